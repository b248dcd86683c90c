"""The trade ``sylvie/runtime/freed_memory.py`` makes, as the C library sees it: with the fixed 1 MB threshold a
block freed goes back to the system, so allocating one again faults its pages in afresh; with glibc's own
threshold the block is reused. Sampled training runs without it, full-graph training with it."""
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
