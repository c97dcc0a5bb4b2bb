"""Fits each system's `collective_launch_us` (python/accel_sim/data/systems/*.yaml): the fixed
cost of one collective beyond what its library's tuner model charges (core collective.cc, the
ring and NVLS under NCCL's or RCCL's protocols), from the system's fit-split `measured` row, the
smallest all-reduce its nccl-tests / rccl-tests sweep timed (1 KiB, where the time is all fixed
cost). The other sizes of the sweep are the report split that `accel-sim validate` compares.

    launch = measured time - the model's time with no launch cost
    measured time = bytes / algbw, algbw = busbw / the all-reduce's factor 2 (p - 1) / p  (nccl-tests)

Run: PYTHONPATH=python python validation/fit_collective_launch.py
"""

from __future__ import annotations

from accel_sim import _core
from accel_sim.io.system_file import builtin_systems


def fitted_launches() -> dict[str, float]:
    """System id -> fitted launch cost in seconds, for every system with a fit-split sized
    all-reduce row. The launch adds to every collective the library times, so the model's time
    without it is its time with the file's value less that value."""
    out = {}
    for e in builtin_systems():
        rows = [m for m in e.measured if m["split"] == "fit" and m["bytes"] and m["collective"] == "all_reduce"]
        if not rows:
            continue
        m = min(rows, key=lambda r: r["bytes"])
        q = _core.CollectiveQuery()
        q.kind, q.bytes, q.ranks = _core.CollectiveKind.all_reduce, m["bytes"], m["gpus"]
        est = _core.estimate_collective(q, e.spec)
        # The measured time from its bus bandwidth, by the core's busbw / algbw factor.
        measured_s = m["bytes"] / (m["busbw_gbs"] * 1e9 * est.algbw_bytes_per_s / est.busbw_bytes_per_s)
        out[e.spec.id] = max(0.0, measured_s - (est.time_s - e.spec.launch_s))
    return out


def main() -> int:
    for system, launch in fitted_launches().items():
        print(f"{system}: collective_launch_us {launch * 1e6:.1f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
