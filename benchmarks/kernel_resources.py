"""What our Numba-CUDA kernels ask of a GPU, measured without one: registers, shared memory and spills per thread.

    python benchmarks/kernel_resources.py                 # sm_90 (H100, H200)
    python benchmarks/kernel_resources.py --record
    make kernel-resources

Each kernel (the Low-bit Module's encode, one per bit width, and decode, ``sylvie/comm/lowbit/cuda.py``; the
zero-copy gather on each unit it copies rows in, ``sylvie/features/gather_cuda.py``) is compiled to PTX by
numba-cuda (libNVVM) with the argument types its launch site passes, then assembled by ``ptxas -v`` for the target
architecture, whose report gives per kernel: registers a thread, static shared memory, stack frame, spill stores
and loads, and the named barriers used. The PTX itself gives the number of ``bar.sync`` instructions
(``cuda.syncthreads()``) in the kernel.

The signatures are those of the launch sites: Low-bit's ``encode``/``decode`` (``sylvie/comm/lowbit/__init__.py``)
pass contiguous torch tensors and Python ints; the encode kernel is compiled per bit width (a constant in it), the
decode takes the bit width at run time, and the row width D is a run-time argument of both, so one compile covers
every D, the 1-bit D = 256 case included. ``launch_gather`` (the feature store's and ``benchmarks/gather.py``'s) passes
its kernel integer views of the flat table and of the output, in 16-, 8-, 4-, 2- or 1-byte units (the widest that
the row's size and both addresses allow: 16 for 400-byte fp32 rows), int64 indices and the row's width in units,
the table's misalignment, the segment in units and the lanes per row.

A GPU's driver assembles the same PTX at the first launch with its own ptxas; its figures can differ from this
ptxas' by a few registers where the versions differ. Needs libNVVM and ptxas: PyPI's ``nvidia-cuda-nvcc-cu12``
(in the ``test`` extra) or a CUDA toolkit (``CUDA_HOME``); without them it says so in one line and exits 3.
"""
from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import SimpleNamespace

MISSING = 3  # the exit status when ptxas or NVVM is missing
INSTALL = "pip install nvidia-cuda-nvcc-cu12 (or pip install -e '.[test]')"


class Missing(Exception):
    """ptxas or libNVVM is not installed: the message says which and what to install."""


@dataclass(frozen=True)
class Resources:
    """One kernel's figures from ``ptxas -v`` and its PTX."""
    registers: int
    smem_bytes: int
    stack_bytes: int
    spill_stores: int
    spill_loads: int
    barriers: int  # named barriers ptxas reports used (0 when it reports none)
    bar_syncs: int  # bar.sync / barrier.sync instructions in the PTX (cuda.syncthreads())


def find_ptxas() -> str:
    """The ptxas of the ``nvidia-cuda-nvcc-cu12`` wheel, else CUDA_HOME's, else the one on PATH."""
    try:
        import nvidia.cuda_nvcc as nvcc

        for root in nvcc.__path__:
            if (Path(root) / "bin" / "ptxas").is_file():
                return str(Path(root) / "bin" / "ptxas")
    except ImportError:
        pass
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH")):
        if home and (Path(home) / "bin" / "ptxas").is_file():
            return str(Path(home) / "bin" / "ptxas")
    found = shutil.which("ptxas")
    if found is None:
        raise Missing(f"no ptxas here (neither the nvidia-cuda-nvcc-cu12 wheel, CUDA_HOME nor PATH): {INSTALL}")
    return found


def parse_ptxas(report: str, ptx: str) -> Resources:
    """The figures of the one entry function in ``ptxas -v``'s report, and the PTX's bar.sync count."""
    def number(pattern: str) -> int:
        m = re.search(pattern, report)
        return int(m.group(1)) if m else 0

    registers = re.search(r"Used (\d+) registers", report)
    if registers is None:
        raise ValueError(f"ptxas -v printed no register count:\n{report}")
    return Resources(registers=int(registers.group(1)), smem_bytes=number(r"(\d+) bytes smem"),
                     stack_bytes=number(r"(\d+) bytes stack frame"), spill_stores=number(r"(\d+) bytes spill stores"),
                     spill_loads=number(r"(\d+) bytes spill loads"), barriers=number(r"used (\d+) barriers"),
                     bar_syncs=len(re.findall(r"^\s*(?:bar|barrier)\.sync\b", ptx, flags=re.MULTILINE)))


@contextmanager
def target(cc: tuple[int, int]):
    """numba-cuda asks the current device for its compute capability when a kernel calls a device function;
    without a GPU there is none, so for the compile that question is answered with the target's."""
    from sylvie.numba_cuda import cuda  # noqa: F401 - before numba.cuda's own modules (numpy >= 2.5)

    dispatcher = sys.modules["numba.cuda.dispatcher"]
    before = dispatcher.get_current_device
    dispatcher.get_current_device = lambda: SimpleNamespace(compute_capability=cc)
    try:
        yield
    finally:
        dispatcher.get_current_device = before


def kernels():
    """(kernel, signature as written, the numba dispatcher, its argument types): as the launch sites pass them."""
    from numba import types

    from sylvie.comm.lowbit import cuda as lowbit
    from sylvie.features import gather_cuda

    def arr(dtype, ndim):
        return types.Array(dtype, ndim, "C")

    f32, i32, i64, u8 = arr(types.float32, 2), arr(types.int32, 2), arr(types.int64, 1), arr(types.uint8, 1)
    for bits in (1, 2, 4, 8):
        yield (f"Low-bit encode, {bits} bit{'s' if bits > 1 else ''}",
               "f32[n,D], i32[n,D], 3 x i64[:], key i32, f32[n,D], u8[:], u8[n]",
               lowbit.encode_kernel(bits), (f32, i32, i64, i64, i64, types.int32, f32, u8, u8))
    yield ("Low-bit decode", "u8[:], bits, 3 x i64[:], f32[n,D]", lowbit._decode, (u8, types.int64, i64, i64, i64, f32))
    units = (("16-byte", types.int64, gather_cuda._gather_wide), ("8-byte", types.int64, gather_cuda._gather_units),
             ("4-byte", types.int32, gather_cuda._gather_units), ("2-byte", types.int16, gather_cuda._gather_units),
             ("1-byte", types.uint8, gather_cuda._gather_units))
    for what, dtype, kernel in units:
        name = {"int64": "i64", "int32": "i32", "int16": "i16", "uint8": "u8"}[str(dtype)]
        sig = (arr(dtype, 1), i64, arr(dtype, 1)) + (types.int64,) * 4
        yield f"gather, {what} units", f"{name}[:], i64[n], {name}[:], width, shift, segment, group", kernel, sig


def compile_ptx(dispatcher, sig, cc: tuple[int, int]) -> str:
    from sylvie.numba_cuda import cuda

    try:
        with target(cc):
            ptx, _ = cuda.compile_ptx(dispatcher.py_func, sig, cc=cc)
    except Exception as e:  # noqa: BLE001 - numba-cuda raises several kinds when it cannot load NVVM
        text = f"{type(e).__name__}: {e}"
        if any(s in text for s in ("libnvvm", "NVVM", "DynamicLibNotFound", "CudaSupportError")):
            raise Missing(f"no libNVVM here ({text.splitlines()[0][:160]}): {INSTALL}") from e
        raise
    return ptx


def assemble(ptxas: str, ptx: str, arch: str) -> str:
    """``ptxas -v``'s report for ``ptx`` (its stderr); the cubin is thrown away."""
    with tempfile.TemporaryDirectory(prefix="sylvie-ptx-") as tmp:
        path = Path(tmp) / "kernel.ptx"
        path.write_text(ptx)
        r = subprocess.run([ptxas, f"-arch={arch}", "-v", str(path), "-o", os.devnull], capture_output=True,
                           text=True, timeout=120)
    if r.returncode != 0:
        raise RuntimeError(f"ptxas failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r.stdout + r.stderr


def _source(path: str) -> str:
    """Where a file of the toolchain comes from: the nvidia-cuda-nvcc-cu12 wheel (and its version), or its path."""
    from importlib.metadata import PackageNotFoundError, version

    if f"{os.sep}nvidia{os.sep}cuda_nvcc{os.sep}" in path:
        try:
            return f"nvidia-cuda-nvcc-cu12 {version('nvidia-cuda-nvcc-cu12')}"
        except PackageNotFoundError:
            pass
    return path


def toolchain(ptxas: str) -> str:
    """numba-cuda's, libNVVM's and ptxas' versions and where they come from, one line."""
    from importlib.metadata import version

    from numba.cuda.cuda_paths import get_cuda_paths
    from numba.cuda.cudadrv import nvvm

    release = subprocess.run([ptxas, "--version"], capture_output=True, text=True).stdout
    m = re.search(r"V(\d+\.\d+\.\d+)", release)
    nvvm_version = ".".join(map(str, nvvm.NVVM().get_version()))
    return (f"numba-cuda {version('numba-cuda')}, numba {version('numba')}, libNVVM {nvvm_version} "
            f"({_source(str(get_cuda_paths()['nvvm'].info))}), ptxas {m.group(1) if m else '?'} ({_source(ptxas)})")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--arch", default="sm_90", help="the GPU architecture, sm_XY (default sm_90: H100, H200)")
    ap.add_argument("--record", action="store_true",  # common is imported late: the tests load this file alone
                    help="also write the table to a new record benchmarks/records/<date>_kernel-resources_<machine>.md")
    args = ap.parse_args()
    m = re.fullmatch(r"sm_(\d+)(\d)", args.arch)
    if m is None:
        ap.error(f"--arch {args.arch}: expected sm_XY, e.g. sm_90 or sm_80")
    cc = (int(m.group(1)), int(m.group(2)))
    os.environ.pop("NUMBA_ENABLE_CUDASIM", None)  # the simulator compiles nothing
    try:
        ptxas = find_ptxas()
        rows = []
        for name, written, dispatcher, sig in kernels():
            ptx = compile_ptx(dispatcher, sig, cc)
            rows.append((name, written, parse_ptxas(assemble(ptxas, ptx, args.arch), ptx)))
        tools = toolchain(ptxas)
    except Missing as e:
        print(f"kernel_resources: {e}", file=sys.stderr)
        sys.exit(MISSING)
    lines = [f"Our Numba-CUDA kernels for {args.arch}, per thread (`ptxas -v`; syncthreads: `bar.sync` in the PTX); "
             f"{tools}:", "",
             "| kernel | signature | registers | smem bytes | stack bytes | spill stores / loads bytes | barriers | "
             "syncthreads |", "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    for name, written, r in rows:
        lines.append(f"| {name} | `{written}` | {r.registers} | {r.smem_bytes:,} | {r.stack_bytes} | "
                     f"{r.spill_stores} / {r.spill_loads} | {r.barriers} | {r.bar_syncs} |")
    from common import publish

    publish("\n".join(lines), args.record and "kernel-resources")


if __name__ == "__main__":
    main()
