"""Capture time and peak memory of a large model: Llama-3-70B forward, batch 1, seq 4096, bf16,
built on the meta device from the shipped config (no weights).

    python bench/capture_bench.py [--model llama-3-70b.json] [--seq 4096]

Prints the build and capture wall times and the process's peak RSS (ru_maxrss). Target: capture
< 60 s and < 3 GB RSS on a 2-core laptop-class machine. Run it alone (RSS is per process).
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from importlib import resources

import torch
import transformers

from accel_sim.capture import capture_model


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="llama-3-70b.json")
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--seq", type=int, default=4096)
    args = parser.parse_args()

    config = json.loads((resources.files("accel_sim") / "data" / "models" / args.model).read_text())
    t0 = time.perf_counter()
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**config))
    model = model.to(torch.bfloat16).eval()
    t1 = time.perf_counter()
    ids = torch.empty(args.batch, args.seq, dtype=torch.int64, device="meta")
    graph = capture_model(model, {"input_ids": ids})
    t2 = time.perf_counter()
    rss_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024 / 1e9  # Linux: KiB
    params = sum(p.numel() for p in model.parameters())
    print(f"model={args.model} params={params / 1e9:.2f}B batch={args.batch} seq={args.seq}")
    print(f"build_s={t1 - t0:.2f} capture_s={t2 - t1:.2f} nodes={len(graph['nodes'])} peak_rss_gb={rss_gb:.2f}")
    print(f"targets: capture_s < 60 -> {'ok' if t2 - t1 < 60 else 'MISSED'}; "
          f"peak_rss_gb < 3 -> {'ok' if rss_gb < 3 else 'MISSED'}")


if __name__ == "__main__":
    main()
