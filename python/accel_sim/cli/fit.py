"""`accel-sim fit`: prints the largest batch or sequence length that fits each device
(accel_sim.commands.fit searches, accel_sim.report.fitting renders) and writes its plot."""

from __future__ import annotations

import argparse
import json

from accel_sim.commands.fit import fit


def cmd_fit(args: argparse.Namespace) -> int:
    from accel_sim.report.fitting import write_fit_plot

    run = fit(args)
    if args.plot:
        write_fit_plot(run.report, args.plot)
    print(json.dumps(run.to_dict(), indent=1) if args.json else run.text())
    if args.plot and not args.json:
        print(f"  wrote {args.plot}")
    return 0
