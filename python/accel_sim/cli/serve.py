"""`accel-sim serve`: prints a serving run or a capacity table over devices (accel_sim.commands.serve
runs them, accel_sim.report.serving renders them) and writes its trace and HTML report."""

from __future__ import annotations

import argparse
import json
import sys

from accel_sim.commands.serve import serve


def cmd_serve(args: argparse.Namespace) -> int:
    from accel_sim.device import device_label

    s = serve(args)
    for note in s.notes:
        print(f"note: {note}", file=sys.stderr)
    if args.trace and len(s.rows) == 1:
        from accel_sim.report.serve_timeline import write_serve_trace

        device, _, result, _, _ = s.rows[0]
        write_serve_trace(args.trace, result, replicas=args.replicas, engines_per_replica=args.pp * args.dp_attention,
                          title=f"{s.spec.name} on {args.replicas} x {args.tp * args.pp * args.dp_attention} "
                                f"{device_label(device, args.clock_mhz)}")
    if args.html:
        from accel_sim.report.html_report import write_html
        from accel_sim.report.html_runs import serve_html

        write_html(args.html, serve_html(model=s.spec.name, rows=[row[:4] for row in s.rows], slo=s.slo,
                                         subtitle=(f"{args.stack} · " if args.stack else "")
                                         + f"{args.scheduler} scheduler · {args.replicas} replica(s) · TP {args.tp} PP {args.pp}"
                                         + (f" · clock overridden: {args.clock_mhz:g} MHz" if args.clock_mhz is not None else "")))
    if args.json:
        print(json.dumps(s.to_dict(), indent=1, allow_nan=False, default=lambda v: None))
        return 0
    print(s.text())
    if args.html:
        print(f"\n  report: {args.html}")
    return 0
