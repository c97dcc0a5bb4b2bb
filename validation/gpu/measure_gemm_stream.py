"""Decode-shaped GEMMs as a step runs them: many different weight matrices back to back in one
stream, replayed as a CUDA graph, so neither the host nor the L2 cache (each weight is read once
per pass) flatters or penalises them, beside the same GEMM timed alone between CUDA events.

    python validation/gpu/measure_gemm_stream.py --out DIR

writes DIR/gemm_stream.csv: per shape, seconds per GEMM in the stream and alone, and the bytes
the weights stream; and DIR/stream_ops.csv: streaming ops (add, silu, rms_norm, softmax) the same
way, 16 buffers back to back per replay. Each row with the GPU, driver, torch and CUDA versions
and the date.
"""

from __future__ import annotations

import argparse
import statistics
import sys
from pathlib import Path

try:  # the installed package, or else this checkout's python/ (a build that put _core there)
    import accel_sim  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

from accel_sim.calibration import capture_graph, provenance, write_rows  # noqa: E402

COLUMNS = ["dtype", "m", "n", "k", "weights", "stream_s_per_gemm", "alone_s", "weight_bytes", "source"]


def replays(torch, graph, repeats: int = 20) -> list[float]:
    """Seconds of each of `repeats` replays of a CUDA graph, between CUDA events."""
    times = []
    for _ in range(repeats):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        graph.replay()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3)
    return times


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    import torch

    source = provenance(torch, "cuda")
    dtype = torch.bfloat16
    rows = []
    for n, k in ((4096, 4096), (6144, 4096), (14336, 4096), (4096, 14336), (8192, 8192), (28672, 4096),
                 (128256, 4096)):
        count = max(4, min(32, (1 << 30) // (n * k * 2)))  # about 1 GB of weights, never fewer than 4
        weights = [torch.randn(k, n, device="cuda", dtype=dtype) for _ in range(count)]
        for m in (1, 16, 64, 256):
            x = torch.randn(m, k, device="cuda", dtype=dtype)
            outs = [torch.empty(m, n, device="cuda", dtype=dtype) for _ in range(count)]

            def chain():
                for w, o in zip(weights, outs):
                    torch.matmul(x, w, out=o)

            graph = capture_graph(torch, chain)
            times = [t / count for t in replays(torch, graph)]
            alone = []
            flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
            for _ in range(20):
                flush.zero_()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                torch.matmul(x, weights[0], out=outs[0])
                end.record()
                end.synchronize()
                alone.append(start.elapsed_time(end) * 1e-3)
            rows.append(dict(dtype="bf16", m=m, n=n, k=k, weights=count,
                             stream_s_per_gemm=f"{statistics.median(times):.6g}",
                             alone_s=f"{statistics.median(alone):.6g}", weight_bytes=n * k * 2, source=source))
            print(m, n, k, rows[-1]["stream_s_per_gemm"], rows[-1]["alone_s"], flush=True)
            del graph, outs
        del weights
        torch.cuda.empty_cache()
    import torch.nn.functional as F

    ops_rows = []
    for elements in [1 << e for e in range(13, 28, 2)]:
        xs = [torch.randn(elements // 4096 or 1, min(elements, 4096), device="cuda", dtype=dtype) for _ in range(16)]
        ys = [torch.randn_like(x) for x in xs]
        w = torch.ones(xs[0].shape[-1], device="cuda", dtype=dtype)
        for op, fn, per_element in (("add", lambda x, y: torch.add(x, y), 6), ("silu", lambda x, y: F.silu(x), 4),
                                    ("rms_norm", lambda x, y: F.rms_norm(x, (x.shape[-1],), w), 4),
                                    ("softmax", lambda x, y: torch.softmax(x, dim=-1), 4)):
            def chain():
                for x, y in zip(xs, ys):
                    fn(x, y)

            graph = capture_graph(torch, chain)
            times = [t / len(xs) for t in replays(torch, graph)]
            ops_rows.append(dict(dtype="bf16", op=op, elements=xs[0].numel(), bytes=per_element * xs[0].numel(),
                                 stream_s_per_op=f"{statistics.median(times):.6g}", source=source))
            print(op, xs[0].numel(), ops_rows[-1]["stream_s_per_op"], flush=True)
            del graph
        del xs, ys
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    write_rows(ops_rows, out / "stream_ops.csv", ["dtype", "op", "elements", "bytes", "stream_s_per_op", "source"])
    write_rows(rows, out / "gemm_stream.csv", COLUMNS)
    print(f"# wrote {len(rows)} rows to {out / 'gemm_stream.csv'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
