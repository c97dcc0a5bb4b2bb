"""`accel-sim plan`: prints the plan search (accel_sim.commands.plan runs it, accel_sim.report.training
renders it) as text or JSON, and its sweep over GPU counts and systems as an HTML report or a plot."""

from __future__ import annotations

import argparse
import json

from accel_sim.commands.plan import plan
from accel_sim.report.training import short_layout


def cmd_plan(args: argparse.Namespace) -> int:
    from accel_sim.commands.flags import refuse
    from accel_sim.errors import UsageError

    if args.json and not (args.html or args.plot):
        refuse(args, ("train_tokens",), "sets the days to train in the text report, --html and --plot; --json "
               "reports the step")
    sweep = len([s for s in args.system.split(",") if s.strip()]) > 1 or len(args.gpus) > 1
    if args.plot and not sweep:
        raise UsageError("--plot draws a sweep: give several --gpus or --system values")
    if args.plot and not args.plot.endswith((".svg", ".html")):
        raise UsageError(f"--plot writes .svg or .html (got {args.plot})")
    result = plan(args)
    runs = result.runs
    print(json.dumps(result.to_dict(), indent=1) if args.json else result.text())
    if args.html:
        from accel_sim.report.html_report import write_html
        from accel_sim.report.html_runs import plan_html
        from accel_sim.report.plan_plot import plan_charts

        plot = None
        if sweep and any(r.best for *_, r, _ in runs):
            plot = "\n".join(plan_charts([(entry.spec.name, gpus, r.best[0].estimate if r.best else None)
                                          for entry, _, gpus, r, _ in runs], train_tokens=args.train_tokens))
        write_html(args.html, plan_html(runs, short=short_layout,
                                        train_tokens=args.train_tokens, plot_svg=plot))
        if not args.json:
            print(f"\n  report: {args.html}")
    if args.plot:
        from accel_sim.report.plan_plot import write_plan_plot

        write_plan_plot(args.plot, [(entry.spec.name, gpus, r.best[0].estimate if r.best else None)
                                    for entry, _, gpus, r, _ in runs],
                        model=runs[0][1].spec.name, train_tokens=args.train_tokens)
        if not args.json:
            print(f"\n  plot: {args.plot}")
    return 0
