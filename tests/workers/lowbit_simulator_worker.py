"""Under NUMBA_ENABLE_CUDASIM=1: the CPU kernels and the CUDA kernels (simulated) must write the same bytes,
with the counter-based RNG and with given uniforms, and decode to the same floats; and flag the same rows holding NaN
or inf, leaving their bytes alone.

Shapes: rows of 13 (the first case, with constant rows and an empty destination), fewer than 32 (5), not a multiple of
32 over three warp steps (71), 256 (the 1-bit D = 256 case of the benchmarks), and 20 rows of 33 over 3 blocks of 8
rows; at 1, 2, 4 and 8 bits. Rows sit 5 + ceil(D * bits / 8) bytes apart, so most start off any 4-byte boundary.
Prints one line per case and a summary; exits 1 where any differs."""
import os
import sys

import numpy as np
import torch

from sylvie.comm.lowbit import decode, encode
from sylvie.comm.lowbit.cpu import encode_rows
from sylvie.comm.lowbit.cuda import encode_rows_cuda
from sylvie.comm.lowbit.format import Layout

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run with NUMBA_ENABLE_CUDASIM=1"
g = torch.Generator().manual_seed(0)
x = torch.randn(14, 13, generator=g) * torch.logspace(-8, 8, 14)[:, None]
x[3], x[4], x[5] = 0.3, 0.0, -2.5  # constant rows
EVERY = [(bits, given) for bits in (1, 2, 4, 8) for given in (False, True)]
# The simulator is slow (a Python thread a lane): every width and RNG on the first shape, then 1 bit (the ballot) and
# one more width on each other shape.
cases = [(x, [5, 0, 6, 3], EVERY)]  # an empty destination in between
for n, d, counts, runs in ((9, 5, [4, 5], [(1, True), (2, False)]), (7, 71, [3, 4], [(1, False), (4, True)]),
                           (6, 256, [4, 0, 2], [(1, False), (8, True)]), (20, 33, [13, 7], [(1, True)])):
    cases.append((torch.randn(n, d, generator=g) * torch.logspace(-3, 3, n)[:, None], counts, runs))
checks = same = 0
for rows, counts, runs in cases:
    for bits, given in runs:
        uniforms = torch.rand(rows.shape, generator=g) if given else None
        cpu = encode(rows, bits, counts, key=11, uniforms=uniforms, backend="cpu")
        sim = encode(rows, bits, counts, key=11, uniforms=uniforms, backend="cuda")
        ok = torch.equal(cpu.buffer, sim.buffer)
        ok &= torch.equal(decode(cpu.buffer, cpu.layout, backend="cpu"),
                          decode(cpu.buffer, cpu.layout, backend="cuda"))
        print(f"{rows.shape[0]} x {rows.shape[1]}, bits {bits}, "
              f"{'given' if uniforms is not None else 'counter-based'} uniforms: "
              f"{'identical' if ok else 'DIFFERENT'}")
        checks, same = checks + 1, same + ok
# The first case encoded twice gives the same bytes.
for bits in (1,):
    checks += 1
    same += torch.equal(encode(x, bits, [5, 0, 6, 3], key=3, backend="cuda").buffer,
                        encode(x, bits, [5, 0, 6, 3], key=3, backend="cuda").buffer)
# NaN and inf rows: flagged in ``bad`` as the CPU kernel flags them, their bytes untouched (zero), the rest written.
rows = torch.randn(11, 40, generator=g).numpy()
rows[2, 7], rows[5, 39], rows[6, 0], rows[9, 20] = np.nan, np.inf, -np.inf, np.nan
for bits in (1, 4):
    layout = Layout.of([6, 5], 40, bits)
    outs, bads = [], []
    for kernel in (encode_rows, encode_rows_cuda):
        out, bad = np.zeros(layout.total_bytes, np.uint8), np.zeros(11, np.uint8)
        kernel(rows, bits, *layout.tables, np.int32(5), np.zeros((0, 40), np.float32), out, bad)
        outs.append(out)
        bads.append(bad)
    ok = np.array_equal(bads[0], bads[1]) and list(np.nonzero(bads[1])[0]) == [2, 5, 6, 9]
    ok &= np.array_equal(outs[0], outs[1])
    print(f"NaN and inf rows, bits {bits}: {'identical' if ok else 'DIFFERENT'} (bad rows {np.nonzero(bads[1])[0]})")
    checks, same = checks + 1, same + ok
print(f"identical: {same} of {checks}")
sys.exit(0 if same == checks else 1)
