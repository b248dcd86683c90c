"""Where the tests' inputs and commands are, and running them: a command with the venv's bin first on PATH
(``run``), torchrun (``torchrun``), P ranks forked from one process (``ranks``), `sylvie` in-process until it
refuses its input (``refused_line``)."""
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
CORA_RAW = REPO / "data" / "embedded" / "planetoid"
BIN = Path(sys.executable).parent


def venv_env(**extra) -> dict:
    """This environment with the venv's bin first on PATH (the pipeline's commands come from there)."""
    return {**os.environ, "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}", "DGLBACKEND": "pytorch", **extra}


def run(cmd, check=True, timeout=900, **kw):
    """Run a command with the venv's bin first on PATH; returns the CompletedProcess."""
    env = venv_env(**kw.pop("env", {}))
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, **kw)
    if check and p.returncode != 0:
        raise AssertionError(f"{cmd} exited {p.returncode}\nstdout:\n{p.stdout[-4000:]}\nstderr:\n{p.stderr[-4000:]}")
    return p


def torchrun(nproc, *args, **kw):
    return run([str(BIN / "torchrun"), "--standalone", "--nproc-per-node", str(nproc), *map(str, args)], **kw)


def ranks(nproc, *args, **kw):
    """``nproc`` ranks of ``args`` (a script, or ``--no-python sylvie ...``) as torchrun would start them, forked
    from one process that imported torch and sylvie once (tests/support/forked_ranks.py): for the tests whose subject
    is what the ranks compute. The tests of launching itself use torchrun (``torchrun``, `sylvie launch`)."""
    return run([sys.executable, str(Path(__file__).with_name("forked_ranks.py")), str(nproc), *map(str, args)], **kw)


def refused_line(argv: list[str], capsys) -> str:
    """The last line ``sylvie <argv>`` (in-process) prints when it refuses its input: exit 2, no traceback."""
    from sylvie import cli

    capsys.readouterr()
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err and "Traceback" not in "\n".join(err)
    return err[-1]
