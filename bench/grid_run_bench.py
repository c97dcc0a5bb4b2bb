"""The cost of accel_sim.grid_run's machinery per point: batching, pickling, the journal, the table.

    python bench/grid_run_bench.py                 # 100,000 trivial points, 10,000 points of 1 ms
    python bench/grid_run_bench.py --ray           # the same on a local Ray instance too
    python bench/grid_run_bench.py --points 20000 --busy-points 2000

Two measurements:
* overhead: an evaluate that does no work (rows built from the index), so all the time is the
  machinery's. Reported per point as wall time, and as CPU time of this process and its workers
  (getrusage) less the CPU time of the same evaluate called directly on the same batches.
* efficiency: an evaluate that burns BUSY_S of CPU per point (a stand-in for a point of C++
  simulation), on all cores: points per second per core against one core calling it directly
  (wall clock: only meaningful on an otherwise idle machine), and the evaluations' CPU time as a
  share of all the CPU time the sweep used (this process and its workers: robust to other load).
The grid is a stand-in too (9 columns like a `simulate` row), so no model is loaded.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "python"))

from accel_sim.grid_run import run_grid  # noqa: E402
from accel_sim.grid_workers import ray_runtime_env  # noqa: E402

COLUMNS = [("point", "int64"), ("model", "string"), ("batch", "int64"), ("seq", "int64"), ("device", "string"),
           ("latency_s", "float64"), ("peak_memory_bytes", "int64"), ("fits", "bool"), ("error", "string")]
DEVICES = ("a100", "h100", "h200", "mi300x")


@dataclass(frozen=True)
class BenchGrid:
    path: str
    size: int
    command: str = "simulate"

    def __len__(self) -> int:
        return self.size

    def point(self, i: int) -> dict:
        return {"model": "llama-3-8b", "batch": 1 << (i % 8), "seq": 128 << (i // 8 % 8), "device": DEVICES[i // 64 % 4]}

    def columns(self) -> list[tuple[str, str]]:
        return COLUMNS


def trivial(grid: BenchGrid, indices: list[int]) -> list[dict]:
    rows = []
    for i in indices:
        p = grid.point(i)
        rows.append({"point": i, **p, "latency_s": p["batch"] * p["seq"] * 1e-6, "peak_memory_bytes": p["seq"] << 20,
                     "fits": p["seq"] < 8192, "error": None})
    return rows


BUSY_S = 0.001


def busy(grid: BenchGrid, indices: list[int]) -> list[dict]:
    for _ in indices:
        end = time.thread_time() + BUSY_S
        while time.thread_time() < end:
            pass
    return trivial(grid, indices)


def cpu_seconds() -> float:
    me, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + kids.ru_utime + kids.ru_stime


def direct(grid: BenchGrid, evaluate, batch: int) -> float:
    """CPU seconds of EVALUATE called on every point in batches, with no machinery."""
    start = time.process_time()
    for first in range(0, len(grid), batch):
        evaluate(grid, list(range(first, min(first + batch, len(grid)))))
    return time.process_time() - start


def timed_run(grid: BenchGrid, out: Path, **kwargs) -> tuple[float, float]:
    cpu, wall = cpu_seconds(), time.perf_counter()
    summary = run_grid(grid, out, restart=True, **kwargs)
    assert summary.complete and summary.computed == len(grid) and summary.failed == 0, summary
    return time.perf_counter() - wall, cpu_seconds() - cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--busy-points", type=int, default=10_000)
    parser.add_argument("--ray", action="store_true", help="also on a local Ray instance")
    parser.add_argument("--out", default=".parquet", choices=[".parquet", ".csv"])
    args = parser.parse_args()
    cores = len(os.sched_getaffinity(0))
    print(f"{cores} cores, Python {sys.version.split()[0]}")
    setups = [("in-process", {"workers": 1}), (f"pool x{cores}", {"workers": cores})]
    if args.ray:
        import ray

        ray.init(num_cpus=cores, include_dashboard=False, log_to_driver=False, runtime_env=ray_runtime_env())
        setups.append((f"ray x{cores}", {"ray_address": "auto"}))
    with tempfile.TemporaryDirectory() as tmp:
        grid_file = Path(tmp) / "grid.yaml"
        grid_file.write_text("bench\n")
        grid = BenchGrid(str(grid_file), args.points)
        base = direct(grid, trivial, 1000)
        print(f"\noverhead: {args.points:,} points of trivial work ({base / args.points * 1e6:.1f} us each, called directly)")
        for name, kwargs in setups:
            wall, cpu = timed_run(grid, Path(tmp) / f"t{args.out}", evaluate=trivial, **kwargs)
            print(f"  {name:<12} {args.points / wall:>9,.0f} points/s   wall {wall / args.points * 1e6:6.1f} us/point   "
                  f"machinery CPU {(cpu - base) / args.points * 1e6:6.1f} us/point")

        grid = BenchGrid(str(grid_file), args.busy_points)
        one = direct(grid, busy, 100)
        per_core = args.busy_points / one
        print(f"\nefficiency: {args.busy_points:,} points of {BUSY_S * 1e3:g} ms CPU; one core calling it directly: "
              f"{per_core:,.0f} points/s")
        for name, kwargs in setups:
            wall, cpu = timed_run(grid, Path(tmp) / f"b{args.out}", evaluate=busy, **kwargs)
            used = 1 if kwargs.get("workers") == 1 else cores
            rate = args.busy_points / wall
            useful = "" if "ray_address" in kwargs else \
                f"; useful CPU {args.busy_points * BUSY_S / cpu * 100:5.1f}% of the CPU it used"
            print(f"  {name:<12} {rate:>9,.0f} points/s on {used} core(s): {rate / used / per_core * 100:5.1f}% "
                  f"of one core's throughput per core{useful}")
    print(f"\nload average {os.getloadavg()[0]:.2f} (other work on the machine lowers the wall-clock figures, "
          "not the CPU ones; Ray workers' CPU is not counted)")
    if args.ray:
        ray.shutdown()


if __name__ == "__main__":
    main()
