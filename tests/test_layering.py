"""The package's imports follow the direction of ARCHITECTURE.md: cli -> train -> {runtime, sampling, features,
comm, models, partition, data}, features -> comm; comm, features, sampling and models never import train;
evaluation runs on the ranks' runtime, never on train; formats (the files stages hand each other) import only base
modules; nothing imports cli; the Low-bit, gather and neighbour-pick kernels are leaves. Every import counts, also
one inside a function."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "sylvie"

# Area of a module (first match of its dotted name, longest prefix first).
AREAS = {
    "sylvie.cli": "cli", "sylvie.__main__": "main",
    "sylvie.bench": "bench", "sylvie.launch": "launch",
    "sylvie.evaluate": "evaluate", "sylvie.report": "report", "sylvie.train": "train",
    "sylvie.sampling.vip_stage": "vip",  # the vip stage: partition in, VIP per part out
    "sylvie.sampling": "sampling", "sylvie.runtime": "runtime",
    "sylvie.features": "features", "sylvie.comm": "comm",
    "sylvie.comm.gather_cpu": "kernels", "sylvie.features.gather_cuda": "kernels",  # the gather kernels
    "sylvie.sampling.neighbor_picks": "kernels",  # the sampler's draws
    "sylvie.sampling.negatives": "kernels",  # link prediction's negative draws
    # the Low-bit kernels and what they share; the package's public encode/decode (its __init__) is comm
    "sylvie.comm.lowbit.format": "kernels", "sylvie.comm.lowbit.scalar": "kernels", "sylvie.comm.lowbit.cpu": "kernels",
    "sylvie.comm.lowbit.cuda": "kernels", "sylvie.numba_cuda": "kernels",  # numba-cuda, importable with numpy 2.5
    "sylvie.models": "models",
    # the block: the one record our sampler builds and the models take (with the sort that gives its out-edges)
    "sylvie.models.block": "block", "sylvie.models.relation_block": "block", "sylvie.models.block_transpose": "block",
    "sylvie.partition": "partition", "sylvie.data": "data", "sylvie.formats": "formats",
    "sylvie.errors": "base", "sylvie.atomic": "base", "sylvie.arrow_arrays": "base", "sylvie.output_dir": "base",
    "sylvie.output_lock": "base", "sylvie.memory_budget": "base",
    "sylvie.config": "base", "sylvie.graph_types": "base", "sylvie": "base",
    "sylvie.pipeline_config": "pipeline",  # what the Snakefile plans from: the config checked whole
}
# Which areas each area may import (besides itself).
ALLOWED = {
    "main": {"cli"},
    "cli": {"bench", "launch", "evaluate", "vip", "report", "train", "sampling", "runtime", "features", "comm",
            "kernels", "block", "models", "partition", "data", "formats", "base"},
    "bench": {"launch", "formats", "base"},
    "pipeline": {"launch", "data", "base"},  # a run's placement, every dataset buildable
    "launch": {"formats", "base"},
    # evaluation runs a trained model: on the whole graph, or partition-parallel on the ranks' runtime; never train
    "evaluate": {"runtime", "partition", "block", "models", "data", "formats", "base"},
    "vip": {"sampling", "partition", "formats", "base"},
    "report": {"formats", "base"},
    "train": {"runtime", "sampling", "features", "comm", "kernels", "block", "models", "partition", "data", "formats",
              "base"},
    # a rank's process group, watchdog and part of the graph (halo rows through comm, blocks for the models)
    "runtime": {"comm", "kernels", "block", "models", "partition", "formats", "base"},
    "sampling": {"kernels", "block", "partition", "formats", "base"},
    "features": {"sampling", "comm", "kernels", "formats", "base"},
    "comm": {"kernels", "formats", "base"},
    "kernels": set(),
    "block": {"base"},
    "models": {"block", "base"},
    "partition": {"data", "formats", "base"},
    "data": {"formats", "base"},
    "formats": {"base"},
    "base": set(),
}


def area(module: str) -> str:
    for prefix in sorted(AREAS, key=len, reverse=True):
        if module == prefix or module.startswith(prefix + "."):
            return AREAS[prefix]
    raise AssertionError(f"{module}: no area; add it to AREAS in tests/test_layering.py")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports_of(path: Path) -> list[tuple[int, str]]:
    """(line, imported sylvie module) for every import in the file, relative ones resolved."""
    here = module_name(path)
    package = here if path.name == "__init__.py" else here.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(parent + ([base] if base else []))
            found += [(node.lineno, f"{base}.{a.name}" if _is_module(f"{base}.{a.name}") else base) for a in node.names]
    return [(line, m) for line, m in found if m == "sylvie" or m.startswith("sylvie.")]


def _is_module(dotted: str) -> bool:
    p = PACKAGE.parent.joinpath(*dotted.split("."))
    return p.with_suffix(".py").is_file() or (p / "__init__.py").is_file()


def violations(root: Path = PACKAGE) -> list[str]:
    bad = []
    for path in sorted(root.rglob("*.py")):
        src = area(module_name(path))
        for line, target in imports_of(path):
            dst = area(target)
            if dst != src and dst not in ALLOWED[src]:
                bad.append(f"{path.relative_to(PACKAGE.parent)}:{line}: {src} imports {dst} ({target})")
    return bad


@pytest.mark.unit
def test_imports_follow_the_architecture():
    assert violations() == []


@pytest.mark.unit
def test_a_forbidden_import_is_caught(tmp_path):
    """The check itself: comm importing train is reported."""
    fake = PACKAGE / "comm" / "_layering_probe.py"
    assert imports_of(PACKAGE / "comm" / "halo_exchange.py"), "the parser finds no imports"
    fake.write_text("def f():\n    from sylvie.train.run import run_training\n")
    try:
        assert any("comm/_layering_probe.py:2: comm imports train" in v for v in violations())
    finally:
        fake.unlink()


@pytest.mark.slow
def test_the_report_stage_starts_without_torch():
    """`sylvie report` reads JSON and draws plots: importing it must not import torch (3 CPU-seconds a process here;
    the pipeline runs it after every change)."""
    code = ("import sys, sylvie.cli, sylvie.report.html; "
            "print(sorted(m for m in ('torch', 'numba') if m in sys.modules))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "[]", p.stdout


def _cycles(root: Path = PACKAGE) -> list[list[str]]:
    """The import cycles between sylvie's modules (every import, one inside a function too): each as the modules
    along it."""
    graph = {}
    for path in sorted(root.rglob("*.py")):
        here = module_name(path)
        graph.setdefault(here, set()).update(t for _, t in imports_of(path) if t != here and _is_module(t))
    cycles, state = [], {}

    def visit(m, stack):
        state[m] = "open"
        stack.append(m)
        for t in sorted(graph.get(m, ())):
            if state.get(t) == "open":
                cycles.append(stack[stack.index(t):] + [t])
            elif t not in state:
                visit(t, stack)
        stack.pop()
        state[m] = "done"

    for m in sorted(graph):
        if m not in state:
            visit(m, [])
    return cycles


@pytest.mark.unit
def test_no_two_modules_import_each_other():
    """One direction between any two modules, also through others (a package's __init__ aside: it names its
    modules)."""
    found = [c for c in _cycles() if not any(m.count(".") <= 1 and m in _PACKAGES for m in c)]
    assert found == [], "\n".join(" -> ".join(c) for c in found)


_PACKAGES = {module_name(p) for p in PACKAGE.rglob("__init__.py")}
