"""The tests' launcher of P ranks on this machine: `sylvie launch`'s forked ranks (sylvie/launch/forked_ranks.py:
torchrun's environment and a rendezvous store this process hosts, every rank a fork of this process, which imported
torch, numba and sylvie once), for a test's worker script as well as for `sylvie` itself.

    python tests/support/forked_ranks.py P SCRIPT [ARGS...]            # each rank runs SCRIPT as __main__
    python tests/support/forked_ranks.py P --no-python sylvie ARGS...  # each rank runs `sylvie ARGS...` (cli.main)

OMP_NUM_THREADS=1 where it is unset and P > 1 (set here before torch is imported, as libgomp reads it when loaded).
The tests whose subject is what the ranks compute start them here; the tests of the launch itself start them with
`sylvie launch` (either launcher) or torchrun, as users do.
"""
import ast
import os
import runpy
import sys


def _script_imports(script: str) -> list[str]:
    """The modules SCRIPT's top level imports (only imports: nothing of the script runs here)."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    tree = ast.parse(open(script).read())
    return [name for node in tree.body
            for name in ([a.name for a in node.names] if isinstance(node, ast.Import) else
                         [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])]


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not argv[0].isdigit() or int(argv[0]) < 1:
        print(__doc__, file=sys.stderr)
        return 2
    nproc, command = int(argv[0]), argv[1:]
    if nproc > 1:
        os.environ.setdefault("OMP_NUM_THREADS", "1")
    from sylvie.launch.forked_ranks import TRAINING, ForkedRanks, preload, stage_modules

    if command[0] == "--no-python":
        from sylvie.cli import main as sylvie

        preload(stage_modules(command[1:]))

        def run():
            sys.argv = command[1:]
            return sylvie(command[2:])
    else:
        preload([*_script_imports(command[0]), *TRAINING])  # the workers train

        def run():
            sys.argv = list(command)
            runpy.run_path(command[0], run_name="__main__")

    return ForkedRanks(nproc, run).start().wait()


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)
