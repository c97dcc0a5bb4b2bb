"""`train`'s options and run: one parallel training configuration on a cluster (core:
estimate_training), from the flags to the core's TrainingEstimate; the options and the run
inputs that `plan` shares. Printing is the CLI's (accel_sim.cli.train)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from accel_sim import _core
from accel_sim.commands.flags import AT_LEAST_ONE, CLOCK_MHZ, COUNT, check_clock
from accel_sim.io.stack_file import ATTENTION_KERNELS, RECOMPUTE_POLICIES

PRECISIONS = ("bf16-mixed", "fp16-mixed", "fp8-mixed", "bf16", "fp16", "fp32")
RECOMPUTE = RECOMPUTE_POLICIES
# The blocks' linears a LoRA adapter can sit beside (the core's kLoraTargets).
LORA_TARGETS = tuple(_core.LORA_TARGETS)


def add_run_args(p: argparse.ArgumentParser) -> None:
    """What `train` and `plan` share: the model, the cluster and the step's numerics."""
    p.add_argument("--model", required=True, metavar="NAME|CONFIG", help="a shipped model or an HF config.json")
    p.add_argument("--seq", **COUNT, required=True, help="tokens per sequence")
    p.add_argument("--scaleup-domain", **COUNT, metavar="N", help="GPUs per scale-up domain (NVLink/NVSwitch, xGMI), overriding the system file's")
    p.add_argument("--precision", choices=PRECISIONS, default="bf16-mixed", help="bf16-mixed (default): 16-bit compute, fp32 master weights, gradients and optimizer states; fp8-mixed: the blocks' GEMMs in fp8 as Transformer Engine runs them")
    p.add_argument("--optimizer", choices=("adamw", "adam", "sgd"), default="adamw")
    p.add_argument("--attention-impl", choices=ATTENTION_KERNELS,
                   help="the attention kernel (default: the stack's on this device)")
    p.add_argument("--stack", metavar="NAME|FILE",
                   help="the training framework as a stack file: what it runs (attention kernel, fused SwiGLU, TP "
                        "overlap, fp8 weights, gradient dtype, ZeRO stages); default: megatron-core "
                        "(shipped: megatron-core, megatron-core-24.07, megatron-lm-2022, torchtitan, torchtitan-2024, llm-foundry, llm-foundry-2023, deepspeed, hf-accelerate, flash-attention-training; docs/formats/stack.md)")
    p.add_argument("--lora-rank", **COUNT, metavar="R",
                   help="LoRA fine-tuning: the model frozen, adapters of rank R trained beside the blocks' linears, laid out "
                        "as the stack lays them out (one per fused projection, or per nn.Linear; stack field training.lora)")
    p.add_argument("--lora-targets", metavar="LIST",
                   help=f"with --lora-rank: the linears that take adapters, comma-separated from {','.join(LORA_TARGETS)} "
                        "(default: all of them, as Megatron-Bridge's LoRA and HF PEFT's all-linear)")
    p.add_argument("--recompute-interval", **COUNT, default=1, metavar="N",
                   help="with --recompute: checkpoint every N-th layer only (torchtitan's selective_ac_option N is "
                        "--recompute full --recompute-interval N; default: 1, every layer)")
    p.add_argument("--expert-imbalance", **AT_LEAST_ONE, default=1.0, metavar="F",
                   help="MoE under EP: the busiest rank's routed tokens over the mean (default: 1, balanced)")
    p.add_argument("--compile", action="store_true",
                   help="the step under torch.compile: each chain of element-wise ops one kernel, as Inductor fuses it "
                        "(torchtitan's training.compile); what the step keeps is costed as in eager mode")
    p.add_argument("--tp-overlap", action="store_true",
                   help="overlap the TP collectives with their GEMMs where the stack does not by default (torchtitan's "
                        "async TP, parallelism.enable_async_tensor_parallel; needs --sp)")
    p.add_argument("--no-tp-overlap", action="store_true",
                   help="expose the TP collectives (default: with SP they overlap their GEMMs, Megatron-LM's --tp-comm-overlap as NeMo's recipes run it)")
    p.add_argument("--cost-model", default="kernel")
    p.add_argument("--device", metavar="NAME", help="the GPUs of the run, in place of the system's own (its fabric stays): a "
                   "shipped device or one of --device-file")
    p.add_argument("--device-file", action="append", default=[], metavar="FILE",
                   help="a device file (docs/formats/device.md) the system or --device names; repeatable")
    p.add_argument("--clock-mhz", **CLOCK_MHZ, help="core clock override for the kernel model (a power-capped or down-clocked part)")
    p.add_argument("--json", action="store_true", help="print JSON")


@dataclass
class RunInputs:
    spec: Any     # _core.ModelSpec
    base: Any     # _core.BuildOptions (sequence, numerics)
    options: Any  # _core.SimulateOptions
    device: Any   # _core.DeviceSpec
    clock_mhz: float | None = None  # the kernel model's clock override, or None
    variant_of: str | None = None   # the device id the system's device_overrides vary, or None
    device_entry: Any = None        # the DeviceEntry of `device` (its file)
    device_use: str = ""            # why the run uses that device: "h100_sxm (the device of dgx_h100)"
    stack: Any = None               # the StackEntry the run applies (io/stack_file.py)

    @property
    def device_label(self) -> str:
        """The device as reports name it, with its clock when overridden."""
        from accel_sim.device import device_label

        return device_label(self.device, self.clock_mhz)

    def device_dict(self) -> dict:
        """What the JSON reports add of the device: its name, the clock override (null: the
        device file's clock) and the device its system's device_overrides vary (null: none)."""
        return {"device_name": self.device.name, "clock_override_mhz": self.clock_mhz, "device_variant_of": self.variant_of}


def system_device(args: argparse.Namespace, entry: Any) -> Any:
    """The DeviceEntry a train or plan run uses on the system `entry`: --device, else the system's
    device variant (its `device_overrides`), else the device it names; from the shipped devices
    and --device-file."""
    from accel_sim.device import resolve_device

    if args.device:
        return resolve_device(args.device, args.device_file).entry
    if entry.device_variant is not None:
        return entry.device_variant
    return resolve_device(entry.spec.device, args.device_file).entry


def refuse_device_files_no_run_uses(args: argparse.Namespace, runs: list[RunInputs]) -> None:
    """Refuses a --device-file whose device none of `runs` (one per system of the command) uses."""
    uses = ", ".join(dict.fromkeys(run.device_use for run in runs))
    why = "" if args.device else "; --device picks another"
    refuse_unused_device_files(args.device_file, [run.device_entry for run in runs], f"its GPUs are {uses}{why}")


def refuse_unused_device_files(device_files: list[str], used: list[Any], why: str) -> None:
    """A UsageError for a --device-file that defines none of the devices `used` (DeviceEntry, a
    variant counting as its base's file), ending in `why`: a device file the run ignores would
    leave the user believing their device was simulated."""
    from accel_sim.errors import UsageError
    from accel_sim.io.device_file import load_device_file

    files = [u.variant_of.path if u.variant_of is not None else u.path for u in used]
    paths = {str(Path(f).resolve()) for f in files if Path(f).is_file()}
    for f in device_files:
        if str(Path(f).resolve()) not in paths:
            raise UsageError(f"--device-file {f} gives {load_device_file(f).spec.id}, which this run does not use: {why}")


def run_inputs(args: argparse.Namespace, entry: Any) -> RunInputs:
    """The model, numerics, options and device of a train or plan run on the system `entry`."""
    from accel_sim import _core
    from accel_sim.errors import UsageError
    from accel_sim.io.model_config import load_model_spec
    from accel_sim.io.stack_file import resolve_stack

    if args.seq < 1:
        raise UsageError(f"--seq must be at least 1 (got {args.seq})")
    chosen = system_device(args, entry)
    device = chosen.spec
    check_clock(args, [device])
    stack = resolve_stack(args.stack)
    t = stack.training
    if args.precision == "fp8-mixed" and t.fp8 == "none":
        raise UsageError(f"--precision fp8-mixed: {stack.id} has no fp8 recipe "
                         f"({stack.sources.get('training.fp8', stack.path)})")
    dtype = {"bf16-mixed": "bf16", "fp16-mixed": "fp16", "fp8-mixed": "bf16"}.get(args.precision, args.precision)
    spec = load_model_spec(args.model, dtype=dtype)
    _refuse_run_flags(args, spec)
    base = _core.BuildOptions()
    base.seq = args.seq
    base.master_weights = args.precision.endswith("-mixed")
    base.fp8_gemms = args.precision == "fp8-mixed"
    base.optimizer = getattr(_core.Optimizer, args.optimizer)
    if not args.expert_imbalance >= 1.0:
        raise UsageError(f"--expert-imbalance must be at least 1 (got {args.expert_imbalance})")
    base.expert_imbalance = args.expert_imbalance
    base.recompute_interval = args.recompute_interval
    apply_lora(args, stack, base)
    options = _core.SimulateOptions()
    options.cost_model = args.cost_model
    apply_training_stack(stack, base, options, chosen.architecture, args.attention_impl)
    if args.tp_overlap and args.no_tp_overlap:
        raise UsageError("--tp-overlap and --no-tp-overlap contradict each other")
    if args.tp_overlap and not t.tensor_parallel:
        raise UsageError(f"--tp-overlap: {stack.id} has no tensor parallelism")
    options.overlap_tp_comm = (options.overlap_tp_comm or args.tp_overlap) and not args.no_tp_overlap
    options.fuse_elementwise = args.compile
    if args.clock_mhz is not None:
        options.cost.clock_hz = args.clock_mhz * 1e6
    use = f"{device.id} (--device)" if args.device else f"{device.id} (the device of {entry.spec.id})"
    return RunInputs(spec, base, options, device, args.clock_mhz,
                     chosen.variant_of.spec.id if chosen.variant_of is not None else None, chosen, use, stack)


def apply_lora(args: argparse.Namespace, stack: Any, base: Any) -> None:
    """Sets --lora-rank and --lora-targets on the step's BuildOptions `base` (apply_training_stack
    lays the adapters out as the stack does); refuses them under a stack without adapters."""
    from accel_sim.errors import UsageError

    if args.lora_targets is not None and not args.lora_rank:
        raise UsageError("--lora-targets applies to a LoRA run: give --lora-rank")
    if not args.lora_rank:
        return
    layout = stack.training.lora
    if layout == "none":
        raise UsageError(f"--lora-rank: {stack.id} has no LoRA adapters "
                         f"({stack.sources.get('training.lora', stack.path)})")
    targets = [t.strip() for t in (args.lora_targets or "").split(",") if t.strip()]
    unknown = [t for t in targets if t not in LORA_TARGETS]
    if unknown or (args.lora_targets is not None and not targets):
        raise UsageError(f"--lora-targets {args.lora_targets!r}: name linears from {', '.join(LORA_TARGETS)}")
    base.lora_rank = args.lora_rank
    base.lora_targets = targets


def apply_training_stack(stack: Any, base: Any, options: Any, architecture: str, attention: str | None = None) -> None:
    """Sets what the stack runs (io/stack_file.py) on a training step's BuildOptions `base` (its
    precision already set) and SimulateOptions `options`: the attention kernel on a device of
    `architecture` (or `attention`, when given), the fused gated activation, fp8 parameters and
    weight cache, eager or fused RMSNorm, the gradient buffers' dtype, the layout of LoRA adapters (when `base` has a LoRA
    rank), TP-communication overlap and the host's cost per
    kernel (its runtime section; the device's launch cost when it has none)."""
    from accel_sim import _core

    t = stack.training
    kernel = attention or t.attention_for(architecture)
    base.eager_attention = kernel == "eager"
    base.fused_gated_activation = t.fused_gated_activation
    base.eager_norm = t.eager_norm
    base.cross_entropy = getattr(_core.CrossEntropy, t.cross_entropy)
    base.fp8_parameters = base.fp8_gemms and t.fp8_parameters
    base.fp8_recipe = getattr(_core.Fp8Recipe, t.fp8_recipe_in_core() if base.fp8_gemms else "transformer_engine")
    base.gradients_in_weight_dtype = base.master_weights and t.gradients_in_weight_dtype
    base.optimizer_impl = getattr(_core.OptimizerImpl, t.optimizer_impl_for(base.optimizer.name))
    base.lora_shared_input = base.lora_rank > 0 and t.lora == "fused"
    options.cost.attention_impl = getattr(_core.AttentionImpl, kernel)
    options.overlap_tp_comm = t.tp_comm_overlap_for(architecture)
    options.fp8_weight_cache = t.fp8_weight_cache
    options.cost.host_overhead_per_kernel_s = stack.host_overhead_per_kernel_s


def refuse_layout_the_stack_cannot_run(stack: Any, degrees: dict[str, list[int]], zero: list[int] | None) -> None:
    """Refuses parallel degrees above 1 the stack has no implementation of, and ZeRO stages it
    does not run (`degrees`: tp, pp, cp and virtual_stages, each the values asked for)."""
    from accel_sim.errors import UsageError

    t = stack.training
    for flag, field in (("tp", "tensor_parallel"), ("pp", "pipeline_parallel"),
                        ("virtual_stages", "pipeline_parallel"), ("cp", "context_parallel")):
        values = degrees.get(flag) or [1]
        if not getattr(t, field) and max(values) > 1:
            raise UsageError(f"--{flag.replace('_', '-')} {max(values)}: {stack.id} has no {field.replace('_', ' ')}ism "
                             f"({stack.sources.get('training.' + field, stack.path)})")
    bad = [z for z in (zero or []) if z not in t.zero_stages]
    if bad:
        raise UsageError(f"--zero {bad[0]}: {stack.id} runs ZeRO stages {', '.join(map(str, t.zero_stages))} "
                         f"({stack.sources.get('training.zero_stages', stack.path)})")


def recompute_policy(stack: Any, policy: str) -> Any:
    """The core's Recompute that the flags' `policy` (none, selective, full) runs under `stack`;
    `selective` under a stack without selective recomputation is refused."""
    from accel_sim.errors import UsageError

    chosen = stack.training.recompute_for(policy)
    if chosen is None:
        raise UsageError(f"--recompute {policy}: {stack.id} has no selective recomputation "
                         f"({stack.sources.get('training.selective_recompute', stack.path)}); use none or full")
    return chosen


def stack_builder_choices(name: str, degrees: dict[str, list[int]], kernels: str, phase: str,
                          optimizer: str, fp8_gemms: bool = False) -> tuple[Any, dict]:
    """(the training stack `name` resolves to, build_model_graph's keywords it sets: its fused
    SwiGLU, norm, cross-entropy, optimizer implementation and, under `fp8_gemms`, fp8 recipe)
    for a graph the builder makes in `kernels` style for `phase` with `optimizer`: what --stack
    changes in simulate's, compare's and fit's --model graphs; a parallel degree the stack has no
    implementation of is refused."""
    from accel_sim.io.stack_file import resolve_stack

    stack = resolve_stack(name)
    refuse_layout_the_stack_cannot_run(stack, degrees, None)
    t = stack.training
    train = phase == "train"
    return stack, {"fused_gated_activation": t.fused_gated_activation and kernels == "fused",
                   "fp8_recipe": t.fp8_recipe_in_core() if fp8_gemms else "transformer_engine",
                   "eager_norm": t.eager_norm,
                   "cross_entropy": t.cross_entropy if train else "upcast",
                   "optimizer_impl": t.optimizer_impl_for(optimizer) if train else "fused"}


def _refuse_run_flags(args: argparse.Namespace, spec: Any) -> None:
    """Refuses typed flags of add_run_args that `spec` or the cost model would not use
    (accel_sim.commands.flags); `train` refuses its layout's own in refuse_layout_flags."""
    from accel_sim.commands.flags import refuse, refuse_attention_kernel_under_roofline

    ep = args.ep if isinstance(args.ep, list) or args.ep is None else [args.ep]  # plan: a list, or the search's
    if not spec.moe.num_experts:
        refuse(args, ("expert_imbalance",), f"applies to mixture-of-experts models; {spec.name} is dense")
    elif ep is not None and max(ep) == 1:
        refuse(args, ("expert_imbalance",), "is the busiest expert-parallel rank's share of routed tokens over the "
               "mean; with --ep 1 every rank runs every expert")
    refuse_attention_kernel_under_roofline(args, eager_builds_core=True)


def refuse_layout_flags(args: argparse.Namespace) -> None:
    """Refuses typed flags `train`'s layout cannot honour (accel_sim.commands.flags)."""
    from accel_sim.commands.flags import refuse

    sharded_offload = bool(args.offload and args.offload & {"optimizer", "parameters"})
    if args.dp * args.cp == 1:
        if args.zero and not sharded_offload:
            refuse(args, ("zero",), f"{args.zero} shards optimizer states, gradients or parameters over the "
                   "data- and context-parallel ranks; with --dp 1 and --cp 1 there is nothing to shard "
                   "(ZeRO with dp x cp = 1 is ZeRO-0)")
        refuse(args, ("no_overlap",), "exposes the data-parallel communication (over the data- and "
               "context-parallel ranks); with --dp 1 and --cp 1 there is none")
    if args.pp == 1 and args.schedule == "gpipe":
        refuse(args, ("schedule",), "gpipe is a pipeline schedule; with --pp 1 there is no pipeline")
    if not (args.tp > 1 and args.sp):
        refuse(args, ("no_tp_overlap",), "exposes the TP all-gathers and reduce-scatters of sequence parallelism; "
               "this run has none (it needs --tp above 1 and --sp)")


OFFLOAD_BITS = {"optimizer": _core.OFFLOAD_OPTIMIZER, "parameters": _core.OFFLOAD_PARAMETERS,
                "activations": _core.OFFLOAD_ACTIVATIONS}


def offload_kinds(text: str, flag: str = "--offload") -> frozenset[str]:
    """The set a comma- or plus-separated --offload value names (optimizer, parameters,
    activations); `none` is the empty set."""
    from accel_sim.errors import UsageError

    names = [n.strip() for n in text.replace("+", ",").split(",") if n.strip()]
    if names == ["none"]:
        return frozenset()
    bad = [n for n in names if n not in OFFLOAD_BITS]
    if bad or not names:
        raise UsageError(f"{flag}: {bad[0] if bad else text!r} is not something to offload (known: "
                         f"{', '.join(OFFLOAD_BITS)}, or none)")
    if len(set(names)) != len(names):
        raise UsageError(f"{flag} {text}: names one kind twice")
    return frozenset(names)


def _offload_arg(text: str) -> frozenset[str]:
    """--offload's argparse type: offload_kinds, its error argparse's."""
    from accel_sim.errors import UsageError

    try:
        return offload_kinds(text)
    except UsageError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix("--offload: ").removeprefix("--offload ")) from None


def offload_bits(kinds: frozenset[str]) -> int:
    return sum(OFFLOAD_BITS[k] for k in kinds)


def refuse_offload(kinds: frozenset[str], stack: Any, system: Any, flag: str = "--offload") -> None:
    """Refuses an offload the system has no host for (its `host` block) or the stack cannot run
    (its training.offload)."""
    from accel_sim.errors import UsageError

    if not kinds:
        return
    what = "+".join(sorted(kinds))
    if not system.spec.host.given():
        raise UsageError(f"{flag} {what}: system {system.spec.id} gives no host memory, host DRAM bandwidth and host "
                         "link (a `host` block, docs/formats/system.md)")
    if kinds not in stack.training.offload_sets():
        runs = ", ".join("+".join(sorted(e)) for e in stack.training.offload) or "nothing"
        raise UsageError(f"{flag} {what}: {stack.id} offloads {runs} "
                         f"({stack.sources.get('training.offload', stack.path)})")


def _grid(text: str) -> tuple[int, int]:
    """A 2D grid P x Q (e.g. 4x2) of --tp-2d and --cp-2d."""
    parts = text.lower().replace("×", "x").split("x")
    if len(parts) != 2 or not all(p.strip().isdigit() and int(p) >= 1 for p in parts):
        raise argparse.ArgumentTypeError(f"expected a grid P x Q such as 4x2 (got {text!r})")
    return int(parts[0]), int(parts[1])


def apply_grid(args: argparse.Namespace) -> bool:
    """Sets --tp, --cp and --sp from --tp-2d or --cp-2d (refusing a --tp or --cp given beside them);
    True for SUMMA (--tp-2d)."""
    from accel_sim.commands.flags import given
    from accel_sim.errors import UsageError

    if args.tp_2d and args.cp_2d:
        raise UsageError("give --tp-2d (SUMMA) or --cp-2d (TP x CP), not both")
    grid = args.tp_2d or args.cp_2d
    if grid is None:
        return False
    flag = "--tp-2d" if args.tp_2d else "--cp-2d"
    for name in ("tp", "cp"):
        if given(args, name):
            raise UsageError(f"{flag} {grid[0]}x{grid[1]} sets --tp and --cp; give one or the other")
    if grid[0] < 2 or grid[1] < 2:
        raise UsageError(f"{flag} {grid[0]}x{grid[1]}: a 2D grid needs both sides above 1 (a side of 1 is 1D: "
                         "--tp or --cp)")
    args.tp, args.cp, args.sp = grid[0], grid[1], True
    return args.tp_2d is not None


def add_parser(sub: Any) -> None:
    p = sub.add_parser("train", help="one data/pipeline/tensor-parallel training step on a cluster")
    p.add_argument("--system", required=True, help="the cluster (see `accel-sim systems`)")
    p.add_argument("--gpus", **COUNT, required=True, help="GPUs in the run: tp x pp x dp x cp")
    for flag, text in (("tp", "tensor"), ("pp", "pipeline"), ("dp", "data"), ("cp", "context"), ("ep", "expert (inside dp)")):
        p.add_argument(f"--{flag}", **COUNT, default=1, help=f"{text}-parallel degree (default: 1)")
    p.add_argument("--sp", action="store_true", help="sequence parallelism with TP")
    p.add_argument("--tp-2d", type=_grid, metavar="PxQ",
                   help="2D SUMMA tensor parallelism on a P x Q grid: P splits the widths and heads (--tp), Q the "
                        "sequence and each weight's input (--cp); with sequence parallelism; needs a --stack that runs "
                        "it (megatron-core-summa)")
    p.add_argument("--cp-2d", type=_grid, metavar="PxQ",
                   help="2D context tensor parallelism: P-way TP with sequence parallelism over the widths, Q-way "
                        "context parallelism over the sequence (the same as --tp P --cp Q --sp)")
    p.add_argument("--global-batch", **COUNT, required=True, help="sequences per step, all data-parallel replicas")
    p.add_argument("--microbatch", **COUNT, default=1, help="sequences per micro-batch (default: 1)")
    p.add_argument("--virtual-stages", **COUNT, default=1, help="interleaved 1F1B model chunks per pipeline rank (default: 1)")
    p.add_argument("--schedule", choices=("1f1b", "gpipe"), default="1f1b", help="pipeline schedule (default: 1f1b; gpipe keeps every micro-batch in flight)")
    p.add_argument("--zero", type=int, choices=(0, 1, 2, 3),
                   help="0: all-reduce gradients; 1: distributed optimizer; 2: and sharded gradients; 3: FSDP, sharded "
                        "parameters (default: the stack's, 0 without data or context parallelism)")
    p.add_argument("--order", default="tp-cp-ep-dp-pp", help="rank order, innermost first, as Megatron-LM's (default: tp-cp-ep-dp-pp)")
    p.add_argument("--no-overlap", action="store_true", help="expose all data-parallel communication")
    p.add_argument("--offload", type=_offload_arg, metavar="LIST",
                   help="offload to the system's host memory: optimizer (ZeRO-Offload: states and the step on the "
                        "CPU), parameters (ZeRO-Infinity, ZeRO-3), activations, comma-separated; as the --stack runs it")
    p.add_argument("--recompute", choices=RECOMPUTE, default="none")
    p.add_argument("--trace", metavar="FILE", help="write the step's pipeline schedule as a Perfetto / Chrome trace (JSON)")
    p.add_argument("--html", metavar="FILE", help="write a self-contained HTML report: step breakdown, pipeline timeline, memory per GPU")
    p.add_argument("--chakra", metavar="PREFIX",
                   help="write the step as Chakra execution traces, PREFIX.{stage}.et for each pipeline stage: what "
                        "every rank of stage r runs (for ASTRA-sim, copy it to each of those ranks' NPU files and map "
                        "the stage numbers in comm_src/comm_dst to their NPU ids)")
    add_run_args(p)


def train_estimate(args: argparse.Namespace) -> tuple[Any, Any, Any, Any]:
    """(system entry, run inputs, layout, the core's TrainingEstimate) of one configuration; an
    infeasible one is returned with its reason (e.feasible false), not raised."""
    from accel_sim import _core
    from accel_sim.errors import UsageError
    from accel_sim.io.system_file import resolve_system, with_scaleup_domain

    entry = with_scaleup_domain(resolve_system(args.system, device_files=args.device_file), args.scaleup_domain,
                                args.device_file)
    summa = apply_grid(args)
    refuse_layout_flags(args)
    run = run_inputs(args, entry)
    if args.tp_overlap and not (args.tp > 1 and args.sp):  # after run_inputs: a stack without TP says so first
        raise UsageError("--tp-overlap overlaps the TP all-gathers and reduce-scatters of sequence parallelism "
                         "with their GEMMs; this run has none (it needs --tp above 1 and --sp)")
    refuse_device_files_no_run_uses(args, [run])
    layout = _core.ParallelLayout()
    for name in ("tp", "pp", "dp", "cp", "ep"):
        setattr(layout, name, getattr(args, name))
    if layout.gpus() != args.gpus:
        raise UsageError(f"--gpus {args.gpus} is not tp x pp x dp x cp = {layout.gpus()}")
    layout.sequence_parallel = args.sp
    layout.micro_batch, layout.global_batch = args.microbatch, args.global_batch
    t = run.stack.training
    if summa and not t.summa:
        raise UsageError(f"--tp-2d: {run.stack.id} runs 1D tensor parallelism "
                         f"({run.stack.sources.get('training.summa', run.stack.path)}); --stack megatron-core-summa "
                         "models 2D SUMMA")
    layout.summa = summa
    refuse_layout_the_stack_cannot_run(run.stack, {f: [getattr(args, f)] for f in ("tp", "pp", "cp", "virtual_stages")},
                                       None if args.zero is None else [args.zero])
    kinds = args.offload or frozenset()
    refuse_offload(kinds, run.stack, entry)
    zero = args.zero if args.zero is not None else (t.zero if args.dp * args.cp > 1 else 0)
    # Offload needs its ZeRO stage (optimizer: 1 or more; parameters: 3): without --zero, the
    # least of the stack's stages that has it.
    need = 3 if "parameters" in kinds else 1 if "optimizer" in kinds else 0
    if zero < need:
        if args.zero is not None:
            raise UsageError(f"--offload {'+'.join(sorted(kinds))} needs ZeRO {'3' if need == 3 else '>= 1'} "
                             f"(got --zero {args.zero})")
        zero = min((z for z in t.zero_stages if z >= need), default=need)
    for kind in kinds:
        setattr(layout, f"offload_{kind}", True)
    layout.virtual_stages, layout.zero, layout.order = args.virtual_stages, zero, args.order
    layout.gpipe = args.schedule == "gpipe"
    layout.overlap_grad_reduce = t.overlap_grad_reduce and not args.no_overlap
    layout.overlap_param_gather = t.overlap_param_gather and not args.no_overlap
    run.base.recompute = recompute_policy(run.stack, args.recompute)
    if args.recompute_interval != 1 and args.recompute == "none":
        raise UsageError("--recompute-interval applies to a recompute policy (--recompute is none)")
    try:
        e = _core.estimate_training(run.spec, run.base, layout, run.device, entry.spec, run.options)
    except ValueError as err:
        raise UsageError(str(err)) from None
    return entry, run, layout, e


def step_schedule(e: Any, layout: Any) -> tuple[Any, list[tuple[str, float, float]]]:
    """The core's pipeline schedule of one step's micro-batches (each stage's forward and backward
    split over its virtual stages), and the spans after it: the exposed data-parallel
    communication, then the optimizer."""
    from accel_sim import _core

    v = layout.virtual_stages
    schedule = _core.schedule_pipeline(layout.pp, v, e.micro_batches, e.forward_s / v, e.backward_s / v, e.p2p_send_s)
    end = schedule.makespan_s
    slowed = end + e.overlap_slowdown_s
    tail = [("compute slowed by overlapped collectives", end, slowed),
            ("data-parallel communication (exposed)", slowed, slowed + e.dp_comm_s),
            ("optimizer", slowed + e.dp_comm_s, slowed + e.dp_comm_s + e.optimizer_s)]
    if layout.offloads():
        # What offload adds (core training.h): the host link's transfers the passes wait for and
        # the parameters' return, and the CPU's optimizer step.
        at = tail[-1][2]
        tail += [("host-link transfers (exposed)", at, at + e.offload_s),
                 ("CPU optimizer step", at + e.offload_s, at + e.offload_s + e.host_optimizer_s)]
    return schedule, tail




@dataclass
class TrainRun:
    """One training configuration as `accel-sim train` runs it: its options (`args`), the system
    entry, the run's inputs, the layout and the core's TrainingEstimate (`estimate`). It renders
    itself as `train` prints it: to_dict() is `train --json`, text() the text report."""

    args: Any
    entry: Any
    run: RunInputs
    layout: Any
    estimate: Any

    def to_dict(self) -> dict:
        from accel_sim.report.training import train_json

        return train_json(self)

    def text(self) -> str:
        from accel_sim.report.training import train_text

        return train_text(self)


def train(args: argparse.Namespace) -> TrainRun:
    """`train`'s run: the configuration of `args` estimated; one that does not fit or cannot run
    is refused with its reason (a UsageError), as the command refuses it."""
    from accel_sim.errors import UsageError

    entry, run, layout, e = train_estimate(args)
    if not e.feasible:
        raise UsageError(f"infeasible: {e.reason}")
    return TrainRun(args, entry, run, layout, e)
