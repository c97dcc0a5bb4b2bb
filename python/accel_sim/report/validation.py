"""What `validate` reports: the model's measured error, section by section, as JSON (the schema
accel-sim/validate, docs/formats/report.md) and as tables (accel_sim.commands.validate.ValidationRun)."""

from __future__ import annotations

import statistics
from typing import Any

from accel_sim.report.json_report import SCHEMA_VERSION
from accel_sim.report.tables import table
from accel_sim.validation import PLATEAU_BYTES



def message_size(b: float) -> str:
    """nccl-tests' size notation: 1K = 1,024 bytes, 1M = 1,048,576, 1G = 1,073,741,824; "8 GB"
    for a large-message figure."""
    if b == PLATEAU_BYTES:
        return "8 GB"
    for unit, scale in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if b >= scale:
            return f"{b / scale:g}{unit}"
    return f"{b:g}"


def validation_json(v: Any) -> dict:
    """`validate --json` of a ValidationRun."""
    return {
        "schema": "accel-sim/validate", "schema_version": SCHEMA_VERSION, "rows": v.rows, "skipped": v.skipped, "collectives": v.collectives,
        "training_runs": v.runs,
        "training_runs_summary": {"rows": v.run_stats.rows, "median_abs_error": v.run_stats.median_abs_error,
                                  "max_abs_error": v.run_stats.max_abs_error,
                                  "median_signed_error": v.run_stats.median_signed_error},
        "training_runs_by_family": v.run_families,
        "training_runs_left_out": [{"reason": why, "rows": n} for why, n in v.left_out],
        "training_rows_with_memory": v.with_memory,
        "uncalibrated_devices": v.unmeasured,
        "lines": [{"split": s, "device": l.device, "class": l.kind, "calibrated": l.calibrated, "rows": l.kernel.rows,
                   "kernel": {"median_abs_error": l.kernel.median_abs_error, "p90_abs_error": l.kernel.p90_abs_error,
                              "median_signed_error": l.kernel.median_signed_error},
                   "roofline": {"median_abs_error": l.roofline.median_abs_error, "p90_abs_error": l.roofline.p90_abs_error,
                                "median_signed_error": l.roofline.median_signed_error}}
                  for s, l in v.lines],
        "training_memory": v.memory,
        "end_to_end_memory": v.step_memory,
        "serving": v.serving,
        "serving_summary": v.serving_summary,
        "serving_plans": v.serving_plans,
        "encoder_runs": v.encoder,
        "encoder_runs_by_device": v.encoder_groups,
    }


def validation_text(v: Any) -> str:
    """`validate`'s text report of a ValidationRun."""
    lines: list[str] = []

    def out(text: str = "") -> None:
        lines.append(text)

    pct = lambda x: f"{x * 100:.1f}%"  # noqa: E731
    out(f"accel-sim validate · {v.rows} measured kernels · split: {v.args.split}\n")
    out(table(["split", "device", "class", "rows", "kernel median", "kernel p90", "roofline median", "roofline p90", "constants"],
                [(s, l.device, l.kind, l.kernel.rows, pct(l.kernel.median_abs_error), pct(l.kernel.p90_abs_error),
                  pct(l.roofline.median_abs_error), pct(l.roofline.p90_abs_error),
                  "calibrated" if l.calibrated else "uncalibrated") for s, l in v.lines],
                [False, False, False, True, True, True, True, True, False]))
    out(f"\n  |error| = |predicted / measured - 1|; data: {v.paths['kernels']}")
    out("  no kernel measurements (uncalibrated: MAMF-based matmul efficiency where published, model defaults "
          "otherwise; latency bands use the widest measured p90): " + ", ".join(v.unmeasured))
    out("  left out (not one kernel, or no constants for the implementation): "
          + ", ".join(f"{k} {v}" for k, v in sorted(v.skipped.items())))
    if v.memory:
        out("\ntraining memory and throughput (report only): the builder's step through PyTorch's caching allocator "
              "+ the CUDA context, vs GPU memory used after training (NVML); `accel-sim train` under the run's stack "
              "vs the samples/s HF Trainer reported\n")
        sps = lambda v: f"{v:.2f}" if v else "-"  # noqa: E731
        out(table(["device", "model", "stack", "batch", "accum", "checkpointing", "precision", "optimizer", "measured",
                     "predicted", "error", "samples/s", "predicted", "error"],
                    [(m["device"], m["model"], m["stack"], m["batch"], m["grad_accum"], m["gradient_checkpointing"],
                      m["precision"], m["optimizer"], f"{float(m['measured_mib']):,.0f} MiB", f"{m['predicted_mib']:,.0f} MiB",
                      f"{m['error'] * 100:+.1f}%", sps(m["measured_samples_per_s"]), sps(m["predicted_samples_per_s"]),
                      f"{m['samples_per_s_error'] * 100:+.1f}%" if m["samples_per_s_error"] is not None else "-")
                     for m in v.memory],
                    [False, False, False, True, True, False, False, False, True, True, True, True, True, True]))
        out(f"\n  data: {v.paths['training_memory']} (validation/extract_memory.py)")
    if v.step_memory:
        st = v.stats["step_memory"]
        out(f"\nwhole-model steps, peak memory ({v.args.split} rows): torch.cuda.max_memory_allocated() of "
              "HF transformers steps measured by `accel-sim calibrate` vs the builder's peak live bytes\n")
        out(table(["device", "model", "phase", "batch", "seq", "context", "precision", "recompute", "measured",
                     "predicted", "error"],
                    [(m["device"], m["model"] + (" " + m["overrides"] if m["overrides"] else ""), m["phase"], m["batch"],
                      m["seq"], m["context"], m["precision"], m["recompute"], f"{m['measured_bytes'] / 2**30:.2f} GiB",
                      f"{m['predicted_bytes'] / 2**30:.2f} GiB", f"{m['error'] * 100:+.1f}%") for m in v.step_memory],
                    [False, False, False, True, True, True, False, False, True, True, True]))
        out(f"\n  {st.rows} steps · median |error| {st.median_abs_error * 100:.1f}% · worst "
              f"{st.max_abs_error * 100:.1f}%; data: {v.paths['end_to_end']} "
              "(validation/measured/, validation/extract_measured.py)")
    if v.collectives:
        out(f"\ncollectives ({v.args.split} rows): nccl-tests / rccl-tests bus bandwidth vs the model, at the "
              "row's message size (8 GB where the source gives the large-message plateau)\n")
        out(table(["system", "collective", "GPUs", "algorithm", "size", "measured", "predicted", "error", "split"],
                    [(c["system"], c["collective"], c["gpus"], c["algorithm"], message_size(c["bytes"]),
                      f"{c['measured_busbw_gbs']:.2f} GB/s", f"{c['predicted_busbw_gbs']:.2f} GB/s",
                      f"{c['error'] * 100:+.1f}%", c["split"]) for c in v.collectives],
                    [False, False, True, False, True, True, True, True, False]))
        out("\n  data: the `measured` lists of python/accel_sim/data/systems/*.yaml, each with its source")
    if v.runs:
        out(f"\ntraining runs (split {v.args.split}; `accel-sim train --stack S` under the stack that ran each: megatron-core for "
              "Megatron-LM / NeMo, with SP and no recompute; llm-foundry-2023 for MosaicML's MPT benchmark, FSDP1 and flash-attn 1.x; flash-attention-training for flash-attention's GPT3 speed table; "
              "megatron-lm-2022 for Korthikanti et al.'s A100 iterations, the fit split of the A100's sustained clock, "
              "SP with selective recomputation only; torchtitan-2024 for torchtitan's published FSDP2 runs): tokens/s per GPU\n")
        out(table(["id", "stack", "device", "model", "GPUs", "seq", "layout", "precision", "measured", "predicted",
                     "error / why not"],
                    [(r["id"], r["stack"], r["device"] or r["system"],
                      r["model"] + (" " + r["overrides"] if r["overrides"] else ""), r["gpus"], r["seq"], r["layout"],
                      r["precision"],
                      f"{r['measured_tokens_per_s_per_gpu']:,.0f}",
                      f"{r['predicted_tokens_per_s_per_gpu']:,.0f}" if r["predicted_tokens_per_s_per_gpu"] else "-",
                      (f"{r['error'] * 100:+.1f}%" + ("" if r["feasible"] else f" (but: {r['reason']})"))
                      if r["error"] is not None else r["reason"]) for r in v.runs],
                    [False, False, False, False, True, True, False, False, True, True, False]))
        out()
        out(table(["stack", "device", "rows", "median |error|", "worst", "median signed"],
                    [(f["stack"], f["device"], f["rows"], f"{f['median_abs_error'] * 100:.1f}%",
                      f"{f['max_abs_error'] * 100:.1f}%", f"{f['median_signed_error'] * 100:+.1f}%")
                     for f in v.run_families], [False, False, True, True, True, True]))
        stats = v.run_stats
        out(f"\n  {stats.rows} of {len(v.runs)} runs predicted · median |error| {stats.median_abs_error * 100:.1f}% · "
              f"worst {stats.max_abs_error * 100:.1f}% · median signed {stats.median_signed_error * 100:+.1f}% "
              "(tokens/s and model TFLOP/s per GPU share the error)")
        out(f"  data: {v.paths['training_runs']} (validation/extract_training_runs.py); "
              "precision 'unstated' is predicted as bf16-mixed")
        with_mem = [r for r in v.runs if r["memory_error"] is not None]
        if with_mem:
            ms = v.stats["run_memory"]
            out("\n  memory per GPU of the runs whose source gives it (the caching allocator's peak reserved bytes; "
                  "predicted: `train`'s memory per GPU less the CUDA context):")
            out(table(["id", "stack", "model", "GPUs", "layout", "measured", "predicted", "error"],
                        [(r["id"], r["stack"], r["model"], r["gpus"], r["layout"], f"{r['measured_memory_gib']:.1f} GiB",
                          f"{r['predicted_memory_gib']:.1f} GiB", f"{r['memory_error'] * 100:+.1f}%") for r in with_mem],
                        [False, False, False, True, False, True, True, True]))
            out(f"  {ms.rows} runs · median |error| {ms.median_abs_error * 100:.1f}% · median signed "
                  f"{ms.median_signed_error * 100:+.1f}%")
        with_memory = v.with_memory
        total = v.all_runs + with_memory + sum(n for _, n in v.left_out)
        evaluated = v.all_runs + with_memory
        elsewhere = f", {v.all_runs - len(v.runs)} on the other split" if v.all_runs > len(v.runs) else ""
        out(f"\n  {evaluated} of the calibration set's {total} training rows are evaluated ({evaluated / total * 100:.0f}%): "
              f"{len(v.runs)} runs above{elsewhere}, {with_memory} samples/s of the training-memory runs; the other "
              f"{total - evaluated}, by reason:")
        for why, n in v.left_out:
            out(f"  {n:5d}  {why}")
    if v.serving:
        out("\nserving (report only; `accel-sim serve`, every request at t = 0 as the benchmarks submit them): "
              "TensorRT-LLM static batches and TTFT, vLLM batch latency and offline throughput, each under the "
              "serving stack it ran (`accel-sim stacks`)\n")

        def fmt(v: float, unit: str) -> str:
            return f"{v * 1e3:,.1f} ms" if unit == "s" and v < 1 else f"{v:,.2f} s" if unit == "s" else f"{v:,.0f} {unit}"

        out(table(["id", "kind", "model", "device", "stack", "TP", "batch", "in/out", "precision", "measured",
                     "predicted", "error"],
                    [(r["id"], r["kind"], r["model"], r["device"], r["stack"], r["tp"], r["batch"],
                      f"{r['input_len']}/{r['output_len']}", r["precision"], fmt(r["measured"], r["unit"]) + ("/GPU" if r["per_gpu"] == "1" else ""),
                      fmt(r["predicted"], r["unit"]) + ("/GPU" if r["per_gpu"] == "1" else ""),
                      f"{r['error'] * 100:+.1f}%") for r in v.serving],
                    [False, False, False, False, False, True, True, True, False, True, True, True]))
        out()
        for kind, st in v.serving_summary.items():
            out(f"  {kind:<19} {st['rows']:>3} rows · median |error| {st['median_abs_error'] * 100:.1f}% · "
                  f"worst {st['max_abs_error'] * 100:.1f}% · median signed {st['median_signed_error'] * 100:+.1f}%")
        out(f"  data: {v.paths['serving_runs']} (validation/extract_serving.py); offline throughput counts "
              "the tokens of each row's `counts` (AMD's tables: output tokens)")
    if v.serving_plans:
        plans = v.serving_plans
        feasible = [p for p in plans if p["verdict"] in ("best", "feasible")]
        median = statistics.median(abs(p["error"]) for p in feasible) if feasible else 0.0
        out(f"\n  the same {len(plans)} throughput deployments as `serve-plan` searches of their one layout: "
            f"{len(feasible)} feasible (they ran), median |error| {median * 100:.1f}% of the planner's throughput")
        for p in plans:
            if p["verdict"] not in ("best", "feasible"):
                out(f"    {p['id']} {p['model']} on {p['device']} TP{p['tp']}: {p['verdict']} ({p['reason']})")
    if v.encoder:
        out(f"\nencoder inference ({v.args.split} rows; {len(v.encoder)} BERT SQuAD forward passes, NVIDIA "
              "DeepLearningExamples' TensorFlow 1 tables, predicted under the tensorflow1-xla stack: unfused attention "
              "core, XLA's fused elementwise chains, its fitted host cost per kernel; the DGX-1 V100 16GB table is the "
              "fit split): latency per batch by device and precision\n")
        out(table(["device", "precision", "rows", "median |error|", "worst", "median signed"],
                    [(g["device"], g["precision"], g["rows"], f"{g['median_abs_error'] * 100:.1f}%",
                      f"{g['max_abs_error'] * 100:.1f}%", f"{g['median_signed_error'] * 100:+.1f}%")
                     for g in v.encoder_groups], [False, False, True, True, True, True]))
        st = v.stats["encoder"]
        out(f"\n  {st.rows} runs · median |error| {st.median_abs_error * 100:.1f}% · median signed "
              f"{st.median_signed_error * 100:+.1f}%; each row in --json (encoder_runs); data: "
              f"{v.paths['encoder_runs']} (validation/extract_encoder.py)")
    return "\n".join(lines)
