"""What `train` and `plan` report: a run's JSON (the schemas accel-sim/train and accel-sim/plan,
docs/formats/report.md) and its text, from the run's inputs and the core's estimates
(accel_sim.commands.train.TrainRun, accel_sim.commands.plan.PlanRun)."""

from __future__ import annotations

from typing import Any

from accel_sim.report.json_report import SCHEMA_VERSION


def clock_line(run: Any, e: Any) -> str | None:
    """What clock the step's kernels ran at when it is the device's sustained clock under training
    load (the core's training_clock_hz), not the device file's or an override the title names."""
    if run.clock_mhz is not None or e.clock_hz <= 0:
        return None
    k = run.device.kernel
    capped = ""
    if k.sustained_clock_power_w > 0 and run.device.tdp_w > 0 and k.sustained_clock_power_w != run.device.tdp_w:
        capped = (f" at {k.sustained_clock_power_w:,.0f} W, brought to this part's {run.device.tdp_w:,.0f} W "
                  "power limit")
    return (f"{e.clock_hz / 1e6:,.0f} MHz, the sustained clock under training load "
            f"({k.sustained_clock_fraction:g} of {run.device.clock_hz / 1e6:,.0f} MHz{capped}, "
            f"kernel.sustained_clock_fraction in the device file)")


def lora_dict(run: Any) -> dict | None:
    """The JSON reports' `lora`: the rank, the targeted linears ("all": every linear of the
    blocks) and the stack's layout, or None."""
    if not run.base.lora_rank:
        return None
    return {"rank": run.base.lora_rank, "targets": list(run.base.lora_targets) or "all",
            "layout": run.stack.training.lora}


def lora_line(run: Any) -> str | None:
    """The text reports' LoRA line, or None without adapters."""
    d = lora_dict(run)
    if d is None:
        return None
    shared = "q, k and v share one A, gate and up another" if d["layout"] == "fused" else "one per projection"
    where = "every linear of the blocks" if d["targets"] == "all" else ", ".join(d["targets"])
    return f"rank {d['rank']} adapters beside {where} ({shared}); the model frozen"


def layout_dict(layout: Any, recompute: str, recompute_interval: int = 1) -> dict:
    d = {n: getattr(layout, n) for n in ("tp", "pp", "dp", "cp", "ep", "micro_batch", "global_batch",
                                         "virtual_stages", "zero", "sequence_parallel", "summa", "order", "gpipe")}
    d["recompute"] = recompute
    d["recompute_interval"] = recompute_interval
    d["offload"] = offloaded(layout)
    return d


def offloaded(layout: Any) -> list[str]:
    """What the layout offloads to host memory (core ParallelLayout::offload_*)."""
    return [k for k in ("optimizer", "parameters", "activations") if getattr(layout, f"offload_{k}")]


def estimate_dict(e: Any) -> dict:
    return {"step_s": e.step_s, "micro_batches": e.micro_batches, "stage_layers": e.stage_layers,
            "breakdown_s": {"compute": e.compute_s, "of_which_tp_comm": e.tp_comm_s, "bubble": e.bubble_s,
                            "pp_comm": e.pp_comm_s, "dp_comm_exposed": e.dp_comm_s,
                            "overlap_slowdown": e.overlap_slowdown_s, "optimizer": e.optimizer_s,
                            "offload_exposed": e.offload_s, "host_optimizer": e.host_optimizer_s},
            "host_memory_per_node_bytes": e.host_memory_per_node_bytes,
            "tokens_per_s": e.tokens_per_s, "tflops_per_gpu": e.tflops_per_gpu, "mfu": e.mfu,
            "memory_per_gpu_bytes": e.memory_per_gpu_bytes, "activation_bytes": e.activation_bytes,
            "reserved_per_gpu_bytes": e.reserved_per_gpu_bytes,
            "fits": e.fits, "reason": e.reason, "clock_mhz": e.clock_hz / 1e6 if e.clock_hz > 0 else None}


def candidate_dict(c: Any, interval: int) -> dict:
    return {"layout": layout_dict(c.layout, c.recompute.name, interval)} | estimate_dict(c.estimate)


def short_layout(c: Any) -> str:
    l = c.layout  # noqa: E741
    return (f"TP{l.tp} PP{l.pp} DP{l.dp}" + (f" CP{l.cp}" if l.cp > 1 else "") + (f" EP{l.ep}" if l.ep > 1 else "")
            + f" mb{l.micro_batch}" + (f" v{l.virtual_stages}" if l.virtual_stages > 1 else "")
            + f" ZeRO-{l.zero} {c.recompute.name}" + (" SP" if l.sequence_parallel else "")
            + (" SUMMA" if l.summa else "")
            + (" off:" + "+".join(k[:3] for k in offloaded(l)) if l.offloads() else ""))



def train_json(t: Any) -> dict:
    """`train --json` of a TrainRun."""
    args, run, layout, e = t.args, t.run, t.layout, t.estimate
    return {"schema": "accel-sim/train", "schema_version": SCHEMA_VERSION, "model": run.spec.name,
            "system": t.entry.spec.id, "device": run.device.id, **run.device_dict(), "stack": run.stack.as_dict(),
            "lora": lora_dict(run), "gpus": args.gpus, "seq": args.seq,
            "layout": layout_dict(layout, run.base.recompute.name, run.base.recompute_interval),
            "compile": run.options.fuse_elementwise, "tp_overlap": run.options.overlap_tp_comm} | estimate_dict(e)


def train_text(t: Any) -> str:
    """`train`'s text report of a TrainRun."""
    args, entry, run, layout, e = t.args, t.entry, t.run, t.layout, t.estimate
    ms = lambda s: f"{s * 1e3:,.1f} ms"  # noqa: E731
    lines = [f"accel-sim train · {run.spec.name} on {args.gpus} x {run.device_label} ({entry.spec.name}) · "
             f"TP {args.tp} PP {args.pp} DP {args.dp}" + (f" CP {args.cp}" if args.cp > 1 else "")
             + (f" EP {args.ep}" if args.ep > 1 else "") + (" SP" if args.sp else "")
             + (f" · 2D SUMMA {layout.tp}x{layout.cp}" if layout.summa else "") + f" · ZeRO-{layout.zero}",
             f"  stack        {run.stack.id}: {run.stack.version}"]
    if clock_line(run, e):
        lines.append(f"  clock        {clock_line(run, e)}")
    if run.options.fuse_elementwise:
        lines.append("  compile      torch.compile: each chain of element-wise ops one kernel (what the step keeps as eager)")
    if lora_line(run):
        lines.append(f"  LoRA         {lora_line(run)}")
    if run.variant_of:
        lines.append(f"  device       {run.device.id}: {entry.spec.id}'s variant of {run.variant_of} "
                     f"({', '.join(entry.device_overrides)} from {entry.path})")
    schedule = "GPipe" if layout.gpipe else ("interleaved 1F1B" if layout.virtual_stages > 1 else "1F1B")
    lines += [
        "",
        f"  step         {ms(e.step_s)} · {e.micro_batches} micro-batches of {args.microbatch} x {args.seq} tokens",
        f"               compute {ms(e.compute_s)} (TP/CP/EP collectives {ms(e.tp_comm_s)}) · bubble {ms(e.bubble_s)} · "
        f"pipeline sends {ms(e.pp_comm_s)} · data-parallel exposed {ms(e.dp_comm_s)} · optimizer {ms(e.optimizer_s)}",
        f"               compute slowed by the collectives it overlaps {ms(e.overlap_slowdown_s)}",
        *([f"  offload      {', '.join(offloaded(layout))} to host memory: transfers exposed {ms(e.offload_s)} · "
           f"CPU optimizer step {ms(e.host_optimizer_s)} · host memory {e.host_memory_per_node_bytes / 2**30:,.1f} GiB "
           f"per node of {entry.spec.host.memory_bytes / 2**30:,.0f} GiB"] if layout.offloads() else []),
        f"  throughput   {e.tokens_per_s:,.0f} tokens/s · {e.tflops_per_gpu:,.0f} TFLOP/s per GPU · MFU {e.mfu * 100:.1f}%",
        f"  memory       {e.memory_per_gpu_bytes / 2**30:,.1f} GiB per GPU of {run.device.memory_bytes / 2**30:,.0f} GiB "
        f"(activations {e.activation_bytes / 2**30:,.1f} GiB)",
        f"               {e.reserved_per_gpu_bytes / 2**30:,.1f} GiB as PyTorch's caching allocator reserves it "
        f"(max_memory_reserved + runtime: the free blocks of its segments kept)",
        f"  (the heaviest stage, {e.stage_layers} layers; {schedule} schedule; see core/include/accelsim/training.h)",
    ]
    return "\n".join(lines)


def plan_json(p: Any) -> Any:
    """`plan --json` of a PlanRun: one run's object, or the list of several."""
    args = p.args
    out = [{"schema": "accel-sim/plan", "schema_version": SCHEMA_VERSION, "model": run.spec.name,
            "system": entry.spec.id, "device": run.device.id, "stack": run.stack.as_dict(), "lora": lora_dict(run),
            **run.device_dict(), "gpus": gpus, "seq": args.seq, "global_batch": p.global_batch, "search_s": secs,
            "candidates": r.candidates, "evaluated": r.evaluated, "feasible": r.feasible, "profiles": r.profiles,
            "best": [candidate_dict(c, run.base.recompute_interval) for c in r.best],
            "best_infeasible": [candidate_dict(c, run.base.recompute_interval) for c in r.best_infeasible],
            "pruned": dict(r.pruned)} for entry, run, gpus, r, secs in p.runs]
    return out[0] if len(out) == 1 else out


def plan_text(p: Any) -> str:
    """`plan`'s text report of a PlanRun: the ranked configurations of one run, or the best of each
    of several (a sweep over GPU counts or systems)."""
    return _plan_sweep_text(p) if len(p.runs) > 1 else _plan_one_text(p)


def _plan_one_text(p: Any) -> str:
    args = p.args
    entry, run, gpus, r, secs = p.runs[0]
    lines = [f"accel-sim plan · {run.spec.name} on {gpus:,} x {run.device_label} ({entry.spec.name}) · "
             f"global batch {p.global_batch:,} x {args.seq:,} tokens · {args.precision}",
             f"  stack: {run.stack.id}, {run.stack.version}"]
    ranked = r.best or r.best_infeasible
    if ranked and clock_line(run, ranked[0].estimate):
        lines.append(f"  clock: {clock_line(run, ranked[0].estimate)}")
    if lora_line(run):
        lines.append(f"  LoRA: {lora_line(run)}")
    lines += [f"  searched {r.candidates:,} configurations in {secs:.1f} s: {r.evaluated:,} composed from "
              f"{r.profiles:,} stage profiles, {r.feasible:,} fit", ""]
    if r.best:
        lines.append(f"  {'#':>2}  {'configuration':<52} {'step':>9} {'tokens/s':>12} {'TFLOP/s':>8} {'MFU':>6} {'GiB':>6}"
                     "   compute / bubble / TP comm / DP comm")
        for i, c in enumerate(r.best, 1):
            e = c.estimate
            lines.append(f"  {i:>2}  {short_layout(c):<52} {e.step_s:>8.2f}s {e.tokens_per_s:>12,.0f} {e.tflops_per_gpu:>8,.0f} "
                         f"{e.mfu * 100:>5.1f}% {e.memory_per_gpu_bytes / 2**30:>6.1f}   "
                         f"{e.compute_s:.2f} / {e.bubble_s:.2f} / {e.tp_comm_s:.2f} / {e.dp_comm_s:.2f} s")
        lines.append(f"      order: {r.best[0].layout.order} (innermost first) · days for {args.train_tokens:,.0f} tokens: "
                     f"{args.train_tokens / r.best[0].estimate.tokens_per_s / 86400:,.1f}")
    else:
        lines.append("  no configuration fits")
    if r.best_infeasible:
        lines += ["", "  faster, but they do not fit:"]
        for c in r.best_infeasible[:3]:
            lines.append(f"      {short_layout(c):<52} {c.estimate.step_s:>8.2f}s  {c.estimate.reason}")
    if r.pruned:
        lines += ["", "  not composed:"]
        for why, n in sorted(r.pruned.items(), key=lambda kv: -kv[1])[:6]:
            lines.append(f"    {n:>12,}  {why}")
    return "\n".join(lines)


def _plan_sweep_text(p: Any) -> str:
    args, runs = p.args, p.runs
    model = runs[0][1].spec.name
    lines = [f"accel-sim plan · {model} · global batch {p.global_batch:,} x {args.seq:,} tokens · best configuration per "
             "cluster size"]
    if args.device or args.clock_mhz is not None or any(run.variant_of for _, run, *_ in runs):
        shown = dict.fromkeys(f"{entry.spec.id}: {run.device_label}" for entry, run, *_ in runs)
        lines.append(f"  GPUs         {' · '.join(shown)}")
    lines += ["", f"  {'system':<22} {'GPUs':>7} {'best configuration':<52} {'step':>9} {'MFU':>6} {'days':>8}   searched"]
    for entry, _, gpus, r, secs in runs:
        if not r.best:
            lines.append(f"  {entry.spec.id:<22} {gpus:>7,} {'(nothing fits)':<52}")
            continue
        c = r.best[0]
        days = args.train_tokens / c.estimate.tokens_per_s / 86400
        lines.append(f"  {entry.spec.id:<22} {gpus:>7,} {short_layout(c):<52} {c.estimate.step_s:>8.2f}s "
                     f"{c.estimate.mfu * 100:>5.1f}% {days:>8,.1f}   {r.candidates:,} in {secs:.1f} s")
    lines.append(f"\n  days: time to train on {args.train_tokens:,.0f} tokens at the best configuration's throughput")
    return "\n".join(lines)
