"""`accel-sim sweep --grid FILE --out FILE`: every point of a grid file of any command, in this
process, on a pool of worker processes or on Ray, into one table (grid.py reads the file, grid_run.py
runs it; docs/formats/grid.md). Apart from commands/sweep.py because the grid's points read the
commands' options (commands/parser.py), which read sweep's."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any


@dataclass
class GridSweepRun:
    """A grid sweep as `accel-sim sweep --grid` runs it: its options, the grid, where it ran and
    grid_run's summary (the table itself is the file at args.out)."""

    args: Any
    grid: Any
    where: str
    summary: Any

    def to_dict(self) -> dict:
        from accel_sim.report.sweeping import grid_json

        return grid_json(self)

    def text(self) -> str:
        from accel_sim.report.sweeping import grid_text

        return grid_text(self)


# The flags of `sweep --grid` itself: how the grid runs and reports, never what a point runs.
_GRID_RUN_FLAGS = {"command", "debug", "grid", "out", "workers", "ray", "batch_size", "restart", "retry_failed", "json",
                   "quiet"}


def grid_sweep(args: argparse.Namespace) -> GridSweepRun:
    """`sweep --grid FILE --out FILE`: every point of the grid, over all cores or a Ray cluster,
    into one table; resumable. A KeyboardInterrupt leaves the finished points in the journal."""
    from accel_sim.commands.flags import refuse
    from accel_sim.errors import UsageError
    from accel_sim.grid import load_grid
    from accel_sim.progress import Progress

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
    finally:
        progress.close()
    return GridSweepRun(args, grid, where, summary)
