"""Capture time and peak memory of a large model: Llama-3-70B forward (or, with --train, one
training step: forward, loss, backward, fused AdamW), batch 1, seq 4096, bf16, built on the meta
device from the shipped config (no weights).

    python bench/capture_bench.py [--model llama-3-70b.json] [--seq 4096] [--train]

Prints the build and capture wall times and the process's peak RSS (ru_maxrss). Targets on a
2-core laptop-class machine: forward capture < 60 s and < 3 GB RSS; training step < 90 s and
< 4 GB RSS. Run it alone (RSS is per process).
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from importlib import resources

import torch
import transformers

from accel_sim.capture import capture_model, capture_training_step


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="llama-3-70b.json")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=4096)
    parser.add_argument("--train", action="store_true", help="capture a training step (AdamW)")
    args = parser.parse_args()

    config = json.loads((resources.files("accel_sim") / "data" / "models" / args.model).read_text())
    t0 = time.perf_counter()
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**config))
    model = model.to(torch.bfloat16).eval()
    t1 = time.perf_counter()
    ids = torch.empty(args.batch, args.seq, dtype=torch.int64, device="meta")
    if args.train:
        graph = capture_training_step(model, {"input_ids": ids}, optimizer="adamw")
    else:
        graph = capture_model(model, {"input_ids": ids})
    t2 = time.perf_counter()
    rss_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9  # Linux: KiB
    params = sum(p.numel() for p in model.parameters())
    limit_s, limit_gb = (90, 4) if args.train else (60, 3)
    print(f"model={args.model} params={params / 1e9:.2f}B batch={args.batch} seq={args.seq} "
          f"{'training step' if args.train else 'forward'}")
    print(f"build_s={t1 - t0:.2f} capture_s={t2 - t1:.2f} nodes={len(graph['nodes'])} peak_rss_gb={rss_gb:.2f}")
    print(f"targets: capture_s < {limit_s} -> {'ok' if t2 - t1 < limit_s else 'MISSED'}; "
          f"peak_rss_gb < {limit_gb} -> {'ok' if rss_gb < limit_gb else 'MISSED'}")


if __name__ == "__main__":
    main()
