"""Speed of the C++ core on a captured Llama-3-8B forward (batch 1, seq 2048, bf16).

    python bench/simulate_speed.py [--repeat 50]

Captures once, builds the core graph once, then times `_core.simulate` alone (the C++ call; the
GIL is released inside). Prints best and median over the repeats and the time per op. Target:
< 50 ms per simulation.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from importlib import resources

import torch
import transformers

from accel_sim import _core
from accel_sim.capture import capture_model
from accel_sim.device import Device
from accel_sim.io.graph_file import to_core


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeat", type=int, default=50)
    args = parser.parse_args()
    config = json.loads((resources.files("accel_sim") / "data" / "models" / "llama-3-8b.json").read_text())
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(transformers.AutoConfig.for_model(**config))
    model = model.to(torch.bfloat16).eval()
    graph = capture_model(model, {"input_ids": torch.empty(1, 2048, dtype=torch.int64, device="meta")})
    t0 = time.perf_counter()
    core_graph = to_core(graph)
    t1 = time.perf_counter()
    device = Device("h100").spec
    options = _core.SimulateOptions()
    times = []
    for _ in range(args.repeat):
        start = time.perf_counter()
        _core.simulate(core_graph, device, options)
        times.append(time.perf_counter() - start)
    n = core_graph.num_nodes
    best, median = min(times), statistics.median(times)
    print(f"nodes={n} load_graph_ms={(t1 - t0) * 1e3:.1f}")
    print(f"simulate_best_ms={best * 1e3:.3f} simulate_median_ms={median * 1e3:.3f} per_op_ns={best / n * 1e9:.0f}")
    print(f"target: simulate < 50 ms -> {'ok' if median < 0.05 else 'MISSED'} ({0.05 / median:.0f}x headroom)")


if __name__ == "__main__":
    main()
