"""Under NUMBA_ENABLE_CUDASIM=1: the CPU kernels and the CUDA kernels (simulated) must write the same bytes,
with the counter-based RNG and with given uniforms, and decode to the same floats."""
import os

import torch

from sylvie.comm.lowbit import decode, encode

assert os.environ.get("NUMBA_ENABLE_CUDASIM") == "1", "run with NUMBA_ENABLE_CUDASIM=1"
g = torch.Generator().manual_seed(0)
x = torch.randn(14, 13, generator=g) * torch.logspace(-8, 8, 14)[:, None]
x[3], x[4], x[5] = 0.3, 0.0, -2.5  # constant rows
counts = [5, 0, 6, 3]  # an empty destination in between
same = 0
for bits in (1, 2, 4, 8):
    for uniforms in (None, torch.rand(x.shape, generator=g)):
        cpu = encode(x, bits, counts, key=11, uniforms=uniforms, backend="cpu")
        sim = encode(x, bits, counts, key=11, uniforms=uniforms, backend="cuda")
        ok = torch.equal(cpu.buffer, sim.buffer)
        ok &= torch.equal(decode(cpu.buffer, cpu.layout, backend="cpu"), decode(cpu.buffer, cpu.layout, backend="cuda"))
        print(f"bits {bits}, {'given' if uniforms is not None else 'counter-based'} uniforms: "
              f"{'identical' if ok else 'DIFFERENT'}")
        same += ok
        same += torch.equal(sim.buffer, encode(x, bits, counts, key=11, uniforms=uniforms, backend="cuda").buffer)
print(f"identical: {same} of 16")
