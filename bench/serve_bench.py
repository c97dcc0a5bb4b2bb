"""Times `accel-sim serve`'s core: 1,000,000 requests of Llama-3-8B (1,000 prompt and 200 output
tokens, Poisson arrivals at 96 requests/s) on 8 H100 replicas under the vLLM scheduler, and
`find_max_qps` for Mixtral-8x7B (TP 2) on H100 against p99 TTFT 500 ms and TPOT 50 ms.

Run: python bench/serve_bench.py   (prints its figures; nothing is asserted)
"""

from __future__ import annotations

import os
import time

from accel_sim import _core
from accel_sim.device import resolve_device
from accel_sim.io.model_config import load_model_spec
from accel_sim.io.system_file import resolve_system


def _replica(tp: int, system: str | None) -> object:
    r = _core.ReplicaConfig()
    r.tp = tp
    if system:
        r.system = resolve_system(system).spec
    o = _core.SimulateOptions()
    o.cost_model = "kernel"
    o.cost.cuda_graphs = True
    r.simulate = o
    return r


def _lengths(value: int) -> object:
    s = _core.LengthSpec()
    s.kind, s.value = _core.LengthDistribution.fixed, value
    return s


def main() -> None:
    device = resolve_device("h100").spec
    print(f"serve bench on {os.cpu_count()} cores")
    start = time.perf_counter()
    costs = _core.IterationModel(load_model_spec("llama-3-8b"), device, _replica(1, None))
    spec = _core.WorkloadSpec()
    spec.requests, spec.qps, spec.seed = 1_000_000, 96.0, 0
    spec.input, spec.output = _lengths(1000), _lengths(200)
    workload = _core.generate_workload(spec)
    generated = time.perf_counter()
    config = _core.ServeConfig()
    config.replicas = 8
    r = _core.simulate_serving(costs, workload, config)
    done = time.perf_counter()
    print(f"  llama-3-8b, 1,000,000 requests on 8 x H100 (vllm): {done - start:.2f} s in all "
          f"(workload {generated - start:.2f} s, simulation {done - generated:.2f} s); {r.steps:,} steps, "
          f"{costs.profiles_built} graph profiles; {r.output_tokens_per_s:,.0f} output tokens/s, "
          f"TTFT p99 {r.ttft.p99 * 1e3:.1f} ms, TPOT p99 {r.tpot.p99 * 1e3:.1f} ms")

    start = time.perf_counter()
    costs = _core.IterationModel(load_model_spec("mixtral-8x7b"), device, _replica(2, "dgx_h100"))
    spec = _core.WorkloadSpec()
    spec.requests, spec.seed = 2000, 0
    spec.input, spec.output = _lengths(1000), _lengths(200)
    config = _core.ServeConfig()
    config.slo_ttft_s, config.slo_tpot_s = 0.5, 0.05
    found = _core.find_max_qps(costs, spec, config)
    print(f"  mixtral-8x7b TP2 on H100, find_max_qps (p99 TTFT 500 ms, TPOT 50 ms, 2,000 requests a trial): "
          f"{found.qps:.2f} requests/s in {time.perf_counter() - start:.2f} s ({found.trials} trials)")


if __name__ == "__main__":
    main()
