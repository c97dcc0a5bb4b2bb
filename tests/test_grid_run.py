"""accel_sim.grid_run: a grid's points on all cores or on Ray, one table, resumable.

The grid and the per-point evaluation are fakes (tests/grid_fakes.py) whose rows are known in
advance, so each test checks the machinery: every point once, in order, typed, and failures kept.
"""

from __future__ import annotations

import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
import tracemalloc
from pathlib import Path

import pytest

import accel_sim
import grid_fakes
from accel_sim.errors import UsageError
from accel_sim.grid import MAX_POINTS
from accel_sim.grid_results import CSV_META_SUFFIX, JOURNAL_SUFFIX, PARQUET_META_KEY, journal_path_for
from accel_sim.grid_run import GridRunSummary, run_grid
from accel_sim.grid_workers import max_workers
from browser import in_ci
from grid_fakes import FakeGrid, fake_grid

TESTS = Path(__file__).resolve().parent
PACKAGE_ROOT = Path(accel_sim.__file__).resolve().parent.parent

try:
    import pyarrow.parquet as pq
except ImportError:   # the test extra has it; skipped on a developer machine without, never in CI
    _message = 'pyarrow is not installed (pip install "accel-sim[parquet]", or ".[test]")'
    if in_ci():
        pytest.fail(_message + " -- CI is set, so the grid-sweep tests may not be skipped", pytrace=False)
    pytest.skip(_message, allow_module_level=True)


def expected(grid: FakeGrid, evaluate=grid_fakes.evaluate) -> list[dict]:
    return evaluate(grid, list(range(len(grid))))


def read_parquet(path: Path) -> list[dict]:
    return pq.read_table(path).to_pylist()


def read_csv(path: Path) -> list[dict]:
    """The CSV table typed by hand: ints, floats, True/False, empty = None."""
    parse = {"point": int, "a": int, "b": int, "name": str, "even": lambda s: {"True": True, "False": False}[s],
             "latency_s": float, "tokens": int, "fits": lambda s: {"True": True, "False": False}[s], "error": str}
    with open(path, newline="") as f:
        return [{k: (parse[k](v) if v != "" else None) for k, v in r.items()} for r in csv.DictReader(f)]


# ----------------------------------------------------------------------------- local runs

def test_in_process_and_pool_give_the_same_table(tmp_path):
    grid = fake_grid(tmp_path, 500)
    one = run_grid(grid, tmp_path / "one.parquet", workers=1, evaluate=grid_fakes.evaluate)
    two = run_grid(grid, tmp_path / "two.parquet", workers=2, evaluate=grid_fakes.evaluate)
    three = run_grid(grid, tmp_path / "three.parquet", workers=3, batch_size=7, evaluate=grid_fakes.evaluate)
    want = expected(grid)
    assert read_parquet(tmp_path / "one.parquet") == want
    assert read_parquet(tmp_path / "two.parquet") == want
    assert read_parquet(tmp_path / "three.parquet") == want
    failed = sum(1 for i in range(500) if i % 11 == 5)   # 45
    for summary in (one, two, three):
        assert isinstance(summary, GridRunSummary)
        assert (summary.total, summary.computed, summary.resumed, summary.failed, summary.complete) == (500, 500, 0, failed, True)
    assert not journal_path_for(tmp_path / "two.parquet").exists()


def test_pool_with_spawn_start_method(tmp_path):
    grid = fake_grid(tmp_path, 60)
    run_grid(grid, tmp_path / "s.parquet", workers=2, batch_size=8, evaluate=grid_fakes.evaluate, start_method="spawn")
    assert read_parquet(tmp_path / "s.parquet") == expected(grid)


def test_parquet_columns_are_typed_with_nulls_and_the_grid_in_the_metadata(tmp_path):
    import pyarrow as pa

    grid = fake_grid(tmp_path, 30)
    out = tmp_path / "r.parquet"
    run_grid(grid, out, workers=2, batch_size=4, evaluate=grid_fakes.evaluate)
    table = pq.read_table(out)
    assert table.schema.names == [name for name, _ in grid.columns()]
    assert [f.type for f in table.schema] == [pa.int64(), pa.int64(), pa.int64(), pa.string(), pa.bool_(),
                                              pa.float64(), pa.int64(), pa.bool_(), pa.string()]
    rows = table.to_pylist()
    assert [r["point"] for r in rows] == list(range(30))
    # Point 12: a = 12 % 7 = 5, b = 12 // 7 = 1, latency 5 + 1/1000, 120 tokens, a >= 4 so it does not fit.
    assert rows[12] == {"point": 12, "a": 5, "b": 1, "name": "n0", "even": True, "latency_s": 5.001,
                        "tokens": 120, "fits": False, "error": None}
    assert rows[3]["latency_s"] == float("inf")
    # Point 16 = 11 + 5 fails: parameters kept, figures null, the error in its column.
    assert rows[16] == {"point": 16, "a": 2, "b": 2, "name": "n1", "even": True, "latency_s": None,
                        "tokens": None, "fits": None, "error": "no fit at a=2,b=2"}
    assert table.column("latency_s").null_count == 3   # points 5, 16, 27
    meta = json.loads(table.schema.metadata[PARQUET_META_KEY])
    assert meta["command"] == "simulate" and meta["points"] == 30 and len(meta["fingerprint"]) == 64


def test_csv_table_round_trips(tmp_path):
    grid = fake_grid(tmp_path, 40)
    out = tmp_path / "r.csv"
    run_grid(grid, out, workers=1, batch_size=6, evaluate=grid_fakes.evaluate)
    assert out.read_text().splitlines()[0] == "point,a,b,name,even,latency_s,tokens,fits,error"
    assert read_csv(out) == expected(grid)
    assert json.loads((tmp_path / ("r.csv" + CSV_META_SUFFIX)).read_text())["points"] == 40
    # Run again: the finished table is recognized, nothing is computed, the file is left alone.
    before = out.stat().st_mtime_ns
    again = run_grid(grid, out, workers=1, evaluate=grid_fakes.recording_evaluate)
    assert (again.computed, again.resumed, again.failed) == (0, 40, 4)
    assert out.stat().st_mtime_ns == before


def test_progress_counts_up_to_the_total(tmp_path):
    grid = fake_grid(tmp_path, 50)
    calls = []
    run_grid(grid, tmp_path / "p.csv", workers=2, batch_size=10, evaluate=grid_fakes.evaluate,
             progress=lambda done, total: calls.append((done, total)))
    assert calls[0] == (0, 50) and calls[-1] == (50, 50)
    assert [d for d, _ in calls] == sorted(d for d, _ in calls) and len(calls) == 6


def test_automatic_batches_start_small_and_cover_every_point_once(tmp_path, monkeypatch):
    monkeypatch.setenv("GRID_FAKE_LOG", str(tmp_path / "asked.log"))
    grid = fake_grid(tmp_path, 3000)
    run_grid(grid, tmp_path / "a.parquet", workers=1, evaluate=grid_fakes.recording_evaluate)
    batches = [line.split() for line in (tmp_path / "asked.log").read_text().splitlines()]
    assert len(batches[0]) == 4                     # nothing timed yet
    assert max(len(b) for b in batches) > 4         # then sized from the time per point
    assert grid_fakes.asked_indices(tmp_path / "asked.log") == list(range(3000))
    assert read_parquet(tmp_path / "a.parquet") == expected(grid)


# ----------------------------------------------------------------------------- failures

def test_a_batch_that_raises_records_its_points_and_the_sweep_goes_on(tmp_path):
    grid = fake_grid(tmp_path, 40)
    summary = run_grid(grid, tmp_path / "r.parquet", workers=2, batch_size=5, evaluate=grid_fakes.raising_evaluate)
    rows = read_parquet(tmp_path / "r.parquet")
    want = expected(grid)
    assert summary.complete and summary.computed == 40
    for r, w in zip(rows, want):
        if 10 <= r["point"] < 15:   # the batch holding point 13
            assert r["error"] == "RuntimeError: boom at 13; a batch of 5 points, 10 to 14"
            assert (r["a"], r["b"], r["name"], r["even"]) == (w["a"], w["b"], w["name"], w["even"])
            assert (r["latency_s"], r["tokens"], r["fits"]) == (None, None, None)
        else:
            assert r == w
    # The 5 points of the raising batch, and points 5, 16, 27, 38 that fail by themselves.
    assert summary.failed == 5 + 4


def test_a_worker_process_that_dies_costs_only_its_batch(tmp_path):
    grid = fake_grid(tmp_path, 60)
    summary = run_grid(grid, tmp_path / "r.parquet", workers=2, batch_size=5, evaluate=grid_fakes.crashing_evaluate)
    rows = read_parquet(tmp_path / "r.parquet")
    assert summary.complete and summary.computed == 60
    bad = [r["point"] for r in rows if r["error"] and r["error"].startswith("the worker process died")]
    assert bad == [10, 11, 12, 13, 14]
    assert rows[13]["error"] == "the worker process died (exit status 3); a batch of 5 points, 10 to 14"
    assert [r for r in rows if not 10 <= r["point"] < 15] == [w for w in expected(grid) if not 10 <= w["point"] < 15]


class _ForkLimit:
    """multiprocessing.get_context as a machine out of processes sees it: the first ALLOWED
    worker processes start, the rest fail as fork does (OSError EAGAIN)."""

    def __init__(self, allowed: int) -> None:
        import multiprocessing

        self.allowed, self.started, self.get_context = allowed, 0, multiprocessing.get_context

    def __call__(self, method=None):
        real, limit = self.get_context(method), self

        class Process(real.Process):
            def start(self):
                if limit.started >= limit.allowed:
                    raise BlockingIOError(11, "Resource temporarily unavailable")
                limit.started += 1
                super().start()

        class Context:
            def __getattr__(self, name):
                return Process if name == "Process" else getattr(real, name)

        return Context()


@pytest.mark.parametrize("allowed", [0, 1])
def test_workers_the_system_cannot_start_are_done_without(tmp_path, monkeypatch, allowed):
    """Four workers asked for, none or one can be started: the sweep runs on the one it has, or
    in its own process, and writes the whole table, where the fork's OSError ended it."""
    import accel_sim.grid_workers as grid_workers

    limit = _ForkLimit(allowed)
    monkeypatch.setattr(grid_workers.multiprocessing, "get_context", limit)
    grid = fake_grid(tmp_path, 40)
    summary = run_grid(grid, tmp_path / "r.csv", workers=4, batch_size=5, evaluate=grid_fakes.evaluate)
    assert (summary.complete, summary.computed, limit.started) == (True, 40, allowed)
    assert read_csv(tmp_path / "r.csv") == expected(grid)


def test_bad_rows_from_evaluate_are_recorded_not_fatal(tmp_path):
    grid = fake_grid(tmp_path, 12)
    run_grid(grid, tmp_path / "t.parquet", workers=1, batch_size=3, evaluate=grid_fakes.badly_typed_evaluate)
    rows = read_parquet(tmp_path / "t.parquet")
    assert rows[2]["tokens"] is None and rows[2]["error"] == "column 'tokens' cannot hold 'many'"
    assert rows[4]["error"] == "unexpected column 'surprise'" and rows[4]["tokens"] == 40
    assert rows[6]["tokens"] == 60 and rows[6]["error"] is None   # an integral float fits an int64 column
    assert rows[9]["tokens"] is None and rows[9]["error"] == "column 'tokens' cannot hold 1180591620717411303424"
    assert rows[9]["latency_s"] == 2.001 and rows[8]["error"] is None
    run_grid(grid, tmp_path / "s.parquet", workers=1, batch_size=3, evaluate=grid_fakes.short_evaluate)
    rows = read_parquet(tmp_path / "s.parquet")
    assert [r["error"] for r in rows[6:9]] == ["evaluate returned 2 rows for 3 points; a batch of 3 points, 6 to 8"] * 3
    assert rows[9]["error"] is None and rows[9]["tokens"] == 90


def test_rows_a_worker_cannot_send_back_fail_their_batch_only(tmp_path):
    grid = fake_grid(tmp_path, 20)
    run_grid(grid, tmp_path / "r.parquet", workers=2, batch_size=5, evaluate=grid_fakes.unpicklable_evaluate)
    rows = read_parquet(tmp_path / "r.parquet")
    assert [r["point"] for r in rows if r["error"] and r["error"].startswith("the batch's rows cannot be sent back: ")] \
        == [5, 6, 7, 8, 9]
    assert rows[4] == expected(grid)[4] and rows[10] == expected(grid)[10]


# ----------------------------------------------------------------------------- resume

KILLED_SWEEP = """
import sys
sys.path[:0] = [{tests!r}, {package!r}]
import grid_fakes
from accel_sim.grid_run import run_grid
run_grid(grid_fakes.FakeGrid({grid!r}, {size}), {out!r}, workers=2, batch_size=5, evaluate=grid_fakes.slow_evaluate)
"""


def journal_points(path: Path) -> list[int]:
    lines = path.read_bytes().split(b"\n")[1:-1]   # the header; after the last newline: a torn line or nothing
    return [json.loads(line)[0] for line in lines]


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_a_killed_sweep_resumes_without_recomputing_finished_points(tmp_path, suffix):
    size = 300
    grid = fake_grid(tmp_path, size)
    out = tmp_path / f"r{suffix}"
    journal = Path(str(out) + JOURNAL_SUFFIX)
    script = tmp_path / "sweep.py"
    script.write_text(KILLED_SWEEP.format(tests=str(TESTS), package=str(PACKAGE_ROOT), grid=grid.path, size=size,
                                          out=str(out)))
    proc = subprocess.Popen([sys.executable, str(script)], env={**os.environ, "GRID_FAKE_SLOW_S": "0.02"},
                            start_new_session=True, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 60
        while not (journal.exists() and len(journal_points(journal)) >= 40):
            assert proc.poll() is None, proc.stderr.read().decode()
            assert time.monotonic() < deadline, "the sweep journaled nothing in 60 s"
            time.sleep(0.01)
        os.killpg(proc.pid, signal.SIGKILL)   # the sweep and its workers, as a lost machine would
    finally:
        proc.wait(10)
    assert not out.exists()
    done = journal_points(journal)
    assert 40 <= len(done) < size and len(set(done)) == len(done)
    with open(journal, "ab") as f:   # as if killed in the middle of writing a line
        f.write(b'[299,5,42,"n2",fal')

    log = tmp_path / "asked.log"
    os.environ["GRID_FAKE_LOG"] = str(log)
    try:
        # Interrupted once more: the torn line is cut off before the journal is appended to.
        part = run_grid(grid, out, workers=2, evaluate=grid_fakes.recording_evaluate, stop_after=20)
        assert (part.resumed, part.computed, part.complete) == (len(done), 20, False)
        assert len(journal_points(journal)) == len(done) + 20 and journal.read_bytes().endswith(b"\n")
        summary = run_grid(grid, out, workers=2, evaluate=grid_fakes.recording_evaluate)
    finally:
        del os.environ["GRID_FAKE_LOG"]
    asked = grid_fakes.asked_indices(log)
    assert sorted(asked) == sorted(set(range(size)) - set(done))   # each unfinished point once, no finished one
    assert (summary.resumed, summary.computed, summary.complete) == (len(done) + 20, size - len(done) - 20, True)
    assert not journal.exists()

    uninterrupted = tmp_path / f"u{suffix}"
    run_grid(grid, uninterrupted, workers=1, evaluate=grid_fakes.evaluate)
    read = read_parquet if suffix == ".parquet" else read_csv
    assert read(out) == read(uninterrupted) == expected(grid)


def test_stop_after_keeps_the_journal_and_the_next_run_finishes(tmp_path, monkeypatch):
    grid = fake_grid(tmp_path, 100)
    out = tmp_path / "r.parquet"
    first = run_grid(grid, out, workers=2, batch_size=10, evaluate=grid_fakes.evaluate, stop_after=35)
    assert (first.computed, first.complete) == (35, False)
    assert not out.exists() and sorted(journal_points(journal_path_for(out))) == list(range(35))
    monkeypatch.setenv("GRID_FAKE_LOG", str(tmp_path / "asked.log"))
    second = run_grid(grid, out, workers=1, batch_size=10, evaluate=grid_fakes.recording_evaluate)
    assert grid_fakes.asked_indices(tmp_path / "asked.log") == list(range(35, 100))
    assert (second.resumed, second.computed, second.complete) == (35, 65, True)
    assert read_parquet(out) == expected(grid)


def test_failed_points_are_kept_unless_retried(tmp_path, monkeypatch):
    grid = fake_grid(tmp_path, 50)
    out = tmp_path / "r.parquet"
    run_grid(grid, out, workers=1, evaluate=grid_fakes.evaluate)
    log = tmp_path / "asked.log"
    monkeypatch.setenv("GRID_FAKE_LOG", str(log))
    same = run_grid(grid, out, workers=2, evaluate=grid_fakes.always_fit_evaluate)
    assert same.computed == 0 and grid_fakes.asked_indices(log) == []
    retried = run_grid(grid, out, workers=2, evaluate=grid_fakes.always_fit_evaluate, retry_failed=True)
    failed = [i for i in range(50) if i % 11 == 5]   # 5, 16, 27, 38, 49
    assert sorted(grid_fakes.asked_indices(log)) == failed
    assert (retried.resumed, retried.computed, retried.failed) == (45, 5, 0)
    rows = read_parquet(out)
    assert [rows[i]["tokens"] for i in failed] == [-1] * 5
    assert [r for r in rows if r["point"] not in failed] == [w for w in expected(grid) if w["point"] not in failed]


def test_another_grids_output_or_journal_is_refused(tmp_path):
    grid = fake_grid(tmp_path, 20)
    other = fake_grid(tmp_path, 20, text="axes: [a, c]\n", name="other.yaml")
    out = tmp_path / "r.parquet"
    run_grid(grid, out, workers=1, evaluate=grid_fakes.evaluate)
    with pytest.raises(UsageError, match=r"r\.parquet exists and holds the results of another grid: .*--restart"):
        run_grid(other, out, workers=1, evaluate=grid_fakes.evaluate)
    with pytest.raises(UsageError, match="another grid"):   # the same file, another command
        run_grid(FakeGrid(grid.path, 20, command="serve"), out, workers=1, evaluate=grid_fakes.evaluate)
    assert not journal_path_for(out).exists()   # a refused sweep leaves nothing behind
    restarted = run_grid(other, out, workers=1, evaluate=grid_fakes.evaluate, restart=True)
    assert restarted.computed == 20 and read_parquet(out) == expected(other)

    partial = tmp_path / "p.csv"
    run_grid(grid, partial, workers=1, batch_size=5, evaluate=grid_fakes.evaluate, stop_after=10)
    with pytest.raises(UsageError, match=r"p\.csv\.partial\.jsonl is the unfinished sweep of another grid"):
        run_grid(other, partial, workers=1, evaluate=grid_fakes.evaluate)

    plain = tmp_path / "plain.csv"
    plain.write_text("x,y\n1,2\n")
    with pytest.raises(UsageError, match=r"plain\.csv exists without a plain\.csv\.meta\.json"):
        run_grid(grid, plain, workers=1, evaluate=grid_fakes.evaluate)
    import pyarrow as pa

    pq.write_table(pa.table({"x": [1, 2]}), tmp_path / "plain.parquet")
    with pytest.raises(UsageError, match="another grid"):
        run_grid(grid, tmp_path / "plain.parquet", workers=1, evaluate=grid_fakes.evaluate)
    (tmp_path / "junk.parquet").write_text("not parquet")
    with pytest.raises(UsageError, match="not a Parquet table"):
        run_grid(grid, tmp_path / "junk.parquet", workers=1, evaluate=grid_fakes.evaluate)


def test_a_damaged_journal_is_refused_but_a_garbled_last_line_is_dropped(tmp_path, monkeypatch):
    grid = fake_grid(tmp_path, 20)
    out = tmp_path / "r.csv"
    run_grid(grid, out, workers=1, batch_size=5, evaluate=grid_fakes.evaluate, stop_after=10)
    journal = journal_path_for(out)
    lines = journal.read_bytes().split(b"\n")   # the header, points 0..9, ""
    damaged = list(lines)
    damaged[3] = b"garbage"
    journal.write_bytes(b"\n".join(damaged))
    with pytest.raises(UsageError, match=r"r\.csv\.partial\.jsonl is damaged at line 4: pass --restart"):
        run_grid(grid, out, workers=1, evaluate=grid_fakes.evaluate)
    # A complete last line that does not parse (zeros left by a crash of the machine) is the
    # last write lost: dropped, and its point computed again.
    lines[10] = b"\0\0\0\0"
    journal.write_bytes(b"\n".join(lines))
    monkeypatch.setenv("GRID_FAKE_LOG", str(tmp_path / "asked.log"))
    summary = run_grid(grid, out, workers=1, evaluate=grid_fakes.recording_evaluate)
    assert grid_fakes.asked_indices(tmp_path / "asked.log") == list(range(9, 20))
    assert (summary.resumed, summary.computed) == (9, 11)
    assert read_csv(out) == expected(grid)


def test_a_sweep_refuses_an_output_another_sweep_is_writing(tmp_path):
    import fcntl

    grid = fake_grid(tmp_path, 20)
    out = tmp_path / "r.parquet"
    run_grid(grid, out, workers=1, batch_size=5, evaluate=grid_fakes.evaluate, stop_after=10)
    journal = journal_path_for(out)
    before = journal.read_bytes()
    with open(journal, "ab") as held:   # as the running sweep holds it
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        for restart in (False, True):
            with pytest.raises(UsageError, match=r"another sweep is writing .*r\.parquet\.partial\.jsonl"):
                run_grid(grid, out, workers=1, evaluate=grid_fakes.evaluate, restart=restart)
    assert journal.read_bytes() == before
    assert run_grid(grid, out, workers=1, evaluate=grid_fakes.evaluate).resumed == 10


def test_a_full_disk_stops_the_sweep_with_a_usage_error_and_it_resumes(tmp_path, monkeypatch):
    import errno

    import accel_sim.grid_run as grid_run

    grid = fake_grid(tmp_path, 30)
    out = tmp_path / "r.csv"
    real_fsync, calls = os.fsync, []

    def fsync(fd):
        calls.append(fd)
        if len(calls) == 4:   # the journal's header, two batches, then the disk is full
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        real_fsync(fd)

    monkeypatch.setattr(grid_run.os, "fsync", fsync)
    with pytest.raises(UsageError, match=r"cannot write .*r\.csv\.partial\.jsonl: No space left on device "
                                         r"\(the points finished so far are kept: rerun"):
        run_grid(grid, out, workers=1, batch_size=5, evaluate=grid_fakes.evaluate)
    monkeypatch.setattr(grid_run.os, "fsync", real_fsync)
    again = run_grid(grid, out, workers=1, batch_size=5, evaluate=grid_fakes.evaluate)
    assert again.resumed >= 10 and again.resumed + again.computed == 30
    assert read_csv(out) == expected(grid)


# ----------------------------------------------------------------------------- usage errors

def test_output_format_and_optional_packages(tmp_path, monkeypatch):
    grid = fake_grid(tmp_path, 5)
    with pytest.raises(UsageError, match=r"the output table must end in \.parquet or \.csv"):
        run_grid(grid, tmp_path / "r.xlsx", evaluate=grid_fakes.evaluate)
    with pytest.raises(UsageError, match="does not exist"):
        run_grid(grid, tmp_path / "no" / "r.csv", evaluate=grid_fakes.evaluate)
    with pytest.raises(UsageError, match=r"the number of workers must be >= 0 \(got -1\)"):
        run_grid(grid, tmp_path / "r.csv", workers=-1, evaluate=grid_fakes.evaluate)
    cores = len(os.sched_getaffinity(0))
    with pytest.raises(UsageError, match=rf"the number of workers must be at most {4 * cores}, 4 per core"):
        run_grid(grid, tmp_path / "r.csv", workers=4 * cores + 1, evaluate=grid_fakes.evaluate)
    monkeypatch.setitem(sys.modules, "pyarrow", None)   # as if not installed
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(UsageError, match=r'needs pyarrow: pip install "accel-sim\[parquet\]"'):
        run_grid(grid, tmp_path / "r.parquet", evaluate=grid_fakes.evaluate)
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(UsageError) as e:
        run_grid(grid, tmp_path / "r.csv", ray_address="auto", evaluate=grid_fakes.evaluate)
    assert str(e.value) == '--ray needs Ray: pip install "accel-sim[ray]"'
    assert not (tmp_path / ("r.csv" + JOURNAL_SUFFIX)).exists()   # refused before anything was started


# ----------------------------------------------------------------------------- large grids

def test_a_million_point_grid_streams_without_materializing_its_points(tmp_path):
    grid = fake_grid(tmp_path, 1_000_000)
    out = tmp_path / "big.parquet"
    tracemalloc.start()
    try:
        started = time.monotonic()
        summary = run_grid(grid, out, workers=1, batch_size=500, evaluate=grid_fakes.trivial_evaluate, stop_after=5000)
        seconds = time.monotonic() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert (summary.computed, summary.complete) == (5000, False)
    assert sorted(journal_points(journal_path_for(out))) == list(range(5000))
    # A state byte per point (1 MB) and one 65,536-row chunk of the table (about 5 MB); a list
    # of the 10^6 indices alone would be 36 MB, their rows gigabytes.
    assert peak < 12 * 2**20, f"peak {peak / 2**20:.1f} MiB"
    assert seconds < 10


def test_a_grid_beyond_the_limit_is_refused_before_a_byte_per_point_is_allocated(tmp_path):
    """10^12 points: a UsageError at once, no journal left behind, where the state byte per
    point (a terabyte) ended in a MemoryError."""
    grid = fake_grid(tmp_path, 10**12)
    out = tmp_path / "r.csv"
    started = time.monotonic()
    with pytest.raises(UsageError) as e:
        run_grid(grid, out, workers=1, evaluate=grid_fakes.evaluate)
    assert str(e.value) == (f"the grid {grid.path} has 1,000,000,000,000 points, more than the 10,000,000 a sweep "
                            "takes (docs/formats/grid.md): split it into grid files of at most 10,000,000 points")
    assert time.monotonic() - started < 1 and not out.exists() and not journal_path_for(out).exists()
    assert MAX_POINTS == 10**7


def test_workers_are_bounded_on_the_command_line(tmp_path):
    path = tmp_path / "grid.yaml"
    path.write_text("command: simulate\nfixed: {model: gpt2}\ngrid: {batch: [1, 2]}\n")
    result = subprocess.run([sys.executable, "-m", "accel_sim.cli.main", "sweep", "--grid", str(path), "--out",
                             str(tmp_path / "r.csv"), "--workers", "100000"], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2 and not (tmp_path / "r.csv").exists()
    assert result.stderr == (f"accel-sim: error: --workers takes 0 (one per core) to {max_workers():,} (4 per core of "
                             "this machine; got 100,000)\n")


# ----------------------------------------------------------------------------- Ray

@pytest.fixture(scope="module")
def local_ray():
    """A local Ray instance of 2 CPUs whose workers can import tests/ and this accel_sim."""
    try:
        import ray
    except ImportError:
        message = 'Ray is not installed (pip install "accel-sim[ray]", or ".[test]")'
        if in_ci():
            pytest.fail(message + " -- CI is set, so the Ray tests may not be skipped", pytrace=False)
        pytest.skip(message)
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = os.pathsep.join([str(TESTS), str(PACKAGE_ROOT)] + ([old] if old else []))
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
        yield ray
    finally:
        ray.shutdown()
        if old is None:
            del os.environ["PYTHONPATH"]
        else:
            os.environ["PYTHONPATH"] = old


def test_ray_gives_the_local_table(tmp_path, local_ray):
    grid = fake_grid(tmp_path, 400)
    local = run_grid(grid, tmp_path / "local.parquet", workers=2, evaluate=grid_fakes.evaluate)
    on_ray = run_grid(grid, tmp_path / "ray.parquet", ray_address="auto", evaluate=grid_fakes.evaluate)
    assert local_ray.is_initialized()   # an initialized Ray is used and left running
    assert read_parquet(tmp_path / "ray.parquet") == read_parquet(tmp_path / "local.parquet") == expected(grid)
    assert (on_ray.computed, on_ray.failed) == (local.computed, local.failed) == (400, 36)
    run_grid(grid, tmp_path / "ray.csv", ray_address="auto", batch_size=9, evaluate=grid_fakes.evaluate)
    assert read_csv(tmp_path / "ray.csv") == expected(grid)


def test_a_real_grid_on_ray_gives_the_local_table(tmp_path, local_ray):
    """The acceptance: simulate and train grid files (a point that fails among them) on the
    local Ray instance give the table the local pool gives, cell for cell."""
    from accel_sim.grid import load_grid

    sim = tmp_path / "sim.yaml"
    sim.write_text("command: simulate\nfixed: {model: llama3-8b, phase: decode, context: 1024}\n"
                   "grid:\n  device: [a100, h100, nonesuch]\n  batch: [1, 32]\n  memory_bandwidth_gbs: [2000, 5000]\n")
    train = tmp_path / "train.yaml"
    train.write_text("command: train\nfixed: {model: llama-3-8b, system: dgx-h100, seq: 4096, microbatch: 1, "
                     "global_batch: 64}\npoints:\n  - {gpus: 16, tp: 2, pp: 4, dp: 2}\n  - {gpus: 8, tp: 3, pp: 1, dp: 1}\n"
                     "  - {gpus: 8, tp: 8, pp: 1, dp: 1}\n")
    for path, points, failed in ((sim, 12, 4), (train, 3, 1)):
        grid = load_grid(path)
        local = run_grid(grid, tmp_path / f"{path.stem}-local.parquet", workers=2, batch_size=2)
        on_ray = run_grid(grid, tmp_path / f"{path.stem}-ray.parquet", ray_address="auto", batch_size=2)
        a, b = read_parquet(tmp_path / f"{path.stem}-local.parquet"), read_parquet(tmp_path / f"{path.stem}-ray.parquet")
        assert a == b and len(a) == points
        assert (local.failed, on_ray.failed) == (failed, failed)


def test_ray_tasks_that_raise_or_die_record_their_batch(tmp_path, local_ray):
    grid = fake_grid(tmp_path, 40)
    run_grid(grid, tmp_path / "raise.parquet", ray_address="auto", batch_size=5, evaluate=grid_fakes.raising_evaluate)
    local = tmp_path / "local.parquet"
    run_grid(grid, local, workers=1, batch_size=5, evaluate=grid_fakes.raising_evaluate)
    assert read_parquet(tmp_path / "raise.parquet") == read_parquet(local)   # the same error text too

    summary = run_grid(grid, tmp_path / "die.parquet", ray_address="auto", batch_size=5,
                       evaluate=grid_fakes.crashing_evaluate)
    rows = read_parquet(tmp_path / "die.parquet")
    assert summary.complete
    assert [r["point"] for r in rows if r["error"] and r["error"].startswith("the Ray task failed")] == [10, 11, 12, 13, 14]
    assert rows[13]["error"].startswith("the Ray task failed: WorkerCrashedError: The worker died unexpectedly")
    assert rows[13]["error"].endswith("; a batch of 5 points, 10 to 14") and "\n" not in rows[13]["error"]
    assert [r for r in rows if not 10 <= r["point"] < 15] == [w for w in expected(grid) if not 10 <= w["point"] < 15]


def test_ray_workers_that_cannot_run_the_grid_are_a_usage_error_before_any_point(tmp_path, local_ray, monkeypatch):
    # An evaluate from a module only this process can import (not on the workers' PYTHONPATH),
    # as on a cluster without accel-sim installed.
    (tmp_path / "only_here").mkdir()
    (tmp_path / "only_here" / "only_here_eval.py").write_text("def evaluate(grid, indices):\n    return []\n")
    monkeypatch.syspath_prepend(str(tmp_path / "only_here"))
    import only_here_eval

    grid = fake_grid(tmp_path, 10)
    out = tmp_path / "r.csv"
    with pytest.raises(UsageError) as e:
        run_grid(grid, out, ray_address="auto", evaluate=only_here_eval.evaluate)
    assert str(e.value).startswith("the Ray workers cannot evaluate this grid: ModuleNotFoundError: "
                                   "No module named 'only_here_eval' (install accel-sim")
    assert not out.exists()
    workers_version = accel_sim.__version__
    from accel_sim import grid_workers as driver

    monkeypatch.setattr(driver, "__version__", "0.0.1-other")  # the driver's, not the workers
    with pytest.raises(UsageError, match=f"the Ray workers run accel-sim {re.escape(workers_version)}, this is 0.0.1-other"):
        run_grid(grid, out, ray_address="auto", evaluate=grid_fakes.evaluate)
