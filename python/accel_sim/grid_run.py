"""Runs every point of a grid and writes one table: in this process, on all cores, or on Ray.

    from accel_sim.grid_run import run_grid
    summary = run_grid(grid, "results.parquet")                  # all cores of this machine
    summary = run_grid(grid, "results.parquet", ray_address="auto")  # the connected Ray cluster
    print(summary.computed, summary.resumed, summary.failed, summary.seconds)

A grid (accel_sim.grid.Grid) says how many points it has, the parameters of point i and the
table's columns; `evaluate(grid, indices)` (accel_sim.grid_points.run_points) turns a batch of
neighbouring indices into rows, one per index, a failed point carrying its error. This module
only schedules batches and keeps the results (grid_workers.py runs them, grid_results.py keeps
the table, the journal and the output file):

* Batches. Pending indices are generated lazily in index order, so a grid of 10^6 points is never
  a list of 10^6 anything; a batch is sized from the measured time per point to take about
  TARGET_BATCH_S (more on Ray, whose tasks cost more), smaller towards the end so that the
  workers finish together. At most one batch per local worker, or two per Ray CPU, is in flight.
* Where. workers=1 evaluates in this process; otherwise a pool of worker processes each
  evaluating one batch at a time, so a worker that dies (a crash in the core) costs exactly its
  batch, whose points are recorded with the error, and is replaced. With ray_address, a Ray task
  per batch; a task that raises or whose worker dies records its batch's points with the error.
  The sweep itself never stops for a point. When run_grid starts Ray, it ships this accel_sim
  package to the workers (ray_runtime_env); a probe task checks, before the first batch, that
  the workers can unpickle the grid and evaluate and run the same accel-sim version.
* Journal. Each finished batch is appended to `<out>.partial.jsonl` (a header line with the
  grid's fingerprint and columns, then one JSON array per row) and fsynced, so a killed sweep
  loses at most its batches in flight; a torn last line is dropped on reading.
* Resume. On start, the rows of an existing output and of a journal of the same grid (same
  fingerprint: the grid file's bytes, its command and the columns) are taken as done and not
  computed again; rows that carry an error are computed again only with retry_failed. An
  output or journal of another grid is refused (UsageError) unless restart discards them.
* Output. When every point has a row, the table is written sorted by point, to a temporary file
  renamed over OUT (Parquet through pyarrow, or CSV with a `<out>.meta.json` sidecar holding the
  fingerprint), and the journal is removed. Columns are typed from grid.columns(): int64,
  float64, bool, string; None is null (an empty CSV field).
"""

from __future__ import annotations

import math
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from accel_sim.errors import UsageError
from accel_sim.grid import MAX_POINTS
from accel_sim.grid_results import (FORMAT_VERSION, JOURNAL_FORMAT, EXACT, Journal, ResultTable, check_columns,
                                    converter, csv_meta_path, grid_fingerprint, journal_path_for, load_output,
                                    output_format, write_output)
from accel_sim.grid_workers import (Evaluate, available_cores, import_ray, max_workers, run_in_pool,
                                    run_in_process, run_on_ray, MAX_WORKERS_PER_CORE)
from accel_sim.io import fields

TARGET_BATCH_S = 0.25      # local batch: long enough that the ~0.1 ms round trip is noise
FIRST_BATCH = 4            # before any point has been timed
MAX_BATCH = 20_000         # also bounds a message's size (rows of a batch in one pickle)
TAIL_BATCHES_PER_WORKER = 4


@dataclass(frozen=True)
class GridRunSummary:
    """What run_grid did. failed counts the table's rows that carry an error (computed now or
    carried over); complete is False when stop_after ended the run before the last point (the
    journal is kept and the output not written)."""

    out_path: str
    total: int
    computed: int
    resumed: int
    failed: int
    seconds: float
    complete: bool


def run_grid(grid, out_path: str | os.PathLike, *, workers: int = 0, ray_address: str | None = None,
             batch_size: int | None = None, progress: Callable[[int, int], None] | None = None,
             evaluate: Evaluate | None = None, restart: bool = False, retry_failed: bool = False,
             stop_after: int | None = None, start_method: str | None = None) -> GridRunSummary:
    """Evaluates every point of GRID not already in OUT_PATH (or its journal) and writes the table.

    workers: processes on this machine; 0 is one per available core, 1 evaluates in this
        process. Ignored with ray_address.
    ray_address: "auto" or a cluster address for ray.init(address=...), or "local" to start a
        local Ray instance; an already initialized Ray is used as it is.
    batch_size: points per batch (task); None sizes batches from the measured time per point.
    progress: called as progress(done, total) after each batch, done counting resumed points.
    evaluate: evaluate(grid, indices) -> rows; accel_sim.grid_points.run_points by default. Sent to
        worker processes and Ray tasks by pickling, so a module-level function.
    restart: discard an existing output and journal, whatever grid they belong to.
    retry_failed: compute again the points whose earlier row carries an error.
    stop_after: stop once this many points have been computed in this run (the journal keeps
        them for a later run); to try the first points of a large grid.
    start_method: multiprocessing start method of the pool ("fork" where available, else "spawn").
    """
    started = time.monotonic()
    out = Path(out_path)
    fmt = output_format(out)
    if ray_address is not None:
        import_ray()
    if evaluate is None:
        from accel_sim.grid_points import run_points as evaluate
    if batch_size is not None and batch_size < 1:
        raise UsageError(f"the batch size must be at least 1 (got {batch_size})")
    if stop_after is not None and stop_after < 0:
        raise UsageError(f"stop_after must be >= 0 (got {stop_after})")
    if workers < 0:
        raise UsageError(f"the number of workers must be >= 0 (got {workers})")
    if ray_address is None and workers > max_workers():
        raise UsageError(f"the number of workers must be at most {max_workers():,}, {MAX_WORKERS_PER_CORE} per core of "
                         f"this machine (got {workers:,}; 0: one per core)")
    if not out.parent.is_dir():
        raise UsageError(f"cannot write {out}: the directory {out.parent} does not exist")

    total = len(grid)
    if total > MAX_POINTS:   # before a byte per point is allocated
        raise UsageError(f"the grid {grid.path} has {total:,} points, more than the {MAX_POINTS:,} a sweep takes "
                         f"(docs/formats/grid.md): split it into grid files of at most {MAX_POINTS:,} points")
    columns = [(str(name), str(kind)) for name, kind in grid.columns()]
    check_columns(columns)
    header = {"format": JOURNAL_FORMAT, "version": FORMAT_VERSION,
              "fingerprint": grid_fingerprint(grid, columns), "command": grid.command,
              "grid": str(grid.path), "points": total, "columns": [list(c) for c in columns]}

    table = ResultTable(columns, total)
    journal = Journal(journal_path_for(out), header, columns)
    try:
        journal.lock()   # before anything is read or discarded: no other sweep writes OUT now
        if restart:
            journal.discard()
            out.unlink(missing_ok=True)
            csv_meta_path(out).unlink(missing_ok=True)
        had_output = out.exists()
        if had_output:
            load_output(out, fmt, header, table)
        had_journal = journal.load(table)
        run = _Run(grid, table, journal, retry_failed=retry_failed, batch_size=batch_size,
                   stop_after=stop_after, progress=progress)
        if run.pending_points:
            if ray_address is not None:
                run_on_ray(run, evaluate, grid, ray_address)
            else:
                count = available_cores() if workers == 0 else workers
                if count == 1:
                    run_in_process(run, evaluate, grid)
                else:
                    run_in_pool(run, evaluate, grid, count, start_method)
        complete = table.missing() == 0
        if complete:
            if run.computed or had_journal or not had_output:
                write_output(out, fmt, header, table)
            journal.remove()
    finally:
        journal.close()
    return GridRunSummary(out_path=str(out), total=total, computed=run.computed, resumed=run.resumed,
                          failed=table.failed(), seconds=time.monotonic() - started, complete=complete)


# ----------------------------------------------------------------------------- files and formats


# ----------------------------------------------------------------------------- the table in memory


# ----------------------------------------------------------------------------- one run

class _Run:
    """The pending points, batch sizes, and the rows coming back: checked, typed, journaled."""

    def __init__(self, grid, table: ResultTable, journal: Journal, *, retry_failed: bool, batch_size: int | None,
                 stop_after: int | None, progress) -> None:
        self.grid, self.table, self.journal, self.progress = grid, table, journal, progress
        self.names = [name for name, _ in table.columns]
        self.exact = [EXACT[kind] for kind in table.kinds]
        self.converters = [converter(kind) for kind in table.kinds]
        self.total = table.total
        if retry_failed:
            self.table.state = self.table.state.replace(b"\x02", b"\x00")
        self.resumed = self.total - table.missing()
        self.pending_points = table.missing()
        if stop_after is not None:
            self.pending_points = min(self.pending_points, stop_after)
        self.fixed_size = batch_size
        self.parallel = 1
        self.target_s = TARGET_BATCH_S
        self.cursor = 0
        self.handed = 0
        self.computed = 0
        self.timed_points = 0
        self.timed_s = 0.0
        if progress is not None:
            progress(self.resumed, self.total)

    # -- handing out work
    def batch_points(self) -> int:
        """How many points the next batch gets."""
        left = self.pending_points - self.handed
        if self.fixed_size:
            return min(self.fixed_size, left)
        if self.timed_points == 0:
            size = FIRST_BATCH
        else:
            per_point = max(self.timed_s / self.timed_points, 1e-7)
            size = int(self.target_s / per_point)
        tail = math.ceil(left / (self.parallel * TAIL_BATCHES_PER_WORKER))
        return max(1, min(size, MAX_BATCH, tail, left))

    def next_batch(self) -> list[int] | None:
        """The next pending indices in grid order (not computed, not in flight), or None."""
        if self.handed >= self.pending_points:
            return None
        size = self.batch_points()
        state = self.table.state
        start = state.find(0, self.cursor)
        if start < 0:
            return None
        end = min(start + size, self.total)
        if state.count(0, start, end) == end - start:   # the common case: a run of pending points
            batch = list(range(start, end))
            self.cursor = end
        else:   # pending points between done ones (a resumed sweep): jump from one to the next
            batch = []
            i = start
            while i >= 0 and len(batch) < size:
                batch.append(i)
                i = state.find(0, i + 1)
            self.cursor = batch[-1] + 1
        self.handed += len(batch)
        return batch

    # -- taking results
    def record(self, indices: list[int], outcome: tuple, seconds: float) -> None:
        """OUTCOME is ("ok", rows) or ("error", one line) for the whole batch."""
        kind, payload = outcome
        if kind == "ok":
            try:
                rows = self._rows(indices, payload)
            except _BadBatch as e:
                rows = self._failed_rows(indices, str(e))
            self.timed_points += len(indices)
            self.timed_s += seconds
        else:
            rows = self._failed_rows(indices, payload)
        for row in rows:
            try:
                self.table.put(row)
            except OverflowError:   # an int beyond int64: that value becomes the row's error
                self._out_of_range(row)
                self.table.put(row)
        self.journal.append(rows)
        self.computed += len(indices)
        if self.progress is not None:
            self.progress(self.resumed + self.computed, self.total)

    def _rows(self, indices: list[int], rows: Any) -> list[list]:
        if not isinstance(rows, list) or len(rows) != len(indices):
            count = len(rows) if isinstance(rows, list) else type(rows).__name__
            raise _BadBatch(f"evaluate returned {count} rows for {len(indices)} points")
        names, exact, converters, width = self.names, self.exact, self.converters, len(self.names)
        out = []
        for index, row in zip(indices, rows):
            if not isinstance(row, dict) or row.get("point") != index:
                got = row.get("point") if isinstance(row, dict) else row
                raise _BadBatch(f"evaluate returned a row for point {got!r} where point {index} was expected")
            values = [row.get(name) for name in names]
            problems = []
            if len(row) != width:
                extra = sorted(set(row) - set(names))
                missing = [name for name in names if name not in row]
                problems += [f"unexpected column {n!r}" for n in extra] + [f"no column {n!r}" for n in missing]
            for j, value in enumerate(values):
                if value is not None and type(value) is not exact[j]:
                    try:
                        values[j] = converters[j](value)
                    except (TypeError, ValueError, AttributeError, OverflowError):
                        problems.append(f"column {names[j]!r} cannot hold {value!r}")
                        values[j] = None
            if problems:
                note = "; ".join(problems)
                values[-1] = f"{values[-1]}; {note}" if values[-1] else note
            if isinstance(values[-1], str) and "\n" in values[-1]:
                values[-1] = " ".join(values[-1].split())
            out.append(values)
        return out

    def _out_of_range(self, row: list) -> None:
        for j, kind in enumerate(self.table.kinds):
            if kind == "int64" and row[j] is not None and not -fields.INT64_MAX - 1 <= row[j] <= fields.INT64_MAX:
                note = f"column {self.names[j]!r} cannot hold {row[j]!r}"
                row[j] = None
                row[-1] = f"{row[-1]}; {note}" if row[-1] else note

    def _failed_rows(self, indices: list[int], message: str) -> list[list]:
        """A row per index with the point's parameters, no figures and MESSAGE as its error."""
        first, last = indices[0], indices[-1]
        span = f"the batch of point {first}" if first == last else f"a batch of {len(indices)} points, {first} to {last}"
        error = f"{message}; {span}"
        rows = []
        for index in indices:
            try:
                params = self.grid.point(index)
            except Exception:
                params = {}
            row = [index] + [None] * (len(self.names) - 2) + [error]
            for j in range(1, len(self.names) - 1):
                value = params.get(self.names[j])
                if value is not None:
                    try:
                        row[j] = value if type(value) is self.exact[j] else self.converters[j](value)
                    except (TypeError, ValueError, AttributeError, OverflowError):
                        pass
            rows.append(row)
        return rows


class _BadBatch(Exception):
    pass


# ----------------------------------------------------------------------------- where batches run


