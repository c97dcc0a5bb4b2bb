"""What `serve-plan` reports: its JSON (the schema accel-sim/serve-plan, docs/formats/report.md), its
text, its HTML report (the Pareto chart, the ranked layouts, the rejections) and the launch
commands of a layout for vLLM, SGLang and TensorRT-LLM, from the core's result
(accel_sim.commands.serve_plan.ServePlanRun)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from accel_sim.report.json_report import SCHEMA_VERSION
from accel_sim.report.serving import speculative_dict
from accel_sim.report.tables import table

# How each verdict reads in a report, in the core's order (serve_plan.h, LayoutVerdict).
VERDICTS = {"best": "best", "feasible": "meets the SLOs", "invalid": "cannot run the parallelism",
            "unsupported": "quantization not supported", "does_not_fit": "does not fit",
            "misses_ttft": "misses TTFT", "misses_tpot": "misses TPOT", "misses_slo": "misses the SLOs in simulation",
            "over_budget": "over the GPU budget", "screened_out": "screened out (analytic estimate far from the best)"}


def _ms(s: float) -> str:
    return f"{s * 1e3:,.1f} ms" if s < 10 else f"{s:,.1f} s"


def unit_text(layout: Any) -> str:
    """'TP4' / 'TP4 PP2', with '1P:2D' for a disaggregated unit and '+spec' under speculative decoding."""
    par = (f"DP{layout.dp_attention} EP{layout.dp_attention}" if layout.dp_attention > 1 else
           f"TP{layout.tp}" + (f" PP{layout.pp}" if layout.pp > 1 else ""))
    par = f"{par} {layout.prefill_replicas}P:{layout.decode_replicas}D" if layout.disaggregated else par
    return par + (" +spec" if layout.speculative else "")


def layout_text(run: Any, r: Any) -> str:
    """One line naming a layout: device, stack, quantization, parallelism, knobs."""
    e = run.engine(r.layout)
    l = r.layout
    return (f"{e.device.id} {e.stack} {l.quantization.name} {unit_text(l)} · max {l.max_seqs} seqs · "
            f"{l.token_budget:,}-token steps")


def launch_commands(run: Any, r: Any) -> dict[str, str]:
    """The engine command lines that run a layout's replica (a disaggregated unit: its prefill and
    decode servers), for vLLM, SGLang and TensorRT-LLM. Flag names from each engine's documented
    CLI: vLLM's engine arguments (https://docs.vllm.ai/en/latest/serving/engine_args.html), SGLang's
    server arguments (https://docs.sglang.io/advanced_features/server_arguments.html) and
    trtllm-serve's options (https://nvidia.github.io/TensorRT-LLM/commands/trtllm-serve.html)."""
    from accel_sim.io.model_config import find_model

    entry = find_model(run.args.model)
    model = entry.hub_id if entry is not None and entry.hub_id else run.args.model
    l = r.layout
    e = run.engine(l)
    q = l.quantization.name
    mem = e.replica.gpu_memory_utilization
    vllm = [f"vllm serve {model}", f"--tensor-parallel-size {l.tp}", f"--pipeline-parallel-size {l.pp}",
            f"--max-num-seqs {l.max_seqs}", f"--max-num-batched-tokens {l.token_budget}",
            f"--gpu-memory-utilization {mem:g}", f"--block-size {e.replica.block_size}"]
    sglang = [f"python -m sglang.launch_server --model-path {model}", f"--tp-size {l.tp}", f"--pp-size {l.pp}",
              f"--max-running-requests {l.max_seqs}", f"--chunked-prefill-size {l.token_budget}",
              f"--mem-fraction-static {mem:g}"]
    trt = [f"trtllm-serve {model}", f"--tp_size {l.tp}", f"--pp_size {l.pp}", f"--max_batch_size {l.max_seqs}",
           f"--max_num_tokens {l.token_budget}", f"--kv_cache_free_gpu_memory_fraction {mem:g}"]
    if q == "fp8":
        vllm += ["--quantization fp8", "--kv-cache-dtype fp8"]
        sglang += ["--quantization fp8", "--kv-cache-dtype fp8_e4m3"]
        trt[0] = f"trtllm-serve <an FP8 checkpoint of {model}, e.g. quantized with TensorRT Model Optimizer>"
    elif q in ("nvfp4", "mxfp4"):
        fmt = q.upper()
        vllm[0] = f"vllm serve <an {fmt} checkpoint of {model}, e.g. from TensorRT Model Optimizer or AMD Quark>"
        vllm.append("--kv-cache-dtype fp8")
        sglang[0] = f"python -m sglang.launch_server --model-path <an {fmt} checkpoint of {model}>"
        sglang.append("--kv-cache-dtype fp8_e4m3")
        trt[0] = f"trtllm-serve <an {fmt} checkpoint of {model}, e.g. quantized with TensorRT Model Optimizer>"
    elif q == "int4":
        vllm[0] = f"vllm serve <an AWQ 4-bit checkpoint of {model}>"
        sglang[0] = f"python -m sglang.launch_server --model-path <an AWQ 4-bit checkpoint of {model}>"
        trt[0] = f"trtllm-serve <an INT4-AWQ checkpoint of {model}>"
    sp = e.replica.speculative
    if l.speculative:
        # vLLM's --speculative-config (docs.vllm.ai, Speculative Decoding); SGLang's
        # --speculative-algorithm options (docs.sglang.io, Speculative Decoding); TensorRT-LLM's
        # speculative_config in the LLM API options file (trtllm-serve --extra_llm_api_options).
        method = {"eagle": "eagle", "mtp": "deepseek_mtp", "draft_model": "draft_model"}[sp.kind.name]
        draft = f"<{'an EAGLE head for' if sp.kind.name == 'eagle' else 'the draft model of'} {model}>"
        spec = {"method": method, "num_speculative_tokens": sp.tokens}
        if sp.kind.name != "mtp":
            spec["model"] = draft
        vllm.append("--speculative-config '" + json.dumps(spec, separators=(",", ":")) + "'")
        algorithm = {"eagle": "EAGLE", "mtp": "EAGLE", "draft_model": "STANDALONE"}[sp.kind.name]
        sglang.append(f"--speculative-algorithm {algorithm} --speculative-num-steps {sp.tokens} "
                      f"--speculative-eagle-topk 1 --speculative-num-draft-tokens {sp.tokens + 1}"
                      + (f" --speculative-draft-model-path {draft}" if sp.kind.name != "mtp" else ""))
        decoding = {"eagle": "Eagle", "mtp": "MTP", "draft_model": "DraftTarget"}[sp.kind.name]
        trt.append(f"--extra_llm_api_options <a YAML with speculative_config: {{decoding_type: {decoding}, "
                   f"max_draft_len: {sp.tokens}}}>")
    if l.dp_attention > 1:
        d = l.dp_attention
        vllm.append(f"--data-parallel-size {d} --enable-expert-parallel")
        sglang[1] = f"--tp-size {d}"
        sglang.append(f"--dp-size {d} --enable-dp-attention --ep-size {d}")
        trt[1] = f"--tp_size {d}"
        trt.append(f"--ep_size {d} --extra_llm_api_options <a YAML with enable_attention_dp: true>")
    out = {"vllm": " ".join(vllm), "sglang": " ".join(sglang), "tensorrt-llm": " ".join(trt)}
    if l.disaggregated:
        out["vllm"] += (" --kv-transfer-config '{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}'"
                        f"   # on each of the {l.prefill_replicas} prefill and {l.decode_replicas} decode servers, behind a "
                        "disaggregating proxy")
        out["sglang"] += (f" --disaggregation-mode prefill|decode   # {l.prefill_replicas} prefill and "
                          f"{l.decode_replicas} decode servers behind the mini load balancer")
        out["tensorrt-llm"] += (f"   # {l.prefill_replicas} context and {l.decode_replicas} generation servers "
                                "(trtllm-serve disaggregated)")
    return out


def _layout_dict(run: Any, r: Any) -> dict:
    l = r.layout
    e = run.engine(l)
    d = {"device": e.device.id, "stack": e.stack or None, "quantization": l.quantization.name, "tp": l.tp, "pp": l.pp,
         "dp_attention": l.dp_attention,
         "prefill_replicas": l.prefill_replicas, "decode_replicas": l.decode_replicas, "max_seqs": l.max_seqs,
         "token_budget": l.token_budget, "speculative": l.speculative, "unit_gpus": l.unit_gpus,
         "verdict": r.verdict.name, "reason": r.reason,
         "memory_per_gpu": {"weights_bytes": r.weight_bytes_per_gpu, "kv_cache_bytes": r.kv_bytes_per_gpu,
                            "kv_blocks_per_engine": r.kv_blocks},
         "ttft_floor_s": r.ttft_floor_s or None, "tpot_floor_s": r.tpot_floor_s or None,
         "estimated_qps_per_unit": r.estimated_qps_per_unit or None, "simulated": r.simulated}
    if r.simulated and r.qps_per_unit > 0:
        d |= {"qps_per_unit": r.qps_per_unit, "units": r.units, "gpus": r.gpus, "usd_per_hour": r.usd_per_hour or None,
              "output_tokens_per_s_per_gpu": r.output_tokens_per_s_per_gpu,
              "tokens_per_s_per_user": r.tokens_per_s_per_user,
              "ttft_p99_s": r.ttft.p99, "tpot_p99_s": r.tpot.p99, "tpot_mean_s": r.tpot.mean,
              "cost_per_million_output_tokens_usd": r.cost_per_million_output_tokens_usd or None, "pareto": r.pareto}
    if r.verified:
        d["deployment"] = {"slo_attainment": r.slo_attainment, "ttft_p99_s": r.verified_ttft_p99_s,
                           "tpot_p99_s": r.verified_tpot_p99_s}
    return d


def serve_plan_json(run: Any) -> dict:
    """`serve-plan --json` of a ServePlanRun: the inputs, the best layout with its launch commands,
    every layout (ranked ones first) and the rejections counted by verdict."""
    q, res, args = run.request, run.result, run.args
    layouts = list(res.layouts)
    best = run.best
    return {"schema": "accel-sim/serve-plan", "schema_version": SCHEMA_VERSION, "model": run.model.name,
            "objective": q.objective.name, "target_qps": q.target_qps or None,
            "slo": {"ttft_p99_s": q.slo_ttft_s or None, "tpot_p99_s": q.slo_tpot_s or None},
            "workload": {"mean_input_tokens": res.mean_input_tokens, "mean_output_tokens": res.mean_output_tokens,
                         "requests_per_trial": q.workload.requests, "seed": q.workload.seed},
            "devices": [e.spec.id for e in run.devices], "stacks": [s.as_dict() for s in run.stacks],
            "max_gpus": q.space.max_gpus,
            "speculative": speculative_dict(q.engines[0].replica.speculative),
            "search": {"layouts": len(layouts), "simulated": res.simulated, "ranked": res.ranked, "trials": res.trials,
                       "exhaustive": q.exhaustive, "seconds": run.seconds},
            "best": (_layout_dict(run, best) | {"launch": launch_commands(run, best)}) if best is not None else None,
            "pareto": [_layout_dict(run, layouts[i]) for i in res.pareto],
            "rejected": dict(Counter(r.verdict.name for r in layouts[res.ranked:])),
            "layouts": [_layout_dict(run, r) for r in layouts]}


RANKED_HEAD = ["#", "device", "stack", "quant", "unit", "seqs", "budget", "req/s/unit", "units", "GPUs", "$/hour",
               "tok/s/GPU", "tok/s/user", "TTFT p99", "TPOT p99", "SLO met"]
PARETO_ROWS = 12  # the text report's rows of the front (the HTML chart shows all of it)


def thinned(items: list, count: int) -> list:
    """At most `count` of `items`, evenly spaced, the first and last kept."""
    if len(items) <= count:
        return items
    picks = sorted({round(i * (len(items) - 1) / (count - 1)) for i in range(count)})
    return [items[i] for i in picks]


def _ranked_rows(run: Any, count: int) -> list:
    rows = []
    for i, r in enumerate(list(run.result.layouts)[:min(count, run.result.ranked)]):
        e = run.engine(r.layout)
        att = f"{r.slo_attainment * 100:.1f}%" if r.verified else "-"
        rows.append([str(i + 1), e.device.id, e.stack or "-", r.layout.quantization.name, unit_text(r.layout),
                     str(r.layout.max_seqs), f"{r.layout.token_budget:,}", f"{r.qps_per_unit:,.2f}", str(r.units),
                     str(r.gpus), f"${r.usd_per_hour:,.2f}" if r.usd_per_hour else "-",
                     f"{r.output_tokens_per_s_per_gpu:,.0f}", f"{r.tokens_per_s_per_user:,.1f}", _ms(r.ttft.p99),
                     _ms(r.tpot.p99), att])
    return rows


def rejections(run: Any) -> list[tuple[str, int, str]]:
    """(verdict, layouts, one example's line) for each kind of rejection, most common first."""
    layouts = list(run.result.layouts)[run.result.ranked:]
    counts = Counter(r.verdict.name for r in layouts)
    out = []
    for verdict, n in counts.most_common():
        example = next(r for r in layouts if r.verdict.name == verdict)
        out.append((verdict, n, f"{layout_text(run, example)}: {example.reason}"))
    return out


def serve_plan_text(run: Any) -> str:
    """`serve-plan`'s text report."""
    q, res = run.request, run.result
    slo = " and ".join(f"p99 {k} ≤ {_ms(v)}" for k, v in (("TTFT", q.slo_ttft_s), ("TPOT", q.slo_tpot_s)) if v)
    target = f"{q.target_qps:g} requests/s" if q.target_qps else "the most output tokens/s per GPU"
    lines = [f"accel-sim serve-plan · {run.model.name} · {target} · {slo} · prompts {res.mean_input_tokens:,.0f}, "
             f"outputs {res.mean_output_tokens:,.0f} tokens on average",
             f"  searched {len(res.layouts):,} layouts ({', '.join(e.spec.id for e in run.devices)} x "
             f"{', '.join(s.id for s in run.stacks)}; up to {q.space.max_gpus} GPUs) in {run.seconds:.1f} s: "
             f"{res.simulated:,} simulated ({res.trials:,} runs), {res.ranked:,} meet the SLOs within the budget"]
    best = run.best
    if best is None:
        lines += ["", "  no layout meets the SLOs within the budget"]
    else:
        e = run.engine(best.layout)
        cost = (f" · ${best.usd_per_hour:,.2f}/hour · ${best.cost_per_million_output_tokens_usd:,.2f} per 1M output tokens"
                if best.usd_per_hour else "")
        lines += ["", f"  best          {best.units} x {unit_text(best.layout)} on {e.device.name} ({e.stack}, "
                      f"{best.layout.quantization.name}, max {best.layout.max_seqs} seqs, {best.layout.token_budget:,}-token "
                      f"steps) = {best.gpus} GPU{'s' if best.gpus > 1 else ''}{cost}"]
        if best.verified:
            lines.append(f"  deployment    {best.slo_attainment * 100:.1f}% of requests meet the SLOs at "
                         f"{q.target_qps:g} requests/s · p99 TTFT {_ms(best.verified_ttft_p99_s)} · p99 TPOT "
                         f"{_ms(best.verified_tpot_p99_s)}")
        lines.append(f"  per unit      {best.qps_per_unit:,.2f} requests/s within the SLOs · "
                     f"{best.output_tokens_per_s_per_gpu:,.0f} output tokens/s/GPU · "
                     f"{best.tokens_per_s_per_user:,.1f} tokens/s per user")
        lines += ["", "  ranked layouts (rate per unit within the SLOs; latency at that rate; SLO met: the whole "
                      "deployment at the target)", ""]
        lines.append(table(RANKED_HEAD, _ranked_rows(run, run.args.top), [False] * 7 + [True] * 9))
        front = thinned([res.layouts[i] for i in res.pareto], PARETO_ROWS)
        lines += ["", f"  Pareto front ({len(res.pareto)} layouts{'' if len(res.pareto) <= PARETO_ROWS else f', {PARETO_ROWS} shown'}: "
                      "output tokens/s per GPU vs per user, each at its highest rate within the SLOs)", ""]
        lines.append(table(["tok/s/user", "tok/s/GPU", "layout"],
                           [[f"{r.tokens_per_s_per_user:,.1f}", f"{r.output_tokens_per_s_per_gpu:,.0f}", layout_text(run, r)]
                            for r in front], [True, True, False]))
        lines += ["", "  launch the best layout's replicas:"]
        lines += [f"    {engine:<13}{cmd}" for engine, cmd in launch_commands(run, best).items()]
    rej = rejections(run)
    if rej:
        lines += ["", "  rejected (layouts, and one of them):"]
        for verdict, n, example in rej:
            lines.append(f"    {VERDICTS[verdict]:<28}{n:>6,}  e.g. {example}")
    return "\n".join(lines)


def serve_plan_html(run: Any) -> str:
    """The HTML report: the Pareto chart of every layout meeting the SLOs (the front joined), the
    ranked table with launch commands, and the rejections."""
    from accel_sim.report.html_report import card, esc, html_table, kpi, page
    from accel_sim.report.svg import PALETTE, Series, line_chart

    q, res = run.request, run.result
    layouts = list(res.layouts)
    ranked = layouts[:res.ranked]
    sections = []
    best = run.best
    if best is not None:
        kpis = '<div class="kpis">' + "".join([
            kpi("best", f"{best.gpus} GPU{'s' if best.gpus > 1 else ''}", layout_text(run, best)),
            kpi("cost", f"${best.usd_per_hour:,.2f}/hour" if best.usd_per_hour else "-",
                f"${best.cost_per_million_output_tokens_usd:,.2f} per 1M output tokens" if best.usd_per_hour else ""),
            kpi("SLO attainment", f"{best.slo_attainment * 100:.1f}%" if best.verified else "-",
                "the whole deployment at the target rate" if best.verified else ""),
            kpi("searched", f"{len(layouts):,} layouts", f"{res.simulated:,} simulated in {run.seconds:.1f} s"),
        ]) + "</div>"
        sections.append(card("Summary", kpis, cls="summary"))
        # Each device's layouts as a scatter; the front joined by a dashed line.
        by_device: dict[str, list] = {}
        for r in ranked:
            by_device.setdefault(run.engine(r.layout).device.id, []).append(r)
        front = [layouts[i] for i in res.pareto]
        series = [Series("Pareto front", [(r.tokens_per_s_per_user, r.output_tokens_per_s_per_gpu) for r in front],
                         "#222222", [layout_text(run, r) for r in front], dashed=True)]
        for i, (device, rs) in enumerate(sorted(by_device.items())):
            series.append(Series(device, [(r.tokens_per_s_per_user, r.output_tokens_per_s_per_gpu) for r in rs],
                                 PALETTE[i % len(PALETTE)],
                                 [f"{layout_text(run, r)}: {r.tokens_per_s_per_user:,.1f} tokens/s per user, "
                                  f"{r.output_tokens_per_s_per_gpu:,.0f} tokens/s per GPU, {r.gpus} GPUs" for r in rs],
                                 line=False))
        chart = line_chart(series, cls="pareto",
                           title="Throughput per GPU vs speed per user (each layout at its highest rate within the SLOs)",
                           x_label="output tokens/s per user (1 / mean TPOT)", y_label="output tokens/s per GPU",
                           width=900, height=460, x_min=0, y_min=0, attrs={"data-layouts": len(ranked)})
        sections.append(card("Pareto front", chart, cls="pareto"))
        rows = _ranked_rows(run, max(run.args.top, 25))
        table_html = html_table(RANKED_HEAD, rows, [False] * 7 + [True] * 9, cls="serve-plan-ranked")
        sections.append(card("Ranked layouts", f'<div style="overflow-x:auto">{table_html}</div>',
                             note="rate per unit: the highest a unit sustains within the SLOs, with its latency; SLO met: "
                                  "the whole deployment simulated at the target rate"))
        launch = "".join(f'<p><b>{engine}</b></p><pre style="white-space:pre-wrap">{esc(cmd)}</pre>'
                         for engine, cmd in launch_commands(run, best).items())
        sections.append(card("Launch the best layout", launch, cls="launch"))
    else:
        sections.append(card("Summary", "<p>No layout meets the SLOs within the budget.</p>", cls="summary"))
    rej = rejections(run)
    if rej:
        sections.append(card("Rejected layouts", html_table(["why", "layouts", "for example"],
                                                            [(VERDICTS[v], (f"{n:,}", n), ex) for v, n, ex in rej],
                                                            [False, True, False], cls="serve-plan-rejected"), cls="rejected"))
    slo = ", ".join(f"p99 {k} {_ms(v)}" for k, v in (("TTFT", q.slo_ttft_s), ("TPOT", q.slo_tpot_s)) if v)
    target = f"{q.target_qps:g} requests/s" if q.target_qps else "most tokens/s per GPU"
    return page(f"accel-sim serve-plan · {run.model.name}", f"{target} · {slo} · up to {q.space.max_gpus} GPUs", sections)

