"""benchmarks/kernel_resources.py: our Numba-CUDA kernels' registers, shared memory and spills from ``ptxas -v``
without a GPU; where ptxas or libNVVM is missing it says so in one line (naming the wheel) and exits 3."""
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
SCRIPT = REPO / "benchmarks" / "kernel_resources.py"
KERNELS = ("Low-bit encode, 1 bit", "Low-bit encode, 2 bits", "Low-bit encode, 4 bits", "Low-bit encode, 8 bits",
           "Low-bit decode", "gather, 16-byte units", "gather, 8-byte units", "gather, 4-byte units",
           "gather, 2-byte units", "gather, 1-byte units")

# ptxas 12.9's report for the Low-bit encode before issue 58's rewrite (sm_90), its mangled name shortened
REPORT = """ptxas info    : 160 bytes gmem
ptxas info    : Compiling entry function '_ZN6sylvie4comm6lowbit4cuda7_encodeE' for 'sm_90'
ptxas info    : Function properties for _ZN6sylvie4comm6lowbit4cuda7_encodeE
    0 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 54 registers, used 1 barriers, 4096 bytes smem
ptxas info    : Compile time = 82.147 ms
"""


def _script():
    spec = importlib.util.spec_from_file_location("kernel_resources", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(spec.name, module)  # its dataclass looks its module up there
    spec.loader.exec_module(sys.modules[spec.name])
    return sys.modules[spec.name]


@pytest.mark.unit
def test_ptxas_report_and_ptx_are_read_into_the_figures():
    ptx = "\tbar.sync \t0;\n\tld.shared.u32 \t%r1, [%rd1];\n\tbarrier.sync 0;\n// bar.sync in a comment\n"
    r = _script().parse_ptxas(REPORT, ptx)
    assert (r.registers, r.smem_bytes, r.stack_bytes, r.spill_stores, r.spill_loads, r.barriers, r.bar_syncs) == \
        (54, 4096, 0, 8, 12, 1, 2)


@pytest.mark.unit
def test_missing_ptxas_or_nvvm_is_said_in_one_line_and_exits_3(monkeypatch, capsys):
    module = _script()
    monkeypatch.setattr(sys, "argv", ["kernel_resources.py"])

    def no_ptxas():
        raise module.Missing(f"no ptxas here: {module.INSTALL}")

    monkeypatch.setattr(module, "find_ptxas", no_ptxas)
    with pytest.raises(SystemExit) as e:
        module.main()
    assert e.value.code == 3
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "pip install nvidia-cuda-nvcc-cu12" in err, err

    from sylvie.numba_cuda import cuda

    def no_nvvm(*args, **kwargs):
        raise OSError("libnvvm.so: cannot open shared object file")

    monkeypatch.setattr(cuda, "compile_ptx", no_nvvm)
    with pytest.raises(module.Missing, match="no libNVVM here .*pip install nvidia-cuda-nvcc-cu12"):
        module.compile_ptx(SimpleDispatcher, (), (9, 0))


class SimpleDispatcher:
    """A stand-in for a numba dispatcher: compile_ptx only reads ``py_func``."""
    py_func = staticmethod(lambda: None)


@pytest.mark.slow
def test_every_kernel_gets_its_register_count_for_sm_90():
    env = {k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}
    r = subprocess.run([sys.executable, str(SCRIPT)], env=env, capture_output=True, text=True, timeout=300,
                       cwd=REPO)
    if r.returncode == 3:
        pytest.skip(r.stderr.strip())  # no ptxas or NVVM: the test extra's nvidia-cuda-nvcc-cu12 is not installed
    assert r.returncode == 0, r.stdout + r.stderr
    rows = {row[0].lstrip("| "): row for row in (line.split(" | ") for line in r.stdout.splitlines()
                                                   if line.startswith(("| Low-bit", "| gather")))}
    assert sorted(rows) == sorted(KERNELS)
    for row in rows.values():
        assert 0 < int(row[2]) <= 255, row  # registers a thread
    # issue 58's targets: every encode (the 1-bit one above all) and decode at most 32 registers, no spills, no shared
    # memory and no syncthreads; the gather at most 32 registers (the aligned kernel's before), no spills
    for name, row in rows.items():
        registers, smem, spills, syncthreads = int(row[2]), row[3], row[5], int(row[7].rstrip(" |"))
        assert registers <= 32 and spills == "0 / 0", row
        if name.startswith("Low-bit"):
            assert smem == "0" and syncthreads == 0, row
