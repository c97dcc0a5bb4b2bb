"""The options of `accel-sim sweep`: one graph over a range of a parameter (--vary), or a grid file
of any command's points (docs/formats/grid.md)."""

from __future__ import annotations

import argparse
from typing import Any, Callable

from accel_sim.commands.flags import COUNT, WHOLE


def add_parser(sub: Any, add_simulation_args: Callable[[argparse.ArgumentParser], None]) -> None:
    from accel_sim.sweep import METRICS, PARAMETERS

    p = sub.add_parser("sweep", help="vary a device or workload parameter and plot latency, throughput or memory",
                       description="Simulate one workload at each value of one parameter. Device parameters: "
                       + ", ".join(n for n, q in PARAMETERS.items() if q.kind != "workload")
                       + "; workload parameters (rebuild the graph, need --model): "
                       + ", ".join(n for n, q in PARAMETERS.items() if q.kind == "workload") + ".")
    add_simulation_args(p)
    where = p.add_mutually_exclusive_group()
    where.add_argument("--device", default="h100", help="device name or alias (default: h100); see `accel-sim devices`")
    where.add_argument("--devices", help="comma-separated device names: one series per device, e.g. a100,h100")
    p.add_argument("--vary", action="append", metavar="NAME=SPEC",
                   help="the parameter and its values: start:stop:n (n evenly spaced, both ends included), "
                   "start:stop:n:log (geometric) or a comma list; e.g. memory_bandwidth_gbs=2000:8000:7, batch=1,2,4,8. "
                   "Units: peak_tflops in dense TFLOP/s of the run's matmul dtype (every other compute rate of the part "
                   "scales with it), memory_bandwidth_gbs and link_bandwidth_gbs in GB/s, memory_gb in GiB, clock_mhz in MHz")
    p.add_argument("--metric", choices=tuple(METRICS), default="latency",
                   help="what --plot draws: latency, throughput (tokens/s), memory (needed) or mfu (default: latency)")
    p.add_argument("--plot", metavar="FILE", help="write the plot: .png (needs matplotlib), .svg, or .html (a self-contained page)")
    g = p.add_argument_group("grid sweeps (docs/formats/grid.md)")
    g.add_argument("--grid", metavar="FILE", help="a grid file: a command (simulate, train, plan, serve) and the values of its "
                   "parameters; every point of the product (or the listed points) is run; needs --out")
    g.add_argument("--out", metavar="FILE", help="with --grid: the results table, .parquet (needs pyarrow) or .csv; an "
                   "interrupted sweep resumes from it")
    g.add_argument("--workers", **WHOLE, default=0, metavar="N", help="with --grid: local worker processes, at most 4 per "
                   "core (default 0: one per core); workers the system cannot start are done without")
    g.add_argument("--ray", metavar="ADDRESS", help="with --grid: run the points as Ray tasks on this cluster (auto: the one "
                   "this machine is connected to); needs pip install \"accel-sim[ray]\"")
    g.add_argument("--batch-size", **COUNT, metavar="N", help="with --grid: points per task (default: chosen from the grid's size)")
    g.add_argument("--restart", action="store_true", help="with --grid: discard the results of an earlier run in --out")
    g.add_argument("--retry-failed", action="store_true", help="with --grid: run again the points that failed in an earlier run")
