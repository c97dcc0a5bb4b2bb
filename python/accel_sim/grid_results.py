"""The table of a grid sweep's results: the rows kept in memory as they come (ResultTable), the
journal each finished batch is appended to (Journal: `<out>.partial.jsonl`, fsynced, resumable),
and the output file written when every point has its row (Parquet through pyarrow, or CSV with a
`<out>.meta.json` sidecar), with the grid's fingerprint that tells one grid's rows from
another's. grid_run.py runs the sweep; docs/formats/grid-results.md is the format."""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
from array import array
from pathlib import Path
from typing import Any, Callable, Iterator, Sequence

from accel_sim.errors import UsageError


JOURNAL_SUFFIX = ".partial.jsonl"


CSV_META_SUFFIX = ".meta.json"


PARQUET_META_KEY = b"accel-sim.grid"


RESULTS_FORMAT = "accel-sim-grid-results"


JOURNAL_FORMAT = "accel-sim-grid-journal"


FORMAT_VERSION = 1


COLUMN_TYPES = ("int64", "float64", "bool", "string")


WRITE_CHUNK = 1 << 16      # rows per Parquet row group, per chunk of the in-memory table


PARQUET_INSTALL = 'pip install "accel-sim[parquet]"'


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


def csv_meta_path(out: Path) -> Path:
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


def check_columns(columns: list[tuple[str, str]]) -> None:
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


def write_output(out: Path, fmt: str, header: dict, table: "ResultTable") -> None:
    meta = dict(header, format=RESULTS_FORMAT)
    try:
        if fmt == "parquet":
            _atomic_write(out, lambda tmp: _write_parquet(tmp, meta, table))
        else:
            _atomic_write(csv_meta_path(out), lambda tmp: tmp.write_text(json.dumps(meta, indent=1) + "\n"))
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


def _write_parquet(path: Path, meta: dict, table: "ResultTable") -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = _arrow_schema(table.columns, meta)
    with pq.ParquetWriter(path, schema) as writer:
        for columns in table.chunks():
            arrays = [pa.array(values, type=field.type) for values, field in zip(columns, schema)]
            writer.write_batch(pa.RecordBatch.from_arrays(arrays, schema=schema))


def _write_csv(path: Path, table: "ResultTable") -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow([name for name, _ in table.columns])
        for columns in table.chunks():
            writer.writerows(zip(*columns))   # None is written as an empty field


def load_output(out: Path, fmt: str, header: dict, table: "ResultTable") -> None:
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
    meta_path = csv_meta_path(out)
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


class Journal:
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

    def load(self, table: "ResultTable") -> bool:
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

    def _read(self, data: bytes, table: "ResultTable") -> int:
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


class ResultTable:
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


def converter(kind: str) -> Callable[[Any], Any]:
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


EXACT = {"int64": int, "float64": float, "bool": bool, "string": str}


def one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    message = text[0] if text else ""
    return f"{type(error).__name__}: {message}" if message else type(error).__name__
