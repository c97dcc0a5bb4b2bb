"""`accel-sim train`: prints one training configuration's estimate (accel_sim.commands.train runs it,
accel_sim.report.training renders it) and writes its trace and HTML report."""

from __future__ import annotations

import argparse
import json
from typing import Any

from accel_sim.commands.train import step_schedule, train
from accel_sim.report.training import layout_dict


def cmd_train(args: argparse.Namespace) -> int:
    t = train(args)
    entry, run, layout, e = t.entry, t.run, t.layout, t.estimate
    title = f"{run.spec.name} on {args.gpus} x {run.device_label}"
    if args.trace:
        write_step_trace(args.trace, e, layout, title=title)
    if args.html:
        from accel_sim.report.html_report import write_html
        from accel_sim.report.html_runs import train_html

        schedule, tail = step_schedule(e, layout)
        write_html(args.html, train_html(title=f"{title} ({entry.spec.name})", e=e,
                                         layout=layout_dict(layout, run.base.recompute.name, run.base.recompute_interval),
                                         schedule=schedule, tail=tail, device=run.device))
    written = []
    if args.chakra:
        from accel_sim.errors import UsageError
        from accel_sim.report.chakra import write_step_chakra

        schedule, _ = step_schedule(e, layout)
        try:
            written = write_step_chakra(args.chakra, e, layout, schedule)
        except OSError as err:
            raise UsageError(f"cannot write the Chakra traces to {args.chakra}.*.et: {err.strerror}") from None
    if args.json:
        print(json.dumps(t.to_dict(), indent=1))
        return 0
    print(t.text())
    for path, counts in written:
        print(f"  chakra       {path} ({counts['nodes']} nodes: {counts['compute']} compute, {counts['sends']} sends, "
              f"{counts['receives']} receives, {counts['collectives']} collectives)")
    if args.trace:
        print(f"  trace        {args.trace} (open in ui.perfetto.dev)")
    if args.html:
        print(f"  report       {args.html}")
    return 0
def write_step_trace(path: str, e: Any, layout: Any, *, title: str) -> None:
    """One step as a Perfetto trace: the core's pipeline schedule of the micro-batches (each stage's
    forward and backward split over its virtual stages), then the exposed data-parallel
    communication and the optimizer on a track of their own."""
    from accel_sim.errors import UsageError
    from accel_sim.report.pipeline_trace import write_pipeline_trace

    schedule, tail = step_schedule(e, layout)
    try:
        write_pipeline_trace(path, schedule, title=title, extra_tracks={"step end": tail},
                             metadata={"step_s": e.step_s, "layout": layout_dict(layout, "")})
    except OSError as err:
        raise UsageError(f"cannot write the trace to {path}: {err.strerror}") from None
