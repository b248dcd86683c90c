"""The trade ``sylvie/runtime/freed_memory.py`` makes, as the C library sees it: with the fixed 1 MB threshold a
block freed goes back to the system, so allocating one again faults its pages in afresh; with glibc's own
threshold the block is reused. Sampled training runs without it, full-graph training with it."""
import os
import subprocess
import sys
import textwrap

import pytest

PROGRAM = textwrap.dedent("""
    import resource, sys
    import numpy as np
    from sylvie.runtime.freed_memory import return_freed_memory
    if sys.argv[1] == "return":
        assert return_freed_memory()
    for _ in range(3):  # glibc's threshold rises to the block's size once one is freed
        np.ones(1 << 21)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(50):  # 16 MB blocks (4,096 pages each), allocated and freed
        np.ones(1 << 21)
    print(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
""")


def faults(mode: str) -> int:
    out = subprocess.run([sys.executable, "-c", PROGRAM, mode], capture_output=True, text=True, check=True)
    return int(out.stdout)


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator")
def test_returning_freed_memory_faults_every_block_in_again_and_the_default_reuses_it():
    blocks, huge_pages = 50, (1 << 24) // (1 << 21)  # at least one fault per 2 MB (a transparent huge page)
    assert faults("return") >= blocks * huge_pages
    assert faults("keep") < blocks


RELEASE = textwrap.dedent("""
    import sys
    from pathlib import Path
    import numpy as np
    from sylvie.runtime.freed_memory import release_free_memory

    def anon_mb():
        line = next(x for x in Path("/proc/self/status").read_text().splitlines() if x.startswith("RssAnon"))
        return int(line.split()[1]) / 1024

    size = int(sys.argv[1])  # elements a block: under glibc's mmap threshold (its heap), or tcmalloc's large spans
    blocks = [np.ones(size) for _ in range((256 << 20) // (8 * size))]  # 256 MB, every page touched
    keep = np.ones(size)  # above them: the heap's top is not freed with them
    del blocks
    held = anon_mb()
    which = release_free_memory()
    print(which, held - anon_mb())
""")


@pytest.mark.slow
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's allocator, and tcmalloc's")
@pytest.mark.parametrize("allocator", ["glibc", "tcmalloc"])
def test_releasing_hands_back_what_the_allocator_holds_free(allocator):
    env = dict(os.environ)
    env.pop("LD_PRELOAD", None)
    if allocator == "tcmalloc":
        from sylvie.launch.allocator import find_tcmalloc
        library = find_tcmalloc(env)
        if library is None:
            pytest.skip("tcmalloc is not installed (make install installs it)")
        env["LD_PRELOAD"] = str(library)
    size = 8 << 10 if allocator == "glibc" else 128 << 10  # 64 KB blocks from glibc's heap; 1 MB tcmalloc spans
    out = subprocess.run([sys.executable, "-c", RELEASE, str(size)], capture_output=True, text=True, check=True,
                         env=env).stdout.split()
    assert out[0] == allocator
    assert float(out[1]) > 200  # of the 256 MB freed, MB handed back
