"""Commands with `import dgl` refused (issue 41): a sitecustomize.py in a folder put first on PYTHONPATH, so every
Python started with that environment loads it (`sylvie launch`, torchrun, every rank). It puts a finder first on
sys.meta_path that raises ModuleNotFoundError for `dgl` and `dgl.*`, runs the sitecustomize it shadows, if there is
one, and logs each process it is loaded in and each import it refuses, with the file and line that asked; so a test
can fail when sylvie's own code asks for DGL at all (even where it would catch the ImportError), and check that the
hook reached every rank. Used by tests/test_without_dgl.py (every stage), tests/test_exactness.py and
tests/test_model_matrix.py (their ranks train without DGL)."""
import json
import os
from pathlib import Path

import sylvie
from support.commands import run
from sylvie.atomic import read_jsonl

SYLVIE_CODE = Path(sylvie.__file__).resolve().parent

HOOK = '''"""Written by tests/support/no_dgl.py: a Python started with this folder first on PYTHONPATH cannot import
dgl; it notes itself and each refused import in imports.jsonl beside this file."""
import json
import os
import sys

_LOG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "imports.jsonl")


def _note(event, **fields):
    with open(_LOG, "a") as f:
        f.write(json.dumps({"event": event, "pid": os.getpid(), **fields}) + "\\n")


_REFUSED = json.loads(os.environ.get("SYLVIE_TEST_REFUSED_IMPORTS") or '["dgl"]')


class RefuseDGL:
    """First on sys.meta_path: `import dgl` and `import dgl.<anything>` (or each package of
    SYLVIE_TEST_REFUSED_IMPORTS, a JSON list) fail as if it were not installed."""

    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] not in _REFUSED or _probing():
            return None
        frame = sys._getframe(1)  # the code that imports, past the import machinery
        while frame is not None and ("importlib" in frame.f_code.co_filename
                                     or frame.f_code.co_filename.startswith("<frozen")):
            frame = frame.f_back
        _note("refused", module=name, by=f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame else "?")
        raise ModuleNotFoundError(f"No module named {name!r} (refused by the import hook of "
                                  f"tests/support/no_dgl.py)", name=name)


def _probing():
    """Asked by importlib.util.find_spec (torch._dynamo looks where packages are, and imports none), not by an
    import: answered as Python would (the probe learns a path, nothing runs)."""
    frame = sys._getframe(2)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "_find_and_load_unlocked":
            return False
        if code.co_name == "find_spec" and code.co_filename == "<frozen importlib.util>":
            return True
        frame = frame.f_back
    return False


sys.meta_path.insert(0, RefuseDGL())
_note("loaded", argv=list(getattr(sys, "argv", [])), rank=os.environ.get("RANK"))


def _run_shadowed():
    """The sitecustomize this one hides (a distribution's or an environment's), as Python would have run it."""
    import importlib.util
    from importlib.machinery import PathFinder

    here = os.path.dirname(os.path.abspath(__file__))
    spec = PathFinder.find_spec("sitecustomize", [p for p in sys.path if os.path.abspath(p or ".") != here])
    if spec is not None and spec.loader is not None:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))


_run_shadowed()
'''


class NoDGL:
    """Runs commands with the hook in their environment and checks, after each, what the hook logged."""

    def __init__(self, folder: Path, refused: tuple[str, ...] = ("dgl",)):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "sitecustomize.py").write_text(HOOK)
        self.log = folder / "imports.jsonl"
        self.env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(folder), os.environ.get("PYTHONPATH")])),
                    "SYLVIE_TEST_REFUSED_IMPORTS": json.dumps(list(refused))}

    def events(self) -> list[dict]:
        return read_jsonl(self.log) if self.log.exists() else []

    def run(self, cmd):
        self.log.unlink(missing_ok=True)
        return run([str(c) for c in cmd], check=False, timeout=600, env=self.env)

    def stage(self, cmd, stage: str, ranks: int = 1):
        """Run ``cmd`` (a `sylvie` command, or `sylvie launch ... -- sylvie <stage> ...`): it must succeed without
        sylvie's code even asking for DGL, and the hook must have been loaded in each of its ``ranks`` processes."""
        p = self.run(cmd)
        events = self.events()
        asked = sorted({f"{e['module']} from {e['by']}" for e in events
                        if e["event"] == "refused" and _is_sylvie_code(e["by"])})
        assert not asked and p.returncode == 0, (
            f"sylvie {stage} without DGL: exit {p.returncode}; sylvie's code imported DGL: {asked or 'nowhere'}\n"
            f"command: {' '.join(map(str, cmd))}\nstderr:\n{p.stderr[-3000:]}")
        missing = self.not_in_every_rank(stage, ranks)
        assert missing is None, missing
        return p

    def not_in_every_rank(self, stage: str, ranks: int) -> str | None:
        """Why the hook did not reach each of the ``ranks`` processes of `sylvie <stage>` (None: it did): each
        started afresh (torchrun's ranks, or a process of its own, distinct RANKs), or all forked from one
        forked_ranks.py of that stage (`sylvie launch`'s, or the tests'), each a copy of it, its finder first on
        sys.meta_path."""
        events = [e for e in self.events() if e["event"] == "loaded"]
        workers = [e for e in events if e["argv"][1:2] == [stage]]
        # the launcher's `python -m sylvie.launch.forked_ranks --ranks P -- sylvie STAGE` (argv[0] is "-m" while
        # sitecustomize runs), or the tests' `python tests/support/forked_ranks.py P --no-python sylvie STAGE`
        forked = [e for e in events if e["argv"][:1] and (e["argv"][:3] == ["-m", "--ranks", str(ranks)] or (
            Path(e["argv"][0]).name == "forked_ranks.py" and e["argv"][1:2] == [str(ranks)])) and stage in e["argv"]]
        if (len(workers) == ranks and len({e["rank"] for e in workers}) == ranks) or len(forked) == 1:
            return None
        return (f"sylvie {stage}: the hook was loaded in {len(workers)} of its processes and {len(forked)} "
                f"forked_ranks.py, expected {ranks} ranks: {workers + forked}")

    def assert_sylvie_never_asked(self, ranks: int) -> None:
        """Since the last ``clear``: no code of sylvie's asked for DGL, and the hook was loaded in ``ranks`` rank
        processes (RANK set), or in the tests/support/forked_ranks.py that forked ``ranks`` ranks (each a copy of it,
        its finder first on sys.meta_path)."""
        events = self.events()
        asked = sorted({f"{e['module']} from {e['by']}" for e in events
                        if e["event"] == "refused" and _is_sylvie_code(e["by"])})
        assert not asked, f"sylvie's code imported DGL: {asked}"
        ranked = {e["rank"] for e in events if e["event"] == "loaded" and e["rank"] is not None}
        forked = [e for e in events if e["event"] == "loaded" and e["argv"][:1]
                  and Path(e["argv"][0]).name == "forked_ranks.py" and e["argv"][1:2] == [str(ranks)]]
        assert len(ranked) == ranks or len(forked) == 1, \
            f"the hook was loaded in ranks {sorted(ranked)} and {len(forked)} forked_ranks.py, expected {ranks} ranks"

    def clear(self) -> None:
        self.log.unlink(missing_ok=True)


def _is_sylvie_code(where: str) -> bool:
    return Path(where.rsplit(":", 1)[0]).resolve().is_relative_to(SYLVIE_CODE)
