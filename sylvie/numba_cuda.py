"""numba-cuda, as every CUDA kernel of ours imports it: ``from sylvie.numba_cuda import cuda``.

numba-cuda (0.30.4, the newest on PyPI in 2026-11, and earlier) registers a CUDA version of ``np.row_stack`` while
it loads its array typing, which happens at the first kernel it compiles. numpy 2.5 removed ``row_stack`` (an
alias of ``vstack``, deprecated since numpy 2.0), so with numpy >= 2.5 every first compile raised
``AttributeError: module 'numpy' has no attribute 'row_stack'`` (seen on the GPU machine: numpy 2.5.2, numba 0.68,
numba-cuda's kernels, every one of them). Where numpy lacks the name, it is given back here as a function of its
own that stacks as ``vstack`` does, before numba-cuda is imported; where numpy has it, nothing changes.
"""
import numpy as np

if "row_stack" not in vars(np):
    def row_stack(tup, *, dtype=None, casting="same_kind"):
        """``np.vstack`` under the name numpy 2.5 removed (numba-cuda registers a kernel version of it)."""
        return np.vstack(tup, dtype=dtype, casting=casting)

    np.row_stack = row_stack

from numba import cuda  # noqa: E402

__all__ = ["cuda"]
