"""The `--json` objects of simulate and compare (docs/formats/report.md; JSON Schemas in
docs/formats/schemas/). SCHEMA_VERSION is every command's `schema_version`: see the versioning
rules in docs/formats/report.md before changing what any command prints."""

from __future__ import annotations

from accel_sim import _core

from dataclasses import asdict
from typing import Any

from accel_sim.report.hints import hint_message

SCHEMA_VERSION = 2


def _device(report: Any) -> dict:
    spec = report.device.spec
    return {
        "id": spec.id,
        "name": spec.name,
        "memory_bytes": spec.memory_bytes,
        "memory_bandwidth_bytes_per_s": spec.memory_bandwidth_bytes_per_s,
        "price_usd_per_hour": spec.price_usd_per_hour or None,
    }


def _group(g: Any) -> dict:
    return {
        "name": g.name,
        "count": g.count,
        "time_s": g.time_s,
        "fraction": g.fraction,
        "flops": g.flops,
        "bytes": g.bytes,
        "bound": g.dominant_bound.name,
    }


def simulation_to_dict(report: Any, include_ops: bool = True) -> dict:
    r = report.result
    m = r.memory
    peak = report.peak_op
    out = {
        "schema": "accel-sim/simulate",
        "schema_version": SCHEMA_VERSION,
        "model": report.name,
        "device": _device(report),
        "cost_model": report.options.cost_model,
        "stack": report.stack.as_dict() if getattr(report, "stack", None) is not None else None,
        "attention_impl": report.options.cost.attention_impl.name,
        "tf32": report.options.cost.allow_tf32,
        "release_policy": report.options.release_policy.name,
        "capture": {k: v for k, v in report.metadata.items() if k != "model_info"},
        "model_info": report.model_info,
        "latency_s": r.latency_s,
        "latency_band": dict(zip(("fraction", "basis"), report.latency_band)),
        "fusion_gain_s": report.fusion_gain_s,
        "energy_j": r.energy_j or None,
        "fused": report.options.fuse_elementwise,
        "peak_memory_bytes": m.peak_bytes,
        "memory_capacity_bytes": r.memory_capacity_bytes,
        "fits": r.fits,
        "precision": precision_dict(report),
        "allocator": {
            "peak_allocated_bytes": m.peak_allocated_bytes,
            "peak_reserved_bytes": m.peak_reserved_bytes,
            "peak_segment_bytes": m.peak_segment_bytes,
            "runtime_reserved_bytes": report.device.spec.runtime_reserved_bytes,
            "required_bytes": r.required_bytes,
        },
        "peak_op": None if peak is None else {"index": peak.index, "op": peak.op, "module": peak.module,
                                               "pass": peak.pass_name},
        "memory": {
            "parameter_bytes": m.parameter_bytes,
            "buffer_bytes": m.buffer_bytes,
            "input_bytes": m.input_bytes,
            "peak_activation_bytes": m.peak_activation_bytes,
            "peak_gradient_bytes": m.peak_gradient_bytes,
            "optimizer_state_bytes": m.optimizer_state_bytes,
        },
        "pass_time_s": {
            "forward": r.forward_time_s,
            "backward": r.backward_time_s,
            "optimizer": r.optimizer_time_s,
        },
        "model_flops": r.model_flops,
        "mfu": r.model_flops_utilization,
        "mfu_roofline_bound": report.mfu_roofline_bound,
        "tokens_per_s": report.tokens_per_s,
        "flops": r.total_flops,
        "bytes": r.total_bytes,
        "num_kernels": r.num_kernels,
        "num_collectives": r.num_collectives,
        "communication_bytes": r.communication_bytes,
        "communication_time_s": r.communication_time_s,
        "system": report.options.system.id if report.options.system is not None else None,
        "compute_bound_time_s": r.compute_bound_time_s,
        "memory_bound_time_s": r.memory_bound_time_s,
        "launch_overhead_time_s": r.launch_overhead_time_s,
        "compute_utilization": r.compute_utilization,
        "bandwidth_utilization": r.bandwidth_utilization,
        "reference_peak_flops_per_s": r.reference_peak_flops_per_s,
        "uncovered_ops": report.uncovered_ops,
        "breakdown": {
            "op": [_group(g) for g in report.groups("op")],
            "op_class": [_group(g) for g in report.groups("op_class")],
            "layer": [_group(g) for g in report.groups("layer")],
            "module_type": [_group(g) for g in report.groups("module_type")],
        },
        "hints": [
            {"kind": h.kind.name, "fraction": h.fraction, "message": hint_message(h, report)}
            for h in report.hints
        ],
    }
    if include_ops:
        out["ops"] = [asdict(row) for row in report.ops]
    return out


def precision_dict(report: Any) -> dict:
    """The dtype the run's matrix ops ask for and the units a device without that dtype's unit
    ran ops on instead (narrower: a format that does not hold the dtype's values)."""
    r = report.result
    return {
        "matmul_dtype": _core.dtype_name(r.reference_dtype),
        "narrower": r.narrower_precision,
        "substitutions": [{"dtype": _core.dtype_name(u.dtype), "matrix": u.matrix, "unit": u.unit,
                           "narrower": u.narrower, "ops": u.ops, "time_s": u.time_s} for u in r.substitutions],
    }


def comparison_to_dict(compare: Any, include_ops: bool = False) -> dict:
    c = compare.comparison
    devices = []
    for report, verdict in zip(compare.reports, c.devices):
        d = simulation_to_dict(report, include_ops=include_ops)
        d["verdict"] = {
            "bound": verdict.dominant_bound.name,
            "cost_per_run_usd": verdict.cost_per_run_usd or None,
            "speedup_vs_slowest": verdict.speedup_vs_slowest,
            "overkill": verdict.overkill,
            "overkill_because": verdict.overkill_reason or None,
            "ranked": verdict.ranked,
        }
        devices.append(d)
    pick = lambda i: compare.reports[i].device.id if i >= 0 else None  # noqa: E731
    return {
        "schema": "accel-sim/compare",
        "schema_version": SCHEMA_VERSION,
        "model": compare.reports[0].name if compare.reports else "",
        "fastest": pick(c.fastest_index),
        "best_value": pick(c.best_value_index),
        "devices": devices,
    }
