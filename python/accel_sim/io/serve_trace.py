"""Request traces for the serving simulator: arrival time, prompt length and output length per request.

Two formats, chosen by the file's suffix (docs/formats/serve-trace.md):

- ``.jsonl``: one JSON object per line, blank lines skipped. Mooncake's traces
  (``{"timestamp": 27482, "input_length": 6955, "output_length": 52, "hash_ids": [...]}``) read as they are.
- ``.csv``: a header row, then one request per row; header names are case-insensitive, so
  Azure's LLM inference traces (``TIMESTAMP,ContextTokens,GeneratedTokens``) read as they are.

Arrival times are made relative to the first request (its arrival is 0.0 s). A trace without
timestamps has ``arrival_s = None``: the simulator then draws arrivals from a process.

Every mistake raises :class:`accel_sim.errors.UsageError` with a one-line message that starts with
``FILE:LINE:`` (1-based file lines; in a CSV file the header is line 1), or ``FILE:`` for a
mistake of the whole file (missing, unknown suffix, no requests). Lengths are at most 2^31 - 1
tokens (the core's requests hold them as int32), hash ids are int64, timestamps finite doubles;
``max_request_tokens`` also bounds each request's prompt plus output (a model's context).

Speed (measured on a 2-core x86-64 machine, CPython 3.11, 1,000,000 requests, best of 3):
a JSONL trace of seconds and two lengths reads in 1.5 s, Mooncake-style lines (ms, no hash ids)
in 1.7 s, Mooncake-style lines with 16 hash ids each (200 MB) in 3.7 s, and an Azure-style CSV
(datetime strings) in 2.3 s. Decoding JSON is most of it; fields are found by dict look-ups, the
name a trace uses being remembered from its first line.
"""

from __future__ import annotations

import csv
import datetime as _dt
import gc
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from accel_sim.errors import UsageError

DEFAULT_HASH_BLOCK_TOKENS = 512  # Mooncake's traces hash the prompt in 512-token blocks
MAX_LENGTH = 2**31 - 1  # tokens: the core's Request holds lengths as int32_t (core/include/accelsim/serve.h)
_HASH_MIN, _HASH_MAX = -(2**63), 2**63 - 1  # the core's hashes are int64_t

# Accepted names of each field, in order of preference (the first one a record has is used).
# Timestamps: (name, seconds per unit).
TIME_FIELDS: tuple[tuple[str, float], ...] = (
    ("arrival_s", 1.0),
    ("timestamp_s", 1.0),
    ("timestamp", 1e-3),  # Mooncake: milliseconds. In CSV also Azure's TIMESTAMP datetime strings.
    ("arrival_ms", 1e-3),
)
INPUT_FIELDS = ("input_len", "input_length", "prompt_len", "prompt_tokens", "input_tokens", "ContextTokens")
OUTPUT_FIELDS = ("output_len", "output_length", "output_tokens", "completion_tokens", "GeneratedTokens")
HASH_FIELD = "hash_ids"

_TIME_SCALE = dict(TIME_FIELDS)
_INT = {int}
_DATETIME_FORM = "YYYY-MM-DD HH:MM:SS[.fraction]"


@dataclass(frozen=True)
class Trace:
    """A request trace: list i of each field describes request i, in arrival order."""

    path: str
    arrival_s: list[float] | None  # None when the trace has no timestamps (arrivals come from a process)
    input_len: list[int]
    output_len: list[int]
    block_hashes: list[list[int]] | None  # per request, hashes of consecutive prompt blocks; None if absent
    hash_block_tokens: int  # tokens per hash block

    def __len__(self) -> int:
        return len(self.input_len)


def _error(path: str, line: int | None, message: str) -> UsageError:
    where = f"{path}:{line}" if line is not None else path
    return UsageError(f"{where}: {message}")


def _missing(path: str, line: int, names: Sequence[str]) -> UsageError:
    return _error(path, line, f"missing field '{names[0]}' (accepted: {', '.join(names)})")


def _length(path: str, line: int, name: str, value: object, what: str, text: bool = False) -> int:
    """Checks a length that is not a positive int (the slow path): integral floats (12.0) are
    accepted; strings only from CSV cells (`text`)."""
    if text and isinstance(value, str):
        text = value.strip()
        try:
            value = int(text)
        except ValueError:
            try:
                value = float(text)
            except ValueError:
                raise _error(path, line, f"'{name}' must be an integer, got {value!r}") from None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if type(value) is not int:  # bools, fractional numbers, lists, null
        raise _error(path, line, f"'{name}' must be an integer, got {value!r}")
    if value < 0:
        raise _error(path, line, f"'{name}' must not be negative, got {value}")
    if value == 0:
        raise _error(path, line, f"'{name}' is 0: a request needs at least one {what} token")
    if value > MAX_LENGTH:
        raise _error(path, line, f"'{name}' {value} is beyond {MAX_LENGTH:,} tokens (2^31 - 1), the most a request holds")
    return value


def _check_request(path: str, line: int, names: tuple[str, str], n_in: int, n_out: int, limit: int | None,
                   why: str) -> None:
    if limit is not None and n_in + n_out > limit:
        raise _error(path, line, f"'{names[0]}' {n_in} + '{names[1]}' {n_out} = {n_in + n_out:,} tokens, beyond {why}")


def _check_hash_range(path: str, line: int, hashes: list[int], shown: str) -> None:
    if hashes and (min(hashes) < _HASH_MIN or max(hashes) > _HASH_MAX):
        raise _error(path, line, f"'{HASH_FIELD}' must be integers in [-2^63, 2^63), got {shown}")


def _check_hashes(path: str, line: int, hashes: list, n_input: int, block: int) -> None:
    limit = -(-n_input // block)
    if len(hashes) > limit:
        raise _error(path, line, f"{len(hashes)} hash ids for a {n_input}-token prompt: at most "
                                 f"ceil({n_input} / {block}) = {limit} blocks of {block} tokens")


def _format_time(raw: object, unit: str) -> str:
    return str(raw) if unit == "datetime" else f"{raw} {unit}"


class _Clock:
    """Turns timestamps into seconds relative to the first one; checks sign and order."""

    def __init__(self, path: str):
        self.path = path
        self.first_s: float | None = None
        self.first_unit = ""
        self.first_ms: float | None = None  # the first timestamp, when it is in milliseconds
        self.prev_s = 0.0
        self.prev_raw: object = None
        self.prev_unit = ""
        self.prev_line = 0

    def number(self, line: int, name: str, raw: object, scale: float) -> float:
        if type(raw) is not float and type(raw) is not int:
            raise _error(self.path, line, f"timestamp '{name}' must be a number, got {raw!r}")
        if type(raw) is int and abs(raw) > 2**1023:  # no double holds it (math.isfinite would overflow)
            raise _error(self.path, line, f"timestamp '{name}' must be finite, got {_short(raw)}")
        if not math.isfinite(raw):
            raise _error(self.path, line, f"timestamp '{name}' must be finite, got {raw!r}")
        if raw < 0:
            raise _error(self.path, line, f"timestamp '{name}' must not be negative, got {raw}")
        if scale == 1.0:
            return self._at(line, float(raw), raw, "s")
        relative = self._at(line, raw / 1000, raw, "ms")
        if self.first_ms is None:
            self.first_ms = raw
        # one rounding, not two: 2250.5 ms after 2000 ms is 0.2505 s, not 2.2505 - 2.0
        return (raw - self.first_ms) / 1000 if self.first_unit == "ms" else relative

    def _at(self, line: int, seconds: float, raw: object, unit: str) -> float:
        if self.first_s is None:
            self.first_s, self.first_unit = seconds, unit
        elif seconds < self.prev_s:
            raise _error(self.path, line, f"timestamp {_format_time(raw, unit)} is earlier than line "
                                          f"{self.prev_line}'s {_format_time(self.prev_raw, self.prev_unit)} "
                                          f"(requests must be in arrival order)")
        self.prev_s, self.prev_raw, self.prev_unit, self.prev_line = seconds, raw, unit, line
        return seconds - self.first_s


class _DateClock(_Clock):
    """Azure's datetime strings. Whole seconds are counted as integers and the fraction (7 digits in
    Azure's traces) is added after subtracting the first request's, so no precision is lost to the
    size of an epoch offset."""

    def __init__(self, path: str):
        super().__init__(path)
        self.first_whole: int | None = None

    def datetime(self, line: int, name: str, raw: str) -> float:
        text = raw.strip()
        whole, dot, fraction = text.partition(".")
        try:
            if dot and not (fraction.isdigit() and fraction.isascii()):
                raise ValueError
            stamp = _dt.datetime.fromisoformat(whole)
            if stamp.tzinfo is not None or len(whole) < 19:
                raise ValueError
        except ValueError:
            raise _error(self.path, line, f"timestamp '{name}' {raw!r} is not a number or a datetime "
                                          f"{_DATETIME_FORM}") from None
        seconds = stamp.toordinal() * 86400 + stamp.hour * 3600 + stamp.minute * 60 + stamp.second
        if self.first_whole is None:
            self.first_whole = seconds
        frac = int(fraction) / 10 ** len(fraction) if dot else 0.0
        return self._at(line, (seconds - self.first_whole) + frac, text, "datetime")


def read_trace(path: str | Path, hash_block_tokens: int = DEFAULT_HASH_BLOCK_TOKENS, *,
               max_request_tokens: int | None = None, limit: str = "") -> Trace:
    """Reads a ``.jsonl`` or ``.csv`` request trace (docs/formats/serve-trace.md), streaming it line
    by line. With `max_request_tokens`, a request whose prompt plus output exceed it is an error
    that ends with `limit` (what the bound is, e.g. "llama-3-8b's 8192 positions")."""
    name = str(path)
    bound = (max_request_tokens, limit or f"{max_request_tokens:,} tokens") if max_request_tokens else (None, "")
    if type(hash_block_tokens) is not int or hash_block_tokens <= 0:
        raise UsageError(f"hash_block_tokens must be a positive integer, got {hash_block_tokens!r}")
    suffix = Path(name).suffix.lower()
    if suffix not in (".jsonl", ".csv"):
        raise _error(name, None, f"unknown trace format '{suffix or '(no suffix)'}' (expected .jsonl or .csv)")
    try:
        with open(name, encoding="utf-8-sig", newline="" if suffix == ".csv" else None) as f:
            if suffix == ".jsonl":
                trace = _read_jsonl(name, f, hash_block_tokens, bound)
            else:
                trace = _read_csv(name, f, hash_block_tokens, bound)
    except FileNotFoundError:
        raise _error(name, None, "trace file not found") from None
    except IsADirectoryError:
        raise _error(name, None, "is a directory, not a trace file") from None
    except UnicodeDecodeError:
        raise _not_utf8(name) from None
    except OSError as e:
        raise _error(name, None, f"cannot read trace: {e.strerror or e}") from None
    if not trace.input_len:
        raise _error(name, None, "empty trace: no requests")
    return trace


def _not_utf8(path: str) -> UsageError:
    """The first line that is not UTF-8, found again byte by byte (only once reading has failed)."""
    with open(path, "rb") as f:
        for line, raw in enumerate(f, 1):
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as e:
                return _error(path, line, f"not UTF-8 text ({e.reason} at column {e.start + 1})")
    return _error(path, None, "not UTF-8 text")


def _mixed_times(path: str, line: int, has_time: bool, first_line: int) -> UsageError:
    if has_time:
        return _error(path, line, f"no timestamp, but line {first_line} has one (give every request a "
                                  f"timestamp, or none)")
    return _error(path, line, f"a timestamp, but line {first_line} has none (give every request a "
                              f"timestamp, or none)")


def _find(record: dict, names: Sequence[str]) -> str | None:
    for n in names:
        if n in record:
            return n
    return None


def _read_jsonl(path: str, f, block: int, bound: tuple[int | None, str]) -> Trace:
    # Reading keeps a million small lists alive: the cyclic collector would walk them again and
    # again (a third of the time) although none can be in a cycle.
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _read_jsonl_records(path, f, block, bound)
    finally:
        if collecting:
            gc.enable()


def _read_jsonl_records(path: str, f, block: int, bound: tuple[int | None, str]) -> Trace:
    # raw_decode skips json.loads's Python-level checks (a third to a half of its time per line); a line it
    # rejects, or that has more than white space after its value, goes to json.loads for the verdict.
    raw_decode = json.JSONDecoder().raw_decode
    loads = json.loads
    arrivals: list[float] = []
    inputs: list[int] = []
    outputs: list[int] = []
    hashes: list[list[int]] = []
    any_hash = False
    in_key, out_key, t_key = INPUT_FIELDS[0], OUTPUT_FIELDS[0], TIME_FIELDS[0][0]
    has_time: bool | None = None
    first_line = 0
    clock = _Clock(path)
    limit, why = bound
    for line, text in enumerate(f, 1):
        if text.isspace():
            continue
        try:
            try:
                rec, end = raw_decode(text)
                if end != len(text) and not text[end:].isspace():
                    rec = loads(text)
            except ValueError:
                rec = loads(text)
        except ValueError as e:
            detail = f"{e.msg} at column {e.colno}" if isinstance(e, json.JSONDecodeError) else str(e)
            raise _error(path, line, f"malformed JSON: {detail}") from None
        except RecursionError:
            raise _error(path, line, "malformed JSON: nested too deeply") from None
        if type(rec) is not dict:
            raise _error(path, line, f"expected a JSON object, got {type(rec).__name__}")

        if in_key not in rec:
            in_key = _find(rec, INPUT_FIELDS) or in_key
        n_in = rec.get(in_key)
        if type(n_in) is not int or n_in <= 0 or n_in > MAX_LENGTH:
            if in_key not in rec:
                raise _missing(path, line, INPUT_FIELDS)
            n_in = _length(path, line, in_key, n_in, "prompt")
        if out_key not in rec:
            out_key = _find(rec, OUTPUT_FIELDS) or out_key
        n_out = rec.get(out_key)
        if type(n_out) is not int or n_out <= 0 or n_out > MAX_LENGTH:
            if out_key not in rec:
                raise _missing(path, line, OUTPUT_FIELDS)
            n_out = _length(path, line, out_key, n_out, "output")
        if limit is not None and n_in + n_out > limit:
            _check_request(path, line, (in_key, out_key), n_in, n_out, limit, why)

        if t_key not in rec:
            found = None
            for name, _ in TIME_FIELDS:
                if name in rec:
                    found = name
                    break
            if has_time is None:
                has_time, first_line = found is not None, line
            if (found is not None) != has_time:
                raise _mixed_times(path, line, has_time, first_line)
            if found is not None:
                t_key = found
        elif has_time is None:
            has_time, first_line = True, line
        elif not has_time:
            raise _mixed_times(path, line, has_time, first_line)
        if has_time:
            raw = rec[t_key]
            scale = _TIME_SCALE[t_key]
            if scale == 1.0 and type(raw) is float and raw >= clock.prev_s and raw != math.inf:
                # fast path for seconds: sorted, non-negative and finite (NaN fails `>=`)
                if clock.first_s is None:
                    clock.first_s, clock.first_unit = raw, "s"
                clock.prev_s, clock.prev_raw, clock.prev_unit, clock.prev_line = raw, raw, "s", line
                arrivals.append(raw - clock.first_s)
            else:
                arrivals.append(clock.number(line, t_key, raw, scale))

        h = rec.get(HASH_FIELD)
        if h is not None:
            if type(h) is not list or not set(map(type, h)) <= _INT:
                raise _error(path, line, f"'{HASH_FIELD}' must be a list of integers, got {_short(h)}")
            _check_hash_range(path, line, h, _short(h))
            _check_hashes(path, line, h, n_in, block)
            if not any_hash:
                any_hash = True
                hashes = [[] for _ in inputs]
            hashes.append(h)
        elif any_hash:
            hashes.append([])
        inputs.append(n_in)
        outputs.append(n_out)
    return Trace(path, arrivals if has_time else None, inputs, outputs,
                 hashes if any_hash and any(hashes) else None, block)


def _short(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _column(header: dict[str, int], names: Sequence[str]) -> tuple[int, str] | None:
    for n in names:
        i = header.get(n.lower())
        if i is not None:
            return i, n
    return None


def _parse_hashes(path: str, line: int, cell: str) -> list[int]:
    parts = cell.replace(";", " ").split()
    try:
        hashes = [int(p) for p in parts]
    except ValueError:
        raise _error(path, line, f"'{HASH_FIELD}' must be integers separated by spaces or ';', "
                                 f"got {_short(cell)}") from None
    _check_hash_range(path, line, hashes, _short(cell))
    return hashes


def _rows(path: str, reader):
    """The CSV reader's rows; a line it cannot split (a NUL, an unclosed quote, a cell beyond the
    csv module's field limit) is an error naming the line."""
    while True:
        try:
            row = next(reader)
        except StopIteration:
            return
        except csv.Error as e:
            raise _error(path, reader.line_num, f"not a CSV row: {e}") from None
        yield row


def _read_csv(path: str, f, block: int, bound: tuple[int | None, str]) -> Trace:
    reader = csv.reader(f)
    header_row: list[str] | None = None
    for header_row in _rows(path, reader):
        if header_row:
            break
    if not header_row:
        raise _error(path, None, "empty trace: no header row and no requests")
    header_line = reader.line_num
    header: dict[str, int] = {}
    for i, name in enumerate(header_row):
        key = name.strip().lower()
        if key in header:
            raise _error(path, header_line, f"column '{name.strip()}' appears twice")
        header[key] = i
    in_col = _column(header, INPUT_FIELDS)
    if in_col is None:
        raise _missing(path, header_line, INPUT_FIELDS)
    out_col = _column(header, OUTPUT_FIELDS)
    if out_col is None:
        raise _missing(path, header_line, OUTPUT_FIELDS)
    t_col = _column(header, [n for n, _ in TIME_FIELDS])
    h_idx = header.get(HASH_FIELD)
    width = len(header_row)

    arrivals: list[float] = []
    inputs: list[int] = []
    outputs: list[int] = []
    hashes: list[list[int]] = []
    clock: _Clock | None = None
    limit, why = bound
    names = (header_row[in_col[0]].strip(), header_row[out_col[0]].strip())
    for row in _rows(path, reader):
        line = reader.line_num
        if not row or (len(row) == 1 and not row[0].strip()):
            continue
        if len(row) != width:
            raise _error(path, line, f"{len(row)} columns, but the header (line {header_line}) has {width}")
        n_in = _length(path, line, names[0], row[in_col[0]], "prompt", text=True)
        n_out = _length(path, line, names[1], row[out_col[0]], "output", text=True)
        _check_request(path, line, names, n_in, n_out, limit, why)
        if t_col is not None:
            idx, alias = t_col
            name = header_row[idx].strip()
            cell = row[idx].strip()
            if not cell:
                raise _error(path, line, f"empty timestamp '{name}' (give every request a timestamp, "
                                         f"or drop the column)")
            if clock is None:  # the first record decides: a number (unit from the name) or a datetime
                clock = _Clock(path) if _is_number(cell) else _DateClock(path)
            if isinstance(clock, _DateClock):
                arrivals.append(clock.datetime(line, name, cell))
            else:
                try:
                    raw: object = int(cell)
                except ValueError:
                    try:
                        raw = float(cell)
                    except ValueError:
                        raise _error(path, line, f"timestamp '{name}' must be a number, got {cell!r}") from None
                arrivals.append(clock.number(line, name, raw, _TIME_SCALE[alias]))
        if h_idx is not None:
            h = _parse_hashes(path, line, row[h_idx])
            _check_hashes(path, line, h, n_in, block)
            hashes.append(h)
        inputs.append(n_in)
        outputs.append(n_out)
    has_hashes = h_idx is not None and any(hashes)
    return Trace(path, arrivals if t_col is not None else None, inputs, outputs,
                 hashes if has_hashes else None, block)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def write_jsonl(path: str | Path, arrival_s: Sequence[float] | None, input_len: Sequence[int],
                output_len: Sequence[int], *, block_hashes: Sequence[Sequence[int]] | None = None) -> None:
    """Writes a request trace that ``read_trace`` reads back unchanged (arrivals as given when the
    first is 0.0, as generated workloads' are; otherwise shifted to start at 0.0)."""
    name = str(path)
    n = len(input_len)
    if len(output_len) != n or (arrival_s is not None and len(arrival_s) != n) or \
            (block_hashes is not None and len(block_hashes) != n):
        sizes = f"{n} input lengths, {len(output_len)} output lengths"
        if arrival_s is not None:
            sizes += f", {len(arrival_s)} arrivals"
        if block_hashes is not None:
            sizes += f", {len(block_hashes)} hash lists"
        raise UsageError(f"{name}: cannot write a trace of {sizes}: give one of each per request")
    if n == 0:
        raise UsageError(f"{name}: cannot write an empty trace: give at least one request")
    lines = []
    prev = 0.0
    for i in range(n):
        a, b = _positive_int(name, i, "input_len", input_len[i]), _positive_int(name, i, "output_len", output_len[i])
        fields = f'"input_len": {a}, "output_len": {b}'
        if arrival_s is not None:
            t = float(arrival_s[i])
            if not math.isfinite(t) or t < 0 or t < prev:
                raise UsageError(f"{name}: request {i}: arrival {arrival_s[i]!r} s must be finite, non-negative "
                                 f"and not earlier than the previous request's {prev!r} s")
            prev = t
            fields = f'"arrival_s": {t!r}, ' + fields
        if block_hashes is not None and len(block_hashes[i]):
            ids = [int(x) for x in block_hashes[i]]
            fields += f', "hash_ids": {json.dumps(ids)}'
        lines.append("{" + fields + "}\n")
    try:
        with open(name, "w", encoding="utf-8") as f:
            f.writelines(lines)
    except OSError as e:
        raise UsageError(f"{name}: cannot write trace: {e.strerror or e}") from None


def _positive_int(path: str, i: int, name: str, value: object) -> int:
    if isinstance(value, bool) or not hasattr(value, "__index__") or value.__index__() <= 0:
        raise UsageError(f"{path}: request {i}: {name} must be a positive integer, got {value!r}")
    return value.__index__()
