"""What `serve` reports: a run's JSON (the schema accel-sim/serve, docs/formats/report.md) and its
text, from the core's results (accel_sim.commands.serve.ServeRun)."""

from __future__ import annotations

from typing import Any

from accel_sim.report.json_report import SCHEMA_VERSION


def _ms(s: float) -> str:
    return f"{s * 1e3:,.1f} ms" if s < 10 else f"{s:,.1f} s"


def _pct(p: Any) -> dict:
    return {"mean": p.mean, "p50": p.p50, "p90": p.p90, "p99": p.p99, "max": p.max}


def result_dict(r: Any) -> dict:
    return {"requests": r.requests, "completed": r.completed, "rejected": r.rejected, "makespan_s": r.makespan_s,
            "gpus": r.gpus, "ttft_s": _pct(r.ttft), "tpot_s": _pct(r.tpot), "itl_s": _pct(r.itl), "e2e_s": _pct(r.e2e),
            "queueing_s": _pct(r.queueing), "requests_per_s": r.requests_per_s,
            "output_tokens_per_s": r.output_tokens_per_s, "total_tokens_per_s": r.total_tokens_per_s,
            "goodput_requests_per_s": r.goodput_requests_per_s, "slo_attainment": r.slo_attainment,
            "preemptions": r.preemptions, "steps": r.steps, "mean_batch_size": r.mean_batch_size,
            "prefix_hit_rate": r.prefix_hit_rate, "kv_utilization": {"mean": r.kv_utilization_mean, "max": r.kv_utilization_max},
            "waiting": {"mean": r.waiting_mean, "max": r.waiting_max}, "busy_fraction": r.busy_fraction,
            "cost_per_million_output_tokens_usd": r.cost_per_million_output_tokens_usd or None,
            "cost_per_million_total_tokens_usd": r.cost_per_million_total_tokens_usd or None,
            "timeline": [{"start_s": p.start_s, "t_s": p.t_s, "kv_utilization": p.kv_utilization, "waiting": p.waiting,
                          "running": p.running, "kv_utilization_max": p.kv_utilization_max,
                          "waiting_max": p.waiting_max, "running_max": p.running_max} for p in r.timeline]}



def speculative_dict(sp: Any) -> dict | None:
    """A replica's speculative decoding (core SpeculativeConfig) as the JSON reports give it; None
    when off."""
    if sp.kind.name == "none":
        return None
    return {"kind": sp.kind.name, "tokens": sp.tokens, "acceptance": sp.acceptance,
            "expected_tokens_per_step": sp.expected_tokens, "draft_model": sp.draft.name if sp.draft else None}


def serve_json(s: Any) -> dict:
    """`serve --json` of a ServeRun."""
    from accel_sim.io.stack_file import resolve_stack

    args = s.args
    out = {"schema": "accel-sim/serve", "schema_version": SCHEMA_VERSION, "model": s.spec.name, "scheduler": args.scheduler,
           "replicas": args.replicas, "tp": args.tp, "pp": args.pp, "dp_attention": args.dp_attention,
           "stack": resolve_stack(args.stack, kind="serving").as_dict() if args.stack else None,
           "slo": s.slo, "results": []}
    for device, costs, r, found, kernels in s.rows:
        m = costs.memory
        out["results"].append({"device": device.id, "device_name": device.name, "clock_override_mhz": args.clock_mhz,
                               "speculative": speculative_dict(costs.replica.speculative),
                               "engine": {"prefill_attention": kernels["prefill_attention"],
                                          "decode_attention": kernels["decode_attention"],
                                          "cuda_graphs": kernels["cuda_graphs"]},
                               "max_qps": found.qps if found else None,
                               "max_qps_per_gpu": found.qps_per_gpu if found else None, "memory_per_gpu": {
            "weights_bytes": m.weight_bytes, "activations_bytes": m.activation_bytes, "kv_cache_bytes": m.kv_bytes,
            "kv_blocks_per_engine": m.kv_blocks, "host_kv_blocks_per_engine": m.host_kv_blocks}} | result_dict(r))
    out["results"] += [{"device": device.id, "error": why} for device, why in s.failed]
    return out


def serve_text(s: Any) -> str:
    """`serve`'s text report of a ServeRun: each device's run, then the capacity table of several."""
    from accel_sim.device import device_label
    from accel_sim.io.stack_file import resolve_stack

    args, lines = s.args, []
    scheduler = args.scheduler + (f" chunk {args.chunk}" if args.scheduler == "sarathi" else "")
    for device, costs, r, found, kernels in s.rows:
        head = (f"accel-sim serve · {s.spec.name} on {args.replicas} x {args.tp * args.pp * args.dp_attention} "
                f"{device_label(device, args.clock_mhz)}"
                + (f" (TP {args.tp}" + (f" PP {args.pp}" if args.pp > 1 else "") + ")" if args.tp * args.pp > 1 else "")
                + (f" (attention DP {args.dp_attention}, experts over {args.dp_attention})" if args.dp_attention > 1 else "")
                + f" · {scheduler} · " + (f"{args.disaggregate} prefill + {args.replicas - args.disaggregate} decode replicas · "
                                          if args.disaggregate else "")
                + (f"{args.qps:g} requests/s" if args.qps and not args.find_max_qps else "rate searched"
                   if args.find_max_qps else "trace timestamps"))
        lines += _run_lines(r, args, head, costs.memory, found.qps if found else None)
        if args.stack:
            st = resolve_stack(args.stack, kind="serving")
            lines.append(f"  engine        {st.id} ({st.version}) · prefill attention {kernels['prefill_attention']} · decode "
                         + ("reads the KV cache once per query head" if kernels["decode_attention"] == "per_query_head"
                            else "reads each KV head once for its query group")
                         + " · CUDA graphs " + ("on" if kernels["cuda_graphs"] else "off"))
        sp = costs.replica.speculative
        if sp.kind.name != "none":
            draft = f" ({sp.draft.name}, {costs.memory.draft_weight_bytes / 1e9:.2f} GB of weights)" if sp.draft else \
                f" ({costs.memory.draft_weight_bytes / 1e9:.2f} GB of weights)"
            lines.append(f"  speculative   {sp.kind.name}{draft} · {sp.tokens} tokens proposed a step, each accepted "
                         f"at {sp.acceptance:g} · {sp.expected_tokens:.2f} tokens per step on average")
        if len(s.rows) > 1:
            lines.append("")
    if len(s.devices) > 1:
        lines += _capacity_lines(s.rows, args)
        for device, why in s.failed:
            lines.append(f"  {device.id:<12} cannot serve: {why}")
    return "\n".join(lines)


def _run_lines(r: Any, args: Any, head: str, memory: Any, qps: float | None) -> list[str]:
    gb = 1e9
    lines = [head, "",
             f"  memory/GPU    weights {memory.weight_bytes / gb:,.1f} GB · activations {memory.activation_bytes / gb:,.1f} GB · "
             f"KV cache {memory.kv_bytes / gb:,.1f} GB = {memory.kv_blocks:,} blocks of {args.block_size} tokens per engine"
             + (f" · host tier {memory.host_kv_blocks:,} blocks ({args.kv_offload:g} GiB a GPU, {args.host_link_gbs:g} GB/s)"
                if memory.host_kv_blocks else "")]
    if qps is not None:
        lines.append(f"  max rate      {qps:,.2f} requests/s meet the SLOs")
    lines.append(f"  requests      {r.completed:,} done of {r.requests:,}"
                 + (f" · {r.rejected:,} rejected (longer than the KV cache)" if r.rejected else "")
                 + f" in {_ms(r.makespan_s)} · {r.preemptions:,} preemptions · mean batch {r.mean_batch_size:,.1f}")
    lines.append("")
    rows = [("TTFT", r.ttft), ("TPOT", r.tpot), ("inter-token", r.itl), ("end-to-end", r.e2e), ("queueing", r.queueing)]
    lines.append(f"  {'':<12} {'mean':>11} {'p50':>11} {'p90':>11} {'p99':>11} {'max':>11}")
    for name, p in rows:
        lines.append(f"  {name:<12} " + " ".join(f"{_ms(v):>11}" for v in (p.mean, p.p50, p.p90, p.p99, p.max)))
    lines.append("")
    lines.append(f"  throughput    {r.requests_per_s:,.2f} requests/s · {r.output_tokens_per_s:,.0f} output tokens/s · "
                 f"{r.total_tokens_per_s:,.0f} tokens/s in+out · {r.output_tokens_per_s_per_gpu:,.0f} output tokens/s/GPU")
    if args.slo_ttft_p99 or args.slo_tpot_p99:
        lines.append(f"  goodput       {r.goodput_requests_per_s:,.2f} requests/s meet the SLOs "
                     f"({r.slo_attainment * 100:.1f}% of requests)")
    lines.append(f"  KV cache      {r.kv_utilization_mean * 100:.0f}% used on average, {r.kv_utilization_max * 100:.0f}% at most · "
                 f"queue {r.waiting_mean:,.1f} on average, {r.waiting_max:,.0f} at most · engines busy {r.busy_fraction * 100:.0f}%"
                 + (f" · prefix hits {r.prefix_hit_rate * 100:.0f}% of prompt tokens" if args.prefix_caching else ""))
    if r.cost_per_million_output_tokens_usd:
        lines.append(f"  cost          ${r.cost_per_million_output_tokens_usd:,.2f} per 1M output tokens · "
                     f"${r.cost_per_million_total_tokens_usd:,.2f} per 1M tokens in+out (device price list)")
    return lines


def _capacity_lines(rows: list, args: Any) -> list[str]:
    from accel_sim import _core

    target = args.qps
    lines = ["  capacity" + (" (max rate meeting the SLOs)" if args.find_max_qps else ""),
             f"  {'device':<12} {'requests/s':>11} {'per GPU':>9} {'TTFT p99':>10} {'TPOT p99':>10} {'$/1M out':>9}"
             + (f" {'replicas for ' + format(target, 'g') + '/s':>18}" if target and args.find_max_qps else "")]
    for device, _costs, r, found, _ in rows:
        rate, per_gpu = (found.qps, found.qps_per_gpu) if found is not None else (r.requests_per_s, r.requests_per_s / r.gpus)
        cost = f"{r.cost_per_million_output_tokens_usd:,.2f}" if r.cost_per_million_output_tokens_usd else "n/a"
        line = f"  {device.id:<12} {rate:>11,.2f} {per_gpu:>9,.3f} {_ms(r.ttft.p99):>10} {_ms(r.tpot.p99):>10} {cost:>9}"
        if target and found is not None:
            line += f" {_core.replicas_for_rate(found, target) or 'none':>18}"
        lines.append(line)
    return lines
