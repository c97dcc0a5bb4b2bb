"""A fake grid and fake per-point evaluations for the tests of accel_sim.grid_run.

They stand in for accel_sim.grid's Grid and accel_sim.grid_points' run_points: module-level, so that worker processes
(fork or spawn) and Ray workers can unpickle them by reference (tests/ must be importable
there: pytest puts it on sys.path, the Ray fixture on PYTHONPATH).

Point i of FakeGrid has the parameters a = i % 7, b = i // 7, name = "n{i % 3}", even = i even;
`evaluate` gives it latency_s = a + b / 1000 (inf for point 3), tokens = 10 * i, fits = a < 4,
and fails the points with i % 11 == 5 (figures None, error "no fit at a=..,b=..").
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass


@dataclass(frozen=True)
class FakeGrid:
    path: str
    size: int
    command: str = "simulate"

    def __len__(self) -> int:
        return self.size

    def point(self, index: int) -> dict:
        if not 0 <= index < self.size:
            raise IndexError(index)
        return {"a": index % 7, "b": index // 7, "name": f"n{index % 3}", "even": index % 2 == 0}

    def columns(self) -> list[tuple[str, str]]:
        return [("point", "int64"), ("a", "int64"), ("b", "int64"), ("name", "string"), ("even", "bool"),
                ("latency_s", "float64"), ("tokens", "int64"), ("fits", "bool"), ("error", "string")]


def fake_grid(tmp_path, size: int, text: str = "axes: [a, b]\n", name: str = "grid.yaml") -> FakeGrid:
    path = tmp_path / name
    path.write_text(text)
    return FakeGrid(str(path), size)


def row(grid: FakeGrid, index: int) -> dict:
    params = grid.point(index)
    if index % 11 == 5:
        return {"point": index, **params, "latency_s": None, "tokens": None, "fits": None,
                "error": f"no fit at a={params['a']},b={params['b']}"}
    latency = float("inf") if index == 3 else params["a"] + params["b"] / 1000
    return {"point": index, **params, "latency_s": latency, "tokens": 10 * index, "fits": params["a"] < 4,
            "error": None}


def evaluate(grid: FakeGrid, indices: list[int]) -> list[dict]:
    return [row(grid, i) for i in indices]


def trivial_evaluate(grid, indices: list[int]) -> list[dict]:
    """For overhead measurements: rows with no work behind them."""
    return [{"point": i, "a": i % 7, "b": i // 7, "name": "n", "even": True, "latency_s": 1.5, "tokens": i,
             "fits": True, "error": None} for i in indices]


def slow_evaluate(grid: FakeGrid, indices: list[int]) -> list[dict]:
    """SLOW_S seconds a point ($GRID_FAKE_SLOW_S, default 0.02): a sweep long enough to kill."""
    time.sleep(float(os.environ.get("GRID_FAKE_SLOW_S", "0.02")) * len(indices))
    return evaluate(grid, indices)


def recording_evaluate(grid: FakeGrid, indices: list[int]) -> list[dict]:
    """Appends the indices it is asked for to $GRID_FAKE_LOG, a line per batch (any process)."""
    with open(os.environ["GRID_FAKE_LOG"], "a") as f:
        f.write(" ".join(map(str, indices)) + "\n")
    return evaluate(grid, indices)


def asked_indices(log_path) -> list[int]:
    try:
        text = open(log_path).read()
    except FileNotFoundError:
        return []
    return [int(x) for x in text.split()]


def always_fit_evaluate(grid: FakeGrid, indices: list[int]) -> list[dict]:
    """Like recording_evaluate, but the points evaluate fails succeed (a fixed bug, for retries)."""
    rows = recording_evaluate(grid, indices)
    for r in rows:
        if r["error"] is not None:
            r.update(latency_s=0.5, tokens=-1, fits=True, error=None)
    return rows


CRASH_POINT = 13


def crashing_evaluate(grid: FakeGrid, indices: list[int]) -> list[dict]:
    """The process dies (as after a segfault in the core) on a batch holding CRASH_POINT."""
    if CRASH_POINT in indices:
        os._exit(3)
    return evaluate(grid, indices)


def raising_evaluate(grid: FakeGrid, indices: list[int]) -> list[dict]:
    """Raises (a bug in the evaluation) on a batch holding CRASH_POINT."""
    if CRASH_POINT in indices:
        raise RuntimeError(f"boom at {CRASH_POINT}\nsecond line of the message")
    return evaluate(grid, indices)


def badly_typed_evaluate(grid: FakeGrid, indices: list[int]) -> list[dict]:
    """Point 2's tokens are a string, point 4's row has an extra column, point 9's tokens do not
    fit in an int64; 6.0 tokens is fine."""
    rows = evaluate(grid, indices)
    for r in rows:
        if r["point"] == 2:
            r["tokens"] = "many"
        elif r["point"] == 4:
            r["surprise"] = 1
        elif r["point"] == 6:
            r["tokens"] = 60.0
        elif r["point"] == 9:
            r["tokens"] = 2**70
    return rows


def short_evaluate(grid: FakeGrid, indices: list[int]) -> list[dict]:
    """Drops the last row of a batch holding point 8: the whole batch is recorded as failed."""
    rows = evaluate(grid, indices)
    return rows[:-1] if 8 in indices else rows


def unpicklable_evaluate(grid: FakeGrid, indices: list[int]) -> list[dict]:
    """Point 7's row holds a lambda: fine in-process (the column refuses it), but a worker
    process cannot send the batch back."""
    rows = evaluate(grid, indices)
    for r in rows:
        if r["point"] == 7:
            r["name"] = lambda: "n"
    return rows
