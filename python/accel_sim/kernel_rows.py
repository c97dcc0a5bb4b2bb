"""Measured kernels as rows the kernel model describes: the data, its fit and report splits, the
prediction of each row and the constants a device's fit split gives (`accel-sim validate`,
`calibrate`), and the error bands that `simulate` quotes from them (class_errors).

The data (`data/validation/kernels.csv`, produced by `validation/extract_published.py` from the
published measurements with their sources) holds one measured kernel per row, each assigned to
`fit` (used by `accel-sim calibrate --data` to fit a device's kernel constants) or `report`
(used only by `accel-sim validate` to report error). The C++ core times every row and computes
the error statistics; this module reads rows and arranges the results.

Rows the kernel model does not describe are left out and counted: attention implementations it
has no constants for (Triton tutorials, FlashAttention-4), Liger's "full" timings, which
include per-call overheads of a Python benchmark loop rather than one forward and one backward,
the unfused add-then-RMSNorm baseline of Liger's fused_add_rms_norm benchmark (two kernels) and
a Liger norm's backward (per-block weight-gradient partials, then their sum), which are not one
kernel. Whole eager PyTorch modules (HF's LlamaRMSNorm is seven kernels; torch.compile's
backward graphs) are rows of their own, costed by capturing the module (module_rows.py,
validation.load_module_rows()).

Measurements are device times, so predictions leave out the host launch waits of a model's eager
loop. The `timing` column says how each was taken: `events` (one launch between CUDA events after
an L2-flushing write: triton.testing.do_bench, `accel-sim calibrate`), `graph` (replays of a CUDA
graph of many launches: do_bench_cudagraph, validation/gpu/measure_gemm_stream.py), `loop` (the
mean of back-to-back launches: torch.utils.benchmark) or `profiler` (the profiler's kernel
durations). A kernel timed alone (`events`; also when the column is absent) shows its launch, ramp
and drain in full, which a stream overlaps: its prediction adds the device's alone overhead
(KernelConstants::alone_kernel_overhead_s, alone_stream_overhead_s).
"""

from __future__ import annotations

import csv
import functools
import importlib.resources
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterable

from accel_sim import _core, module_rows
from accel_sim.errors import UsageError
from accel_sim.io.stack_file import ATTENTION_KERNELS


CLASSES = ("gemm", "attention", "memory", "module", "end-to-end")


_IMPLS = set(ATTENTION_KERNELS)


# Data and command-line dtype names -> core dtypes (tf32: fp32 data on TF32 tensor cores).
DTYPES = {"bf16": "bf16", "fp16": "fp16", "fp32": "fp32", "fp8": "fp8_e4m3", "tf32": "fp32"}


TIMINGS = ("events", "graph", "loop", "profiler")


@dataclass(frozen=True)
class KernelRow:
    id: str
    kind: str  # gemm | attention | memory
    device: str
    split: str  # fit | report
    query: Any  # _core.KernelQuery
    measured_s: float
    source: str
    label: str  # a short description for tables


def data_path() -> Path:
    return Path(str(importlib.resources.files("accel_sim") / "data" / "validation" / "kernels.csv"))


def _int(row: dict, key: str, default: int = 0) -> int:
    value = row.get(key, "")
    return int(float(value)) if value not in ("", None) else default


def _query(row: dict) -> tuple[Any, str] | None:
    """The core query of a row, or None when the kernel model does not describe it."""
    q = _core.KernelQuery()
    q.dtype = _core.parse_dtype(DTYPES[row["dtype"]])
    kind = row["kind"]
    if kind == "gemm":
        if row["impl"] == "cutlass_actquant":  # the timing includes a quantization kernel
            return None
        q.kind = _core.KernelKind.matmul
        q.m, q.n, q.k, q.batch = _int(row, "m"), _int(row, "n"), _int(row, "k"), _int(row, "batch", 1)
        return q, f"{row['op']} {q.m}x{q.n}x{q.k}" + (f" x{q.batch}" if q.batch > 1 else "")
    if kind == "attention":
        if row["impl"] not in _IMPLS:
            return None
        q.kind = _core.KernelKind.attention
        q.impl = getattr(_core.AttentionImpl, row["impl"])
        q.batch, q.heads = _int(row, "batch"), _int(row, "heads")
        q.kv_heads = _int(row, "kv_heads", q.heads)
        q.seq_q, q.seq_k, q.head_dim = _int(row, "seq_q"), _int(row, "seq_k"), _int(row, "head_dim")
        q.causal = row["causal"].lower() == "true"
        direction = row["direction"]
        q.forward = direction in ("forward", "forward+backward")
        q.backward = direction in ("backward", "forward+backward")
        if q.impl == _core.AttentionImpl.eager and q.backward:
            return None
        # `accel-sim calibrate` and validation/gpu/measure_train_paths.py time
        # F.scaled_dot_product_attention on contiguous [batch, heads, seq, dim] tensors and say so
        # in the notes: FlashAttention-2's backward then copies O and dO first.
        q.heads_first_inputs = row.get("notes", "").startswith("F.scaled_dot_product_attention")
        return q, f"{row['impl']} {direction} b{q.batch} h{q.heads} s{q.seq_q} d{q.head_dim}" + (" causal" if q.causal else "")
    if kind == "memory":
        # Not one kernel: Liger's "full" timings, HF's eager modules, the eager torch baselines of
        # the Megatron kernels (RMSNorm's pow, mean, rsqrt and products; SwiGLU's silu and
        # product) and Megatron-LM's SwiGLU (a TorchScript function: whether it runs fused
        # depends on the profiling executor; its measured backward takes 5x one pass), the unfused add-then-norm baseline (torch's add, then Liger's RMSNorm), a
        # compiled backward graph, and a norm's backward (a kernel writing per-block
        # weight-gradient partials, then their sum).
        if (row["direction"] not in ("forward", "backward") or row["impl"] in ("huggingface", "liger_unfused_add")
                or (row["impl"] == "torch" and row["op"].startswith("megatron_"))
                or (row["impl"] == "megatron" and row["op"] == "megatron_swiglu")
                or (row["direction"] == "backward" and (row["impl"] == "torch_compile" or "norm" in row["op"]))):
            return None
        q.kind = _core.KernelKind.memory
        q.op = row["op"]
        q.bytes = float(row["bytes"])
        q.elements = float(row["elements"] or 0)
        q.aten_kernel = row["impl"] == "torch"  # PyTorch eager's own kernel, not a fused replacement
        return q, f"{row['op']} {row['impl']} {row['direction']} {q.bytes / 1e6:.1f} MB"
    return None


def load_rows(path: str | Path | None = None) -> tuple[list[KernelRow], dict[str, int]]:
    """All rows the kernel model describes, and the number left out per reason."""
    p = Path(path) if path else data_path()
    if not p.is_file():
        raise UsageError(f"validation data not found: {p}")
    rows, skipped = _read_rows(str(p.resolve()), p.stat().st_mtime)
    return list(rows), dict(skipped)


@functools.lru_cache(maxsize=8)
def _read_rows(path: str, mtime: float) -> tuple[tuple[KernelRow, ...], tuple[tuple[str, int], ...]]:
    """Parses a kernels CSV once per file version (latency bands read it on every report)."""
    rows, skipped = [], {}
    with open(path, newline="", encoding="utf-8") as f:
        for line, row in enumerate(csv.DictReader(f), 2):
            try:
                if module_rows.describes(row):  # a whole eager module: load_module_rows()
                    continue
                made = _query(row) if row["dtype"] in DTYPES else None
                if made is None:
                    reason = f"{row['kind']} {row['impl'] or row['op']} {row['direction']}".strip()
                    skipped[reason] = skipped.get(reason, 0) + 1
                    continue
                query, label = made
                timing = row.get("timing") or "events"
                if timing not in TIMINGS:
                    raise ValueError(f"timing {timing!r} is not one of {', '.join(TIMINGS)}")
                query.timed_alone = timing == "events"
                if timing != "events":
                    label += f" ({timing})"
                rows.append(KernelRow(row["id"], row["kind"], row["device"], row["split"], query,
                                      float(row["measured_s"]), row["source"], label))
            except KeyError as e:
                raise UsageError(f"{path}: line {line} lacks the column {e}") from None
            except (TypeError, ValueError) as e:
                raise UsageError(f"{path}: line {line}: {e}") from None
    return tuple(rows), tuple(skipped.items())


def predict(rows: Iterable[KernelRow], spec: Any, cost_model: str) -> list[float]:
    options = _core.CostOptions()
    options.include_launch_overhead = False
    return [_core.estimate_kernel(r.query, spec, cost_model, options).time_s for r in rows]


def fit_device(spec: Any, rows: list[KernelRow], keep: tuple[str, ...] = ()) -> Any:
    """Kernel constants fitted on the device's `fit` rows (the core's grid search, the sustained
    clock fraction last); those named in `keep` hold the device's values."""
    mine = [r for r in rows if r.device == spec.id and r.split == "fit"]
    try:
        fitted = _core.fit_kernel_constants([r.query for r in mine], [r.measured_s for r in mine], spec, list(keep))
    except ValueError as e:
        raise UsageError(str(e)) from None
    return fitted, len(mine)


_BAND_CACHE: dict[tuple[str, str], tuple[Any, str]] = {}


# Band of a class no device has measurements for: the top of the error reported for uncalibrated
# roofline baselines (16-52% in NeuSight's artefact summary, sitar-lab/NeuSight
# scripts/asplos/summary/summary.csv, arXiv 2407.13853; 22-28% per kernel in a secondary summary of
# KernelSight-LM).
_UNMEASURED_BAND = 0.5


@functools.lru_cache(maxsize=16)
def _widest_p90(kind: str, cost_model: str) -> float:
    """The largest p90 |error| of a class over the measured devices (report split)."""
    from accel_sim.device import resolve_device

    rows, _ = load_rows()
    report = [r for r in rows if r.split == "report" and r.kind == kind]
    p90s = []
    for device_id in sorted({r.device for r in report}):
        spec = resolve_device(device_id, []).spec
        theirs = [r for r in report if r.device == device_id]
        p90s.append(_core.error_stats(predict(theirs, spec, cost_model), [r.measured_s for r in theirs]).p90_abs_error)
    return max(p90s, default=_UNMEASURED_BAND)


def class_errors(spec: Any, cost_model: str) -> tuple[Any, str]:
    """The measured error per op class of `cost_model` on this device, for latency bands.

    Median |error| on the report split (rows never used for fitting) where the device has rows
    of that class; otherwise the largest p90 any measured device shows for the class, and the
    basis says "uncalibrated". Returns (_core.ClassErrors, basis)."""
    key = (spec.id, cost_model)
    if key in _BAND_CACHE:
        return _BAND_CACHE[key]
    rows, _ = load_rows()
    report = [r for r in rows if r.split == "report"]
    errors, measured, fallback = _core.ClassErrors(), [], []
    for kind, field in (("gemm", "gemm"), ("attention", "attention"), ("memory", "memory")):
        mine = [r for r in report if r.device == spec.id and r.kind == kind]
        if mine and spec.kernel.calibrated:
            stats = _core.error_stats(predict(mine, spec, cost_model), [r.measured_s for r in mine])
            setattr(errors, field, stats.median_abs_error)
            measured.append(kind)
            continue
        setattr(errors, field, _widest_p90(kind, cost_model))
        fallback.append(kind)
    if not fallback:
        basis = "measured on this device"
    elif not measured:
        basis = "uncalibrated"
    else:
        basis = f"measured for {', '.join(measured)}; uncalibrated for {', '.join(fallback)}"
    _BAND_CACHE[key] = (errors, basis)
    return errors, basis
