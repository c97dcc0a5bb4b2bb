"""What `kernel` reports: one kernel's or one collective's time, as JSON (the schemas accel-sim/kernel
and accel-sim/collective, docs/formats/report.md) and text (accel_sim.commands.kernels.KernelRun,
accel_sim.commands.systems.CollectiveRun)."""

from __future__ import annotations

from typing import Any

from accel_sim.report.json_report import SCHEMA_VERSION


def kernel_json(k: Any) -> dict:
    args, e, spec = k.args, k.estimate, k.device
    return {"schema": "accel-sim/kernel", "schema_version": SCHEMA_VERSION,
            "kernel": args.kernel_kind, "what": k.what, "device": spec.id, "dtype": args.dtype,
            "cost_model": args.cost_model, "time_s": e.time_s, "tflops": e.achieved_flops_per_s / 1e12,
            "bandwidth_bytes_per_s": e.achieved_bytes_per_s,
            "bound": e.bound.name, "roofline_time_s": e.roofline_time_s, "flops": e.flops,
            "bytes": e.bytes, "calibrated": spec.kernel.calibrated,
            "timing": "alone" if args.timed_alone else "stream"}


def kernel_text(k: Any) -> str:
    args, e, spec = k.args, k.estimate, k.device
    calibrated = "calibrated" if spec.kernel.calibrated else "uncalibrated constants"
    timing = "timed alone between CUDA events" if args.timed_alone else "in a step's stream"
    return "\n".join([
        f"accel-sim · {k.what} · {args.dtype} on {spec.name} ({args.cost_model} model, {calibrated}, {timing})",
        f"  time       {e.time_s * 1e6:,.2f} µs   ({e.bound.name}-bound; roofline {e.roofline_time_s * 1e6:,.2f} µs)",
        f"  achieved   {e.achieved_flops_per_s / 1e12:,.1f} TFLOP/s · {e.achieved_bytes_per_s / 1e9:,.0f} GB/s",
        f"  work       {e.flops / 1e9:,.3f} GFLOP · {e.bytes / 1e6:,.3f} MB"])


def collective_json(c: Any) -> dict:
    args, e, entry = c.args, c.estimate, c.entry
    return {"schema": "accel-sim/collective", "schema_version": SCHEMA_VERSION, "system": entry.spec.id,
            "collective": c.collective, "bytes": args.bytes, "gpus": args.gpus, "algorithm": e.algorithm.name,
            "time_s": e.time_s, "algbw_gbs": e.algbw_bytes_per_s / 1e9, "busbw_gbs": e.busbw_bytes_per_s / 1e9,
            "crosses_domains": e.crosses_domains, "estimated_fields": list(entry.estimated)}


def collective_text(c: Any) -> str:
    args, e, entry = c.args, c.estimate, c.entry
    lines = [f"{c.collective} of {args.bytes / 1e9:g} GB over {args.gpus} GPUs of {entry.spec.name} "
             f"({e.algorithm.name}{', across scale-up domains' if e.crosses_domains else ''})",
             f"  time {e.time_s * 1e3:.3f} ms · algbw {e.algbw_bytes_per_s / 1e9:.1f} GB/s · "
             f"busbw {e.busbw_bytes_per_s / 1e9:.1f} GB/s (nccl-tests' definitions)"]
    if entry.estimated:
        lines.append(f"  the system file's {', '.join(entry.estimated)} are estimates, not published figures (see its sources)")
    return "\n".join(lines)
