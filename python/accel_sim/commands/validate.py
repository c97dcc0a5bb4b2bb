"""`accel-sim validate`: the model against every measured number of the calibration set it can
express, on the fit or the report split: kernels per device and class (kernel_rows.py), whole-
model steps and eager modules, collectives, training runs and their memory, serving runs and
encoder runs (validation.py). accel_sim.report.validation renders the result."""

from __future__ import annotations

import argparse
import importlib.util
from dataclasses import dataclass, field
from typing import Any, Callable


@dataclass
class ValidationRun:
    """What `validate` found, section by section; to_dict() is `validate --json`, text() its text.
    Each list holds one dict per measured row (prediction, measurement, error, source)."""

    args: Any
    rows: int                       # measured kernels the kernel model describes
    skipped: dict                   # kernel rows left out, by reason
    lines: list                     # (split, ValidationLine): kernel and roofline error per device and class
    unmeasured: list                # devices without kernel measurements
    memory: list                    # training-memory studies
    step_memory: list               # whole-model steps' peak memory
    collectives: list               # bus bandwidths of the system files
    runs: list                      # training runs of the split
    all_runs: int                   # training runs of both splits
    left_out: list                  # (reason, rows) of training rows not evaluated
    with_memory: int                # training-memory rows evaluated for their samples/s
    run_stats: Any                  # the core's ErrorStats over the predicted runs
    run_families: list              # per stack and device
    serving: list
    serving_summary: dict           # per serving metric
    encoder: list
    encoder_groups: list            # per device and precision
    stats: dict = field(default_factory=dict)  # ErrorStats of step_memory, the runs' memory, encoder
    paths: dict = field(default_factory=dict)  # the data files each section read
    serving_plans: list = field(default_factory=list)  # the throughput deployments as serve-plan searches

    def to_dict(self) -> dict:
        from accel_sim.report.validation import validation_json

        return validation_json(self)

    def text(self) -> str:
        from accel_sim.report.validation import validation_text

        return validation_text(self)


def devices_of(ids: set[str]) -> dict[str, Any]:
    """The device specs of `ids` that ship; a row for a device that does not is left out."""
    from accel_sim.device import resolve_device

    out = {}
    for device_id in sorted(ids):
        try:
            out[device_id] = resolve_device(device_id, []).spec
        except Exception:  # noqa: BLE001 - a row for a device we do not ship is reported as such
            continue
    return out


def validate(args: argparse.Namespace, progress: Callable[[int, int], None] | None = None) -> ValidationRun:
    """`validate` in five stages (kernels, memory, collectives, training runs, serving), each
    reported to `progress(done, total)`."""
    from accel_sim import _core, kernel_rows, validation

    progress = progress or (lambda done, total: None)
    stages = 5
    rows, skipped = kernel_rows.load_rows(args.data)
    end_to_end = validation.load_end_to_end(args.e2e_data)
    devices = devices_of({r.device for r in rows} | {r["device"] for r in end_to_end})
    splits = ("fit", "report") if args.split == "all" else (args.split,)
    steps = validation.simulate_end_to_end(devices, end_to_end)  # each measured step simulated once
    modules = validation.load_module_rows(args.data)
    if modules and not all(importlib.util.find_spec(m) for m in ("torch", "transformers")):
        skipped["eager modules (capturing them needs torch and transformers)"] = len(modules)
        modules = []
    devices.update(devices_of({m.device for m in modules} - set(devices)))
    lines = []
    for split in splits:
        lines += [(split, line) for line in validation.validate(devices, rows, split, steps, modules)]
    from accel_sim.device import catalog

    unmeasured = sorted(e.spec.id for e in catalog().entries if e.spec.id not in devices)
    step_memory = validation.end_to_end_memory(steps, args.split)
    progress(1, stages)
    memory_rows = validation.load_training_memory() if args.split in ("report", "all") else []
    memory = []
    for row in memory_rows:
        p = validation.predict_training_memory(row)
        speed: dict = {"stack": row["stack"], "measured_samples_per_s": None,
                       "predicted_samples_per_s": None, "samples_per_s_error": None}
        if row.get("measured_samples_per_s"):
            e = validation.predict_fine_tune_throughput(row)
            samples = e.tokens_per_s / int(row["seq"]) if e.step_s > 0 else None
            measured_speed = float(row["measured_samples_per_s"])
            speed.update(measured_samples_per_s=measured_speed, predicted_samples_per_s=samples,
                         samples_per_s_error=_core.error_stats([samples], [measured_speed]).median_signed_error
                         if samples else None)
        memory.append({**{k: row[k] for k in ("id", "device", "model", "batch", "seq", "grad_accum",
                                              "gradient_checkpointing", "precision", "optimizer", "measured_mib", "runtime_mib")},
                       **p, "error": _core.error_stats([p["predicted_mib"]], [float(row["measured_mib"])]).median_signed_error,
                       **speed})
    progress(2, stages)
    collectives = validation.collective_validation()
    progress(3, stages)
    runs = []
    all_runs = validation.load_training_runs()
    for row in all_runs:
        if args.split == "all" or row["split"] == args.split:
            e = validation.predict_training_run(row)
            measured = float(row["measured_tokens_per_s_per_gpu"])
            predicted = e.tokens_per_s / int(row["gpus"]) if e.step_s > 0 else None
            zero = f" ZeRO-{row['zero']}" if row.get("zero") else ""
            recompute = f" rc-{row['recompute']}" if row.get("recompute") not in (None, "", "none") else ""
            if recompute and row.get("recompute_interval") not in (None, "", "1"):
                recompute += f"/{row['recompute_interval']}"
            # The memory a run reached, where its source gives it: the caching allocator's peak
            # reserved bytes (torchtitan's "Memory(GiB)"), beside the estimate's reserved bytes
            # less the CUDA context its runtime reserve holds.
            mem_measured = float(row["measured_memory_gib"]) if row.get("measured_memory_gib") else None
            mem_predicted = ((e.reserved_per_gpu_bytes - validation.runtime_reserved_bytes(row)) / 2**30
                             if mem_measured is not None and e.reserved_per_gpu_bytes > 0 else None)
            runs.append({"id": row["id"], "stack": row.get("stack") or "megatron-core", "system": row["system"],
                         "device": row.get("device") or "", "model": row["model"],
                         "overrides": row.get("overrides") or "", "gpus": int(row["gpus"]),
                         "seq": int(row["seq"]),
                         "layout": f"TP{row['tp']} PP{row['pp']} CP{row['cp']} DP{row['dp']}"
                                   + (f" EP{row['ep']}" if row.get('ep') not in (None, '', '1') else '')
                                   + f" VP{row['virtual_stages']}"
                                   f" mb{row['micro_batch']}{zero}{recompute}"
                                   + (f" LoRA{row['lora_rank']}" if row.get("lora_rank") else "")
                                   + (" no-SP" if row.get("sequence_parallel") == "false" else "")
                                   + (" compile" if row.get("compile") == "true" else "")
                                   + (" async-TP" if row.get("tp_overlap") == "true" else ""),
                         "precision": row["precision"], "measured_tokens_per_s_per_gpu": measured,
                         "predicted_tokens_per_s_per_gpu": predicted,
                         "error": _core.error_stats([predicted], [measured]).median_signed_error if predicted else None,
                         "feasible": e.feasible, "reason": e.reason, "split": row["split"],
                         "measured_memory_gib": mem_measured, "predicted_memory_gib": mem_predicted,
                         "memory_error": (_core.error_stats([mem_predicted], [mem_measured]).median_signed_error
                                          if mem_predicted else None),
                         "source": row["source"]})
    progress(4, stages)
    serving = validation.serving_validation() if args.split in ("report", "all") else []
    encoder, encoder_groups = validation.encoder_validation(args.split)
    progress(5, stages)
    serving_summary = {}
    for kind in sorted({r["kind"] for r in serving}):
        rows_k = [r for r in serving if r["kind"] == kind]
        st = _core.error_stats([r["predicted"] for r in rows_k], [r["measured"] for r in rows_k])
        serving_summary[kind] = {"rows": st.rows, "median_abs_error": st.median_abs_error,
                                 "max_abs_error": st.max_abs_error, "median_signed_error": st.median_signed_error}
    if args.split != "all":
        collectives = [c for c in collectives if c["split"] == args.split]
    done = [r for r in runs if r["predicted_tokens_per_s_per_gpu"]]
    left_out = validation.training_runs_left_out() if runs else []
    run_stats = _core.error_stats([r["predicted_tokens_per_s_per_gpu"] for r in done],
                                  [r["measured_tokens_per_s_per_gpu"] for r in done])
    run_families = []  # per stack and device: the source families of the training runs
    for key in sorted({(r["stack"], r["device"] or r["system"]) for r in done}):
        fam = [r for r in done if (r["stack"], r["device"] or r["system"]) == key]
        st = _core.error_stats([r["predicted_tokens_per_s_per_gpu"] for r in fam],
                               [r["measured_tokens_per_s_per_gpu"] for r in fam])
        run_families.append({"stack": key[0], "device": key[1], "rows": st.rows,
                             "median_abs_error": st.median_abs_error, "max_abs_error": st.max_abs_error,
                             "median_signed_error": st.median_signed_error})
    step_stats = (_core.error_stats([m["predicted_bytes"] for m in step_memory], [m["measured_bytes"] for m in step_memory])
                  if step_memory else None)
    with_mem = [r for r in runs if r["memory_error"] is not None]
    memory_stats = (_core.error_stats([r["predicted_memory_gib"] for r in with_mem],
                                      [r["measured_memory_gib"] for r in with_mem]) if with_mem else None)
    encoder_stats = (_core.error_stats([r["predicted_s"] for r in encoder], [r["measured_s"] for r in encoder])
                     if encoder else None)
    paths = {"kernels": args.data or kernel_rows.data_path(), "training_memory": validation.training_memory_path(),
             "end_to_end": args.e2e_data or validation.end_to_end_path(),
             "training_runs": validation.training_runs_path(), "serving_runs": validation.serving_runs_path(),
             "encoder_runs": validation.encoder_runs_path()}
    serving_plans = validation.serving_plan_checks() if serving else []
    return ValidationRun(args, len(rows), skipped, lines, unmeasured, memory, step_memory, collectives, runs,
                         len(all_runs), left_out, validation.training_rows_with_memory(), run_stats, run_families,
                         serving, serving_summary, encoder, encoder_groups,
                         {"step_memory": step_stats, "run_memory": memory_stats, "encoder": encoder_stats}, paths,
                         serving_plans)
