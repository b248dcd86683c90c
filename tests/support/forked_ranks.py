"""The tests' launcher of P ranks on this machine: what `torchrun --standalone --nproc-per-node P` gives its ranks
(the environment of rank, world and a rendezvous store the launcher hosts), but every rank is a fork of this process,
which imported torch, numba and sylvie once, instead of a new interpreter importing them again.

Why: on the test machine's 2 cores, `import torch` alone takes ~3 CPU-s, and torchrun's agent one more process
that imports it; a 4-rank launch spent ~19 CPU-s before its first epoch, more than its training. The tests whose
subject is what the ranks compute start them here; the tests of the launch itself (`sylvie launch`, torchrun's
failure handling, a rank's death or silence) start them with torchrun, as users do.

    python tests/support/forked_ranks.py P SCRIPT [ARGS...]            # each rank runs SCRIPT as __main__
    python tests/support/forked_ranks.py P --no-python sylvie ARGS...  # each rank runs `sylvie ARGS...` (cli.main)

As under torchrun: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, MASTER_ADDR and MASTER_PORT (the
store this process hosts, TORCHELASTIC_USE_AGENT_STORE=True), TORCHELASTIC_RUN_ID and RESTART_COUNT 0;
OMP_NUM_THREADS=1 where it is unset and P > 1 (set here before torch is imported, as libgomp reads it when loaded).
The ranks write to this process's stdout and stderr. When a rank fails, the others are stopped (SIGTERM, then
SIGKILL after 10 s) and this process exits 1, naming the rank last; every rank dies with this process.
"""
import ast
import contextlib
import os
import signal
import sys
import time
import uuid

STOP_GRACE_S = 10


def _preimport(argv: list[str], nproc: int) -> None:
    """Import, once for every rank, what the ranks import: sylvie's stages, or the modules SCRIPT's top level
    imports (only imports: nothing of the script runs here), and numba's set-up."""
    import torch.distributed  # noqa: F401
    from numba.core.registry import cpu_target

    if argv[0] == "--no-python":
        import sylvie.cli  # noqa: F401
        import sylvie.evaluate  # noqa: F401
        import sylvie.train.run  # noqa: F401
    else:
        sys.path.insert(0, os.path.dirname(os.path.abspath(argv[0])))
        tree = ast.parse(open(argv[0]).read())
        for node in tree.body:
            names = ([a.name for a in node.names] if isinstance(node, ast.Import) else
                     [node.module] if isinstance(node, ast.ImportFrom) and node.module and not node.level else [])
            for name in names:
                __import__(name)
    # what torch.optim's first optimiser imports in each rank that trains (torch._dynamo, which the
    # torch._disable_dynamo wrapper of Optimizer.add_param_group imports: 1-2 CPU-s a rank on the test machine),
    # imported here where more than one rank will train (`sylvie train`, the workers' trainers); no thread starts
    if nproc > 1 and (argv[0] != "--no-python" or argv[2:3] == ["train"]):
        import torch._dynamo  # noqa: F401
    # what numba does at a process's first kernel, loaded from its cache or compiled (~0.6 CPU-s): its CPU target's
    # registries of implementations; no kernel runs here, so no thread pool starts before the forks
    cpu_target.target_context.refresh()


def _rank_main(argv: list[str], env: dict, read_port: int) -> None:
    """In a forked rank: wait for the store's port, take the rank's environment, run, and exit with its code."""
    from sylvie.launch.process_tree import die_with_parent

    die_with_parent()
    port = os.read(read_port, 16).decode()
    if not port:  # the launcher ended before its store started
        os._exit(1)
    os.environ.update(env, MASTER_PORT=port)
    code = 1
    try:
        if argv[0] == "--no-python":
            from sylvie.cli import main

            sys.argv = argv[1:]
            code = main(argv[2:])
        else:
            import runpy

            sys.argv = list(argv)
            runpy.run_path(argv[0], run_name="__main__")
            code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except BaseException:
        import traceback

        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)  # as a rank that `sylvie train` ends: no interpreter teardown (nor this process's atexit)


def _stop(pids: dict[int, int]) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + STOP_GRACE_S
    while pids and time.monotonic() < deadline:
        pid, _ = os.waitpid(-1, os.WNOHANG)
        if pid == 0:
            time.sleep(0.05)
        pids.pop(pid, None)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
    pids.clear()  # every rank reaped: the caller's wait for the others ends


def main(argv: list[str]) -> int:
    if len(argv) < 2 or not argv[0].isdigit() or int(argv[0]) < 1:
        print(__doc__, file=sys.stderr)
        return 2
    nproc, command = int(argv[0]), argv[1:]
    if nproc > 1:
        os.environ.setdefault("OMP_NUM_THREADS", "1")
    if "OMP_NUM_THREADS" in os.environ:  # as `sylvie train` does before numba is imported (sylvie/cli.py)
        os.environ.setdefault("NUMBA_NUM_THREADS", os.environ["OMP_NUM_THREADS"])
    _preimport(command, nproc)
    run_id = uuid.uuid4().hex[:12]
    pids, writers = {}, []
    sys.stdout.flush()
    sys.stderr.flush()
    for rank in range(nproc):
        read_port, write_port = os.pipe()
        pid = os.fork()
        if pid == 0:
            os.close(write_port)
            for w in writers:
                os.close(w)
            env = {"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": str(nproc),
                   "LOCAL_WORLD_SIZE": str(nproc), "GROUP_RANK": "0", "GROUP_WORLD_SIZE": "1",
                   "ROLE_RANK": str(rank), "ROLE_WORLD_SIZE": str(nproc), "ROLE_NAME": "default",
                   "MASTER_ADDR": "127.0.0.1", "TORCHELASTIC_USE_AGENT_STORE": "True",
                   "TORCHELASTIC_RUN_ID": run_id, "TORCHELASTIC_RESTART_COUNT": "0",
                   "TORCHELASTIC_MAX_RESTARTS": "0"}
            _rank_main(command, env, read_port)
        os.close(read_port)
        pids[pid] = rank
        writers.append(write_port)
    # the store the ranks rendezvous at, hosted here as torchrun's agent hosts it (made after the forks: no rank
    # inherits its server thread)
    from datetime import timedelta

    import torch.distributed as dist

    store = dist.TCPStore("127.0.0.1", 0, world_size=None, is_master=True, timeout=timedelta(seconds=300),
                          wait_for_workers=False)
    for w in writers:
        os.write(w, str(store.port).encode())
        os.close(w)
    failed = None
    while pids:
        pid, status = os.waitpid(-1, 0)
        rank = pids.pop(pid, None)
        code = os.waitstatus_to_exitcode(status)
        if rank is not None and code != 0 and failed is None:
            failed = (rank, code)
            _stop(pids)
    if failed is not None:
        rank, code = failed
        how = f"was killed by signal {signal.Signals(-code).name}" if code < 0 else f"exited with code {code}"
        print(f"forked_ranks: rank {rank} {how}; the other ranks were stopped", file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
