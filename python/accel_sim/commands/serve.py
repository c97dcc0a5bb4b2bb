"""`serve`'s options and run: an LLM serving deployment under a request workload (core:
simulate_serving, find_max_qps), from the flags to the core's results. Printing is the CLI's
(accel_sim.cli.serve)."""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass
from typing import Any

from accel_sim.commands.flags import CLOCK_MHZ, COUNT, FRACTION, POSITIVE, RESERVE_FRACTION, SEED, WHOLE, counts_up_to
from accel_sim.progress import Progress
from accel_sim.io import fields
from accel_sim.io.serve_trace import MAX_LENGTH  # a request's lengths: the core's int32 (core/include/accelsim/serve.h)
from accel_sim.io.stack_file import ATTENTION_KERNELS, SCHEDULERS, configure_engine

ROUTERS = ("round-robin", "least-outstanding")


# Bounds on a serving simulation's work, far beyond a deployment's: 10,000 replicas, and 10 million
# requests (a million simulate in 7.0 s on 8 replicas of a 2-core machine, bench/RESULTS.md, so
# ten million in about 70 s; the workload's arrays grow with them).
MAX_REPLICAS = 10_000
MAX_REQUESTS = 10_000_000


def parse_duration(text: str, flag: str = "") -> float:
    """'500ms', '0.5s', '50 ms', '2' (seconds) -> seconds, finite and above 0."""
    from accel_sim.errors import UsageError

    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*(ms|s|us)?\s*", text)
    where = f"{flag} " if flag else ""
    if not m:
        raise UsageError(f"{where}cannot read duration {text!r} (e.g. 500ms, 0.5s)")
    value = float(m.group(1)) * {"ms": 1e-3, "us": 1e-6, "s": 1.0, None: 1.0}[m.group(2)]
    if not (math.isfinite(value) and value > 0):
        raise UsageError(f"{where}{text!r}: a duration must be finite and above 0 (e.g. 500ms)")
    return value


UNBOUNDED_LOGNORMAL_MAX = 1 << 20  # an unbounded log-normal's clip for a model without a position limit


def parse_length(text: str, what: str) -> Any:
    """A length distribution: N | uniform:MIN:MAX | lognormal:MU:SIGMA[:MIN:MAX]. Lengths are
    whole numbers in [1, 2^31 - 1], MU and SIGMA finite, SIGMA at least 0. An unbounded
    log-normal gets max 0 here: `bound_lengths` sets it from the model."""
    from accel_sim import _core
    from accel_sim.errors import UsageError

    spec = _core.LengthSpec()
    parts = text.split(":")
    form = "expected N, uniform:MIN:MAX or lognormal:MU:SIGMA[:MIN:MAX]"

    def length(part: str) -> int:
        try:
            value = int(part)
        except ValueError:
            raise UsageError(f"--{what} {text!r}: {part!r} is not a whole number ({form})") from None
        if not 1 <= value <= MAX_LENGTH:
            raise UsageError(f"--{what} {text!r}: a length is 1 to {MAX_LENGTH:,} tokens (2^31 - 1, the most a "
                             f"request holds), got {value}")
        return value

    def real(part: str, name: str) -> float:
        return fields.finite_text(part, f"--{what} {text!r}: {name}")

    if len(parts) == 1:
        spec.kind, spec.value = _core.LengthDistribution.fixed, length(parts[0])
    elif parts[0] == "uniform" and len(parts) == 3:
        spec.kind, spec.min, spec.max = _core.LengthDistribution.uniform, length(parts[1]), length(parts[2])
    elif parts[0] == "lognormal" and len(parts) in (3, 5):
        spec.kind, spec.mu, spec.sigma = _core.LengthDistribution.lognormal, real(parts[1], "MU"), real(parts[2], "SIGMA")
        if spec.sigma < 0:
            raise UsageError(f"--{what} {text!r}: SIGMA must be at least 0, got {parts[2]}")
        spec.min, spec.max = (length(parts[3]), length(parts[4])) if len(parts) == 5 else (1, 0)
    else:
        raise UsageError(f"--{what} {text!r}: {form}")
    if spec.kind != _core.LengthDistribution.fixed and spec.max and spec.min > spec.max:
        raise UsageError(f"--{what} {text!r}: MIN {spec.min} is above MAX {spec.max}")
    return spec


def largest_length(spec: Any) -> int:
    """The longest length a LengthSpec draws (0: an unbounded log-normal, not bounded yet)."""
    from accel_sim import _core

    return spec.value if spec.kind == _core.LengthDistribution.fixed else spec.max


def add_parser(sub: Any) -> None:
    p = sub.add_parser("serve", help="LLM serving: latency percentiles, throughput, SLOs and capacity under a request load")
    p.add_argument("--model", required=True, metavar="NAME|CONFIG", help="a shipped model or an HF config.json")
    g = p.add_mutually_exclusive_group()
    g.add_argument("--device", default="h100", help="device of every replica (default: h100)")
    g.add_argument("--devices", help="comma-separated devices: a capacity table, one row per device")
    p.add_argument("--device-file", action="append", default=[], metavar="FILE", help="a device file (docs/formats/device.md); repeatable")
    p.add_argument("--tp", **COUNT, default=1, help="tensor-parallel GPUs per replica (default: 1)")
    p.add_argument("--pp", **COUNT, default=1, help="pipeline stages per replica (default: 1)")
    p.add_argument("--dp-attention", **COUNT, default=1, metavar="D",
                   help="an MoE model's replica as D attention data-parallel GPUs, each with its own batch and KV "
                        "cache, the experts split over all D (expert parallelism, all-to-all); tp and pp 1 "
                        "(vLLM --data-parallel-size D --enable-expert-parallel; default: 1)")
    p.add_argument("--replicas", **counts_up_to(MAX_REPLICAS, "0.35 s for 100 requests on 10,000 replicas; 8.7 s on 100,000"),
                   default=1, help="model replicas behind the router (default: 1)")
    p.add_argument("--system", help="the node a multi-GPU replica runs in (default: the built-in system of its device)")
    p.add_argument("--stack", metavar="NAME|FILE",
                   help="the serving engine (vllm, sglang, tensorrt-llm, gpt-fast, ...; `accel-sim stacks`): its "
                        "attention kernels, CUDA graphs and scheduler defaults; a flag typed here wins over the "
                        "stack's (default: none, the flags' defaults)")
    p.add_argument("--router", choices=ROUTERS, default="round-robin", help="default: round-robin")
    p.add_argument("--dtype", choices=("bf16", "fp16"), help="the model's compute dtype (default: the config's)")
    p.add_argument("--weight-dtype", choices=("bf16", "fp16", "fp8", "int8", "int4", "nvfp4", "mxfp4"),
                   help="the weights' dtype (nvfp4, mxfp4: packed fp4 with block scales, dequantized in 16-bit GEMMs "
                        "unless --fp4)")
    p.add_argument("--kv-dtype", choices=("bf16", "fp16", "fp8", "int8"), help="the KV cache's dtype")
    p.add_argument("--fp8", action="store_true",
                   help="the blocks' GEMMs in fp8 with fp8 weights, as TensorRT-LLM's and vLLM's FP8 checkpoints run (pair with --kv-dtype fp8 for an fp8 cache)")
    p.add_argument("--fp4", action="store_true",
                   help="with --weight-dtype nvfp4 or mxfp4: the activations quantized to fp4 too and the GEMMs on the "
                        "device's fp4 units (W4A4), as NVFP4 checkpoints run on Blackwell")
    add_speculative_args(p)
    s = p.add_argument_group("scheduler")
    s.add_argument("--scheduler", choices=SCHEDULERS, default="vllm",
                   help="vllm (prefill-first continuous batching, default), sarathi (chunked prefill), orca (iteration-level, "
                        "whole-request reservation), static (fixed batches)")
    s.add_argument("--order", choices=("fcfs", "sjf"), default="fcfs", help="admission order: first come or shortest prompt first")
    s.add_argument("--max-seqs", **COUNT, default=256, help="sequences per batch (vLLM max_num_seqs; default: 256)")
    s.add_argument("--max-batched-tokens", **COUNT, default=8192, help="tokens per step (vllm, orca; default: 8192)")
    s.add_argument("--chunk", **COUNT, default=512, help="sarathi: token budget per step (default: 512)")
    s.add_argument("--block-size", **COUNT, default=16, help="tokens per KV block (default: 16)")
    s.add_argument("--watermark", **RESERVE_FRACTION, default=0.01, help="fraction of KV blocks kept free at admission (default: 0.01)")
    s.add_argument("--gpu-memory-utilization", **FRACTION, default=0.9, help="fraction of device memory the engine may use (default: 0.9)")
    s.add_argument("--prefix-caching", action="store_true", help="reuse cached prompt blocks (needs block hashes in --workload)")
    s.add_argument("--disaggregate", **WHOLE, default=0, metavar="P",
                   help="P of the replicas run prefill only, the rest decode; the KV cache moves over the system's NICs")
    w = p.add_argument_group("workload")
    w.add_argument("--workload", metavar="TRACE", help="a JSONL/CSV trace: per-request lengths and, if present, timestamps (docs/formats/serve-trace.md)")
    w.add_argument("--lengths-from", metavar="TRACE", help="draw lengths from log-normals fitted to a trace's")
    w.add_argument("--qps", **POSITIVE, help="mean request rate; with a timestamped --workload, rescales its timestamps")
    w.add_argument("--requests", **counts_up_to(MAX_REQUESTS, "a million take 7 s and 0.1 GB, bench/RESULTS.md"), default=1000,
                   help="requests to simulate (default: 1000; a trace: all of it)")
    w.add_argument("--arrival", choices=("poisson", "gamma", "constant"), default="poisson")
    w.add_argument("--burstiness", **POSITIVE, default=1.0, help="gamma arrivals: coefficient of variation of the gaps (default: 1)")
    w.add_argument("--input-len", default="1000", metavar="DIST", help="N, uniform:MIN:MAX or lognormal:MU:SIGMA[:MIN:MAX] (default: 1000); the largest prompt plus the largest output must fit the model's max_position_embeddings (an unbounded log-normal is clipped to fit)")
    w.add_argument("--output-len", default="200", metavar="DIST", help="as --input-len (default: 200)")
    w.add_argument("--seed", **SEED, default=0)
    add_shared_prefix_arg(w)
    add_offload_args(s)
    o = p.add_argument_group("targets and output")
    o.add_argument("--slo-ttft-p99", metavar="DURATION", help="p99 time-to-first-token target, e.g. 500ms")
    o.add_argument("--slo-tpot-p99", metavar="DURATION", help="p99 time-per-output-token target, e.g. 50ms")
    o.add_argument("--find-max-qps", action="store_true", help="search the highest rate meeting the SLOs")
    o.add_argument("--cost-model", default="kernel")
    o.add_argument("--attention-impl", choices=tuple(k for k in ATTENTION_KERNELS if k != "eager"), default="flash2")
    o.add_argument("--clock-mhz", **CLOCK_MHZ, help="core clock override for the kernel model (a power-capped or down-clocked part)")
    o.add_argument("--no-cuda-graphs", action="store_true", help="charge host launch overhead per kernel (default: engines replay CUDA graphs)")
    o.add_argument("--trace", metavar="FILE", help="write the first steps of every engine as a Perfetto / Chrome trace")
    o.add_argument("--trace-steps", **COUNT, default=20000, help="steps kept for --trace (default: 20000)")
    o.add_argument("--json", action="store_true", help="print JSON (docs/formats/report.md)")
    o.add_argument("--html", metavar="FILE", help="write a self-contained HTML report: latency CDFs, percentiles, KV cache and queue over time")
    o.add_argument("--quiet", action="store_true", help="no progress bar")


def add_offload_args(group: Any) -> None:
    """serve's and serve-plan's host-memory KV tier (core ReplicaConfig::host_kv_bytes)."""
    group.add_argument("--kv-offload", **POSITIVE, metavar="GIB",
                       help="keep prefix-cache blocks evicted from the GPU in this much host memory per GPU and load "
                            "them back on a hit (vLLM's CPU offloading, LMCache, SGLang HiCache); needs --host-link-gbs")
    group.add_argument("--host-link-gbs", **POSITIVE, metavar="GB/S",
                       help="each GPU's host link, one direction: about 63 for PCIe Gen5 x16 (32 GT/s x 16 lanes, "
                            "128b/130b: PCI-SIG), 450 for NVLink-C2C (NVIDIA Grace Hopper: 900 GB/s both ways)")


def offload_config(args: argparse.Namespace, replica: Any) -> None:
    """The host-memory KV tier of the offload flags on `replica`, refusing what would not apply."""
    from accel_sim.commands.flags import refuse
    from accel_sim.errors import UsageError

    if args.kv_offload is None:
        refuse(args, ("host_link_gbs",), "is the host link of the --kv-offload tier: give --kv-offload")
        return
    if args.host_link_gbs is None:
        raise UsageError("--kv-offload loads blocks back over the host link: give --host-link-gbs (e.g. 63 for PCIe "
                         "Gen5 x16)")
    replica.host_kv_bytes = args.kv_offload * 2**30
    replica.host_link_bytes_per_s = args.host_link_gbs * 1e9


def add_shared_prefix_arg(group: Any) -> None:
    """serve's and serve-plan's --shared-prefix (core WorkloadSpec::shared_prefix)."""
    group.add_argument("--shared-prefix", **RESERVE_FRACTION, default=0.0, metavar="FRACTION",
                       help="this fraction of every generated prompt is a prefix all requests share (a system "
                            "prompt), in whole blocks of 16 tokens, which a prefix cache serves: a trace's prefix "
                            "hit rate for generated requests (default: 0)")


SPECULATIVE = ("draft_model", "eagle", "mtp")


def add_speculative_args(p: Any) -> None:
    """The speculative-decoding options of serve and serve-plan (core/include/accelsim/serve.h,
    SpeculativeConfig)."""
    g = p.add_argument_group("speculative decoding")
    g.add_argument("--speculative", choices=SPECULATIVE,
                   help="a drafter proposes --spec-tokens tokens a step and the model verifies them in one pass: "
                        "draft_model (--draft-model), eagle (an EAGLE head), mtp (the model's multi-token-prediction "
                        "module, e.g. DeepSeek-V3's)")
    g.add_argument("--spec-tokens", **COUNT, help="tokens proposed per step (k; needs --speculative)")
    g.add_argument("--acceptance", **FRACTION,
                   help="the chance each proposed token is accepted given the ones before it (needs --speculative; "
                        "a step yields (1 - a^(k+1)) / (1 - a) tokens on average)")
    g.add_argument("--draft-model", metavar="NAME|CONFIG", help="the draft model of --speculative draft_model")


def speculative_config(args: argparse.Namespace, dtype: str | None = None) -> Any:
    """The core SpeculativeConfig of the speculative flags (kind none without --speculative)."""
    from accel_sim import _core
    from accel_sim.commands.flags import refuse
    from accel_sim.errors import UsageError
    from accel_sim.io.model_config import load_model_spec

    sp = _core.SpeculativeConfig()
    if not args.speculative:
        refuse(args, ("spec_tokens", "acceptance", "draft_model"), "sets up speculative decoding: give --speculative")
        return sp
    if args.spec_tokens is None or args.acceptance is None:
        raise UsageError(f"--speculative {args.speculative} needs --spec-tokens (tokens proposed a step) and "
                         "--acceptance (the chance each is accepted)")
    if args.speculative == "draft_model" and not args.draft_model:
        raise UsageError("--speculative draft_model needs --draft-model NAME|CONFIG")
    if args.speculative != "draft_model":
        refuse(args, ("draft_model",), f"is the drafter of --speculative draft_model; {args.speculative} drafts "
               "with a head on the model itself")
    if args.spec_tokens > 64:
        raise UsageError(f"--spec-tokens is 1 to 64 (got {args.spec_tokens})")
    sp.kind = getattr(_core.SpeculativeKind, args.speculative)
    sp.tokens, sp.acceptance = args.spec_tokens, args.acceptance
    if args.draft_model:
        sp.draft = load_model_spec(args.draft_model, dtype=dtype)
    return sp


def _system_for(device_id: str, name: str | None) -> Any:
    from accel_sim.errors import UsageError
    from accel_sim.io.system_file import builtin_systems, resolve_system

    if name:
        return resolve_system(name).spec
    for e in builtin_systems():
        if e.spec.device == device_id:
            return e.spec
    raise UsageError(f"no built-in system has {device_id} GPUs: a multi-GPU replica needs --system (see `accel-sim systems`)")


def device_names(args: argparse.Namespace) -> list[str]:
    """The devices --device or --devices names."""
    return [d.strip() for d in (args.devices.split(",") if args.devices else [args.device]) if d.strip()]


def refuse_inapplicable(args: argparse.Namespace, devices: list[str]) -> None:
    """Refuses typed flags this deployment and workload would not use (accel_sim.commands.flags); the
    workload's own (a trace's timestamps, what is random) are refused in serve_workload."""
    from accel_sim.commands.flags import refuse, refuse_attention_kernel_under_roofline

    if args.fp4 and args.weight_dtype not in ("nvfp4", "mxfp4"):
        from accel_sim.errors import UsageError

        raise UsageError("--fp4 runs the GEMMs on fp4 weights: give --weight-dtype nvfp4 or mxfp4")
    if args.fp4 and args.fp8:
        from accel_sim.errors import UsageError

        raise UsageError("--fp4 and --fp8 each choose the blocks' GEMM precision: give one")
    if args.tp * args.pp * args.dp_attention == 1 and not args.disaggregate:
        refuse(args, ("system",), "is the node a multi-GPU replica (--tp, --pp or --dp-attention above 1) or a "
               "disaggregated deployment runs in; this run's replicas are one GPU each")
    if args.replicas * args.pp == 1:
        refuse(args, ("router",), "picks the engine each request goes to; this run has one (--replicas 1, --pp 1)")
    if args.disaggregate and args.scheduler != "sarathi":
        refuse(args, ("scheduler",), f"{args.scheduler} does not run under --disaggregate: prefill engines run chunked "
               "prefill (sarathi, --chunk tokens a step) and decode engines only decode")
    chunking = args.scheduler == "sarathi" or bool(args.disaggregate)
    paged = args.scheduler in ("vllm", "sarathi") or bool(args.disaggregate)
    if not chunking:
        refuse(args, ("chunk",), f"is the token budget of a sarathi step (or a --disaggregate prefill step); "
               f"{args.scheduler} does not chunk prompts")
    if chunking:
        refuse(args, ("max_batched_tokens",), "is the token budget of vllm and orca steps; sarathi steps (and "
               "--disaggregate prefill steps) take --chunk tokens")
    elif args.scheduler == "static":
        refuse(args, ("max_batched_tokens",), "is the token budget of vllm and orca steps; static batches whole "
               "prompts, up to --max-seqs")
    if not paged:
        refuse(args, ("watermark", "prefix_caching"), f"applies to the paged schedulers (vllm, sarathi); "
               f"{args.scheduler} reserves each request's whole prompt and output at admission")
    if not args.workload and not args.shared_prefix:
        refuse(args, ("prefix_caching",), "reuses cached prompt blocks named by a --workload trace's hash_ids or "
               "by --shared-prefix; these generated requests share no prefix")
    if args.workload:
        refuse(args, ("shared_prefix",), "shapes generated prompts; the --workload trace names its prompts' blocks "
               "(hash_ids)")
    if not args.prefix_caching:
        refuse(args, ("shared_prefix",), "is served from a prefix cache: add --prefix-caching")
        refuse(args, ("kv_offload",), "keeps the prefix cache's evicted blocks in host memory: add --prefix-caching")
    if args.arrival != "gamma":
        refuse(args, ("burstiness",), f"is the gaps' coefficient of variation of --arrival gamma; {args.arrival} "
               "arrivals have none")
    if args.workload:
        refuse(args, ("input_len", "output_len", "lengths_from"), "sets generated lengths; the --workload trace "
               "gives every request's lengths")
        refuse(args, ("requests",), "sets how many requests are generated; every request of the --workload trace runs")
    elif args.lengths_from:
        refuse(args, ("input_len", "output_len"), "sets generated lengths; these are drawn from log-normals fitted "
               "to --lengths-from")
    if args.find_max_qps and len(devices) == 1:
        refuse(args, ("qps",), "is not used: --find-max-qps searches the rate (with --devices, --qps is the rate "
               "the capacity table sizes replicas for)")
    if not args.trace:
        refuse(args, ("trace_steps",), "sets the steps --trace keeps; give --trace FILE")
    refuse_attention_kernel_under_roofline(args, eager_builds_core=False)


def position_limit(model: Any) -> tuple[int | None, str]:
    """(the most prompt + output tokens a request may hold, what that bound is): the model's
    max_position_embeddings, which a server does not serve beyond (vLLM's max_model_len defaults to
    it and refuses longer requests); (None, "") when the config gives none."""
    positions = model.max_position_embeddings
    if positions <= 0:
        return None, ""
    return positions, f"{model.name}'s {positions:,} positions (its config's max_position_embeddings)"


def bound_lengths(args: argparse.Namespace, spec: Any, limit: int | None, why: str) -> None:
    """Clips an unbounded log-normal to what the model's positions leave beside the other length's
    largest, and refuses lengths whose largest prompt and largest output together exceed them."""
    from accel_sim import _core
    from accel_sim.errors import UsageError

    lengths = {"input-len": spec.input, "output-len": spec.output}
    for flag, other in (("input-len", "output-len"), ("output-len", "input-len")):
        mine = lengths[flag]
        if mine.kind == _core.LengthDistribution.lognormal and mine.max == 0:
            if limit is None:
                mine.max = UNBOUNDED_LOGNORMAL_MAX
            elif largest_length(lengths[other]) == 0:
                raise UsageError(f"--input-len {args.input_len} and --output-len {args.output_len} are both unbounded "
                                 f"log-normals: give one of them MIN:MAX, so that a request fits {why}")
            else:
                mine.max = max(1, limit - largest_length(lengths[other]))
    longest_in, longest_out = largest_length(spec.input), largest_length(spec.output)
    if limit is not None and longest_in + longest_out > limit:
        tokens = f"{longest_in:,} + {longest_out:,} = {longest_in + longest_out:,} tokens"
        if args.lengths_from:
            raise UsageError(f"the log-normals fitted to --lengths-from {args.lengths_from} draw requests of up to "
                             f"{tokens}, beyond {why}, which a server refuses")
        raise UsageError(f"--input-len {args.input_len} and --output-len {args.output_len} draw requests of up to "
                         f"{tokens}, beyond {why}, which a server refuses: bound the lengths to fit")


def generated_lengths(args: argparse.Namespace, spec: Any, model: Any) -> None:
    """Sets `spec`'s prompt and output length distributions: --input-len and --output-len, or
    log-normals fitted to --lengths-from's trace; every length within the model's positions."""
    from accel_sim import _core
    from accel_sim.io.serve_trace import read_trace

    if args.lengths_from:
        t = read_trace(args.lengths_from)
        spec.input, spec.output = _core.fit_lognormal(t.input_len), _core.fit_lognormal(t.output_len)
    else:
        spec.input, spec.output = parse_length(args.input_len, "input-len"), parse_length(args.output_len, "output-len")
    bound_lengths(args, spec, *position_limit(model))


def serve_workload(args: argparse.Namespace, model: Any) -> tuple[Any, Any]:
    """(workload spec, workload or None): a trace becomes a core Workload, otherwise a spec to
    generate. Every request must fit the model's positions (position_limit)."""
    from accel_sim import _core
    from accel_sim.commands.flags import refuse
    from accel_sim.errors import UsageError
    from accel_sim.io.serve_trace import read_trace

    spec = _core.WorkloadSpec()
    if args.requests < 1:
        raise UsageError(f"--requests must be at least 1 (got {args.requests})")
    if args.qps is not None and not (args.qps > 0 and math.isfinite(args.qps)):
        raise UsageError(f"--qps must be positive and finite (got {args.qps})")
    spec.requests, spec.seed = args.requests, args.seed
    spec.qps = args.qps if args.qps is not None else 1.0
    spec.arrival = getattr(_core.ArrivalProcess, args.arrival)
    if not (args.burstiness > 0 and math.isfinite(args.burstiness)):
        raise UsageError(f"--burstiness must be positive and finite (got {args.burstiness})")
    spec.burstiness = args.burstiness
    spec.shared_prefix = args.shared_prefix
    limit, why = position_limit(model)
    if not args.workload:
        generated_lengths(args, spec, model)
        if args.qps is None and not args.find_max_qps:
            raise UsageError("give --qps (a request rate) or --workload (a trace)")
        fixed = _core.LengthDistribution.fixed
        if args.arrival == "constant" and spec.input.kind == fixed and spec.output.kind == fixed:
            refuse(args, ("seed",), "seeds the random draws; constant arrivals of fixed lengths draw nothing")
        return spec, None
    if args.find_max_qps:
        raise UsageError("--find-max-qps varies the rate of generated arrivals: use --lengths-from with a trace")
    t = read_trace(args.workload, max_request_tokens=limit, limit=why)
    arrivals = t.arrival_s if t.arrival_s is not None else []
    if arrivals:
        refuse(args, ("arrival", "burstiness", "seed"), f"shapes generated arrivals; {args.workload}'s timestamps are "
               "the arrivals (--qps rescales them)")
        if arrivals[-1] == arrivals[0]:
            refuse(args, ("qps",), f"rescales the gaps between a trace's timestamps; {args.workload}'s requests all "
                   "arrive at once")
    elif args.qps is None:
        raise UsageError(f"{args.workload} has no timestamps: give --qps for its arrivals")
    elif args.arrival == "constant":
        refuse(args, ("seed",), f"seeds the random draws; constant arrivals of {args.workload}'s requests draw nothing")
    if t.block_hashes is None:
        refuse(args, ("prefix_caching",), f"reuses cached prompt blocks named by hash_ids; {args.workload} has none")
    hashes, offsets = [], []
    if t.block_hashes is not None:
        offsets.append(0)
        for h in t.block_hashes:
            hashes.extend(h)
            offsets.append(len(hashes))
    try:
        # With --qps, the trace's timestamps are rescaled to that mean rate.
        w = _core.workload_from_arrays(arrivals, t.input_len, t.output_len, hashes, offsets, t.hash_block_tokens, spec,
                                       bool(arrivals) and args.qps is not None)
    except ValueError as err:
        raise UsageError(f"{args.workload}: {err}") from None
    return spec, w


# The serve flags a serving stack sets when they are not typed (flag destination: ServingStack field).
_STACK_FLAGS = {"scheduler": "scheduler", "max_seqs": "max_seqs", "max_batched_tokens": "max_batched_tokens",
                "chunk": "chunk", "block_size": "block_size", "gpu_memory_utilization": "gpu_memory_utilization"}


def apply_serving_stack(args: argparse.Namespace) -> Any:
    """The serving stack --stack names (or None), its scheduler defaults written into `args` for
    each flag the user did not type; the kernels, which depend on the device, are applied in
    _replica."""
    from accel_sim.commands.flags import given
    from accel_sim.errors import UsageError
    from accel_sim.io.stack_file import resolve_stack

    if not args.stack:
        return None
    stack = resolve_stack(args.stack, kind="serving")
    for dest, name in _STACK_FLAGS.items():
        value = getattr(stack.serving, name)
        if value is not None and not given(args, dest):
            setattr(args, dest, value)
    if args.disaggregate and args.scheduler != "sarathi" and not given(args, "scheduler"):
        raise UsageError(f"--disaggregate runs chunked prefill (sarathi) on its prefill engines; {stack.id} schedules "
                         f"with {args.scheduler}: add --scheduler sarathi to run it disaggregated")
    return stack


def engine_kernels(args: argparse.Namespace, stack: Any, architecture: str) -> dict:
    """What the engine runs on a device of `architecture` (ServingStack.engine_for's keys and the
    host's cost per kernel): typed flags first, then the stack's choices, then the flags' defaults."""
    from accel_sim.commands.flags import given

    out = {"prefill_attention": args.attention_impl, "decode_attention": "grouped", "cuda_graphs": True,
           "host_overhead_per_kernel_s": 0.0}
    if stack is not None:
        out |= stack.serving.engine_for(architecture)
        out["host_overhead_per_kernel_s"] = stack.host_overhead_per_kernel_s
        if given(args, "attention_impl"):
            out["prefill_attention"] = args.attention_impl
    out["cuda_graphs"] = out["cuda_graphs"] and not args.no_cuda_graphs
    return out


def _replica(args: argparse.Namespace, device: Any, kernels: dict) -> Any:
    from accel_sim import _core
    from accel_sim.errors import UsageError

    for flag in ("tp", "pp", "replicas", "max_seqs", "max_batched_tokens", "chunk", "block_size"):
        if getattr(args, flag) < 1:
            raise UsageError(f"--{flag.replace('_', '-')} must be at least 1 (got {getattr(args, flag)})")
    r = _core.ReplicaConfig()
    r.tp, r.pp = args.tp, args.pp
    r.dp_attention = args.dp_attention
    if args.tp * args.pp * args.dp_attention > 1 or args.disaggregate:
        r.system = _system_for(device.id, args.system)
    build = _core.BuildOptions()
    build.fp8_gemms = args.fp8
    build.fp4_gemms = args.fp4
    r.build = build
    r.block_size = args.block_size
    r.gpu_memory_utilization = args.gpu_memory_utilization
    r.speculative = speculative_config(args, args.dtype)
    offload_config(args, r)
    # The largest step sizes the activation reserve (vLLM's profiling run): the chunk of chunked
    # prefill (sarathi, a disaggregated prefill engine), the token budget otherwise.
    chunking = args.scheduler == "sarathi" or bool(args.disaggregate)
    r.max_batched_tokens = args.chunk if chunking else args.max_batched_tokens
    o = _core.SimulateOptions()
    o.cost_model = args.cost_model
    configure_engine(o, r, kernels, kernels["host_overhead_per_kernel_s"])
    if args.clock_mhz is not None:
        o.cost.clock_hz = args.clock_mhz * 1e6
    r.simulate = o
    return r


def _config(args: argparse.Namespace, replica: Any, device: Any) -> Any:
    from accel_sim import _core
    from accel_sim.errors import UsageError

    c = _core.ServeConfig()
    c.replicas = args.replicas
    c.router = getattr(_core.RouterKind, args.router.replace("-", "_"))
    s = _core.SchedulerConfig()
    s.kind = getattr(_core.SchedulerKind, args.scheduler)
    s.order = getattr(_core.AdmissionOrder, args.order)
    s.max_seqs, s.max_batched_tokens, s.chunk = args.max_seqs, args.max_batched_tokens, args.chunk
    if not 0 <= args.watermark < 1:
        raise UsageError(f"--watermark must be in [0, 1) (got {args.watermark})")
    s.watermark, s.prefix_caching = args.watermark, args.prefix_caching
    c.scheduler = s
    if args.disaggregate:
        if not 0 < args.disaggregate < args.replicas:
            raise UsageError(f"--disaggregate {args.disaggregate}: needs at least one prefill and one decode replica of --replicas {args.replicas}")
        c.prefill_replicas = args.disaggregate  # the KV cache moves over the system's NICs (the core's default)
    if args.slo_ttft_p99:
        c.slo_ttft_s = parse_duration(args.slo_ttft_p99)
    if args.slo_tpot_p99:
        c.slo_tpot_s = parse_duration(args.slo_tpot_p99)
    c.price_usd_per_gpu_hour = device.price_usd_per_hour
    c.record_steps = args.trace_steps if args.trace else 0
    return c


def serve_runs(args: argparse.Namespace, spec: Any = None) -> tuple[list, list]:
    """The serving run of each device of `args` (of `spec`, the model spec, when the caller has it
    loaded): (rows, failed), rows (device spec, IterationModel,
    ServeResult, MaxQpsResult or None), failed (device spec, why) for devices that cannot serve
    the model (with one device, that is a UsageError instead)."""
    from accel_sim import _core
    from accel_sim.commands.flags import check_clock
    from accel_sim.commands.train import refuse_unused_device_files
    from accel_sim.device import resolve_device
    from accel_sim.errors import UsageError
    from accel_sim.io.model_config import load_model_spec

    if spec is None:
        spec = load_model_spec(args.model, dtype=args.dtype, weight_dtype=args.weight_dtype, kv_dtype=args.kv_dtype)
    devices = device_names(args)
    if not devices:
        raise UsageError("--devices names no device")
    if args.find_max_qps and not (args.slo_ttft_p99 or args.slo_tpot_p99):
        raise UsageError("--find-max-qps needs --slo-ttft-p99 and/or --slo-tpot-p99")
    if args.trace and len(devices) > 1:
        raise UsageError("--trace writes one deployment's steps: give one --device")
    stack = apply_serving_stack(args)
    refuse_inapplicable(args, devices)
    for flag in ("slo_ttft_p99", "slo_tpot_p99"):
        if getattr(args, flag):
            parse_duration(getattr(args, flag), "--" + flag.replace("_", "-"))
    entries = [resolve_device(name, args.device_file).entry for name in devices]
    refuse_unused_device_files(args.device_file, entries, f"its GPUs are {', '.join(e.spec.id for e in entries)} "
                               "(--device or --devices picks the device)")
    check_clock(args, [e.spec for e in entries])
    wspec, workload = serve_workload(args, spec)
    rows, failed = [], []
    for entry in entries:
        device = entry.spec
        kernels = engine_kernels(args, stack, entry.architecture)
        replica = _replica(args, device, kernels)
        config = _config(args, replica, device)
        try:
            costs = _core.IterationModel(spec, device, replica)
            label = f"serve {spec.name} on {device.id}"
            progress = Progress(label, args.quiet or args.json)
            try:
                if args.find_max_qps:
                    found = _core.find_max_qps(costs, wspec, config, progress)
                    result = found.at_max
                else:
                    w = workload if workload is not None else _core.generate_workload(wspec)
                    result, found = _core.simulate_serving(costs, w, config, progress), None
            finally:
                progress.close()
        except ValueError as err:
            if len(devices) == 1:
                raise UsageError(f"{device.id}: {err}") from None
            failed.append((device, str(err)))  # a capacity table keeps going: this device gets a row saying why
            continue
        rows.append((device, costs, result, found, kernels))
    return rows, failed




@dataclass
class ServeRun:
    """`accel-sim serve` as it runs: its options (`args`), the model spec, the devices asked for,
    one (device spec, IterationModel, ServeResult, MaxQpsResult or None, engine kernels) per device
    that serves the model and (device spec, why) per one that cannot. to_dict() is `serve --json`,
    text() the text report (several devices: with their capacity table)."""

    args: Any
    spec: Any
    devices: list
    rows: list
    failed: list

    @property
    def result(self) -> Any:
        """The first device's ServeResult."""
        return self.rows[0][2]

    @property
    def notes(self) -> list[str]:
        """What the figures need said beside them: a rate search that met the SLOs at every rate it
        tried found a lower bound, not the device's limit."""
        return [f"{device.id} meets the SLOs at every rate tried; {found.qps:,.0f} requests/s is a lower bound"
                for device, _, _, found, _ in self.rows if found is not None and found.unbounded]

    @property
    def slo(self) -> dict:
        """The SLOs asked for, in seconds (None: not asked for)."""
        return {"ttft_p99_s": parse_duration(self.args.slo_ttft_p99) if self.args.slo_ttft_p99 else None,
                "tpot_p99_s": parse_duration(self.args.slo_tpot_p99) if self.args.slo_tpot_p99 else None}

    def to_dict(self) -> dict:
        from accel_sim.report.serving import serve_json

        return serve_json(self)

    def text(self) -> str:
        from accel_sim.report.serving import serve_text

        return serve_text(self)


def serve(args: argparse.Namespace) -> ServeRun:
    """`serve`'s runs, one per device of `args` (serve_runs)."""
    from accel_sim.io.model_config import load_model_spec

    spec = load_model_spec(args.model, dtype=args.dtype, weight_dtype=args.weight_dtype, kv_dtype=args.kv_dtype)
    rows, failed = serve_runs(args, spec)
    return ServeRun(args, spec, device_names(args), rows, failed)
