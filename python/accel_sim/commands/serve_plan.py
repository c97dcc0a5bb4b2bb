"""`serve-plan`'s options and search: the cheapest serving deployment of a model that meets a
request rate's SLOs, over devices, serving stacks, quantization, TP x PP, scheduler knobs and
aggregated or disaggregated prefill (core: plan_serving, core/include/accelsim/serve_plan.h).
Printing is the CLI's (accel_sim.cli.serve_plan); rendering is accel_sim.report.serve_planning's."""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Any

from accel_sim.commands.flags import COUNT, POSITIVE, SEED, count_list, counts_up_to, refuse, whole_up_to
from accel_sim.commands.serve import (MAX_REQUESTS, add_offload_args, add_shared_prefix_arg, add_speculative_args,
                                      generated_lengths, offload_config, parse_duration, speculative_config)
from accel_sim.progress import Progress

# The default candidates: the three device types of issue-style questions ("H100, H200 or MI300X?")
# and the serving stack most deployments start from.
DEFAULT_DEVICES = "h100,h200,mi300x"
DEFAULT_STACK = "vllm"
OBJECTIVES = ("gpus", "cost", "throughput")
QUANTIZATIONS = ("bf16", "fp8", "int4", "nvfp4", "mxfp4")
MAX_THREADS = 1024
# The GPU budget's bound: a deployment of 100,000 GPUs (the search's layouts do not grow with it).
MAX_GPUS = 100_000


def _counts(text: str) -> list[int]:
    """'4,1,2,2' -> [1, 2, 4]: the distinct values of a comma list of counts (the core's int)."""
    return sorted(set(count_list(text, (1 << 31) - 1)))


def _quantizations(text: str) -> list[str]:
    values = [v.strip() for v in text.split(",") if v.strip()]
    bad = [v for v in values if v not in QUANTIZATIONS]
    if not values or bad:
        raise argparse.ArgumentTypeError(f"expected some of {', '.join(QUANTIZATIONS)} separated by commas (got {text!r})")
    return list(dict.fromkeys(values))


def _units(text: str) -> list[tuple[int, int]]:
    """'1:1,1:2' -> [(1, 1), (1, 2)]; 'none' -> []."""
    if text.strip() == "none":
        return []
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        try:
            p, d = (int(x) for x in part.split(":"))
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected P:D pairs such as 1:2, or none (got {text!r})") from None
        if not (1 <= p <= 64 and 1 <= d <= 64):
            raise argparse.ArgumentTypeError(f"prefill and decode replicas per unit are 1 to 64 each (got {part!r})")
        out.append((p, d))
    if not out:
        raise argparse.ArgumentTypeError(f"expected P:D pairs such as 1:2, or none (got {text!r})")
    return list(dict.fromkeys(out))


_quantizations.comma_list = True  # type: ignore[attr-defined]  (commands.parser.list_valued)
_units.comma_list = True  # type: ignore[attr-defined]


def add_parser(sub: Any) -> None:
    p = sub.add_parser("serve-plan", help="search serving deployments: the fewest GPUs (or least cost) meeting a rate's SLOs")
    p.add_argument("--model", required=True, metavar="NAME|CONFIG", help="a shipped model or an HF config.json")
    p.add_argument("--devices", default=DEFAULT_DEVICES, help=f"comma-separated candidate devices (default: {DEFAULT_DEVICES})")
    p.add_argument("--device-file", action="append", default=[], metavar="FILE", help="a device file (docs/formats/device.md); repeatable")
    p.add_argument("--stack", default=DEFAULT_STACK, metavar="NAME[,NAME]",
                   help=f"candidate serving engines (`accel-sim stacks`): their kernels and scheduler (default: {DEFAULT_STACK})")
    t = p.add_argument_group("target")
    t.add_argument("--qps", **POSITIVE, help="the request rate to serve (the gpus and cost objectives)")
    t.add_argument("--objective", choices=OBJECTIVES,
                   help="gpus: fewest GPUs for --qps (default with --qps); cost: least $/hour for --qps; throughput: "
                        "most output tokens/s per GPU within the SLOs (default without --qps)")
    t.add_argument("--slo-ttft-p99", metavar="DURATION", help="p99 time-to-first-token target, e.g. 500ms")
    t.add_argument("--slo-tpot-p99", metavar="DURATION", help="p99 time-per-output-token target, e.g. 40ms")
    w = p.add_argument_group("workload")
    w.add_argument("--input-len", default="1000", metavar="DIST", help="N, uniform:MIN:MAX or lognormal:MU:SIGMA[:MIN:MAX] (default: 1000)")
    w.add_argument("--output-len", default="200", metavar="DIST", help="as --input-len (default: 200)")
    w.add_argument("--lengths-from", metavar="TRACE", help="draw lengths from log-normals fitted to a trace's (docs/formats/serve-trace.md)")
    w.add_argument("--arrival", choices=("poisson", "gamma", "constant"), default="poisson")
    w.add_argument("--burstiness", **POSITIVE, default=1.0, help="gamma arrivals: coefficient of variation of the gaps (default: 1)")
    w.add_argument("--requests", **counts_up_to(MAX_REQUESTS, "per simulated trial"), default=500,
                   help="requests per simulated trial (default: 500)")
    w.add_argument("--seed", **SEED, default=0)
    add_shared_prefix_arg(w)  # the paged engines (vLLM, SGLang) serve it from their prefix cache
    add_offload_args(w)
    s = p.add_argument_group("search space")
    s.add_argument("--max-gpus", **counts_up_to(MAX_GPUS, "100,000 GPUs"), default=64, help="the GPU budget (default: 64)")
    s.add_argument("--tp", type=_counts, default=[1, 2, 4, 8], help="tensor-parallel degrees (default: 1,2,4,8)")
    s.add_argument("--pp", type=_counts, default=[1, 2, 4], help="pipeline stages (default: 1,2,4)")
    s.add_argument("--dp-attention", type=_counts, default=[1, 2, 4, 8],
                   help="MoE models: attention data-parallel GPUs per replica with the experts split over them "
                        "(serve --dp-attention; tried at TP 1, PP 1; default: 1,2,4,8)")
    s.add_argument("--quantization", type=_quantizations, default=["bf16", "fp8", "nvfp4", "mxfp4"],
                   help="bf16, fp8 (weights, GEMMs and KV cache; devices with fp8 tensor cores), int4 (AWQ weights), "
                        "nvfp4 and mxfp4 (fp4 weights and GEMMs, fp8 KV cache; devices with fp4 tensor cores) "
                        "(default: bf16,fp8,nvfp4,mxfp4)")
    s.add_argument("--max-seqs", type=_counts, default=[32, 64, 128, 256], help="sequences per batch (default: 32,64,128,256)")
    s.add_argument("--token-budget", type=_counts, default=[2048, 8192],
                   help="tokens per step: the prefill chunk, or vLLM's max_num_batched_tokens (default: 2048,8192)")
    s.add_argument("--disaggregate", type=_units, default=[(1, 1), (1, 2), (1, 3), (2, 1)], metavar="P:D,...|none",
                   help="disaggregated units tried beside aggregated replicas: P prefill and D decode replicas "
                        "(default: 1:1,1:2,1:3,2:1)")
    s.add_argument("--exhaustive", action="store_true", help="simulate every layout that fits and meets the latency bounds (no analytic screen)")
    s.add_argument("--threads", **whole_up_to(MAX_THREADS, "0: all cores"), default=0, help="search threads (default: 0, all cores)")
    add_speculative_args(p)  # with --speculative, every layout is tried without and with it
    o = p.add_argument_group("output")
    o.add_argument("--top", **COUNT, default=10, help="layouts to list (default: 10)")
    o.add_argument("--verify", **whole_up_to(1000, "simulations of whole deployments"), default=5,
                   help="best layouts simulated whole at --qps for their SLO attainment (default: 5)")
    o.add_argument("--json", action="store_true", help="print JSON (docs/formats/report.md)")
    o.add_argument("--html", metavar="FILE", help="write a self-contained HTML report: the Pareto chart, the ranked layouts, the rejections")
    o.add_argument("--quiet", action="store_true", help="no progress bar")


def _objective(args: argparse.Namespace) -> str:
    from accel_sim.errors import UsageError

    objective = args.objective or ("gpus" if args.qps is not None else "throughput")
    if objective == "throughput" and args.qps is not None:
        raise UsageError("--objective throughput finds the most tokens/s per GPU within the SLOs: it takes no --qps "
                         "(--objective gpus or cost size a deployment for --qps)")
    if objective != "throughput" and args.qps is None:
        raise UsageError(f"--objective {objective} sizes a deployment for a request rate: give --qps")
    return objective


def _workload(args: argparse.Namespace, model: Any) -> Any:
    from accel_sim import _core

    spec = _core.WorkloadSpec()
    spec.requests, spec.seed = args.requests, args.seed
    spec.arrival = getattr(_core.ArrivalProcess, args.arrival)
    spec.burstiness = args.burstiness
    spec.shared_prefix = args.shared_prefix
    if args.arrival != "gamma":
        refuse(args, ("burstiness",), f"is the gaps' coefficient of variation of --arrival gamma; {args.arrival} "
               "arrivals have none")
    if args.lengths_from:
        refuse(args, ("input_len", "output_len"), "sets generated lengths; these are drawn from log-normals fitted "
               "to --lengths-from")
    generated_lengths(args, spec, model)
    return spec


def _engines(args: argparse.Namespace, entries: list, stacks: list, speculative: Any) -> list:
    """One core ServePlanEngine per device x serving stack: the stack's kernels on the device's
    architecture and its scheduler defaults; the device's built-in system for multi-GPU replicas
    and disaggregated units."""
    from accel_sim import _core
    from accel_sim.io.stack_file import configure_engine
    from accel_sim.io.system_file import builtin_systems

    out = []
    for entry in entries:
        device = entry.spec
        system = next((e.spec for e in builtin_systems() if e.spec.device == device.id), None)
        for stack in stacks:
            serving = stack.serving
            e = _core.ServePlanEngine()
            e.label = f"{device.id} {stack.id}"
            e.stack = stack.id
            e.device = device
            r = _core.ReplicaConfig()
            r.system = system
            if serving.block_size is not None:
                r.block_size = serving.block_size
            if serving.gpu_memory_utilization is not None:
                r.gpu_memory_utilization = serving.gpu_memory_utilization
            o = _core.SimulateOptions()
            o.cost_model = "kernel"  # the calibrated kernel model, as serve's default --cost-model
            configure_engine(o, r, serving.engine_for(entry.architecture), stack.host_overhead_per_kernel_s)
            r.simulate = o
            r.speculative = speculative
            offload_config(args, r)
            e.replica = r
            sched = _core.SchedulerConfig()
            sched.kind = getattr(_core.SchedulerKind, serving.scheduler)
            e.scheduler = sched
            out.append(e)
    return out


def request_of(args: argparse.Namespace) -> tuple[Any, Any, list, list]:
    """(core ServePlanRequest, model spec, device entries, stacks) of `args`."""
    from accel_sim import _core
    from accel_sim.commands.train import refuse_unused_device_files
    from accel_sim.device import resolve_device
    from accel_sim.errors import UsageError
    from accel_sim.io.model_config import load_model_spec
    from accel_sim.io.stack_file import resolve_stack

    objective = _objective(args)
    if not (args.slo_ttft_p99 or args.slo_tpot_p99):
        raise UsageError("serve-plan needs --slo-ttft-p99 and/or --slo-tpot-p99: the layouts are ranked by what "
                         "meeting them takes")
    names = [d.strip() for d in args.devices.split(",") if d.strip()]
    if not names:
        raise UsageError("--devices names no device")
    entries = [resolve_device(n, args.device_file).entry for n in names]
    ids = [e.spec.id for e in entries]
    if len(set(ids)) < len(ids):
        raise UsageError(f"--devices names {', '.join(ids)}: a device twice")
    refuse_unused_device_files(args.device_file, entries, f"the candidates are {', '.join(ids)} (--devices picks them)")
    stack_names = [s.strip() for s in args.stack.split(",") if s.strip()]
    if not stack_names:
        raise UsageError("--stack names no serving stack")
    stacks = [resolve_stack(s, kind="serving") for s in dict.fromkeys(stack_names)]
    if objective == "cost":
        unpriced = [e.spec.id for e in entries if not e.spec.price_usd_per_hour > 0]
        if unpriced:
            raise UsageError(f"--objective cost needs a price per GPU-hour for every device; {', '.join(unpriced)} "
                             "has none (give it price_usd_per_hour in a --device-file)")
    model = load_model_spec(args.model)
    if not args.shared_prefix:
        refuse(args, ("kv_offload",), "keeps the prefix cache's evicted blocks in host memory; these generated "
               "prompts share no prefix (--shared-prefix)")
    if model.moe.num_experts == 0:
        refuse(args, ("dp_attention",), f"splits an MoE model's experts over attention data-parallel GPUs; {model.name} "
               "is dense (more replicas do the same)")
    q = _core.ServePlanRequest()
    q.model = model
    speculative = speculative_config(args)
    q.engines = _engines(args, entries, stacks, speculative)
    space = _core.ServePlanSpace()
    space.tp, space.pp, space.max_seqs, space.token_budgets = args.tp, args.pp, args.max_seqs, args.token_budget
    space.dp_attention = args.dp_attention
    space.quantizations = [_core.parse_quantization(x) for x in args.quantization]
    space.disaggregated = args.disaggregate
    space.speculative = [False, True] if args.speculative else [False]
    space.max_gpus = args.max_gpus
    q.space = space
    q.workload = _workload(args, model)
    q.target_qps = args.qps or 0.0
    q.slo_ttft_s = parse_duration(args.slo_ttft_p99, "--slo-ttft-p99") if args.slo_ttft_p99 else 0.0
    q.slo_tpot_s = parse_duration(args.slo_tpot_p99, "--slo-tpot-p99") if args.slo_tpot_p99 else 0.0
    q.objective = getattr(_core.ServeObjective, objective)
    q.verify = args.verify
    q.exhaustive = args.exhaustive
    q.threads = args.threads
    return q, model, entries, stacks


@dataclass
class ServePlanRun:
    """`accel-sim serve-plan` as it ran: its options (`args`), the core's request and result
    (ServePlanResult: .layouts ranked, .pareto), the devices and stacks searched and the search's
    wall time. to_dict() is `serve-plan --json`, text() the text report."""

    args: Any
    request: Any
    result: Any
    model: Any
    devices: list
    stacks: list
    seconds: float

    @property
    def best(self) -> Any:
        """The best layout's ServeLayoutResult (None when none meets the SLOs within the budget)."""
        return self.result.layouts[0] if self.result.ranked else None

    def engine(self, layout: Any) -> Any:
        """The ServePlanEngine of a layout."""
        return self.request.engines[layout.engine]

    def to_dict(self) -> dict:
        from accel_sim.report.serve_planning import serve_plan_json

        return serve_plan_json(self)

    def text(self) -> str:
        from accel_sim.report.serve_planning import serve_plan_text

        return serve_plan_text(self)


def serve_plan(args: argparse.Namespace) -> ServePlanRun:
    """`serve-plan`'s search of `args` (core plan_serving)."""
    from accel_sim import _core
    from accel_sim.errors import UsageError

    q, model, entries, stacks = request_of(args)
    progress = Progress(f"serve-plan {model.name}", args.quiet or args.json)
    start = time.perf_counter()
    try:
        result = _core.plan_serving(q, progress)
    except ValueError as err:
        raise UsageError(str(err)) from None
    finally:
        progress.close()
    return ServePlanRun(args, q, result, model, entries, stacks, time.perf_counter() - start)
