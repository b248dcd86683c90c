"""numba-cuda loads its CUDA target with the numpy of the GPU machine (2.5, which removed ``np.row_stack``) when
imported through ``sylvie.numba_cuda``, as every CUDA kernel of ours imports it; without it, it does not."""
import os
import subprocess
import sys

import pytest

# numpy 2.5 as the GPU machine has it: no ``row_stack`` (numpy < 2.5 still defines it, deprecated)
NUMPY_2_5 = "import numpy as np\nvars(np).pop('row_stack', None)\n"
# the module numba-cuda loads at its first kernel compile, which registers a version of np.row_stack
CUDA_TARGET = "import numba.cuda.np.arrayobj\nprint('loaded')\n"


def _run(code: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_numba_cuda_loads_its_cuda_target_under_numpy_2_5():
    r = _run(NUMPY_2_5 + "from sylvie.numba_cuda import cuda\n" + CUDA_TARGET +
             "import numpy as np\nassert (np.row_stack(([1, 2], [3, 4])) == np.vstack(([1, 2], [3, 4]))).all()\n")
    assert r.returncode == 0 and "loaded" in r.stdout, r.stderr[-3000:]


@pytest.mark.slow
def test_without_it_numba_cuda_fails_as_it_did_on_the_gpu_machine():
    r = _run(NUMPY_2_5 + CUDA_TARGET)
    assert r.returncode != 0 and "row_stack" in r.stderr, r.stdout + r.stderr[-3000:]


@pytest.mark.slow
def test_with_a_numpy_that_has_it_nothing_changes():
    r = _run("import numpy as np\nbefore = vars(np).get('row_stack')\nimport sylvie.numba_cuda\n"
             "assert vars(np).get('row_stack') is before\n")
    assert r.returncode == 0, r.stderr[-3000:]
