"""`accel-sim sweep`: its options, and the run of `--vary`: one graph over a range of a parameter
(design_sweep.py); `--grid` is commands/grid_sweep.py's. accel_sim.report.sweeping renders them."""

from __future__ import annotations

import argparse
import copy
import inspect
from dataclasses import dataclass
from typing import Any, Callable

from accel_sim.commands.flags import COUNT, WHOLE


def add_parser(sub: Any, add_simulation_args: Callable[[argparse.ArgumentParser], None]) -> None:
    from accel_sim.design_sweep import METRICS, PARAMETERS

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


@dataclass
class SweepRun:
    """A one-parameter sweep as `accel-sim sweep --vary` runs it: its options (`args`), the parameter
    (`name`, its design_sweep.Parameter), the values, one row of figures per device and value, the
    workload (the graph's model info, or its name) and the metric its plot draws (key, label,
    scale). to_dict() is `sweep --json`, text() its table."""

    args: Any
    name: str
    parameter: Any
    values: list
    rows: list
    info: dict | None
    graph_name: str
    workload: str
    metric: tuple
    stack: Any = None

    def to_dict(self) -> dict:
        from accel_sim.report.sweeping import sweep_json

        return sweep_json(self)

    def text(self) -> str:
        from accel_sim.report.sweeping import sweep_text

        return sweep_text(self)


def sweep(args: argparse.Namespace) -> SweepRun:
    """`sweep --vary`'s run (commands/grid_sweep.py runs `sweep --grid`)."""
    from accel_sim.api import simulate as simulate_graph
    from accel_sim.commands import simulate
    from accel_sim.commands.flags import refuse
    from accel_sim.design_sweep import METRICS, PARAMETERS, SweepSetup, check, parse_vary, run_sweep
    from accel_sim.errors import UsageError
    from accel_sim.progress import Progress
    from accel_sim.report.sweep_plot import check_plot_path
    from accel_sim.report.sweeping import workload_label

    if args.grid:
        raise UsageError("--grid runs a grid file: accel_sim.commands.grid_sweep runs it")
    if args.out:
        raise UsageError("--out writes a grid sweep's table: give --grid FILE")
    refuse(args, ("workers", "ray", "batch_size", "restart", "retry_failed"), "applies to a grid sweep (--grid FILE)")
    if not args.vary or len(args.vary) != 1:
        raise UsageError("sweep varies one parameter: give --vary once (or a grid file with --grid)")
    if not args.plot:
        refuse(args, ("metric",), "picks what --plot draws; give --plot FILE (the table and --json hold every metric)")
    name, values = parse_vary(args.vary[0])
    if PARAMETERS[name].kind == "workload":
        refuse(args, (name,), f"is the parameter varied (--vary {args.vary[0]}); give its values there")
    if args.plot:
        check_plot_path(args.plot)
    devices = [d.strip() for d in (args.devices or args.device).split(",") if d.strip()]
    if not devices:
        raise UsageError("--devices names no device")
    # simulate()'s options as the other commands take them; the system and groups are placed per
    # point, the devices resolved per point.
    accepted = set(inspect.signature(simulate_graph).parameters) - {"system", "groups", "device_files", "dtype"}
    common = {k: v for k, v in simulate.common(args).items() if k in accepted}
    setup = SweepSetup(build=simulate.model_build_args(args) if args.model is not None else None, simulate=common,
                       system=args.system, device=devices[0], device_files=tuple(args.device_file))
    check(setup, name)
    load_args = args
    if name in ("tp", "cp", "ep"):
        # The graph's collectives come from the varied degree: --system applies as soon as one
        # value is above 1, though the flag itself is 1.
        load_args = copy.copy(args)
        setattr(load_args, name, int(max(values)))
    graph = simulate.load(load_args)  # checks the flags, resolves the devices, captures or builds once
    progress = Progress(f"sweep {name}", args.quiet or args.json)
    try:
        rows = run_sweep(setup, devices, name, values, graph=graph, progress=progress)
    finally:
        progress.close()

    info = getattr(graph, "info", None)
    graph_name = graph.get("name", "") if isinstance(graph, dict) else getattr(graph, "name", "")
    stack = None
    if args.stack:
        from accel_sim.io.stack_file import resolve_stack

        stack = resolve_stack(args.stack)
    return SweepRun(args, name, PARAMETERS[name], list(values), rows, info, graph_name,
                    workload_label(info, graph_name, name), METRICS[args.metric], stack)


