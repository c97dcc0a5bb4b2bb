"""Runs every point of a grid and writes one table: in this process, on all cores, or on Ray.

    from accel_sim.grid_run import run_grid
    summary = run_grid(grid, "results.parquet")                  # all cores of this machine
    summary = run_grid(grid, "results.parquet", ray_address="auto")  # the connected Ray cluster
    print(summary.computed, summary.resumed, summary.failed, summary.seconds)

A grid (accel_sim.grid.Grid) says how many points it has, the parameters of point i and the
table's columns; `evaluate(grid, indices)` (accel_sim.grid.run_points) turns a batch of
neighbouring indices into rows, one per index, a failed point carrying its error. This module
only schedules batches and keeps the results:

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

import csv
import hashlib
import json
import math
import multiprocessing
import multiprocessing.connection
import os
import re
import signal
import time
from array import array
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from accel_sim.errors import UsageError
from accel_sim.grid import MAX_POINTS
from accel_sim.version import __version__
from accel_sim.io import fields

JOURNAL_SUFFIX = ".partial.jsonl"
CSV_META_SUFFIX = ".meta.json"
PARQUET_META_KEY = b"accel-sim.grid"
RESULTS_FORMAT = "accel-sim-grid-results"
JOURNAL_FORMAT = "accel-sim-grid-journal"
FORMAT_VERSION = 1
COLUMN_TYPES = ("int64", "float64", "bool", "string")

TARGET_BATCH_S = 0.25      # local batch: long enough that the ~0.1 ms round trip is noise
TARGET_RAY_BATCH_S = 1.0   # a Ray task costs a few ms to schedule and return
FIRST_BATCH = 4            # before any point has been timed
MAX_BATCH = 20_000         # also bounds a message's size (rows of a batch in one pickle)
TAIL_BATCHES_PER_WORKER = 4
WRITE_CHUNK = 1 << 16      # rows per Parquet row group, per chunk of the in-memory table
# Worker processes per core, at most: points are CPU-bound, so workers beyond the cores only take
# turns while each holds a process of its own; four a core leaves room for points that wait.
MAX_WORKERS_PER_CORE = 4

RAY_INSTALL = 'pip install "accel-sim[ray]"'
PARQUET_INSTALL = 'pip install "accel-sim[parquet]"'

Evaluate = Callable[[Any, list], list]


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
    evaluate: evaluate(grid, indices) -> rows; accel_sim.grid.run_points by default. Sent to
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
        _import_ray()
    if evaluate is None:
        from accel_sim.grid import run_points as evaluate
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
    _check_columns(columns)
    header = {"format": JOURNAL_FORMAT, "version": FORMAT_VERSION,
              "fingerprint": grid_fingerprint(grid, columns), "command": grid.command,
              "grid": str(grid.path), "points": total, "columns": [list(c) for c in columns]}

    table = _Table(columns, total)
    journal = _Journal(journal_path_for(out), header, columns)
    try:
        journal.lock()   # before anything is read or discarded: no other sweep writes OUT now
        if restart:
            journal.discard()
            out.unlink(missing_ok=True)
            _csv_meta_path(out).unlink(missing_ok=True)
        had_output = out.exists()
        if had_output:
            _load_output(out, fmt, header, table)
        had_journal = journal.load(table)
        run = _Run(grid, table, journal, retry_failed=retry_failed, batch_size=batch_size,
                   stop_after=stop_after, progress=progress)
        if run.pending_points:
            if ray_address is not None:
                _run_on_ray(run, evaluate, grid, ray_address)
            else:
                count = _available_cores() if workers == 0 else workers
                if count == 1:
                    _run_in_process(run, evaluate, grid)
                else:
                    _run_in_pool(run, evaluate, grid, count, start_method)
        complete = table.missing() == 0
        if complete:
            if run.computed or had_journal or not had_output:
                _write_output(out, fmt, header, table)
            journal.remove()
    finally:
        journal.close()
    return GridRunSummary(out_path=str(out), total=total, computed=run.computed, resumed=run.resumed,
                          failed=table.failed(), seconds=time.monotonic() - started, complete=complete)


# ----------------------------------------------------------------------------- files and formats

def output_format(out: Path) -> str:
    """"parquet" or "csv" from OUT's suffix; UsageError for anything else or a missing pyarrow."""
    suffix = out.suffix.lower()
    if suffix == ".csv":
        return "csv"
    if suffix == ".parquet":
        try:
            import pyarrow  # noqa: F401
            import pyarrow.parquet  # noqa: F401
        except ImportError:
            raise UsageError(f"writing {out.name} needs pyarrow: {PARQUET_INSTALL} "
                             "(or write a .csv table)") from None
        return "parquet"
    raise UsageError(f"cannot write {out.name}: the output table must end in .parquet or .csv")


def journal_path_for(out: Path) -> Path:
    return out.with_name(out.name + JOURNAL_SUFFIX)


def _csv_meta_path(out: Path) -> Path:
    return out.with_name(out.name + CSV_META_SUFFIX)


def grid_fingerprint(grid, columns: Sequence[tuple[str, str]]) -> str:
    """sha256 of the grid file's bytes, the command, the number of points and the columns: rows
    are reused only under the same fingerprint."""
    try:
        content = Path(grid.path).read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read the grid file {grid.path}: {e.strerror or e}") from None
    h = hashlib.sha256()
    h.update(json.dumps({"command": grid.command, "points": len(grid), "columns": [list(c) for c in columns]},
                        sort_keys=True).encode())
    h.update(b"\0")
    h.update(content)
    return h.hexdigest()


def _check_columns(columns: list[tuple[str, str]]) -> None:
    names = [name for name, _ in columns]
    if len(columns) < 2 or columns[0] != ("point", "int64") or columns[-1] != ("error", "string"):
        raise ValueError(f"grid columns must start with ('point', 'int64') and end with ('error', 'string'): {columns}")
    if len(set(names)) != len(names):
        raise ValueError(f"grid columns repeat a name: {names}")
    for name, kind in columns:
        if kind not in COLUMN_TYPES:
            raise ValueError(f"grid column {name!r} has type {kind!r}, not one of {COLUMN_TYPES}")


def _foreign(path: Path, what: str) -> UsageError:
    return UsageError(f"{path} {what}: remove it, choose another output, or pass --restart to discard it")


def _same_grid(meta: Any, header: dict) -> bool:
    return (isinstance(meta, dict) and meta.get("fingerprint") == header["fingerprint"]
            and meta.get("columns") == header["columns"])


def _atomic_write(path: Path, write: Callable[[Path], None]) -> None:
    """WRITE(temp) next to PATH, fsync, rename over PATH: PATH is the old file or the new one."""
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        write(tmp)
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
    _fsync_dir(path.parent)


def _fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _write_output(out: Path, fmt: str, header: dict, table: "_Table") -> None:
    meta = dict(header, format=RESULTS_FORMAT)
    try:
        if fmt == "parquet":
            _atomic_write(out, lambda tmp: _write_parquet(tmp, meta, table))
        else:
            _atomic_write(_csv_meta_path(out), lambda tmp: tmp.write_text(json.dumps(meta, indent=1) + "\n"))
            _atomic_write(out, lambda tmp: _write_csv(tmp, table))
    except OSError as e:   # the journal is kept: a rerun writes the table without computing
        raise UsageError(f"cannot write {out}: {e.strerror or e} (every point is in "
                         f"{journal_path_for(out).name}: rerun the same command to write the table)") from None


def _arrow_schema(columns, meta: dict | None = None):
    import pyarrow as pa

    types = {"int64": pa.int64(), "float64": pa.float64(), "bool": pa.bool_(), "string": pa.string()}
    schema = pa.schema([(name, types[kind]) for name, kind in columns])
    if meta is not None:
        schema = schema.with_metadata({PARQUET_META_KEY: json.dumps(meta).encode()})
    return schema


def _write_parquet(path: Path, meta: dict, table: "_Table") -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _arrow_schema(table.columns, meta)
    with pq.ParquetWriter(path, schema) as writer:
        for columns in table.chunks():
            arrays = [pa.array(values, type=field.type) for values, field in zip(columns, schema)]
            writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=schema))


def _write_csv(path: Path, table: "_Table") -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([name for name, _ in table.columns])
        for columns in table.chunks():
            writer.writerows(zip(*columns))   # None is written as an empty field


def _load_output(out: Path, fmt: str, header: dict, table: "_Table") -> None:
    """The rows of a finished output of the same grid into TABLE; UsageError for another grid's."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            pf = pq.ParquetFile(out)
        except Exception:
            raise _foreign(out, "exists and is not a Parquet table") from None
        raw = (pf.schema_arrow.metadata or {}).get(PARQUET_META_KEY)
        try:
            meta = json.loads(raw) if raw else None
        except ValueError:
            meta = None
        if not _same_grid(meta, header):
            raise _foreign(out, "exists and holds the results of another grid")
        names = [name for name, _ in table.columns]
        for batch in pf.iter_batches(batch_size=WRITE_CHUNK, columns=names):
            for values in zip(*(batch.column(i).to_pylist() for i in range(len(names)))):
                table.put(list(values))
        return
    meta_path = _csv_meta_path(out)
    try:
        meta = json.loads(meta_path.read_text())
    except (OSError, ValueError):
        meta = None
    if not _same_grid(meta, header):
        raise _foreign(out, f"exists without a {meta_path.name} of this grid beside it")
    parsers = [_CSV_PARSERS[kind] for _, kind in table.columns]
    with open(out, newline="") as f:
        reader = csv.reader(f)
        if next(reader, None) != [name for name, _ in table.columns]:
            raise _foreign(out, "has other columns than this grid's table")
        for line, cells in enumerate(reader, start=2):
            if len(cells) != len(parsers):
                raise _foreign(out, f"line {line} has {len(cells)} fields, not {len(parsers)}")
            try:
                table.put([parse(cell) for parse, cell in zip(parsers, cells)])
            except (ValueError, KeyError, IndexError):
                raise _foreign(out, f"line {line} does not parse as a row of this grid") from None


def _csv_bool(cell: str) -> bool | None:
    return {"True": True, "False": False, "": None}[cell]


_CSV_PARSERS: dict[str, Callable[[str], Any]] = {
    "int64": lambda cell: int(cell) if cell else None,
    "float64": lambda cell: float(cell) if cell else None,
    "bool": _csv_bool,
    "string": lambda cell: cell if cell else None,
}


_encode_row = json.JSONEncoder(separators=(",", ":")).encode   # one encoder, not one per row


class _Journal:
    """`<out>.partial.jsonl`: the header line, then a JSON array per row, appended per batch."""

    def __init__(self, path: Path, header: dict, columns) -> None:
        self.path, self.header, self.width = path, header, len(columns)
        self.file = None

    def lock(self) -> None:
        """Opens the journal (an empty file if there was none) and takes its lock, or raises
        UsageError while another sweep holds it."""
        import fcntl

        self.file = open(self.path, "ab+")
        try:
            fcntl.flock(self.file.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            self.file.close()
            self.file = None
            raise UsageError(f"another sweep is writing {self.path}: wait for it to end") from None

    def discard(self) -> None:
        self.file.truncate(0)

    def load(self, table: "_Table") -> bool:
        """Reads the rows of an existing journal of this grid into TABLE (dropping a torn last
        line) and keeps it for appending, or starts a new one; True if there was one."""
        self.file.seek(0)
        data = self.file.read()
        good = self._read(data, table) if data else 0
        if good == 0:   # no journal, or only a torn header: start one
            self.file.truncate(0)
            self.file.write((json.dumps(self.header) + "\n").encode())
        elif good < len(data):
            self.file.truncate(good)
        self.file.flush()
        os.fsync(self.file.fileno())
        self.file.seek(0, os.SEEK_END)
        return good > 0

    def _read(self, data: bytes, table: "_Table") -> int:
        """Loads DATA's rows; returns the length of its complete, valid lines (0: no header)."""
        lines = data.split(b"\n")
        last = len(lines) - 1   # the text after the last newline: empty, or a torn line
        try:
            header = json.loads(lines[0]) if last > 0 else None
        except ValueError:
            header = None
        if header is None:
            if len(data) < 4096 and b"\n" not in data:
                return 0   # killed while writing the header
            raise _foreign(self.path, "is not a sweep journal")
        if header.get("format") != JOURNAL_FORMAT or not _same_grid(header, self.header):
            raise _foreign(self.path, "is the unfinished sweep of another grid")
        end = len(lines[0]) + 1
        for number, line in enumerate(lines[1:last], start=2):
            try:
                row = json.loads(line)
                if not isinstance(row, list) or len(row) != self.width:
                    raise ValueError
                table.put(row)
            except (ValueError, TypeError, IndexError):
                if number == last:   # the last complete line torn by a crash mid-write
                    break
                raise UsageError(f"{self.path} is damaged at line {number}: pass --restart to discard it") from None
            end += len(line) + 1
        return end

    def append(self, rows: list[list]) -> None:
        text = "".join(_encode_row(row) + "\n" for row in rows)
        try:
            self.file.write(text.encode())
            self.file.flush()
            os.fsync(self.file.fileno())
        except OSError as e:   # a full disk, say: what was journaled before stays resumable
            raise UsageError(f"cannot write {self.path}: {e.strerror or e} (the points finished so far "
                             "are kept: rerun the same command to resume)") from None

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)   # while holding the lock
        _fsync_dir(self.path.parent)
        self.close()

    def close(self) -> None:
        """Releases the lock; a journal left empty (the sweep was refused before it started)
        is removed."""
        if self.file is not None:
            try:
                if os.fstat(self.file.fileno()).st_size == 0:
                    self.path.unlink(missing_ok=True)
            except OSError:
                pass
            self.file.close()
            self.file = None


# ----------------------------------------------------------------------------- the table in memory

class _Table:
    """The rows found so far, by point, in typed columns allocated per chunk of WRITE_CHUNK
    points as rows arrive: about 9 bytes per number and 8 per string (strings interned), plus a
    state byte per point of the grid (0 none, 1 a row, 2 a row with an error)."""

    def __init__(self, columns: list[tuple[str, str]], total: int) -> None:
        self.columns, self.total = columns, total
        self.kinds = [kind for _, kind in columns]
        self.state = bytearray(total)
        self._chunks: dict[int, list] = {}
        self._strings: dict[str, str] = {}

    def _chunk(self, number: int) -> list:
        chunk = self._chunks.get(number)
        if chunk is None:
            chunk = []
            for kind in self.kinds:
                if kind == "string":
                    chunk.append([None] * WRITE_CHUNK)
                else:
                    values = bytearray(WRITE_CHUNK) if kind == "bool" else array("q" if kind == "int64" else "d",
                                                                                 bytes(8 * WRITE_CHUNK))
                    chunk.append((values, bytearray(WRITE_CHUNK)))   # values, valid
            self._chunks[number] = chunk
        return chunk

    def put(self, row: list) -> None:
        """ROW: the values in column order, already of the columns' types (or None)."""
        point = row[0]
        if type(point) is not int or not 0 <= point < self.total:
            raise ValueError(f"row of point {point!r} outside the grid's 0..{self.total - 1}")
        chunk, at = self._chunk(point // WRITE_CHUNK), point % WRITE_CHUNK
        for kind, column, value in zip(self.kinds, chunk, row):
            if kind == "string":
                column[at] = None if value is None else self._strings.setdefault(value, value)
            elif value is None:
                column[1][at] = 0
            else:
                column[0][at] = value
                column[1][at] = 1
        self.state[point] = 2 if row[-1] is not None else 1

    def missing(self) -> int:
        return self.state.count(0)

    def failed(self) -> int:
        return self.state.count(2)

    def chunks(self) -> Iterator[list[list]]:
        """The table in point order, WRITE_CHUNK rows at a time, as one list per column (None
        for null); every point must have its row."""
        for number in range(math.ceil(self.total / WRITE_CHUNK)):
            n = min(WRITE_CHUNK, self.total - number * WRITE_CHUNK)
            chunk = self._chunk(number)
            columns = []
            for kind, column in zip(self.kinds, chunk):
                if kind == "string":
                    columns.append(column[:n])
                    continue
                values, valid = column[0][:n], column[1][:n]
                values = [v != 0 for v in values] if kind == "bool" else values.tolist()
                if valid.count(0):
                    values = [v if ok else None for v, ok in zip(values, valid)]
                columns.append(values)
            yield columns


def _converter(kind: str) -> Callable[[Any], Any]:
    """Checks and converts a value to a column type: exact types pass as they are; an integral
    float to int64, a number to float64, 0/1 to bool; anything else raises TypeError."""
    if kind == "int64":
        def convert(v):
            if isinstance(v, bool):
                raise TypeError
            if isinstance(v, float) and v.is_integer():
                return int(v)
            return int(v.__index__())
    elif kind == "float64":
        def convert(v):
            if isinstance(v, (str, bytes)):
                raise TypeError
            return float(v)
    elif kind == "bool":
        def convert(v):
            if v in (0, 1) and not isinstance(v, (str, bytes)):
                return bool(v)
            raise TypeError
    else:
        def convert(v):
            if isinstance(v, str):
                return v
            raise TypeError
    return convert


_EXACT = {"int64": int, "float64": float, "bool": bool, "string": str}


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    message = text[0] if text else ""
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


# ----------------------------------------------------------------------------- one run

class _Run:
    """The pending points, batch sizes, and the rows coming back: checked, typed, journaled."""

    def __init__(self, grid, table: _Table, journal: _Journal, *, retry_failed: bool, batch_size: int | None,
                 stop_after: int | None, progress) -> None:
        self.grid, self.table, self.journal, self.progress = grid, table, journal, progress
        self.names = [name for name, _ in table.columns]
        self.exact = [_EXACT[kind] for kind in table.kinds]
        self.converters = [_converter(kind) for kind in table.kinds]
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


def evaluate_batch(evaluate: Evaluate, grid, indices: list[int]) -> tuple[tuple, float]:
    """EVALUATE on one batch, in whatever process runs it: (("ok", rows) or ("error", one
    line), seconds). It does not raise: an exception becomes the batch's error."""
    started = time.perf_counter()
    try:
        outcome = ("ok", evaluate(grid, indices))
    except BaseException as e:   # noqa: B036 -- SystemExit from a point is that point's failure too
        outcome = ("error", _one_line(e))
    return outcome, time.perf_counter() - started


# ----------------------------------------------------------------------------- where batches run

def max_workers() -> int:
    """The most worker processes run_grid starts on this machine."""
    return MAX_WORKERS_PER_CORE * _available_cores()


def _available_cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def _run_in_process(run: _Run, evaluate: Evaluate, grid) -> None:
    while (batch := run.next_batch()) is not None:
        outcome, seconds = evaluate_batch(evaluate, grid, batch)
        run.record(batch, outcome, seconds)


def _worker_main(conn, evaluate: Evaluate, grid, parent_pid: int, inherited: list, journal_fd: int | None) -> None:
    """A pool worker: batches in, (outcome, seconds) out, until None or its parent is gone."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)   # Ctrl-C is the parent's to handle
    for other in inherited:   # fork: the parent's ends of the pipes, so that a dead parent is noticed
        other.close()
    if journal_fd is not None:   # fork: the journal's lock is the parent's alone, gone when it is
        try:
            os.close(journal_fd)
        except OSError:
            pass
    while True:
        while not conn.poll(0.5):
            if os.getppid() != parent_pid:
                return
        try:
            batch = conn.recv()
        except (EOFError, OSError):
            return
        if batch is None:
            return
        outcome, seconds = evaluate_batch(evaluate, grid, batch)
        try:
            conn.send((outcome, seconds))
        except (BrokenPipeError, EOFError, ConnectionResetError):
            return
        except Exception as e:   # rows that do not pickle
            conn.send((("error", f"the batch's rows cannot be sent back: {_one_line(e)}"), seconds))


class _Worker:
    def __init__(self, context, method: str, evaluate: Evaluate, grid, others: list["_Worker"],
                 journal: "_Journal") -> None:
        self.conn, child = context.Pipe(duplex=True)
        inherited = [self.conn] + [w.conn for w in others] if method == "fork" else []
        journal_fd = journal.file.fileno() if method == "fork" and journal.file is not None else None
        self.process = context.Process(target=_worker_main, args=(child, evaluate, grid, os.getpid(), inherited,
                                                                  journal_fd),
                                       daemon=True, name="accel-sim-grid-worker")
        try:
            self.process.start()
        except BaseException:
            self.conn.close()
            raise
        finally:
            child.close()
        self.batch: list[int] | None = None

    def stop(self, wait_s: float) -> None:
        try:
            self.conn.send(None)
        except (OSError, ValueError):
            pass
        self.process.join(wait_s)
        self.kill()

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)
        self.conn.close()


def _death(exitcode: int | None) -> str:
    if exitcode is not None and exitcode < 0:
        try:
            return f"killed by {signal.Signals(-exitcode).name}"
        except ValueError:
            return f"killed by signal {-exitcode}"
    return f"exit status {exitcode}"


def _run_in_pool(run: _Run, evaluate: Evaluate, grid, count: int, start_method: str | None) -> None:
    method = start_method or ("fork" if "fork" in multiprocessing.get_all_start_methods() else "spawn")
    context = multiprocessing.get_context(method)
    run.parallel = count
    workers: list[_Worker] = []
    finished = False

    def start() -> _Worker | None:
        """A new worker, or None where the system cannot start one (out of processes or memory):
        the sweep goes on with the workers it has, or in this process."""
        try:
            workers.append(_Worker(context, method, evaluate, grid, workers, run.journal))
        except OSError:
            return None
        return workers[-1]

    def replace(dead: _Worker) -> _Worker | None:
        dead.kill()
        workers.remove(dead)
        return start()

    try:
        for _ in range(min(count, max(1, run.pending_points))):
            if start() is None:
                break
        idle = list(workers)
        while True:
            while idle:
                batch = run.next_batch()
                if batch is None:
                    break
                worker = idle.pop()
                while worker is not None:
                    try:
                        worker.conn.send(batch)
                        break
                    except OSError:   # it died while idle (killed from outside): its batch is not lost
                        worker = replace(worker)
                if worker is None:   # and no other could be started: this process does the batch
                    run.record(batch, *evaluate_batch(evaluate, grid, batch))
                    continue
                worker.batch = batch
            busy = [w for w in workers if w.batch is not None]
            if not workers:   # none could be started, or none replaced
                _run_in_process(run, evaluate, grid)
            if not busy:
                break
            ready = set(multiprocessing.connection.wait([w.conn for w in busy] + [w.process.sentinel for w in busy]))
            for worker in busy:
                if worker.conn in ready or worker.process.sentinel in ready:
                    reply = None
                    batch, worker.batch = worker.batch, None
                    try:
                        if worker.conn.poll():
                            reply = worker.conn.recv()
                    except (EOFError, OSError):
                        pass   # it died, maybe in the middle of its reply
                    except Exception as e:   # a whole reply that does not unpickle here
                        reply = (("error", f"the worker's rows cannot be read: {_one_line(e)}"), 0.0)
                    if reply is not None:
                        run.record(batch, *reply)
                        idle.append(worker)
                        continue
                    worker.process.join(5)
                    run.record(batch, ("error", f"the worker process died ({_death(worker.process.exitcode)})"), 0.0)
                    new = replace(worker)
                    if new is not None:
                        idle.append(new)
        finished = True
    finally:
        for worker in workers:
            if finished:
                worker.stop(5)
            else:
                worker.kill()


def _check_ray_workers(ray, evaluate_ref, grid_ref) -> None:
    """A probe task before the first batch: a cluster whose workers cannot import accel-sim (or
    run another version) is a UsageError now, not every point failing one by one."""
    try:
        found = ray.get(ray.remote(num_cpus=0, max_retries=0)(ray_probe).remote(evaluate_ref, grid_ref))
    except Exception as e:
        raise UsageError(f"the Ray workers cannot evaluate this grid: {_ray_error_text(e)} (install accel-sim "
                         "on the cluster's nodes, or let accel-sim start Ray to ship itself)") from None
    if found.get("accel_sim") != __version__:
        raise UsageError(f"the Ray workers run accel-sim {found.get('accel_sim')}, this is {__version__}: "
                         "install the same version on the cluster's nodes")


def _import_ray():
    try:
        import ray
    except ImportError:
        raise UsageError(f"--ray needs Ray: {RAY_INSTALL}") from None
    return ray


def ray_runtime_env() -> dict:
    """The runtime_env run_grid gives ray.init: this accel_sim package (its Python files, data
    and built core) shipped to the cluster's workers, so that they run the driver's code whatever
    is installed there. Pass it to ray.init yourself when you initialize Ray before run_grid."""
    return {"py_modules": [str(Path(__file__).resolve().parent)]}


def ray_probe(evaluate: Evaluate, grid) -> dict:
    """Runs as a Ray task before the sweep: getting here means the worker unpickled EVALUATE and
    GRID (so it imports their modules); returns what must match the driver."""
    return {"accel_sim": __version__}


_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_EXCEPTION_LINE = re.compile(r"^[A-Za-z_][\w.]*(Error|Exception|Exit|Interrupt)\b")


def _ray_error_text(error: BaseException) -> str:
    """One line for a Ray failure: the exception at the end of a remote traceback (an import
    error, say), else the error's own first line."""
    lines = [line.strip() for line in _ANSI.sub("", str(error)).splitlines() if line.strip()]
    raised = [line for line in lines if _EXCEPTION_LINE.match(line)]
    if raised:
        return raised[-1]
    return f"{type(error).__name__}: {lines[0]}" if lines else type(error).__name__


def _run_on_ray(run: _Run, evaluate: Evaluate, grid, address: str) -> None:
    ray = _import_ray()
    own = False
    if not ray.is_initialized():
        try:
            if address == "local":
                ray.init(ignore_reinit_error=True, runtime_env=ray_runtime_env())
            else:
                ray.init(address=address, ignore_reinit_error=True, runtime_env=ray_runtime_env())
        except Exception as e:   # ConnectionError, RuntimeError, ValueError, ... by version
            raise UsageError(f"cannot connect to the Ray cluster at {address}: {_one_line(e)} "
                             "(start one with `ray start --head`, or use --ray local)") from None
        own = True
    pending: dict = {}
    try:
        cpus = max(1, int(ray.cluster_resources().get("CPU", 1)))
        run.parallel = cpus
        run.target_s = TARGET_RAY_BATCH_S
        evaluate_ref, grid_ref = ray.put(evaluate), ray.put(grid)
        _check_ray_workers(ray, evaluate_ref, grid_ref)
        task = ray.remote(num_cpus=1, max_retries=1)(evaluate_batch)
        limit = 2 * cpus
        while True:
            while len(pending) < limit:
                batch = run.next_batch()
                if batch is None:
                    break
                pending[task.remote(evaluate_ref, grid_ref, batch)] = batch
            if not pending:
                break
            ready, rest = ray.wait(list(pending), num_returns=1)
            if rest:
                more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
                ready += more
            for ref in ready:
                batch = pending.pop(ref)
                try:
                    outcome, seconds = ray.get(ref)
                except Exception as e:   # RayTaskError, WorkerCrashedError, ObjectLostError, ...
                    outcome, seconds = ("error", f"the Ray task failed: {_ray_error_text(e)}"), 0.0
                run.record(batch, outcome, seconds)
    finally:
        for ref in pending:
            try:
                ray.cancel(ref, force=True)
            except Exception:
                pass
        if own:
            ray.shutdown()
