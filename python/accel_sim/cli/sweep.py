"""`accel-sim sweep`: one workload at each value of a device parameter (peak FLOP/s, memory
bandwidth, capacity, clock, link bandwidth) or a workload parameter (batch, seq, context, GPUs),
on one or more devices, as a table, JSON and a plot (.png, .svg, .html)."""

from __future__ import annotations

import argparse
import copy
import dataclasses
import inspect
import json
import sys

from accel_sim.progress import Progress


def _stack_dict(stack: str | None) -> dict | None:
    """The --stack a sweep ran under, as reports name it, or None."""
    if not stack:
        return None
    from accel_sim.io.stack_file import resolve_stack

    return resolve_stack(stack).as_dict()


def _fmt(v: float) -> str:
    from accel_sim.report.sweep_plot import value_label

    return value_label(v)


def _workload(info: dict | None, graph_name: str, varied: str) -> str:
    """'llama-3-8b decode (batch 1, context 2048)', leaving out the varied parameter."""
    if not info:
        return graph_name or "graph"
    fields = [("batch", "batch", info["batch"])]
    fields.append(("context", "context", info["context"]) if info["phase"] == "decode" else ("seq", "seq", info["seq"]))
    fields += [(k, k.upper(), info[f]) for k, f in (("tp", "tensor_parallel"), ("ep", "expert_parallel"),
                                                    ("cp", "context_parallel")) if info.get(f, 1) > 1 or k == varied]
    shape = ", ".join(f"{label} {value}" for key, label, value in fields if key != varied)
    return f"{info['model']} {info['phase']}" + (f" ({shape})" if shape else "")


def _table_rows(rows: list[dict], name: str) -> tuple[list[str], list[tuple], list[bool]]:
    """Headers, cells and right-alignment of the table (a communication column when collectives
    were timed). A number's cell is (text, value): the HTML table sorts by the value."""
    from accel_sim.report.tables import gib, ms

    comm = any(r["communication_time_s"] > 0 for r in rows)
    headers = ["device", name, "latency", "tokens/s", "memory needed", "fits", "bound", "compute-bound",
               "memory-bound"] + (["communication"] if comm else []) + ["MFU"]

    def seconds(v: float) -> tuple[str, float]:
        return ms(v), v

    out = [(r["device"], (_fmt(r[name]), r[name]), seconds(r["latency_s"]),
            (f"{r['tokens_per_s']:,.0f}", r["tokens_per_s"]) if r["tokens_per_s"] is not None else "-",
            (gib(r["required_bytes"]), r["required_bytes"]), "yes" if r["fits"] else "OOM", r["bound"],
            seconds(r["compute_bound_time_s"]), seconds(r["memory_bound_time_s"]))
           + ((seconds(r["communication_time_s"]),) if comm else ()) + ((f"{r['mfu'] * 100:.1f}%", r["mfu"]),)
           for r in rows]
    right = [False, True, True, True, True, False, False, True, True] + ([True] if comm else []) + [True]
    return headers, out, right


def cmd_sweep(args: argparse.Namespace) -> int:
    import accel_sim
    from accel_sim.commands import simulate
    from accel_sim.errors import UsageError
    from accel_sim.report.json_report import SCHEMA_VERSION
    from accel_sim.report.sweep_plot import SweepFigure, check_plot_path, write_sweep_plot
    from accel_sim.report.tables import table
    from accel_sim.sweep import METRICS, PARAMETERS, SweepSetup, check, parse_vary, run_sweep

    if args.grid:
        return _cmd_grid(args)
    from accel_sim.commands.flags import refuse

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
    accepted = set(inspect.signature(accel_sim.simulate).parameters) - {"system", "groups", "device_files", "dtype"}
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

    p = PARAMETERS[name]
    metric_key, metric_label, metric_scale = METRICS[args.metric]
    info = getattr(graph, "info", None)
    graph_name = graph.get("name", "") if isinstance(graph, dict) else getattr(graph, "name", "")
    workload = _workload(info, graph_name, name)
    if args.json:
        print(json.dumps({
            "schema": "accel-sim/sweep",
            "schema_version": SCHEMA_VERSION,
            "workload": info if info else {"graph": graph_name},
            "parameter": {"name": name, "kind": p.kind, "label": p.label,
                          "values": [int(v) if p.integer else v for v in values]},
            "devices": list(dict.fromkeys(r["device"] for r in rows)),
            "system": args.system,
            "cost_model": args.cost_model,
            "stack": _stack_dict(args.stack),
            "metric": metric_key,
            "points": rows,
        }, indent=1))
    else:
        headers, cells, right = _table_rows(rows, name)
        print(f"accel-sim sweep · {workload} · {p.label} · {args.cost_model} model"
              + (f" · stack {args.stack}" if args.stack else ""))
        print()
        print(table(headers, [[c[0] if isinstance(c, tuple) else c for c in row] for row in cells], right))
        notes = [f"{len(rows)} points"]
        if name == "peak_tflops":
            notes.append("the peak is the run's matmul dtype's; every other compute rate scales with it")
        if any(not r["fits"] for r in rows):
            notes.append("OOM: the point needs more memory than the device has")
        print("\n  " + " · ".join(notes))
    if args.plot:
        headers, cells, right = _table_rows(rows, name)
        figure = SweepFigure(rows, parameter=name, x_label=p.label, metric_key=metric_key, metric_scale=metric_scale,
                             y_label=metric_label, values=values,
                             title=f"{workload} · {args.cost_model} model",
                             log_x=_log_x(args.vary[0], values))
        write_sweep_plot(args.plot, figure, heading=f"accel-sim sweep · {workload}",
                         subtitle=f"{p.label} · {', '.join(dict.fromkeys(r['device'] for r in rows))} · "
                                  f"{args.cost_model} model",
                         table_headers=headers, table_rows=cells, numeric=right)
        if not args.json:
            print(f"  wrote {args.plot}")
    return 0


def _log_x(vary: str, values: list[float]) -> bool:
    """A log x axis for a geometric range, or a list spanning a factor of ten or more."""
    from accel_sim.report.sweep_plot import wants_log

    spec = vary.partition("=")[2]
    return spec.endswith(":log") or (":" not in spec and wants_log(values))


# The flags of `sweep --grid` itself: how the grid runs and reports, never what a point runs.
_GRID_RUN_FLAGS = {"command", "debug", "grid", "out", "workers", "ray", "batch_size", "restart", "retry_failed", "json",
                   "quiet"}


def _cmd_grid(args: argparse.Namespace) -> int:
    """`sweep --grid FILE --out FILE`: every point of the grid, over all cores or a Ray cluster,
    into one table; resumable."""
    from accel_sim.errors import UsageError
    from accel_sim.grid import load_grid
    from accel_sim.report.json_report import SCHEMA_VERSION

    from accel_sim.commands.flags import refuse

    if args.vary or args.plot:
        raise UsageError("--grid runs a grid file: --vary and --plot belong to a one-parameter sweep")
    refuse(args, ("metric",), "picks what a one-parameter sweep's --plot draws; a grid's table holds every figure")
    if args.target:
        raise UsageError(f"the target {args.target} comes from the grid file (put it under fixed: as target)")
    # Every flag of the simulation (the model, the device, the shape, the cost model, ...) is a
    # parameter of the grid file: one typed here would be dropped.
    refuse(args, [d for d in vars(args) if d not in _GRID_RUN_FLAGS], "comes from the grid file (put it under fixed:)")
    if not args.out:
        raise UsageError("--grid needs --out FILE (.parquet or .csv) for the results")
    from accel_sim.grid_run import MAX_WORKERS_PER_CORE, max_workers, run_grid

    if args.workers > max_workers():
        raise UsageError(f"--workers takes 0 (one per core) to {max_workers():,} ({MAX_WORKERS_PER_CORE} per core of this "
                         f"machine; got {args.workers:,})")
    grid = load_grid(args.grid)

    where = f"Ray ({args.ray})" if args.ray else "local"
    progress = Progress(f"sweep {grid.command} · {len(grid):,} points · {where}", args.quiet or args.json)
    try:
        summary = run_grid(grid, args.out, workers=args.workers, ray_address=args.ray, batch_size=args.batch_size,
                           progress=progress, restart=args.restart, retry_failed=args.retry_failed)
    except KeyboardInterrupt:
        progress.close()
        print("accel-sim sweep: interrupted; the finished points are kept: run the same command to resume",
              file=sys.stderr)
        return 130
    finally:
        progress.close()
    out = {"schema": "accel-sim/sweep-grid", "schema_version": SCHEMA_VERSION, "grid": args.grid, "command": grid.command,
           "out": args.out} | {k: v for k, v in dataclasses.asdict(summary).items() if k != "out_path"}
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        print(f"accel-sim sweep · {args.grid} · {grid.command} · {len(grid):,} points · {where}")
        print(f"  computed {summary.computed:,} · resumed {summary.resumed:,} · failed {summary.failed:,} "
              f"in {summary.seconds:,.1f} s")
        print(f"  wrote {args.out}")
    return 0
