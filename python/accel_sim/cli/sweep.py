"""`accel-sim sweep`: prints one workload at each value of a device parameter (peak FLOP/s, memory
bandwidth, capacity, clock, link bandwidth) or a workload parameter (batch, seq, context, GPUs), on
one or more devices, as a table, JSON and a plot (.png, .svg, .html); or a grid file's sweep
(accel_sim.commands.sweep runs them, accel_sim.report.sweeping renders them)."""

from __future__ import annotations

import argparse
import json
import sys

from accel_sim.commands.grid_sweep import grid_sweep
from accel_sim.commands.sweep import sweep


def cmd_sweep(args: argparse.Namespace) -> int:
    try:
        run = grid_sweep(args) if args.grid else sweep(args)
    except KeyboardInterrupt:
        if not args.grid:
            raise
        print("accel-sim sweep: interrupted; the finished points are kept: run the same command to resume",
              file=sys.stderr)
        return 130
    print(json.dumps(run.to_dict(), indent=1) if args.json else run.text())
    if args.plot:
        from accel_sim.report.sweep_plot import SweepFigure, write_sweep_plot
        from accel_sim.report.sweeping import log_x, table_rows

        headers, cells, right = table_rows(run.rows, run.name)
        metric_key, metric_label, metric_scale = run.metric
        figure = SweepFigure(run.rows, parameter=run.name, x_label=run.parameter.label, metric_key=metric_key,
                             metric_scale=metric_scale, y_label=metric_label, values=run.values,
                             title=f"{run.workload} · {args.cost_model} model", log_x=log_x(args.vary[0], run.values))
        write_sweep_plot(args.plot, figure, heading=f"accel-sim sweep · {run.workload}",
                         subtitle=f"{run.parameter.label} · {', '.join(dict.fromkeys(r['device'] for r in run.rows))} · "
                                  f"{args.cost_model} model",
                         table_headers=headers, table_rows=cells, numeric=right)
        if not args.json:
            print(f"  wrote {args.plot}")
    return 0
