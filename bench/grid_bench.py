"""How much the grid machinery of `accel-sim sweep --grid` costs.

Runs a 10,000-point `simulate --model` grid (Llama-3-8B decode on an H100, batch 1..100 x context
100 values from 128 to 8192: every point builds and simulates its own graph) twice:

1. the core's own throughput: the same points' build_graph + simulate called back to back in one
   process (no grid, no Python per point beyond the two calls), points per second on one core;
2. `accel-sim sweep --grid FILE --out FILE.parquet` as a user runs it (a fresh process: start-up,
   grid parsing, the worker pool over all cores, results streamed to a journal, the Parquet file
   written), points per second divided by the workers.

Prints both and their ratio (target: >= 0.80). Usage: python bench/grid_bench.py [--points N]
[--workers N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _grid_text(batches: int, contexts: int) -> str:
    return ("command: simulate\n"
            "fixed: {model: llama3-8b, phase: decode, device: h100}\n"
            "grid:\n"
            f"  batch: '1:{batches}:{batches}'\n"
            f"  context: '128:8192:{contexts}'\n")


def core_throughput(batches: int, contexts: int) -> float:
    """Points per second of the core's build + simulate on one core."""
    from accel_sim import _core
    from accel_sim.device import resolve_device
    from accel_sim.grid import _range
    from accel_sim.io.model_config import load_model_spec

    spec = load_model_spec("llama3-8b")
    device = resolve_device("h100").spec
    options = _core.SimulateOptions()
    options.cost_model = "kernel"  # the command line's default
    context_values = [round(c) for c in _range(f"128:8192:{contexts}", "bench")]
    start = time.perf_counter()
    n = 0
    for b in range(1, batches + 1):
        for c in context_values:
            build = _core.BuildOptions()
            build.phase, build.batch, build.context = _core.Phase.decode, b, c
            result = _core.simulate(_core.build_graph(spec, build), device, options)
            assert result.latency_s > 0
            n += 1
    return n / (time.perf_counter() - start)


def sweep_run(grid: Path, out: Path, workers: int, points: int) -> tuple[float, float]:
    """(wall seconds of the whole command, seconds of the run itself as it reports them)."""
    import json

    import pyarrow.parquet as pq

    for stale in out.parent.glob(out.name + "*"):
        stale.unlink()
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "accel_sim.cli.main", "sweep", "--grid", str(grid), "--out", str(out),
                           "--workers", str(workers), "--quiet", "--json"], check=True, capture_output=True, text=True)
    wall = time.perf_counter() - start
    table = pq.read_table(out)
    assert table.num_rows == points and table.column("error").null_count == points
    return wall, json.loads(done.stdout)["seconds"]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--points", type=int, default=10_000, help="a square number of points (default 10,000)")
    ap.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--rounds", type=int, default=3, help="core and sweep runs alternated, medians kept (default 3)")
    args = ap.parse_args()
    side = int(round(args.points**0.5))
    points = side * side
    cores, walls, runs = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        grid = Path(tmp) / "grid.yaml"
        grid.write_text(_grid_text(side, side))
        out = Path(tmp) / "results.parquet"
        for _ in range(args.rounds):  # alternated: a shared machine's speed drifts
            cores.append(core_throughput(side, side))
            wall, run = sweep_run(grid, out, args.workers, points)
            walls.append(wall)
            runs.append(run)
    core = statistics.median(cores)
    wall, run = statistics.median(walls), statistics.median(runs)
    print(f"core: build_graph + simulate back to back in one process: {core:,.0f} points/s per core "
          f"({1e3 / core:.3f} ms per point; median of {args.rounds})")
    whole = points / wall / args.workers
    inner = points / run / args.workers
    print(f"sweep --grid, {points:,} points on {args.workers} workers: {wall:.2f} s for the whole command "
          f"(start-up, grid, pool, Parquet) = {whole:,.0f} points/s per core; {run:.2f} s for the run itself "
          f"= {inner:,.0f} points/s per core")
    print(f"ratio to the core: {whole / core:.2f} whole command, {inner / core:.2f} the run (target >= 0.80)")


if __name__ == "__main__":
    main()
