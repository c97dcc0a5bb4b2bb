"""Fits each device's `kernel.sustained_clock_fraction` (python/accel_sim/data/devices/*.yaml): the
share of its clock the device keeps under sustained tensor-core load, from the GEMMs of the fit
split of python/accel_sim/data/validation/kernels.csv that ran for at least SUSTAINED_KERNEL_S (3 ms).

A GEMM of a few hundred microseconds runs at the clock the device boosts to; one that keeps the
tensor cores busy for milliseconds draws the board to its power limit, and the clock falls. The
H100 and H200 calibrate sweeps (validation/measured/*-2026-11-24/measurements.csv) show it: the
kernel model, whose matmul rate is the maximum achievable matmul FLOPS of short benchmarks, times
their GEMMs under 3 ms a few percent slow and those over 3 ms 2-26% fast, in bf16, fp16 and fp8
alike. A training step is such a load throughout, so `accel-sim train` and `plan` cost its kernels
at the sustained clock (core training_clock_hz).

The fit is the core's fit_sustained_clock_fraction (core/src/report/kernel_query.cc): for each
fit-split GEMM of at least SUSTAINED_KERNEL_S, the clock at which the kernel model times it as
measured; the median of those clocks over the device's clock. `accel-sim calibrate --data` writes
the same value into the device file it fits.

Run: PYTHONPATH=python python validation/fit_sustained_clock.py
"""

from __future__ import annotations

from accel_sim import _core, kernel_rows
from accel_sim.device import resolve_device


def fitted_fractions() -> dict[str, tuple[float, int]]:
    """Device id -> (fraction rounded to 3 places; the rows it rests on), for every device whose
    fit split has enough long GEMMs."""
    rows, _ = kernel_rows.load_rows()
    out = {}
    for device in sorted({r.device for r in rows}):
        mine = [r for r in rows if r.device == device and r.split == "fit"]
        fraction, used = _core.fit_sustained_clock_fraction([r.query for r in mine], [r.measured_s for r in mine],
                                                            resolve_device(device).spec)
        if fraction > 0:
            out[device] = (round(fraction, 3), used)
    return out


def main() -> int:
    for device, (fraction, rows) in fitted_fractions().items():
        print(f"{device}: sustained_clock_fraction {fraction} "
              f"({rows} GEMMs of at least {_core.SUSTAINED_KERNEL_S * 1e3:g} ms)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
