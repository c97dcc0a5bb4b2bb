"""Fits a device's `kernel.sustained_clock_fraction` (python/accel_sim/data/devices/*.yaml) on the fit
split of the training runs (python/accel_sim/data/validation/training_runs.csv), for a device whose
kernel rows hold no GEMM long enough for validation/fit_sustained_clock.py.

The fit split of the training runs is Korthikanti et al.'s eight GPT-3 iterations on A100
(arXiv 2205.05198: 22B to 1T, full recomputation or sequence parallelism with selective
recomputation; validation/extract_training_runs.py), each predicted under the stack that ran it
(megatron-lm-2022: the unfused attention core, fp16, dropout 0.1). Each candidate fraction, 0.80 to
1.00 in steps of 0.005, runs every fit row's step at that share of the device's clock, as `accel-sim
train` does at the sustained clock (validation.predict_training_run); the fit is the candidate with
the least median |predicted / measured - 1| tokens/s, the largest such on a tie. The report split
(every other training run) is never read.

Run: PYTHONPATH=python python validation/fit_training_clock.py
"""

from __future__ import annotations

import statistics

from accel_sim import validation


def fit_rows() -> dict[str, list[dict]]:
    """Device id -> its fit-split training runs."""
    out: dict[str, list[dict]] = {}
    for r in validation.load_training_runs("fit"):
        out.setdefault(r["device"], []).append(r)
    return out


def median_error(rows: list[dict], fraction: float) -> float:
    errors = []
    for r in rows:
        e = validation.predict_training_run(r, fraction)
        errors.append(abs(e.tokens_per_s / int(r["gpus"]) / float(r["measured_tokens_per_s_per_gpu"]) - 1))
    return statistics.median(errors)


def fit(rows: list[dict]) -> tuple[float, float]:
    best: tuple[float, float] | None = None
    for step in range(40, -1, -1):  # 1.00 down to 0.80: the largest fraction wins a tie
        fraction = round(0.80 + 0.005 * step, 3)
        error = median_error(rows, fraction)
        if best is None or error < best[1]:
            best = (fraction, error)
    assert best is not None
    return best


def main() -> int:
    for device, rows in sorted(fit_rows().items()):
        fraction, error = fit(rows)
        print(f"{device}: sustained_clock_fraction {fraction} (median |error| {error * 100:.1f}% over "
              f"{len(rows)} fit-split training runs; {median_error(rows, 1.0) * 100:.1f}% at the full clock)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
