"""`accel-sim serve-plan`: prints the serving search (accel_sim.commands.serve_plan runs it,
accel_sim.report.serve_planning renders it) as text or JSON and writes its HTML report."""

from __future__ import annotations

import argparse
import json

from accel_sim.commands.serve_plan import serve_plan


def cmd_serve_plan(args: argparse.Namespace) -> int:
    run = serve_plan(args)
    if args.html:
        from accel_sim.report.html_report import write_html
        from accel_sim.report.serve_planning import serve_plan_html

        write_html(args.html, serve_plan_html(run))
    if args.json:
        print(json.dumps(run.to_dict(), indent=1, allow_nan=False))
        return 0
    print(run.text())
    if args.html:
        print(f"\n  report: {args.html}")
    return 0
