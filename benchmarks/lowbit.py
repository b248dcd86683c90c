"""Low-bit Module throughput: encode and decode GB/s (fp32 input bytes / second) beside a plain memory
copy of the same bytes, measured in the same run, interleaved, and the compression ratio against fp32.

    python benchmarks/lowbit.py                       # CPU (numba), D = 128, 256, 602, N = 1M rows
    python benchmarks/lowbit.py --device cuda         # GPU (numba-cuda) against a device-to-device copy
    python benchmarks/lowbit.py --rows 200000 --dims 256 --bits 1 8
    python benchmarks/lowbit.py --device cuda --markdown   # the table in Markdown (make gpu)

Each GB/s cell is the median of --repeats rounds; one round times copy, encode and decode back to back on
preallocated outputs, so all three see the same machine state. enc/copy and dec/copy are the medians of
the per-round ratios, so a round where the machine was busy moves the copy and the codec together.
Compilation happens before timing.
"""
import argparse
import statistics
import time

import torch
from common import provenance

from sylvie.comm.lowbit import decode, encode
from sylvie.comm.lowbit.format import Layout


def _timer(device: str):
    if device == "cuda":
        def timed(fn):
            start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            start.record()
            fn()
            end.record()
            torch.cuda.synchronize()
            return start.elapsed_time(end) / 1e3
    else:
        def timed(fn):
            t = time.perf_counter()
            fn()
            return time.perf_counter() - t
    return timed


def measure(rows: int, dim: int, bits: int, device: str, repeats: int) -> dict:
    gen = torch.Generator(device=device).manual_seed(0)
    x = torch.randn(rows, dim, device=device, generator=gen)
    copy_out = torch.empty_like(x)
    layout = Layout.of([rows], dim, bits)
    wire = torch.empty(layout.total_bytes, dtype=torch.uint8, device=device)
    back = torch.empty_like(x)
    encode(x[:64].contiguous(), bits)  # compile (or load from cache) before timing
    decode(encode(x[:64].contiguous(), bits).buffer, Layout.of([64], dim, bits))
    timed = _timer(device)
    t_copy, t_enc, t_dec = [], [], []
    for r in range(repeats + 1):
        c = timed(lambda: copy_out.copy_(x))
        e = timed(lambda r=r: encode(x, bits, key=r, out=wire))
        d = timed(lambda: decode(wire, layout, out=back))
        if r:  # the first round warms caches and page tables
            t_copy.append(c), t_enc.append(e), t_dec.append(d)
    gb = x.numel() * 4 / 1e9
    return {"copy": gb / statistics.median(t_copy), "encode": gb / statistics.median(t_enc),
            "decode": gb / statistics.median(t_dec), "ratio": x.numel() * 4 / layout.total_bytes,
            "enc/copy": statistics.median(c / e for c, e in zip(t_copy, t_enc)),
            "dec/copy": statistics.median(c / d for c, d in zip(t_copy, t_dec))}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    ap.add_argument("--rows", type=int, default=1_000_000, help="N rows per message")
    ap.add_argument("--dims", type=int, nargs="+", default=[128, 256, 602], help="feature dimensions D")
    ap.add_argument("--bits", type=int, nargs="+", default=[1, 2, 4, 8])
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--markdown", action="store_true", help="the table in Markdown, as the records have it")
    args = ap.parse_args()
    if args.device == "cuda" and not torch.cuda.is_available():
        raise SystemExit("--device cuda: no CUDA device visible to torch")
    where = torch.cuda.get_device_name() if args.device == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(f"Low-bit Module on {where}; GB/s = fp32 input bytes per second; copy = {args.device} memory copy")
    head = (f"{'D':>5} {'N':>9} {'bits':>4} {'ratio':>6} {'copy':>7} {'encode':>7} {'decode':>7} {'enc/copy':>8} "
            f"{'dec/copy':>8}")
    if args.markdown:
        print(f"\nN = {args.rows:,} rows\n\n| D | bits | vs fp32 | copy GB/s | encode GB/s | decode GB/s | "
              "encode/copy | decode/copy |\n| --- | --- | --- | --- | --- | --- | --- | --- |")
    else:
        print(head)
        print("-" * len(head))
    for dim in args.dims:
        for bits in args.bits:
            m = measure(args.rows, dim, bits, args.device, args.repeats)
            if args.markdown:
                print(f"| {dim} | {bits} | {m['ratio']:.1f}x | {m['copy']:.2f} | {m['encode']:.2f} | {m['decode']:.2f} "
                      f"| {m['enc/copy']:.0%} | {m['dec/copy']:.0%} |", flush=True)
                continue
            print(f"{dim:>5} {args.rows:>9} {bits:>4} {m['ratio']:>5.1f}x {m['copy']:>7.2f} {m['encode']:>7.2f} "
                  f"{m['decode']:>7.2f} {m['enc/copy']:>8.0%} {m['dec/copy']:>8.0%}")
    print(f"\n{provenance()}")


if __name__ == "__main__":
    main()
