"""Measured runs against the model: the kernel rows of kernel_rows.py per device and class, the
whole-model steps `calibrate` measured, the training, serving and encoder runs of the calibration
set (each predicted under the stack that ran it) and the training-memory studies; the fit and
report splits of each. The C++ core computes every prediction and error statistic; this module
reads rows and arranges the results (`accel-sim validate`). One module for the measured sets
(615 lines): each is a reader and a predictor of a few functions over the same device, system and
stack resolution."""

from __future__ import annotations

import csv
import functools
import importlib.resources
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accel_sim import _core, module_rows
from accel_sim.errors import UsageError
from accel_sim.kernel_rows import CLASSES, KernelRow, data_path, predict


def load_module_rows(path: str | Path | None = None) -> list[module_rows.ModuleRow]:
    """The rows of the kernels CSV that time a whole eager module (module_rows.py): costed by
    capturing the module, not by one kernel query."""
    p = Path(path) if path else data_path()
    if not p.is_file():
        raise UsageError(f"validation data not found: {p}")
    return list(_read_module_rows(str(p.resolve()), p.stat().st_mtime))


@functools.lru_cache(maxsize=8)
def _read_module_rows(path: str, mtime: float) -> tuple[module_rows.ModuleRow, ...]:
    with open(path, newline="", encoding="utf-8") as f:
        out = []
        for line, row in enumerate(csv.DictReader(f), 2):
            if not module_rows.describes(row):
                continue
            try:
                out.append(module_rows.module_row(row))
            except (KeyError, TypeError, ValueError) as e:
                raise UsageError(f"{path}: line {line}: {e}") from None
    return tuple(out)


@dataclass(frozen=True)
class ValidationLine:
    device: str
    kind: str
    calibrated: bool
    kernel: Any  # _core.ErrorStats
    roofline: Any


def end_to_end_path() -> Path:
    return Path(str(importlib.resources.files("accel_sim") / "data" / "validation" / "end_to_end.csv"))


def load_end_to_end(path: str | Path | None = None) -> list[dict]:
    """Measured whole-model steps (`accel-sim calibrate` on a GPU); none until measured."""
    p = Path(path) if path else end_to_end_path()
    if not p.is_file():
        if path:
            raise UsageError(f"end-to-end data not found: {p}")
        return []
    with open(p, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    needed = ("device", "model", "phase", "batch", "seq", "dtype", "measured_s", "split")
    for line, row in enumerate(rows, 2):
        missing = [c for c in needed if not row.get(c)]
        if missing:
            raise UsageError(f"{p}: line {line} lacks {', '.join(missing)}")
    return rows


_E2E_PRECISIONS = ("bf16", "fp16", "fp32", "amp-bf16", "amp-fp16")


def _row_model_spec(row: dict, what: str, dtype: str) -> Any:
    """The ModelSpec of a validation row: its shipped `model` config with the row's `overrides`
    (a JSON object of config fields, e.g. fewer layers or an MPT run's n_positions)."""
    import json

    from accel_sim.io.model_config import load_model_config, spec_from_hf_config

    config, where = load_model_config(row["model"])
    try:
        overrides = json.loads(row.get("overrides") or "{}")
    except ValueError:
        overrides = None
    if not isinstance(overrides, dict):
        raise UsageError(f"{what} {row.get('id', '?')}: overrides are not a JSON object")
    return spec_from_hf_config({**config, **overrides}, where, name=row["model"], dtype=dtype)


def _end_to_end_graph(row: dict) -> Any:
    """The builder's graph of a measured whole-model row: the shipped config with the row's
    `overrides` (fewer layers), its phase, shape and KV context, in the row's kernels (HF's
    eager modules, forward and backward as autograd runs them); for training AdamW, the row's
    recompute, and for "amp-bf16" / "amp-fp16" (fp32 weights under bf16 or fp16 autocast) bf16 or
    fp16 compute with fp32 master weights, gradients and states (a GradScaler's unscale and
    finite check, a few kernels per step, are not in the graph)."""
    from accel_sim.api import build_model_graph

    precision = row.get("precision") or row["dtype"]
    if precision not in _E2E_PRECISIONS:
        raise UsageError(f"end-to-end row {row.get('id', '?')}: unknown precision '{precision}' "
                         f"(known: {', '.join(_E2E_PRECISIONS)})")
    model = _row_model_spec(row, "end-to-end row", row["dtype"])
    train = row["phase"] == "train"
    keywords = dict(phase=row["phase"], batch=int(row["batch"]), seq=int(row["seq"]),
                    context=int(row.get("context") or 0),
                    kernels=row.get("kernels") or "hf-eager")
    if train:
        keywords.update(optimizer=row.get("optimizer") or "adamw", master_weights=precision.startswith("amp-"),
                        recompute=row.get("recompute") or "none")
    return build_model_graph(model, **keywords).graph


# The stack the measured whole-model rows ran: HF transformers' eager modules from Python.
E2E_STACK = "hf-accelerate"


def predict_end_to_end(row: dict, spec: Any, cost_model: str) -> Any:
    """The simulated step (`_core.SimulationResult`) of a measured whole-model row, with the host
    cost per kernel of the stack it ran (E2E_STACK)."""
    from accel_sim.io.stack_file import resolve_stack

    options = _core.SimulateOptions()
    options.cost_model = cost_model
    options.cost.host_overhead_per_kernel_s = resolve_stack(E2E_STACK).host_overhead_per_kernel_s
    return _core.simulate(_end_to_end_graph(row), spec, options)


@dataclass(frozen=True)
class EndToEndResult:
    row: dict
    kernel: Any  # _core.SimulationResult under the kernel model
    roofline_latency_s: float


def simulate_end_to_end(devices: dict[str, Any], rows: list[dict]) -> list[EndToEndResult]:
    """Each measured whole-model row on a known device, simulated once under each cost model;
    validate() and end_to_end_memory() read these."""
    return [EndToEndResult(r, predict_end_to_end(r, devices[r["device"]], "kernel"),
                           predict_end_to_end(r, devices[r["device"]], "roofline").latency_s)
            for r in rows if r["device"] in devices]


def end_to_end_memory(results: list[EndToEndResult], split: str) -> list[dict]:
    """Peak allocated bytes of each measured whole-model step (torch.cuda.max_memory_allocated)
    beside the builder's peak live bytes for the same step, on `split` (or all)."""
    out = []
    for res in results:
        row = res.row
        if (split != "all" and row["split"] != split) or float(row.get("peak_allocated_bytes") or 0) <= 0:
            continue
        measured = float(row["peak_allocated_bytes"])
        predicted = float(res.kernel.memory.peak_bytes)
        out.append({"id": row["id"], "device": row["device"], "model": row["model"], "phase": row["phase"],
                    "batch": int(row["batch"]), "seq": int(row["seq"]), "context": int(row.get("context") or 0),
                    "precision": row.get("precision") or row["dtype"], "recompute": row.get("recompute") or "none",
                    "overrides": row.get("overrides") or "", "measured_bytes": measured, "predicted_bytes": predicted,
                    "error": _core.error_stats([predicted], [measured]).median_signed_error})
    return out


def validate(devices: dict[str, Any], rows: list[KernelRow], split: str = "report",
             end_to_end: list[EndToEndResult] | None = None,
             modules: list[module_rows.ModuleRow] | None = None) -> list[ValidationLine]:
    """Error of the kernel model and of the roofline per device and class, on one split; the
    whole-model steps from simulate_end_to_end(), the eager-module rows from
    load_module_rows() (class "module")."""
    lines = []
    for device_id in sorted({m.device for m in modules or [] if m.split == split and m.device in devices}):
        spec = devices[device_id]
        mine = [m for m in modules or [] if m.device == device_id and m.split == split]
        measured = [m.measured_s for m in mine]
        lines.append(ValidationLine(
            device_id, "module", spec.kernel.calibrated,
            _core.error_stats([module_rows.predict(m, spec, "kernel") for m in mine], measured),
            _core.error_stats([module_rows.predict(m, spec, "roofline") for m in mine], measured)))
    for device_id in sorted({e.row["device"] for e in end_to_end or [] if e.row["split"] == split}):
        mine = [e for e in end_to_end or [] if e.row["device"] == device_id and e.row["split"] == split]
        measured = [float(e.row["measured_s"]) for e in mine]
        lines.append(ValidationLine(
            device_id, "end-to-end", devices[device_id].kernel.calibrated,
            _core.error_stats([e.kernel.latency_s for e in mine], measured),
            _core.error_stats([e.roofline_latency_s for e in mine], measured)))
    for device_id in sorted({r.device for r in rows}):
        spec = devices.get(device_id)
        if spec is None:
            continue
        for kind in CLASSES:
            mine = [r for r in rows if r.device == device_id and r.kind == kind and r.split == split]
            if not mine:
                continue
            measured = [r.measured_s for r in mine]
            lines.append(ValidationLine(
                device_id, kind, spec.kernel.calibrated,
                _core.error_stats(predict(mine, spec, "kernel"), measured),
                _core.error_stats(predict(mine, spec, "roofline"), measured)))
    return lines


def training_memory_path() -> Path:
    return Path(str(importlib.resources.files("accel_sim") / "data" / "validation" / "training_memory.csv"))


def load_training_memory(path: str | Path | None = None) -> list[dict]:
    """Measured memory of whole training runs (`validation/extract_memory.py`), report-only."""
    p = Path(path) if path else training_memory_path()
    if not p.is_file():
        raise UsageError(f"training-memory data not found: {p}")
    with open(p, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    needed = ("stack", "device", "model", "batch", "seq", "runtime_mib", "measured_mib")
    for line, row in enumerate(rows, 2):
        missing = [c for c in needed if not row.get(c)]
        if missing:
            raise UsageError(f"{p}: line {line} lacks {', '.join(missing)}")
    return rows


def predict_training_memory(row: dict) -> dict:
    """The builder's training step for a measured run, replayed through the caching allocator:
    what NVML shows once the run is over is the allocator's reserved segments (it keeps them)
    plus the CUDA context measured for that software stack (the row's runtime_mib).

    A sequence-classification fine-tune is built as the encoder without the MLM head (its
    pooler and 2-way classifier hold 0.1% of BERT-large's parameters); gradient accumulation
    runs micro-batches of `batch`, so one micro-step's memory is the step's. Precision "amp-fp16"
    (fp16 autocast over fp32 weights) is built as fp16 compute with fp32 master weights,
    gradients and states (validation/extract_memory.py says what that counts)."""
    from accel_sim.api import build_model_graph
    from accel_sim.io.stack_file import resolve_stack

    spec, precision = _fine_tune_spec(row)
    optimizer = row.get("optimizer") or "adamw"
    built = build_model_graph(spec, phase="train", batch=int(row["batch"]), seq=int(row["seq"]),
                              optimizer=optimizer, master_weights=precision == "amp-fp16",
                              recompute="full" if row.get("gradient_checkpointing") == "true" else "none",
                              eager_attention=row.get("attention") == "eager",
                              persistent_gradients=row.get("zero_grad") == "in_place",
                              optimizer_impl=resolve_stack(row["stack"]).training.optimizer_impl_for(optimizer))
    profile = _core.compute_memory_profile(built.graph)
    mib = 2**20
    return {"logical_mib": profile.peak_bytes / mib, "allocated_mib": profile.peak_allocated_bytes / mib,
            "reserved_mib": profile.peak_reserved_bytes / mib,
            "predicted_mib": profile.peak_reserved_bytes / mib + float(row["runtime_mib"])}


def _fine_tune_spec(row: dict) -> tuple[Any, str]:
    """(the ModelSpec, the precision) of a training-memory row: fp32, or amp-fp16 built as fp16
    compute; a sequence classifier without the MLM head, with the pooler."""
    from accel_sim.io.model_config import load_model_spec

    precision = row.get("precision") or "fp32"
    if precision not in ("fp32", "amp-fp16"):
        raise UsageError(f"training memory row {row.get('id', '?')}: unknown precision '{precision}' (known: fp32, amp-fp16)")
    spec = load_model_spec(row["model"], dtype="fp16" if precision == "amp-fp16" else "fp32")
    if "classification" in row.get("task", ""):
        spec.lm_head = spec.lm_head_transform = spec.lm_head_bias = False
        spec.pooler = True
    return spec, precision


def predict_fine_tune_throughput(row: dict) -> Any:
    """`accel-sim train`'s step (`_core.TrainingEstimate`) of a training-memory row's run on one GPU
    under the row's stack (the study's: hf-trainer-2021, eager attention, transformers' loop AdamW, the host's
    cost per kernel): `batch` sequences per micro-batch, `grad_accum` micro-batches per optimizer
    step, the row's optimizer, recomputation and zero_grad. One GPU has no collective, so the
    system (DGX A100, its device replaced by the row's) only carries the device."""
    from accel_sim.commands.train import apply_training_stack
    from accel_sim.device import resolve_device
    from accel_sim.io.stack_file import resolve_stack
    from accel_sim.io.system_file import resolve_system

    spec, precision = _fine_tune_spec(row)
    chosen = resolve_device(row["device"], [])
    stack = resolve_stack(row["stack"])
    base = _core.BuildOptions()
    base.seq = int(row["seq"])
    base.master_weights = precision == "amp-fp16"
    base.optimizer = getattr(_core.Optimizer, row.get("optimizer") or "adamw")
    base.recompute = _core.Recompute.full if row.get("gradient_checkpointing") == "true" else _core.Recompute.none
    base.persistent_gradients = row.get("zero_grad") == "in_place"
    options = _core.SimulateOptions()
    options.cost_model = "kernel"
    apply_training_stack(stack, base, options, chosen.entry.architecture, row.get("attention") or None)
    layout = _core.ParallelLayout()
    layout.micro_batch = int(row["batch"])
    layout.global_batch = int(row["batch"]) * int(row.get("grad_accum") or 1)
    return _core.estimate_training(spec, base, layout, chosen.spec, resolve_system("dgx_a100").spec, options)


def training_runs_path() -> Path:
    return Path(str(importlib.resources.files("accel_sim") / "data" / "validation" / "training_runs.csv"))


def load_training_runs(split: str = "all") -> list[dict]:
    """The published training runs (validation/extract_training_runs.py) of `split`: report, fit
    (Korthikanti et al.'s A100 iterations, which validation/fit_training_clock.py fits on) or all."""
    with open(training_runs_path(), newline="", encoding="utf-8") as f:
        return [r for r in csv.DictReader(f) if split == "all" or r["split"] == split]


# The reason validation/extract_training_runs.py gives the training rows whose runs are the
# training-memory rows' (their throughput is predicted there: predict_fine_tune_throughput).
TRAINING_ROWS_WITH_MEMORY = "predicted with the training-memory rows of the same runs"


def training_runs_left_out() -> list[tuple[str, int]]:
    """The calibration set's training rows validation/extract_training_runs.py does not turn into
    runs, grouped by its reason (python/accel_sim/data/validation/training_runs_skipped.csv), most
    rows first; those predicted with the training-memory rows are not among them
    (training_rows_with_memory)."""
    counts: dict[str, int] = {}
    for reason in _skipped_training_reasons():
        if not reason.startswith(TRAINING_ROWS_WITH_MEMORY):
            counts[reason] = counts.get(reason, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))


def training_rows_with_memory() -> int:
    """How many of the calibration set's training rows are the throughput of the training-memory
    rows' runs."""
    return sum(reason.startswith(TRAINING_ROWS_WITH_MEMORY) for reason in _skipped_training_reasons())


def _skipped_training_reasons() -> list[str]:
    with open(training_runs_path().with_name("training_runs_skipped.csv"), newline="", encoding="utf-8") as f:
        return [row["reason"] for row in csv.DictReader(f)]


def predict_training_run(row: dict, clock_fraction: float | None = None) -> Any:
    """`accel-sim train`'s estimate for a published run (validation/extract_training_runs.py) under
    the row's stack (data/stacks/*.yaml): megatron-core for the Megatron-LM / NeMo rows (what NeMo's
    performance recipes run: sequence parallelism with TP, no recomputation, the distributed
    optimizer), llm-foundry-2023 for MosaicML's FSDP benchmark (flash-attn 1.x). The row names its device where the
    system's own is not the one measured, its ZeRO stage where the stack's default is not the one
    run, its recomputation, and config overrides (an MPT run's n_positions); the row's precision
    (bf16-mixed where it is unstated). Sequence parallelism goes with TP unless the row says
    otherwise (Korthikanti et al.'s full-recomputation baselines ran without it). `clock_fraction`
    (validation/fit_training_clock.py) runs the step at that share of the device's clock instead of
    its sustained clock."""
    from accel_sim.commands.train import apply_training_stack
    from accel_sim.io.stack_file import resolve_stack

    entry, chosen = _run_device(row)
    system = entry.spec
    device = chosen.spec
    precision = row["precision"] if row["precision"] != "unstated" else "bf16-mixed"
    spec = _row_model_spec(row, "training run", "fp16" if precision.startswith("fp16") else "bf16")
    layout = _core.ParallelLayout()
    for name in ("tp", "pp", "cp", "dp"):
        setattr(layout, name, int(row[name]))
    layout.ep = int(row.get("ep") or 1)
    sp = row.get("sequence_parallel") or ""
    if sp not in ("", "true", "false"):
        raise UsageError(f"training run {row.get('id', '?')}: sequence_parallel must be true, false or empty, got {sp!r}")
    layout.sequence_parallel = int(row["tp"]) > 1 and sp != "false"
    layout.micro_batch, layout.global_batch = int(row["micro_batch"]), int(row["global_batch"])
    layout.virtual_stages = int(row["virtual_stages"])
    base = _core.BuildOptions()
    base.seq = int(row["seq"])
    base.fp8_gemms = precision == "fp8-mixed"
    options = _core.SimulateOptions()
    options.cost_model = "kernel"
    stack = resolve_stack(row.get("stack") or "megatron-core")
    t = stack.training
    # The row's recomputation as its stack runs it (`selective` is the stack's own), on every
    # `recompute_interval`-th layer (torchtitan's selective_ac_option N).
    policy = t.recompute_for(row.get("recompute") or "none")
    if policy is None:
        raise UsageError(f"training run {row.get('id', '?')}: {stack.id} has no selective recomputation")
    base.recompute = policy
    base.recompute_interval = int(row.get("recompute_interval") or 1)
    layout.zero = int(row["zero"]) if row.get("zero") else t.zero
    layout.overlap_grad_reduce, layout.overlap_param_gather = t.overlap_grad_reduce, t.overlap_param_gather
    if row.get("lora_rank"):  # a LoRA fine-tune: the row's adapters (the stack lays them out)
        base.lora_rank = int(row["lora_rank"])
        base.lora_targets = (row.get("lora_targets") or "").split()
    apply_training_stack(stack, base, options, chosen.architecture)
    options.fuse_elementwise = row.get("compile") == "true"  # torch.compile: `train --compile`
    if row.get("tp_overlap") == "true":  # torchtitan's async TP: `train --tp-overlap`
        options.overlap_tp_comm = True
    if clock_fraction is not None:
        options.cost.clock_hz = clock_fraction * device.clock_hz
    return _core.estimate_training(spec, base, layout, device, system, options)


def _run_device(row: dict) -> tuple[Any, Any]:
    """(the system entry, the DeviceEntry) a training run ran on: the row's device, else its
    system's variant (device_overrides), else the device the system names."""
    from accel_sim.device import resolve_device
    from accel_sim.io.system_file import resolve_system

    entry = resolve_system(row["system"])
    if row.get("device"):
        return entry, resolve_device(row["device"], []).entry
    if entry.device_variant is not None:
        return entry, entry.device_variant
    return entry, resolve_device(entry.spec.device, []).entry


def runtime_reserved_bytes(row: dict) -> float:
    """The CUDA context and libraries' memory `train` counts on the training run `row`'s device
    (DeviceSpec::runtime_reserved_bytes), which PyTorch's allocator statistics leave out."""
    return _run_device(row)[1].spec.runtime_reserved_bytes


def encoder_runs_path() -> Path:
    return Path(str(importlib.resources.files("accel_sim") / "data" / "validation" / "encoder_runs.csv"))


# The stack the encoder rows ran: TensorFlow 1 with XLA (python/accel_sim/data/stacks/tensorflow1-xla.yaml).
ENCODER_STACK = "tensorflow1-xla"


def predict_encoder_run(row: dict, host_overhead_per_kernel_s: float | None = None) -> Any:
    """The simulated forward pass (`_core.SimulationResult`) of a published BERT inference row
    (validation/extract_encoder.py): the shipped config without its masked-LM head (the rows run
    SQuAD's [hidden, 2] QA head), the row's batch and sequence length, in the row's precision
    (tf32: fp32 data on TF32 tensor cores), under ENCODER_STACK: its attention kernel (the BERT
    reference implementation's unfused core, batched GEMMs around a softmax over the materialised
    scores), elementwise chains fused into single kernels (XLA's fusion), and each kernel issued
    at the stack's host cost per kernel (`host_overhead_per_kernel_s` replaces it; the fit of
    validation/fit_encoder_host.py passes its candidates)."""
    from accel_sim.api import build_model_graph
    from accel_sim.device import resolve_device
    from accel_sim.io.stack_file import resolve_stack

    precision = row["precision"]
    if precision not in ("fp16", "fp32", "tf32"):
        raise UsageError(f"encoder run {row.get('id', '?')}: unknown precision '{precision}' (known: fp16, fp32, tf32)")
    dtype = "fp16" if precision == "fp16" else "fp32"
    spec = _row_model_spec(row, "encoder run", dtype)
    spec.lm_head = False
    spec.lm_head_transform = False
    graph = build_model_graph(spec, phase="prefill", batch=int(row["batch"]), seq=int(row["seq"]),
                              eager_attention=True).graph
    device = resolve_device(row["device"], [])
    stack = resolve_stack(ENCODER_STACK)
    options = _core.SimulateOptions()
    options.cost_model = "kernel"
    options.fuse_elementwise = True
    options.cost.allow_tf32 = precision == "tf32"
    options.cost.attention_impl = getattr(_core.AttentionImpl, stack.training.attention_for(device.entry.architecture))
    options.cost.host_overhead_per_kernel_s = (stack.host_overhead_per_kernel_s if host_overhead_per_kernel_s is None
                                               else host_overhead_per_kernel_s)
    return _core.simulate(graph, device.spec, options)


def load_encoder_runs(split: str = "all") -> list[dict]:
    """The encoder rows of `split` (fit, report or all)."""
    with open(encoder_runs_path(), newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    return [r for r in rows if split == "all" or r["split"] == split]


def encoder_validation(split: str = "report") -> tuple[list[dict], list[dict]]:
    """Every encoder run of `split` predicted, and their errors per device and precision."""
    runs = []
    for row in load_encoder_runs(split):
        predicted = predict_encoder_run(row).latency_s
        measured = float(row["measured_ms"]) / 1e3
        runs.append({"id": row["id"], "device": row["device"], "model": row["model"], "batch": int(row["batch"]),
                     "seq": int(row["seq"]), "precision": row["precision"], "metric": row["metric"],
                     "split": row["split"], "measured_s": measured, "predicted_s": predicted,
                     "error": _core.error_stats([predicted], [measured]).median_signed_error, "source": row["source"]})
    groups = []
    for key in sorted({(r["device"], r["precision"]) for r in runs}):
        g = [r for r in runs if (r["device"], r["precision"]) == key]
        st = _core.error_stats([r["predicted_s"] for r in g], [r["measured_s"] for r in g])
        groups.append({"device": key[0], "precision": key[1], "rows": st.rows, "median_abs_error": st.median_abs_error,
                       "max_abs_error": st.max_abs_error, "median_signed_error": st.median_signed_error})
    return runs, groups


def serving_runs_path() -> Path:
    return Path(str(importlib.resources.files("accel_sim") / "data" / "validation" / "serving_runs.csv"))


_SERVING_SYSTEMS = {"h100_sxm": "dgx_h100", "a100_80gb": "dgx_a100", "mi300x": "mi300x_8"}


def _serving_setup(row: dict) -> tuple:
    """(model spec, device spec, ReplicaConfig, SchedulerConfig, WorkloadSpec, stack) of a published
    inference measurement as predict_serving_run runs it (its docstring says how)."""
    from accel_sim.device import resolve_device
    from accel_sim.io.model_config import load_model_spec
    from accel_sim.io.stack_file import configure_engine, resolve_stack
    from accel_sim.io.system_file import resolve_system

    if row["kind"] == "offline_throughput" and row.get("counts") not in ("output", "total"):
        raise UsageError(f"serving run {row.get('id', '?')}: counts {row.get('counts')!r} is not 'output' or 'total'")
    chosen = resolve_device(row["device"], [])
    device, arch = chosen.spec, chosen.entry.architecture
    engine = resolve_stack(row["stack"], kind="serving")
    st = engine.serving
    fp8 = row["precision"] == "fp8"
    kv = row["kv_cache_dtype"] if row["kv_cache_dtype"] not in ("", "unstated") else ("fp8" if fp8 else None)
    spec = load_model_spec(row["model"], dtype="fp16" if row["precision"] == "fp16" else "bf16", kv_dtype=kv)
    replica = _core.ReplicaConfig()
    replica.tp = int(row["tp"])
    if replica.tp > 1:
        replica.system = resolve_system(_SERVING_SYSTEMS[row["device"]]).spec
    build = _core.BuildOptions()
    build.fp8_gemms = fp8
    replica.build = build
    if st.block_size:
        replica.block_size = st.block_size
    if st.gpu_memory_utilization:
        replica.gpu_memory_utilization = st.gpu_memory_utilization
    options = _core.SimulateOptions()
    options.cost_model = "kernel"
    configure_engine(options, replica, st.engine_for(arch), engine.host_overhead_per_kernel_s)
    replica.simulate = options
    batch, n = int(row["batch"]), int(row["num_requests"] or row["batch"])
    isl, osl = int(row["input_len"]), int(row["output_len"])
    sched = _core.SchedulerConfig()
    sched.kind = getattr(_core.SchedulerKind, st.scheduler)
    sched.max_seqs = batch
    if st.scheduler == "sarathi":  # vLLM V1 under the offline LLM class
        large = device.memory_bytes >= 70 * 2**30 and "a100" not in row["device"]
        sched.chunk = 16384 if large else 8192
        replica.max_batched_tokens = sched.chunk
    else:
        sched.max_batched_tokens = max(st.max_batched_tokens or sched.max_batched_tokens, isl)
        replica.max_batched_tokens = sched.max_batched_tokens
    wspec = _core.WorkloadSpec()
    wspec.requests, wspec.qps = n, 0.0  # all at t = 0
    lengths = []
    for value in (isl, osl):
        ls = _core.LengthSpec()
        ls.kind, ls.value = _core.LengthDistribution.fixed, value
        lengths.append(ls)
    wspec.input, wspec.output = lengths
    return spec, device, replica, sched, wspec, engine


def predict_serving_run(row: dict) -> dict:
    """`accel-sim serve`'s figure for a published inference measurement
    (validation/extract_serving.py), every request arriving at once as the benchmarks submit them,
    under the serving stack the row ran (its `stack` column, python/accel_sim/data/stacks/): the
    prefill attention kernel and the decode kernel's KV reads on the row's device, CUDA graphs, the
    scheduler policy and its token budget:

    static_throughput   TensorRT-LLM gptSessionBenchmark: one static batch of `batch` requests,
                        output tokens/s (per GPU when the row is);
    ttft                TensorRT-LLM, batch 1 with one output token: the time to the first token;
    batch_latency       vLLM benchmark_latency: the batch's end-to-end latency;
    offline_throughput  vLLM benchmark_throughput: `num_requests` prompts under max_num_seqs =
                        `batch`; tokens/s of the row's `counts`: AMD's unlabelled
                        figure is read as output tokens/s (validation/extract_serving.py says
                        why), prompt + output tokens where a row counts "total".
    Both vLLM benchmarks run the offline LLM class, whose V1 token budget is 16,384 on GPUs of
    70 GiB or more other than A100s and 8,192 below (vllm/engine/arg_utils.py,
    _set_default_args_v1); V0's prefill budget is max(max_model_len, 2048) (vllm/config.py), at
    least the prompt here. fp8 rows run the blocks' GEMMs in fp8 (BuildOptions.fp8_gemms) with the
    row's KV dtype (an "unstated" one as the weights')."""
    spec, device, replica, sched, wspec, _ = _serving_setup(row)
    costs = _core.IterationModel(spec, device, replica)
    config = _core.ServeConfig()
    config.scheduler = sched
    r = _core.simulate_serving(costs, _core.generate_workload(wspec), config)
    kind = row["kind"]
    if kind == "static_throughput":
        value = r.output_tokens_per_s_per_gpu if row["per_gpu"] == "1" else r.output_tokens_per_s
    elif kind == "ttft":
        value = r.ttft.p50
    elif kind == "batch_latency":
        value = r.makespan_s
    else:
        value = r.output_tokens_per_s if row["counts"] == "output" else r.total_tokens_per_s
    return {"predicted": value, "completed": r.completed, "rejected": r.rejected, "preemptions": r.preemptions,
            "kv_blocks": costs.memory.kv_blocks}


def serving_validation() -> list[dict]:
    """Every row of serving_runs.csv with its prediction and error (report-only rows)."""
    import csv

    out = []
    with open(serving_runs_path(), newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            scale = {"ms": 1e-3}.get(row["unit"], 1.0)  # ttft rows are in ms, the rest in s or tok/s
            measured = float(row["measured"]) * scale
            p = predict_serving_run(row)
            out.append({k: row[k] for k in ("id", "kind", "model", "device", "tp", "batch", "num_requests", "input_len",
                                             "output_len", "precision", "stack", "counts", "per_gpu", "source")}
                       | {"unit": "s" if scale != 1.0 else row["unit"], "measured": measured,
                          "predicted": p["predicted"], "error": p["predicted"] / measured - 1.0,
                          "preemptions": p["preemptions"]})
    return out


# The kinds of serving rows that describe a deployment at its throughput (the others time one
# batch or one request).
_DEPLOYMENT_KINDS = ("static_throughput", "offline_throughput")


def serving_plan_checks() -> list[dict]:
    """Each published throughput deployment (static_throughput and offline_throughput rows) as
    the serving planner's search of its one layout (core plan_serving): the measured layout must
    be feasible there (it ran), and the planner's throughput must be serve's. The planner runs
    the row's engine, quantization, TP, batch cap and token budget under the throughput objective
    with a TPOT target of an hour, which never binds: its rate search then ends with every request
    arriving at once, as the benchmarks submitted them."""
    import csv

    out = []
    with open(serving_runs_path(), newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["kind"] in _DEPLOYMENT_KINDS]
    for row in rows:
        spec, device, replica, sched, wspec, stack = _serving_setup(row)
        e = _core.ServePlanEngine()
        e.label, e.stack, e.device, e.replica, e.scheduler = f"{device.id} {stack.id}", stack.id, device, replica, sched
        space = _core.ServePlanSpace()
        space.tp, space.pp, space.dp_attention = [replica.tp], [1], [1]
        space.quantizations = [_core.ServeQuantization.fp8 if row["precision"] == "fp8" else _core.ServeQuantization.bf16]
        space.max_seqs = [sched.max_seqs]
        space.token_budgets = [sched.chunk if sched.kind == _core.SchedulerKind.sarathi else sched.max_batched_tokens]
        space.disaggregated, space.speculative, space.max_gpus = [], [False], replica.tp
        q = _core.ServePlanRequest()
        q.model, q.engines, q.space, q.workload = spec, [e], space, wspec
        q.objective = _core.ServeObjective.throughput
        q.slo_tpot_s = 3600.0
        q.verify, q.threads = 0, 1
        layout = _core.plan_serving(q).layouts[0]
        per_gpu = layout.output_tokens_per_s_per_gpu
        isl, osl = int(row["input_len"]), int(row["output_len"])
        if row["kind"] == "static_throughput" and row["per_gpu"] != "1":
            predicted = per_gpu * replica.tp
        elif row["kind"] == "offline_throughput":
            predicted = per_gpu * replica.tp * ((isl + osl) / osl if row["counts"] == "total" else 1.0)
        else:
            predicted = per_gpu
        measured = float(row["measured"])
        ranked = layout.verdict.name in ("best", "feasible")
        out.append({"id": row["id"], "kind": row["kind"], "model": row["model"], "device": row["device"],
                    "tp": replica.tp, "batch": sched.max_seqs, "precision": row["precision"], "stack": stack.id,
                    "verdict": layout.verdict.name, "reason": layout.reason, "measured": measured,
                    "predicted": predicted if ranked else None,
                    "error": predicted / measured - 1.0 if ranked else None})
    return out


# The message size of a figure that gives none: the large-message plateau nccl-tests reports.
PLATEAU_BYTES = 8e9


def collective_validation() -> list[dict]:
    """Every published bus bandwidth in the system files against the collective model, at the
    row's message size (nccl-tests' size), or 8 GB for a large-message figure."""
    from accel_sim.commands.systems import ALGORITHMS
    from accel_sim.io.system_file import builtin_systems

    rows = []
    for e in builtin_systems():
        for m in e.measured:
            q = _core.CollectiveQuery()
            q.kind = getattr(_core.CollectiveKind, m["collective"])
            q.bytes, q.ranks = m["bytes"] or PLATEAU_BYTES, m["gpus"]
            if m["algorithm"] in ALGORITHMS:
                q.algorithm = getattr(_core.CollectiveAlgorithm, m["algorithm"])
            est = _core.estimate_collective(q, e.spec)
            predicted = est.busbw_bytes_per_s / 1e9
            rows.append({"system": e.spec.id, "collective": m["collective"], "gpus": m["gpus"],
                         "algorithm": m["algorithm"], "bytes": q.bytes, "measured_busbw_gbs": m["busbw_gbs"],
                         "predicted_busbw_gbs": predicted,
                         "error": _core.error_stats([predicted], [m["busbw_gbs"]]).median_signed_error,
                         "split": m["split"], "source": m["source"]})
    return rows
