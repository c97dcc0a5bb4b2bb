"""Times `accel-sim plan` for Llama-3.1-405B on 8,192 H100s (DGX H100), 16M-token batches of
8,192-token sequences, over the whole default space with 2D SUMMA beside 1D TP (on every tp x cp
grid) and the offloads Megatron-Core runs (none, the optimizer, the activations, both), and compares
its best configuration with the split Meta reports using (TP 8, PP 16, DP 64; Llama 3 paper,
sec. 3.3.2) searched over the other dimensions.

Run: python bench/plan_bench.py [--threads N]   (prints its figures; nothing is asserted)
"""

from __future__ import annotations

import argparse
import os
import time

from accel_sim import _core
from accel_sim.device import resolve_device
from accel_sim.io.model_config import load_model_spec
from accel_sim.io.system_file import resolve_system


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=0)
    args = ap.parse_args()
    system = resolve_system("dgx-h100").spec
    device = resolve_device(system.device, []).spec
    spec = load_model_spec("llama-3.1-405b", dtype="bf16")
    base = _core.BuildOptions()
    base.seq = 8192
    options = _core.SimulateOptions()
    options.cost_model = "kernel"
    options.overlap_tp_comm = True
    options.fp8_weight_cache = True
    space = _core.default_plan_space(spec, 8192, 2048, 8192)
    space.offload = [0, _core.OFFLOAD_OPTIMIZER, _core.OFFLOAD_ACTIVATIONS,
                     _core.OFFLOAD_OPTIMIZER | _core.OFFLOAD_ACTIVATIONS]
    space.summa = [0, 1]
    start = time.perf_counter()
    r = _core.plan_training(spec, base, space, device, system, options, 10, args.threads, None)
    secs = time.perf_counter() - start
    print(f"plan llama-3.1-405b on 8192 x H100 (dgx_h100), 2048 x 8192 tokens, {os.cpu_count()} cores, "
          f"threads {args.threads or 'all'}")
    print(f"  {r.candidates:,} candidates ({r.evaluated:,} composed from {r.profiles:,} stage profiles, "
          f"{r.feasible:,} fit) in {secs:.2f} s = {r.candidates / secs / 1e6:.2f} M candidates/s")
    best = r.best[0]
    meta_space = _core.default_plan_space(spec, 8192, 2048, 8192)
    meta_space.tp, meta_space.pp, meta_space.cp = [8], [16], [1]
    meta_space.offload = space.offload
    meta = _core.plan_training(spec, base, meta_space, device, system, options, 1, args.threads, None).best[0]
    for label, c in (("best", best), ("Meta's TP8 PP16 DP64", meta)):
        l, e = c.layout, c.estimate  # noqa: E741
        print(f"  {label:<22} TP{l.tp} PP{l.pp} DP{l.dp} CP{l.cp} mb{l.micro_batch} v{l.virtual_stages} "
              f"ZeRO-{l.zero} {c.recompute.name}{' SP' if l.sequence_parallel else ''}{' SUMMA' if l.summa else ''}"
              f"{' offload' if l.offloads() else ''}: step {e.step_s:.2f} s, "
              f"MFU {e.mfu * 100:.1f}%, {e.memory_per_gpu_bytes / 2**30:.1f} GiB")
    print(f"  best / Meta's split: {best.estimate.step_s / meta.estimate.step_s:.3f} of its step time")


if __name__ == "__main__":
    main()
