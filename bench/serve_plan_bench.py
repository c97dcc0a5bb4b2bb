"""Times `accel-sim serve-plan` on the question serving teams ask: Llama-3-70B at 40 requests/s,
prompts of 2,000 and answers of 300 tokens, p99 TTFT 500 ms and p99 TPOT 40 ms, over H100 SXM,
H200 and MI300X under vLLM, every layout up to 64 GPUs (TP 1-8 x PP 1-4, bf16 and fp8, four batch
caps, two token budgets, aggregated and four disaggregated units: 2,880 layouts). The screened
search (the default) against the exhaustive one (every layout that fits and meets the latency
bounds simulated): their wall times, the ratio, and whether they agree on the fewest GPUs.

Run: python bench/serve_plan_bench.py [--no-exhaustive]   (prints its figures; nothing is asserted)
"""

from __future__ import annotations

import os
import sys
import time

import accel_sim

QUESTION = dict(model="llama-3-70b", devices="h100,h200,mi300x", stack="vllm", qps=40, input_len="2000",
                output_len="300", slo_ttft_p99="500ms", slo_tpot_p99="40ms", max_gpus=64)


def run(**extra) -> tuple[float, dict]:
    start = time.perf_counter()
    d = accel_sim.serve_plan(**QUESTION, **extra).to_dict()
    return time.perf_counter() - start, d


def line(name: str, seconds: float, d: dict) -> str:
    b, s = d["best"], d["search"]
    return (f"  {name:<11} {seconds:6.1f} s · {s['layouts']:,} layouts, {s['simulated']:,} simulated "
            f"({s['trials']:,} serving runs) · best {b['gpus']} GPUs: {b['device']} {b['quantization']} TP{b['tp']} "
            f"PP{b['pp']} {b['prefill_replicas']}P:{b['decode_replicas']}D max {b['max_seqs']} seqs, "
            f"{b['token_budget']}-token steps; {b['deployment']['slo_attainment'] * 100:.1f}% of requests meet the SLOs")


def main() -> None:
    print(f"serve-plan bench on {os.cpu_count()} cores: llama-3-70b, 40 requests/s, 2,000 + 300 tokens, "
          "p99 TTFT 500 ms, p99 TPOT 40 ms, h100/h200/mi300x x vllm, up to 64 GPUs")
    screened_s, screened = run()
    print(line("screened", screened_s, screened))
    if "--no-exhaustive" in sys.argv:
        return
    exhaustive_s, exhaustive = run(exhaustive=True)
    print(line("exhaustive", exhaustive_s, exhaustive))
    same = screened["best"]["gpus"] == exhaustive["best"]["gpus"]
    print(f"  screened / exhaustive wall time: {screened_s / exhaustive_s:.3f}; same fewest GPUs: {same}")


if __name__ == "__main__":
    main()
