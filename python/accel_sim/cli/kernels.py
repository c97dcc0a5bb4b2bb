"""`accel-sim kernel`, `validate` and `calibrate`: one kernel's time, the measured error of the
cost models, and fitting a device's kernel constants. The numbers come from the C++ core."""

from __future__ import annotations

import argparse
import importlib.util
import json
from typing import Any

from accel_sim.kernel_rows import DTYPES as _CORE_DTYPES
from accel_sim.report.json_report import SCHEMA_VERSION


_KERNEL_KEYS = ("matmul_efficiency", "fp8_matmul_efficiency", "unaligned_matmul_efficiency", "attention_efficiency", "attention_backward_efficiency",
                "flash3_efficiency", "cudnn_efficiency", "cudnn_backward_efficiency", "fp8_attention_efficiency", "memory_efficiency",
                "gemm_memory_efficiency", "sustained_clock_fraction", "sustained_clock_power_w", "softmax_bandwidth_share",
                "norm_bandwidth_share",
                "widening_cast_bandwidth_share")


def _write_device_file(args: argparse.Namespace, k: Any, rows: int, data: str) -> str:
    """The device's file with the fitted `kernel:` section and its source, in --out-dir."""
    from pathlib import Path

    import yaml

    from accel_sim.device import resolve_device
    from accel_sim.io import fields

    entry = resolve_device(args.device, args.device_file).entry
    doc = fields.read_yaml(entry.path, "device")
    section: dict[str, Any] = {"calibrated": True}
    section.update({key: round(getattr(k, key), 4) for key in _KERNEL_KEYS if getattr(k, key) > 0})
    section["gemm_tile_overhead_us"] = round(k.gemm_tile_overhead_s * 1e6, 3)
    section["kernel_floor_us"] = round(k.kernel_floor_s * 1e6, 3)
    section["stream_floor_us"] = round(k.stream_floor_s * 1e6, 3)
    section["alone_kernel_overhead_us"] = round(k.alone_kernel_overhead_s * 1e6, 3)
    section["alone_stream_overhead_us"] = round(k.alone_stream_overhead_s * 1e6, 3)
    doc["kernel"] = section
    doc.setdefault("sources", {})["kernel"] = f"fitted by accel-sim calibrate on the fit split ({rows} rows) of {data}"
    out = Path(args.out_dir) / f"{entry.spec.id}.yaml"
    out.write_text(yaml.safe_dump(doc, sort_keys=False, width=100), encoding="utf-8")
    return str(out)


def _spec(name: str, files: list[str]) -> Any:
    from accel_sim.device import resolve_device

    return resolve_device(name, files).spec


def cmd_kernel(args: argparse.Namespace) -> int:
    from accel_sim import _core
    from accel_sim.cli.systems import COLLECTIVES, cmd_collective
    from accel_sim.errors import UsageError

    if args.kernel_kind in COLLECTIVES:
        return cmd_collective(args)
    from accel_sim.commands.flags import check_clock, refuse

    if args.kernel_kind == "attention" and not args.backward:
        refuse(args, ("forward",), "adds the forward pass to --backward; without --backward the forward is what is timed")
    spec = _spec(args.device, args.device_file)
    check_clock(args, [spec])
    q = _core.KernelQuery()
    q.dtype = _core.parse_dtype(_CORE_DTYPES[args.dtype])
    if args.kernel_kind == "matmul":
        q.kind = _core.KernelKind.matmul
        q.m, q.n, q.k, q.batch = args.m, args.n, args.k, args.batch
        what = f"matmul {args.batch} x {args.m}x{args.k} @ {args.k}x{args.n}" if args.batch > 1 else f"matmul {args.m}x{args.k} @ {args.k}x{args.n}"
    elif args.kernel_kind == "attention":
        q.kind = _core.KernelKind.attention
        q.batch, q.heads = args.batch, args.heads
        q.kv_heads = args.kv_heads or args.heads
        q.seq_q, q.seq_k, q.head_dim = args.seq_q, args.seq_k or args.seq_q, args.head_dim
        q.causal = args.causal
        q.backward = args.backward
        q.forward = args.forward or not args.backward
        q.impl = getattr(_core.AttentionImpl, args.impl)
        passes = "forward + backward" if q.forward and q.backward else "backward" if q.backward else "forward"
        what = (f"attention {args.impl} {passes}: batch {q.batch}, heads {q.heads}/{q.kv_heads}, "
                f"seq {q.seq_q}x{q.seq_k}, head dim {q.head_dim}" + (", causal" if q.causal else ""))
    else:
        q.kind = _core.KernelKind.memory
        q.op = args.op
        q.elements = args.elements
        what = f"{args.op} over {args.elements:,.0f} elements"
    q.timed_alone = args.timed_alone
    options = _core.CostOptions()
    options.include_launch_overhead = False
    options.allow_tf32 = args.dtype == "tf32"
    if args.clock_mhz is not None:
        options.clock_hz = args.clock_mhz * 1e6
    try:
        e = _core.estimate_kernel(q, spec, args.cost_model, options)
    except ValueError as err:
        raise UsageError(str(err)) from None
    tflops = e.achieved_flops_per_s / 1e12
    if args.json:
        print(json.dumps({
            "schema": "accel-sim/kernel", "schema_version": SCHEMA_VERSION,
            "kernel": args.kernel_kind, "what": what, "device": spec.id, "dtype": args.dtype,
            "cost_model": args.cost_model, "time_s": e.time_s, "tflops": tflops,
            "bandwidth_bytes_per_s": e.achieved_bytes_per_s,
            "bound": e.bound.name, "roofline_time_s": e.roofline_time_s, "flops": e.flops,
            "bytes": e.bytes, "calibrated": spec.kernel.calibrated,
            "timing": "alone" if args.timed_alone else "stream",
        }, indent=1))
        return 0
    calibrated = "calibrated" if spec.kernel.calibrated else "uncalibrated constants"
    timing = "timed alone between CUDA events" if args.timed_alone else "in a step's stream"
    print(f"accel-sim · {what} · {args.dtype} on {spec.name} ({args.cost_model} model, {calibrated}, {timing})")
    print(f"  time       {e.time_s * 1e6:,.2f} µs   ({e.bound.name}-bound; roofline {e.roofline_time_s * 1e6:,.2f} µs)")
    print(f"  achieved   {tflops:,.1f} TFLOP/s · {e.achieved_bytes_per_s / 1e9:,.0f} GB/s")
    print(f"  work       {e.flops / 1e9:,.3f} GFLOP · {e.bytes / 1e6:,.3f} MB")
    return 0


def _devices(ids: set[str]) -> dict[str, Any]:
    from accel_sim.device import resolve_device

    out = {}
    for device_id in sorted(ids):
        try:
            out[device_id] = resolve_device(device_id, []).spec
        except Exception:  # noqa: BLE001 - a row for a device we do not ship is reported as such
            continue
    return out


def cmd_validate(args: argparse.Namespace) -> int:
    from accel_sim.progress import Progress

    progress = Progress("validate", args.quiet or args.json)
    try:
        return _validate(args, progress)
    finally:
        progress.close()


def _validate(args: argparse.Namespace, progress: Any) -> int:
    """`validate` in five stages (kernels, memory, collectives, training runs, serving), each
    reported to `progress`."""
    from accel_sim import _core, kernel_rows, validation
    from accel_sim.report.tables import table

    stages = 5
    rows, skipped = kernel_rows.load_rows(args.data)
    end_to_end = validation.load_end_to_end(args.e2e_data)
    devices = _devices({r.device for r in rows} | {r["device"] for r in end_to_end})
    splits = ("fit", "report") if args.split == "all" else (args.split,)
    steps = validation.simulate_end_to_end(devices, end_to_end)  # each measured step simulated once
    modules = validation.load_module_rows(args.data)
    if modules and not all(importlib.util.find_spec(m) for m in ("torch", "transformers")):
        skipped["eager modules (capturing them needs torch and transformers)"] = len(modules)
        modules = []
    devices.update(_devices({m.device for m in modules} - set(devices)))
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
    from accel_sim.cli.systems import collective_validation

    collectives = collective_validation()
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
    progress.close()
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
    if args.json:
        print(json.dumps({
            "schema": "accel-sim/validate", "schema_version": SCHEMA_VERSION, "rows": len(rows), "skipped": skipped, "collectives": collectives,
            "training_runs": runs,
            "training_runs_summary": {"rows": run_stats.rows, "median_abs_error": run_stats.median_abs_error,
                                      "max_abs_error": run_stats.max_abs_error,
                                      "median_signed_error": run_stats.median_signed_error},
            "training_runs_by_family": run_families,
            "training_runs_left_out": [{"reason": why, "rows": n} for why, n in left_out],
            "training_rows_with_memory": validation.training_rows_with_memory(),
            "uncalibrated_devices": unmeasured,
            "lines": [{"split": s, "device": l.device, "class": l.kind, "calibrated": l.calibrated, "rows": l.kernel.rows,
                       "kernel": {"median_abs_error": l.kernel.median_abs_error, "p90_abs_error": l.kernel.p90_abs_error,
                                  "median_signed_error": l.kernel.median_signed_error},
                       "roofline": {"median_abs_error": l.roofline.median_abs_error, "p90_abs_error": l.roofline.p90_abs_error,
                                    "median_signed_error": l.roofline.median_signed_error}}
                      for s, l in lines],
            "training_memory": memory,
            "end_to_end_memory": step_memory,
            "serving": serving,
            "serving_summary": serving_summary,
            "encoder_runs": encoder,
            "encoder_runs_by_device": encoder_groups,
        }, indent=1))
        return 0
    pct = lambda x: f"{x * 100:.1f}%"  # noqa: E731
    print(f"accel-sim validate · {len(rows)} measured kernels · split: {args.split}\n")
    print(table(["split", "device", "class", "rows", "kernel median", "kernel p90", "roofline median", "roofline p90", "constants"],
                [(s, l.device, l.kind, l.kernel.rows, pct(l.kernel.median_abs_error), pct(l.kernel.p90_abs_error),
                  pct(l.roofline.median_abs_error), pct(l.roofline.p90_abs_error),
                  "calibrated" if l.calibrated else "uncalibrated") for s, l in lines],
                [False, False, False, True, True, True, True, True, False]))
    print(f"\n  |error| = |predicted / measured - 1|; data: {args.data or kernel_rows.data_path()}")
    print("  no kernel measurements (uncalibrated: MAMF-based matmul efficiency where published, model defaults "
          "otherwise; latency bands use the widest measured p90): " + ", ".join(unmeasured))
    print("  left out (not one kernel, or no constants for the implementation): "
          + ", ".join(f"{k} {v}" for k, v in sorted(skipped.items())))
    if memory:
        print("\ntraining memory and throughput (report only): the builder's step through PyTorch's caching allocator "
              "+ the CUDA context, vs GPU memory used after training (NVML); `accel-sim train` under the run's stack "
              "vs the samples/s HF Trainer reported\n")
        sps = lambda v: f"{v:.2f}" if v else "-"  # noqa: E731
        print(table(["device", "model", "stack", "batch", "accum", "checkpointing", "precision", "optimizer", "measured",
                     "predicted", "error", "samples/s", "predicted", "error"],
                    [(m["device"], m["model"], m["stack"], m["batch"], m["grad_accum"], m["gradient_checkpointing"],
                      m["precision"], m["optimizer"], f"{float(m['measured_mib']):,.0f} MiB", f"{m['predicted_mib']:,.0f} MiB",
                      f"{m['error'] * 100:+.1f}%", sps(m["measured_samples_per_s"]), sps(m["predicted_samples_per_s"]),
                      f"{m['samples_per_s_error'] * 100:+.1f}%" if m["samples_per_s_error"] is not None else "-")
                     for m in memory],
                    [False, False, False, True, True, False, False, False, True, True, True, True, True, True]))
        print(f"\n  data: {validation.training_memory_path()} (validation/extract_memory.py)")
    if step_memory:
        st = _core.error_stats([m["predicted_bytes"] for m in step_memory], [m["measured_bytes"] for m in step_memory])
        print(f"\nwhole-model steps, peak memory ({args.split} rows): torch.cuda.max_memory_allocated() of "
              "HF transformers steps measured by `accel-sim calibrate` vs the builder's peak live bytes\n")
        print(table(["device", "model", "phase", "batch", "seq", "context", "precision", "recompute", "measured",
                     "predicted", "error"],
                    [(m["device"], m["model"] + (" " + m["overrides"] if m["overrides"] else ""), m["phase"], m["batch"],
                      m["seq"], m["context"], m["precision"], m["recompute"], f"{m['measured_bytes'] / 2**30:.2f} GiB",
                      f"{m['predicted_bytes'] / 2**30:.2f} GiB", f"{m['error'] * 100:+.1f}%") for m in step_memory],
                    [False, False, False, True, True, True, False, False, True, True, True]))
        print(f"\n  {st.rows} steps · median |error| {st.median_abs_error * 100:.1f}% · worst "
              f"{st.max_abs_error * 100:.1f}%; data: {args.e2e_data or validation.end_to_end_path()} "
              "(validation/measured/, validation/extract_measured.py)")
    if collectives:
        print(f"\ncollectives ({args.split} rows): nccl-tests / rccl-tests bus bandwidth vs the model, at the "
              "row's message size (8 GB where the source gives the large-message plateau)\n")
        print(table(["system", "collective", "GPUs", "algorithm", "size", "measured", "predicted", "error", "split"],
                    [(c["system"], c["collective"], c["gpus"], c["algorithm"], _message_size(c["bytes"]),
                      f"{c['measured_busbw_gbs']:.2f} GB/s", f"{c['predicted_busbw_gbs']:.2f} GB/s",
                      f"{c['error'] * 100:+.1f}%", c["split"]) for c in collectives],
                    [False, False, True, False, True, True, True, True, False]))
        print("\n  data: the `measured` lists of python/accel_sim/data/systems/*.yaml, each with its source")
    if runs:
        print(f"\ntraining runs (split {args.split}; `accel-sim train --stack S` under the stack that ran each: megatron-core for "
              "Megatron-LM / NeMo, with SP and no recompute; llm-foundry-2023 for MosaicML's MPT benchmark, FSDP1 and flash-attn 1.x; flash-attention-training for flash-attention's GPT3 speed table; "
              "megatron-lm-2022 for Korthikanti et al.'s A100 iterations, the fit split of the A100's sustained clock, "
              "SP with selective recomputation only; torchtitan-2024 for torchtitan's published FSDP2 runs): tokens/s per GPU\n")
        print(table(["id", "stack", "device", "model", "GPUs", "seq", "layout", "precision", "measured", "predicted",
                     "error / why not"],
                    [(r["id"], r["stack"], r["device"] or r["system"],
                      r["model"] + (" " + r["overrides"] if r["overrides"] else ""), r["gpus"], r["seq"], r["layout"],
                      r["precision"],
                      f"{r['measured_tokens_per_s_per_gpu']:,.0f}",
                      f"{r['predicted_tokens_per_s_per_gpu']:,.0f}" if r["predicted_tokens_per_s_per_gpu"] else "-",
                      (f"{r['error'] * 100:+.1f}%" + ("" if r["feasible"] else f" (but: {r['reason']})"))
                      if r["error"] is not None else r["reason"]) for r in runs],
                    [False, False, False, False, True, True, False, False, True, True, False]))
        print()
        print(table(["stack", "device", "rows", "median |error|", "worst", "median signed"],
                    [(f["stack"], f["device"], f["rows"], f"{f['median_abs_error'] * 100:.1f}%",
                      f"{f['max_abs_error'] * 100:.1f}%", f"{f['median_signed_error'] * 100:+.1f}%")
                     for f in run_families], [False, False, True, True, True, True]))
        stats = run_stats
        print(f"\n  {stats.rows} of {len(runs)} runs predicted · median |error| {stats.median_abs_error * 100:.1f}% · "
              f"worst {stats.max_abs_error * 100:.1f}% · median signed {stats.median_signed_error * 100:+.1f}% "
              "(tokens/s and model TFLOP/s per GPU share the error)")
        print(f"  data: {validation.training_runs_path()} (validation/extract_training_runs.py); "
              "precision 'unstated' is predicted as bf16-mixed")
        with_mem = [r for r in runs if r["memory_error"] is not None]
        if with_mem:
            ms = _core.error_stats([r["predicted_memory_gib"] for r in with_mem], [r["measured_memory_gib"] for r in with_mem])
            print("\n  memory per GPU of the runs whose source gives it (the caching allocator's peak reserved bytes; "
                  "predicted: `train`'s memory per GPU less the CUDA context):")
            print(table(["id", "stack", "model", "GPUs", "layout", "measured", "predicted", "error"],
                        [(r["id"], r["stack"], r["model"], r["gpus"], r["layout"], f"{r['measured_memory_gib']:.1f} GiB",
                          f"{r['predicted_memory_gib']:.1f} GiB", f"{r['memory_error'] * 100:+.1f}%") for r in with_mem],
                        [False, False, False, True, False, True, True, True]))
            print(f"  {ms.rows} runs · median |error| {ms.median_abs_error * 100:.1f}% · median signed "
                  f"{ms.median_signed_error * 100:+.1f}%")
        with_memory = validation.training_rows_with_memory()
        total = len(all_runs) + with_memory + sum(n for _, n in left_out)
        evaluated = len(all_runs) + with_memory
        elsewhere = f", {len(all_runs) - len(runs)} on the other split" if len(all_runs) > len(runs) else ""
        print(f"\n  {evaluated} of the calibration set's {total} training rows are evaluated ({evaluated / total * 100:.0f}%): "
              f"{len(runs)} runs above{elsewhere}, {with_memory} samples/s of the training-memory runs; the other "
              f"{total - evaluated}, by reason:")
        for why, n in left_out:
            print(f"  {n:5d}  {why}")
    if serving:
        print("\nserving (report only; `accel-sim serve`, every request at t = 0 as the benchmarks submit them): "
              "TensorRT-LLM static batches and TTFT, vLLM batch latency and offline throughput, each under the "
              "serving stack it ran (`accel-sim stacks`)\n")

        def fmt(v: float, unit: str) -> str:
            return f"{v * 1e3:,.1f} ms" if unit == "s" and v < 1 else f"{v:,.2f} s" if unit == "s" else f"{v:,.0f} {unit}"

        print(table(["id", "kind", "model", "device", "stack", "TP", "batch", "in/out", "precision", "measured",
                     "predicted", "error"],
                    [(r["id"], r["kind"], r["model"], r["device"], r["stack"], r["tp"], r["batch"],
                      f"{r['input_len']}/{r['output_len']}", r["precision"], fmt(r["measured"], r["unit"]) + ("/GPU" if r["per_gpu"] == "1" else ""),
                      fmt(r["predicted"], r["unit"]) + ("/GPU" if r["per_gpu"] == "1" else ""),
                      f"{r['error'] * 100:+.1f}%") for r in serving],
                    [False, False, False, False, False, True, True, True, False, True, True, True]))
        print()
        for kind, st in serving_summary.items():
            print(f"  {kind:<19} {st['rows']:>3} rows · median |error| {st['median_abs_error'] * 100:.1f}% · "
                  f"worst {st['max_abs_error'] * 100:.1f}% · median signed {st['median_signed_error'] * 100:+.1f}%")
        print(f"  data: {validation.serving_runs_path()} (validation/extract_serving.py); offline throughput counts "
              "the tokens of each row's `counts` (AMD's tables: output tokens)")
    if encoder:
        print(f"\nencoder inference ({args.split} rows; {len(encoder)} BERT SQuAD forward passes, NVIDIA "
              "DeepLearningExamples' TensorFlow 1 tables, predicted under the tensorflow1-xla stack: unfused attention "
              "core, XLA's fused elementwise chains, its fitted host cost per kernel; the DGX-1 V100 16GB table is the "
              "fit split): latency per batch by device and precision\n")
        print(table(["device", "precision", "rows", "median |error|", "worst", "median signed"],
                    [(g["device"], g["precision"], g["rows"], f"{g['median_abs_error'] * 100:.1f}%",
                      f"{g['max_abs_error'] * 100:.1f}%", f"{g['median_signed_error'] * 100:+.1f}%")
                     for g in encoder_groups], [False, False, True, True, True, True]))
        st = _core.error_stats([r["predicted_s"] for r in encoder], [r["measured_s"] for r in encoder])
        print(f"\n  {st.rows} runs · median |error| {st.median_abs_error * 100:.1f}% · median signed "
              f"{st.median_signed_error * 100:+.1f}%; each row in --json (encoder_runs); data: "
              f"{validation.encoder_runs_path()} (validation/extract_encoder.py)")
    return 0


def _message_size(b: float) -> str:
    """nccl-tests' size notation: 1K = 1,024 bytes, 1M = 1,048,576, 1G = 1,073,741,824; "8 GB"
    for a large-message figure (cli/systems.py: PLATEAU_BYTES)."""
    from accel_sim.cli.systems import PLATEAU_BYTES

    if b == PLATEAU_BYTES:
        return "8 GB"
    for unit, scale in (("G", 2**30), ("M", 2**20), ("K", 2**10)):
        if b >= scale:
            return f"{b / scale:g}{unit}"
    return f"{b:g}"


def cmd_calibrate(args: argparse.Namespace) -> int:
    from accel_sim import kernel_rows, validation
    from accel_sim.errors import UsageError

    spec = _spec(args.device, args.device_file)
    if args.data is not None:
        from accel_sim.commands.flags import refuse

        refuse(args, ("out_dir",), "is where the micro-benchmarks write their measurements and the fitted device "
               "file; --data fits from measured kernels and prints the constants")
    data = args.data or None
    if args.data is None:
        try:
            import torch
        except ImportError:
            torch = None
        if torch is None or not torch.cuda.is_available():
            raise UsageError("calibrate runs micro-benchmarks through PyTorch on a local GPU, and this machine has "
                             "none; use --data [FILE] to fit from measured kernels instead")
        from pathlib import Path

        from accel_sim.calibration import (E2E_COLUMNS, HOST_COLUMNS, measure, measure_host, measure_models,
                                           write_rows)

        print(f"# measuring on {torch.cuda.get_device_name(0)} as '{spec.id}' ...", flush=True)
        rows_out = measure(spec.id, "cuda")
        data = str(Path(args.out_dir) / "measurements.csv")
        write_rows(rows_out, Path(data))
        print(f"# wrote {len(rows_out)} kernel measurements to {data}", flush=True)
        host_out = measure_host(spec.id, "cuda")
        write_rows(host_out, Path(args.out_dir) / "host_overhead.csv", HOST_COLUMNS)
        print(f"# wrote {len(host_out)} host-overhead measurements to {Path(args.out_dir) / 'host_overhead.csv'}",
              flush=True)
        models_out = measure_models(spec.id, "cuda")
        write_rows(models_out, Path(args.out_dir) / "end_to_end.csv", E2E_COLUMNS)
        print(f"# wrote {len(models_out)} whole-model measurements to {Path(args.out_dir) / 'end_to_end.csv'} "
              "(compare with `accel-sim validate --e2e-data`)")
    rows, _ = kernel_rows.load_rows(data)
    before = validation.validate({spec.id: spec}, rows, "fit")
    constants, n = kernel_rows.fit_device(spec, rows, tuple(args.keep))
    if n == 0:
        raise UsageError(f"no fit-split measurements for device '{spec.id}' in {args.data or kernel_rows.data_path()}")
    spec.kernel = constants
    after = validation.validate({spec.id: spec}, rows, "fit")
    for b, a in zip(before, after):
        print(f"# {b.kind}: {a.kernel.rows} fit rows, median |error| {b.kernel.median_abs_error * 100:.1f}% -> "
              f"{a.kernel.median_abs_error * 100:.1f}%")
    k = constants  # fitted by the core
    if args.data is None:
        path = _write_device_file(args, constants, n, data)
        print(f"# wrote the fitted device file {path} (use it with --device-file)")
    print("kernel:")
    print("  calibrated: true")
    for field in _KERNEL_KEYS:
        value = getattr(k, field)
        if value > 0:
            print(f"  {field}: {value:.3f}")
    print(f"  gemm_tile_overhead_us: {k.gemm_tile_overhead_s * 1e6:.2f}")
    print(f"  kernel_floor_us: {k.kernel_floor_s * 1e6:.2f}")
    print(f"  stream_floor_us: {k.stream_floor_s * 1e6:.2f}")
    print(f"  alone_kernel_overhead_us: {k.alone_kernel_overhead_s * 1e6:.2f}")
    print(f"  alone_stream_overhead_us: {k.alone_stream_overhead_s * 1e6:.2f}")
    return 0
