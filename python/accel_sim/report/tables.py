"""Terminal rendering: aligned tables and the summary of each command."""

from __future__ import annotations

from typing import Any, Iterable, Sequence

from accel_sim import _core
from accel_sim.report.hints import hint_message
from accel_sim.report.units import GIB, gib, ms, si


def table(headers: Sequence[str], rows: Iterable[Sequence[Any]], right: Sequence[bool] | None = None) -> str:
    """Aligned plain-text table; `right` marks right-aligned columns (numbers)."""
    rows = [[str(c) for c in row] for row in rows]
    right = right or [False] * len(headers)
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if right[i] else c.ljust(w) for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    out = [line(headers), line(["-" * w for w in widths])]
    out += [line(r) for r in rows]
    return "\n".join("  " + o for o in out)


def _groups_table(groups: list[Any], top: int) -> str:
    rows = [
        (g.name, g.count, f"{g.time_s * 1e3:,.3f}", f"{g.fraction * 100:.1f}", g.dominant_bound.name)
        for g in groups[:top]
    ]
    return table(["name", "ops", "time ms", "%", "bound"], rows, [False, True, True, True, False])


def _dtypes(info: dict) -> str:
    """'bf16', or 'bf16 (int4 weights, fp8 KV cache)' when weights, cache or GEMMs differ."""
    extra = [f"{info[k]} {what}" for k, what in (("weight_dtype", "weights"), ("kv_cache_dtype", "KV cache"))
             if info.get(k, info["dtype"]) != info["dtype"]]
    if info.get("fp8_gemms") and info.get("phase") != "train":  # training says so on its own line
        extra.append("fp8 block GEMMs and weights")
    return info["dtype"] + (f" ({', '.join(extra)})" if extra else "")


def simulation_text(report: Any, top: int = 10) -> str:
    r = report.result
    m = r.memory
    spec = report.device.spec
    lines = [f"accel-sim · {report.name or 'graph'} on {spec.name} ({report.options.cost_model})", ""]
    stack = getattr(report, "stack", None)
    if stack is not None:
        lines.append(f"  stack        {stack.id}: {stack.name}, {stack.version} (attention "
                     f"{report.options.cost.attention_impl.name})")
    total = r.latency_s or 1.0
    band, basis = report.latency_band
    lines.append(f"  latency      {ms(r.latency_s)} ±{band * 100:.0f}%   (band: the model's measured error, {basis})")
    lines.append(
        f"               compute-bound ops {r.compute_bound_time_s / total * 100:.0f}% · "
        f"memory-bound ops {r.memory_bound_time_s / total * 100:.0f}% · waiting on kernel launches "
        f"{r.launch_overhead_time_s / total * 100:.0f}%"
    )
    verdict = "✓ fits" if r.fits else "✗ OOM"
    peak = report.peak_op
    where = (f"   peak during op #{peak.index} {peak.op}" + (f" in {peak.module}" if peak.module else "")
             + (f" ({peak.pass_name})" if r.backward_time_s or r.optimizer_time_s else "")) if peak else ""
    lines.append(f"  peak memory  {gib(m.peak_bytes)} of {gib(r.memory_capacity_bytes)}  {verdict}{where}")
    lines.append(
        f"               with PyTorch's caching allocator {gib(m.peak_segment_bytes)} in segments "
        f"({gib(m.peak_reserved_bytes)} if none is released) + runtime {gib(report.device.spec.runtime_reserved_bytes)} "
        f"= {gib(r.required_bytes)} needed"
    )
    lines.append(
        f"               weights {gib(m.parameter_bytes)} · buffers {gib(m.buffer_bytes)} · inputs "
        f"{gib(m.input_bytes)} · activations at peak {gib(m.peak_activation_bytes)}"
    )
    if m.optimizer_state_bytes or m.peak_gradient_bytes:
        lines.append(
            f"               gradients at peak {gib(m.peak_gradient_bytes)} · optimizer states "
            f"{gib(m.optimizer_state_bytes)}"
        )
    if r.backward_time_s or r.optimizer_time_s:
        tokens = report.tokens_per_s
        lines.append(
            f"  throughput   MFU {r.model_flops_utilization * 100:.1f}% (roofline bound {report.mfu_roofline_bound * 100:.1f}%)"
            + (f" · {tokens:,.0f} tokens/s" if tokens else "")
            + f" · model FLOPs {si(r.model_flops, 'FLOP')} = 6 N T + 3 x forward attention, at the "
            f"{si(r.reference_peak_flops_per_s, 'FLOP/s')} peak"
        )
        lines.append(
            f"  step         forward {ms(r.forward_time_s)} · backward {ms(r.backward_time_s)} · "
            f"optimizer {ms(r.optimizer_time_s)}"
        )
    resized = report.metadata.get("inputs_resized")
    if resized:
        lines.append("  inputs       the script's example inputs resized: " + ", ".join(
            f"{axis} {before} -> {after}" for axis, (before, after) in resized.items()))
    info = report.model_info
    if info:
        shape = (f"batch {info['batch']}, context {info['context']} + 1 new token" if info["phase"] == "decode"
                 else f"batch {info['batch']}, seq {info['seq']}")
        split = [f"TP {info['tensor_parallel']}" + (" + SP" if info.get("sequence_parallel") else "")] if info["tensor_parallel"] > 1 else []
        split += [f"EP {info['expert_parallel']}"] if info.get("expert_parallel", 1) > 1 else []
        split += [f"CP {info['context_parallel']}"] if info.get("context_parallel", 1) > 1 else []
        tp = f", {' '.join(split)} (one rank)" if split else ""
        lines.append(
            f"  model        {info['model']}: {info['parameters'] / 1e9:,.2f} B params, {_dtypes(info)}, "
            f"{info['phase']} ({shape}{tp}), {info['kernels']} kernels · KV cache {gib(info['kv_cache_bytes'])}"
        )
        if info["phase"] == "train":
            masters = "fp32 master weights, gradients and states" if info["master_weights"] else "gradients and states in " + info["dtype"]
            recompute = info.get("recompute", "none")
            if info.get("fp8_gemms"):
                masters += "; block GEMMs in fp8 (Transformer Engine's recipe)"
            lines.append(f"               training step: {info['optimizer']}, {masters}; loss: {info['loss']}; "
                         f"recompute: {recompute}")
        moe = info.get("moe")
        if moe:
            lines.append(
                f"               MoE: {info['active_parameters'] / 1e9:,.2f} B active of {info['parameters'] / 1e9:,.2f} B; "
                f"top-{moe['top_k']} of {moe['num_experts']} experts, {moe['implementation']} GEMMs; "
                f"routing assumed uniform: {moe['expected_experts_touched_per_layer']:.1f} experts' weights read per layer"
            )
    lines.append(f"  work         {si(r.total_flops, 'FLOP')} · {si(r.total_bytes, 'B')} moved · {r.num_kernels} kernels")
    if r.num_collectives:
        system = report.options.system
        where = (f"{ms(r.communication_time_s)} on {system.name} ({', '.join(f'{g.name.upper()} {g.size}' for g in report.options.groups if g.size > 1)}), not overlapped"
                 if system is not None else "not timed (one device; --system times them)")
        lines.append(f"  collectives  {r.num_collectives} · {si(r.communication_bytes, 'B')} · {where}")
    if r.energy_j > 0:
        lines.append(
            f"  energy       {r.energy_j:,.3g} J, {r.energy_j / r.latency_s:,.0f} W average (estimate: idle power "
            f"+ energy per FLOP and per byte, at most the {spec.tdp_w:,.0f} W TDP)"
        )
    lines.append(
        f"  utilization  compute {r.compute_utilization * 100:.1f}% of {si(r.reference_peak_flops_per_s, 'FLOP/s')} · "
        f"bandwidth {r.bandwidth_utilization * 100:.1f}% of {si(spec.memory_bandwidth_bytes_per_s, 'B/s')}"
    )
    gain = report.fusion_gain_s
    if gain > 0:
        lines.append(f"  fusion       fusing elementwise chains into single kernels (torch.compile) would save "
                     f"{ms(gain)} ({gain / total * 100:.1f}%); --fuse costs the graph that way")
    elif report.options.fuse_elementwise:
        lines.append("  fusion       elementwise chains costed as single kernels (--fuse)")
    lines += ["", "Time by op type", _groups_table(report.groups("op"), top)]
    layers = report.groups("layer")
    if any(g.name != "(top level)" for g in layers):
        lines += ["", "Time by layer / module", _groups_table(layers, top)]
    if r.uncovered_ops:
        lines += ["", "Uncovered ops (not in the catalogue; costed as memory-bound on their bytes)"]
        lines.append(
            table(
                ["op", "count", "time ms"],
                [(u.op, u.count, f"{u.time_s * 1e3:,.3f}") for u in r.uncovered_ops],
                [False, True, True],
            )
        )
    if report.hints:
        lines += ["", "Hints"]
        lines += [f"  • {hint_message(h, report)}" for h in report.hints]
    return "\n".join(lines)


def _unit(name: str) -> str:
    """'bf16_matrix' -> 'bf16 tensor units', 'fp32' -> 'fp32 vector units'."""
    return name.replace("_matrix", " tensor units") if name.endswith("_matrix") else f"{name} vector units"


def ran_as(report: Any) -> tuple[str, list[str]]:
    """The precision a device ran the graph's matrix ops in, for a table cell ('fp32', or
    'fp32 as bf16' when it has no unit for the dtype), and a sentence per substitution."""
    r = report.result
    dtype = _core.dtype_name(r.reference_dtype)
    label, notes = dtype, []
    for u in r.substitutions:
        if not u.matrix:
            continue
        name = _core.dtype_name(u.dtype)
        unit = u.unit.replace("_matrix", "")
        if name == dtype:
            label = f"{dtype} as {unit}"
        how = ("in a narrower format, so its figures are not those of " + name + " and it is not ranked"
               if u.narrower else "exactly, at that unit's (lower) rate")
        notes.append(f"{report.device.id} has no {name} tensor units: its {u.ops} {name} matrix op"
                     f"{'s' if u.ops != 1 else ''} ran on {_unit(u.unit)}, {how}")
    return label, notes


def comparison_text(compare: Any) -> str:
    c = compare.comparison
    name = compare.reports[0].name if compare.reports else ""
    lines = [f"accel-sim · {name or 'graph'} on {len(compare.reports)} devices", ""]
    stack = getattr(compare.reports[0], "stack", None) if compare.reports else None
    if stack is not None:
        kernels = ", ".join(f"{r.device.id} {r.options.cost.attention_impl.name}" for r in compare.reports)
        lines += [f"  stack: {stack.id}, {stack.version} (attention: {kernels})", ""]
    rows = []
    notes: list[str] = []
    for report, v in zip(compare.reports, c.devices):
        r = report.result
        precision, why = ran_as(report)
        notes += why
        rows.append(
            (
                report.device.id,
                precision + (" †" if v.narrower_precision else ""),
                f"{ms(r.latency_s)} ±{report.latency_band[0] * 100:.0f}%" + ("" if report.latency_band[1].startswith("measured on") else "*"),
                f"{v.speedup_vs_slowest:.2f}x",
                gib(r.memory.peak_bytes),
                gib(r.memory_capacity_bytes),
                "✓" if r.fits else "✗ OOM",
                v.dominant_bound.name,
                f"{r.compute_utilization * 100:.0f}%",
                f"${v.cost_per_run_usd * 1e6:,.2f}" if v.cost_per_run_usd else "-",
            )
        )
    lines.append(
        table(
            ["device", "precision", "latency", "speed-up", "peak mem", "capacity", "fits", "bound", "compute util",
             "$ per 1M runs"],
            rows,
            [False, False, True, True, True, True, False, False, True, True],
        )
    )
    lines.append("  latency ± the cost model's measured error on that device; * = no measurements there (uncalibrated, wider band)")
    if any(v.narrower_precision for v in c.devices):
        lines.append("  † ran the matrix ops in a narrower format than the model's: not ranked below")
    for note in notes:
        lines.append(f"  {note}")
    lines.append("")
    fastest, best = compare.fastest, compare.best_value
    # Fit, yet not ranked: they ran the matrix ops in a narrower format (the core's verdict).
    unranked = [r.device.id for r, v in zip(compare.reports, c.devices) if r.fits and not v.ranked]
    none = "none fits" + (" at the model's precision" if unranked else "")
    lines.append(f"  fastest:    {fastest.device.id} ({ms(fastest.latency_s)})" if fastest else f"  fastest:    {none}")
    if best is not None:
        lines.append(f"  best value: {best.device.id} (lowest cost per run at list price)")
    memory_bound = [r.device.id for r, v in zip(compare.reports, c.devices) if v.dominant_bound.name == "memory"]
    compute_bound = [r.device.id for r, v in zip(compare.reports, c.devices) if v.dominant_bound.name == "compute"]
    if memory_bound:
        lines.append(f"  memory-bound on: {', '.join(memory_bound)}")
    if compute_bound:
        lines.append(f"  compute-bound on: {', '.join(compute_bound)}")
    for report, v in zip(compare.reports, c.devices):
        if v.overkill:
            lines.append(f"  overkill: {report.device.id} — {v.overkill_reason} costs less per hour (or is smaller) and runs within 25% of its latency")
    oom = [r.device.id for r in compare.reports if not r.fits]
    if oom:
        lines.append(f"  out of memory on: {', '.join(oom)}")
    if unranked:
        dtype = _core.dtype_name(compare.reports[0].result.reference_dtype)
        lines.append(f"  not ranked: {', '.join(unranked)} (no {dtype} tensor units; compare them at a precision "
                     "they run, e.g. --dtype bf16)")
    return "\n".join(lines)


def devices_text(devices: list[Any]) -> str:
    rows = []
    for d in devices:
        s, e = d.spec, d.entry
        p = e.peak_tflops
        rows.append(
            (
                s.id,
                ", ".join(e.aliases),
                s.vendor,
                f"{s.memory_bytes / GIB:,.0f}",
                f"{s.memory_bandwidth_bytes_per_s / 1e9:,.0f}",
                f"{p['bf16']:,.1f}" if "bf16" in p else "-",
                f"{p['fp16']:,.1f}" if "fp16" in p else "-",
                f"{p['fp8']:,.1f}" if "fp8" in p else "-",
                f"{p['fp4']:,.1f}" if "fp4" in p else "-",
                f"{p['fp32']:,.1f}" if "fp32" in p else "-",
                f"{s.price_usd_per_hour:,.2f}" if s.price_usd_per_hour else "-",
            )
        )
    return table(
        ["id", "aliases", "vendor", "mem GiB", "GB/s", "bf16 TF", "fp16 TF", "fp8 TF", "fp4 TF", "fp32 TF", "$/h"],
        rows,
        [False, False, False, True, True, True, True, True, True, True, True],
    )
