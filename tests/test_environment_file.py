"""environment.yml against pyproject.toml and the rules: the conda environment a cluster user builds once (and installs
this checkout into with `pip install -e . --no-deps`) holds every dependency of the package, with version bounds no
looser than pyproject's, all from conda-forge with its CUDA build of PyTorch and without DGL (which is only an extra
of the package: the tests' reference and the Planetoid reader); and the rules run in the environment Snakemake runs
in, never in a conda environment of Snakemake's (built from environment.yml it would lack `sylvie`)."""
import re
from pathlib import Path

import pytest
import yaml
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    tomllib = pytest.importorskip("tomli")

pytestmark = pytest.mark.unit

REPO = Path(__file__).resolve().parent.parent

# PyPI name -> conda name, where they differ: torch is `pytorch` on conda-forge.
CONDA_NAME = {"torch": "pytorch"}


def pyproject() -> dict:
    return tomllib.loads((REPO / "pyproject.toml").read_text())


def environment() -> dict:
    return yaml.safe_load((REPO / "environment.yml").read_text())


def conda_spec(entry: str) -> tuple[str, SpecifierSet]:
    """A conda match spec (`[channel::]name[ ][op]version[,op version]`) as a name and a PEP 440 specifier set:
    `=2.4` (conda's fuzzy match) is `==2.4.*`, a bare version is exact."""
    entry = entry.split("::", 1)[-1].strip()
    name, version = re.match(r"([A-Za-z0-9_.\-]+)\s*(.*)$", entry).groups()
    specs = []
    for part in filter(None, (p.strip() for p in version.split(","))):
        if re.match(r"=[^=]", part):
            part = f"=={part[1:]}" if part.endswith("*") else f"=={part[1:]}.*"
        elif re.match(r"[0-9]", part):
            part = f"=={part}"
        specs.append(part)
    return canonicalize_name(name), SpecifierSet(",".join(specs))


def environment_specs() -> dict[str, SpecifierSet]:
    """Every package environment.yml installs, conda or pip, by canonical (PyPI-side) name."""
    to_pypi = {v: k for k, v in CONDA_NAME.items()}
    specs = {}
    for entry in environment()["dependencies"]:
        if isinstance(entry, dict):  # the pip: list
            for line in entry.get("pip", []):
                req = Requirement(line)
                specs[canonicalize_name(req.name)] = req.specifier
        else:
            name, spec = conda_spec(entry)
            specs[to_pypi.get(name, name)] = spec
    return specs


def probes(*sets: SpecifierSet) -> set[Version]:
    """Versions at and around every bound of the given sets: where two specifier sets can disagree."""
    out = set()
    for spec in (s for ss in sets for s in ss):
        base = spec.version.rstrip(".*")
        try:
            v = Version(base)
        except InvalidVersion:
            continue
        release = list(v.release)
        out |= {v, Version(f"{base}.0"), Version(f"{base}.1"), Version(f"{base}.99"), Version(f"{release[0] + 1}")}
        if release[0] > 0:
            out.add(Version(f"{release[0] - 1}.99"))
        if len(release) > 1 and release[-1] > 0:
            out.add(Version(".".join(map(str, release[:-1] + [release[-1] - 1]))))
    return out


def no_looser(env: SpecifierSet, project: SpecifierSet) -> list[Version]:
    """Versions environment.yml allows that pyproject.toml does not (among the probes)."""
    return sorted(v for v in probes(env, project) if env.contains(v, prereleases=True)
                  and not project.contains(v, prereleases=True))


def test_conda_spec_reads_conda_forms():
    assert conda_spec("pytorch=2.4") == ("pytorch", SpecifierSet("==2.4.*"))
    assert conda_spec("conda-forge::pytorch>=2.4") == ("pytorch", SpecifierSet(">=2.4"))
    assert conda_spec("pyarrow>=14") == ("pyarrow", SpecifierSet(">=14"))
    assert conda_spec("numpy") == ("numpy", SpecifierSet())
    assert conda_spec("snakemake >=9,<10") == ("snakemake", SpecifierSet(">=9,<10"))
    assert conda_spec("python 3.11") == ("python", SpecifierSet("==3.11"))


def test_no_looser_finds_a_looser_bound():
    assert no_looser(SpecifierSet("==2.4.*"), SpecifierSet(">=2.1")) == []
    assert no_looser(SpecifierSet(">=13"), SpecifierSet(">=14")) != []
    assert no_looser(SpecifierSet(">=9"), SpecifierSet(">=9,<10")) != []


def test_every_dependency_is_in_the_environment_with_bounds_no_looser():
    env = environment_specs()
    missing, looser = [], []
    project = pyproject()["project"]
    # the core and what the pipeline runs with on a cluster: the extras the environment is for (not test, dgl)
    lines = project["dependencies"] + [line for extra in ("workflow", "report", "ogb", "cuda", "tensorboard")
                                       for line in project["optional-dependencies"][extra]]
    for line in lines:
        req = Requirement(line)
        name = canonicalize_name(req.name)
        if name not in env:
            missing.append(f"{req} (conda: {CONDA_NAME.get(name, name)})")
        elif req.specifier and env[name] and (bad := no_looser(env[name], req.specifier)):
            looser.append(f"{req}: environment.yml has {env[name]}, which allows {', '.join(map(str, bad))}")
    assert not missing, f"pyproject.toml's dependencies (core and extras) missing from environment.yml: {missing}"
    assert not looser, f"environment.yml allows versions pyproject.toml does not: {looser}"


def test_python_of_the_environment_is_one_the_package_supports():
    env = environment_specs()
    requires = SpecifierSet(pyproject()["project"]["requires-python"])
    assert "python" in env and env["python"], "environment.yml should pin python"
    assert not no_looser(env["python"], requires), f"environment.yml's python {env['python']} vs {requires}"


def test_the_environment_is_conda_forge_with_cuda_pytorch_and_no_dgl():
    """conda-forge alone (no pytorch, nvidia or dglteam channel), its CUDA build of PyTorch (the `pytorch-gpu`
    metapackage), torch from conda rather than from pip (a pip torch would replace the CUDA build), and no DGL."""
    env = environment()
    assert env["channels"] == ["conda-forge"], f"environment.yml's channels: {env['channels']}"
    conda = [entry for entry in env["dependencies"] if isinstance(entry, str)]
    pip = [line for entry in env["dependencies"] if isinstance(entry, dict) for line in entry.get("pip", [])]
    prefixes = {entry.split("::", 1)[0].strip() for entry in conda if "::" in entry}
    assert prefixes <= {"conda-forge"}, f"packages from other channels: {prefixes}"
    names = {conda_spec(entry)[0] for entry in conda}
    assert {"pytorch", "pytorch-gpu"} <= names, "environment.yml should install conda-forge's CUDA PyTorch"
    pip_names = {canonicalize_name(Requirement(line).name) for line in pip}
    assert "torch" not in pip_names, "torch from pip would replace conda-forge's CUDA build"
    text = (REPO / "environment.yml").read_text()
    dgl = sorted(name for name in names | pip_names if name == "dgl" or name.startswith("dgl-"))
    assert not dgl and "dglteam" not in text, f"environment.yml installs DGL: {dgl or 'a dglteam channel'}"


def test_dgl_is_an_extra_and_torch_any_from_2_4():
    """`pip install .` works on any PyTorch >= 2.4 and installs no DGL; the `dgl` extra (DGL and the `packaging` it
    imports) and the tests' extra bring it."""
    project = pyproject()["project"]
    deps = {canonicalize_name(Requirement(line).name): Requirement(line) for line in project["dependencies"]}
    assert "dgl" not in deps, "DGL belongs in the dgl extra, not in the dependencies"
    torch = deps["torch"].specifier
    assert torch.contains("2.4.0") and not torch.contains("2.3.1") and torch.contains("3.0"), f"torch {torch}"
    extras = project["optional-dependencies"]
    assert {canonicalize_name(Requirement(line).name) for line in extras["dgl"]} == {"dgl", "packaging"}
    assert "dgl" in {canonicalize_name(Requirement(line).name) for line in extras["test"]}


def rules() -> dict[str, str]:
    """Rule name -> its text, from the Snakefile and workflow/rules/*.smk."""
    out = {}
    for path in [REPO / "Snakefile", *sorted((REPO / "workflow" / "rules").glob("*.smk"))]:
        text = path.read_text()
        starts = [(m.start(), m.group(1)) for m in re.finditer(r"^rule (\w+):", text, re.M)]
        for (start, name), (end, _) in zip(starts, [*starts[1:], (len(text), "")]):
            out[name] = text[start:end]
    return out


def test_rules_run_in_the_current_environment_never_in_one_snakemake_builds():
    """No rule names a conda environment (a file would have Snakemake build one without `sylvie`, a name would have it
    export that environment after every job): every rule that runs a command says `conda: no_conda_env`, which is
    None, so that with or without --use-conda it runs in the environment Snakemake runs in."""
    common = (REPO / "workflow" / "rules" / "common.smk").read_text()
    assert re.search(r"^def no_conda_env\(wildcards\):\n    return None$", common, re.M), "common.smk: no_conda_env"
    found = rules()
    assert {"download", "partition", "vip", "train", "report"} <= set(found)
    for name, text in found.items():
        directives = re.findall(r"^    conda:\n\s+(.+)$", text, re.M)
        if re.search(r"^    shell:", text, re.M):
            assert directives == ["no_conda_env"], f"rule {name}: conda: {directives}, expected no_conda_env"
        else:
            assert not directives, f"rule {name}: conda: {directives}"
