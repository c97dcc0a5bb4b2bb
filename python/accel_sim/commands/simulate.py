"""The options and checks of the commands that simulate one graph (`simulate`, `compare`, `check`,
`sweep --vary`, grid points of `simulate`): the flags a graph's run shares, the keywords of
build_model_graph and of accel_sim.simulate they turn into, and the refusal of every flag a run
would not use (accel_sim.commands.flags). The CLI (accel_sim.cli.main) and grid files
(accel_sim.grid) read the same rules."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from accel_sim.commands.flags import CLOCK_MHZ, COUNT, WHOLE
from accel_sim.api import OPTIMIZERS
from accel_sim.io.model_config import KV_DTYPES, WEIGHT_DTYPES
from accel_sim.io.stack_file import ATTENTION_KERNELS, RECOMPUTE_POLICIES
from accel_sim.script_watch import add_timeout_argument, watch_script


DTYPES = ("fp32", "bf16", "fp16")


PRECISIONS = ("fp32", "bf16-mixed", "fp16-mixed", "fp8-mixed", "bf16", "fp16")


def percent(text: str) -> float:
    """'5%' -> 0.05; '0.05' -> 0.05."""
    try:
        value = float(text[:-1]) / 100.0 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a percentage such as 5% (got {text!r})") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"a regression limit must be a finite, non-negative percentage (got {text!r})")
    return value


def add_simulation_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", nargs="?", help="a Python script with get_model() -> (model, example_inputs), or a graph .json")
    p.add_argument("--model", metavar="NAME|CONFIG", help="build the graph from a shipped model (see `accel-sim models`) or an HF config.json instead of a script")
    p.add_argument("--phase", choices=("prefill", "decode", "train"), default="prefill", help="with --model: prefill (batch x seq new tokens), one decode step, or one training step on batch x seq tokens (default: prefill)")
    p.add_argument("--train", action="store_true", help="one training step: for a script, capture its forward, loss, backward and optimizer step; with --model, the same as --phase train")
    p.add_argument("--precision", choices=PRECISIONS, help="training precision: bf16-mixed / fp16-mixed compute in 16 bits with fp32 weights, gradients and optimizer states (a script: torch.autocast; --model: fp32 master weights); fp8-mixed (--model): bf16-mixed with the blocks' GEMMs in fp8 as Transformer Engine runs them; bf16 / fp16: everything in 16 bits; fp32")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw", help="with a training step: the optimizer step (adamw, adam, sgd: torch.optim's fused kernels; adafactor: HF's Adafactor, factored second moment; adam8bit: bitsandbytes' 8-bit Adam; none: stop after backward; default: adamw)")
    p.add_argument("--grad-accum", **COUNT, default=1, metavar="N", help="with a training step: N micro-batches' forward and backward per optimizer step, gradients accumulated in buffers kept across them (default: 1)")
    p.add_argument("--no-master-weights", action="store_true", help="with --phase train: keep gradients and optimizer states in the weight dtype instead of fp32 master weights, fp32 gradients and fp32 states")
    p.add_argument("--recompute", choices=RECOMPUTE_POLICIES, default="none", help="with --phase train: activation recomputation (Korthikanti et al. 2022): none; selective, what the --stack's selective recomputation checkpoints (without --stack, and under Megatron-Core, the core attention as Megatron-LM does: q, k, v kept, the kernel run again in backward; under torchtitan its op-level policy: every second GEMM's output and the attention's kept, the rest of each layer run again; stack field training.selective_recompute); full, each layer's input kept and its forward run again in backward (default: none)")
    p.add_argument("--recompute-interval", **COUNT, default=1, metavar="N", help="with --recompute: checkpoint every N-th layer only (torchtitan's selective_ac_option N is --recompute full --recompute-interval N; default: 1, every layer)")
    p.add_argument("--keep-grads", action="store_true", help="with --phase train: gradients kept between steps and zeroed in place (optimizer.zero_grad(set_to_none=False), PyTorch's default before 2.0), so they are live through the forward")
    p.add_argument("--batch", **COUNT, default=1, help="sequences in the batch: with --model (default: 1); for a script, its example inputs resized along dim 0")
    p.add_argument("--seq", **COUNT, default=2048, help="tokens per sequence for prefill and training: with --model (default: 2048); for a script, its example inputs resized along dim 1")
    p.add_argument("--context", **WHOLE, default=2048, help="with --model: cached tokens per sequence for decode (default: 2048)")
    p.add_argument("--kernels", choices=("fused", "hf-eager"), default="fused", help="with --model: an inference engine's fused kernels or HF transformers' eager ops (default: fused)")
    p.add_argument("--moe-impl", choices=("grouped", "sequential"), default="grouped", help="with --model: MoE experts as one grouped GEMM or one GEMM per touched expert (default: grouped)")
    p.add_argument("--sp", action="store_true", help="with --model and --tp > 1: sequence parallelism (norms and residuals on tokens / tp)")
    p.add_argument("--ep", **COUNT, default=1, help="with --model: expert-parallel degree for MoE models (default: 1)")
    p.add_argument("--cp", **COUNT, default=1, help="with --model: context-parallel degree, each sequence split across ranks (default: 1)")
    p.add_argument("--tp", **COUNT, default=1, help="with --model: tensor-parallel degree; simulates one rank without communication (default: 1)")
    p.add_argument("--dtype", choices=DTYPES, help="cast the model and its float inputs before capture (half precision); with --model: the weight/activation/KV dtype")
    p.add_argument("--weight-dtype", choices=WEIGHT_DTYPES, help="with --model: the weights' dtype (int4: weight-only, packed, groups of 128, as AWQ/GPTQ; default: the model dtype)")
    p.add_argument("--kv-dtype", choices=KV_DTYPES, help="with --model: the KV cache's dtype (default: the model dtype)")
    p.add_argument("--tf32", action="store_true", help="run fp32 matmuls on TF32 tensor cores (off by default, as in PyTorch)")
    p.add_argument("--cost-model", default="kernel", help="cost model: kernel (tiles, waves, sustained rates, floors; default) or roofline")
    p.add_argument("--no-launch-overhead", action="store_true", help="leave out the per-kernel launch overhead")
    p.add_argument("--cuda-graphs", action="store_true", help="kernels replayed from a CUDA graph: no host launch cost per kernel")
    p.add_argument("--fuse", action="store_true", help="cost chains of elementwise ops as single kernels, as torch.compile fuses them")
    p.add_argument("--attention-impl", choices=ATTENTION_KERNELS,
                   help="which kernel runs attention in the kernel model (default: the --stack's on the device, else flash2, PyTorch SDPA's flash backend); eager with --model: the builder emits the unfused core (QK^T, softmax, dropout, PV) with its scores in memory")
    p.add_argument("--stack", metavar="NAME|FILE",
                   help="cost the run as a framework runs it (docs/formats/stack.md): its attention kernel on each device and its host cost per kernel; with --model also its fused SwiGLU and, in a training step, its fused cross-entropy (default: none, the kernels' own defaults)")
    p.add_argument("--clock-mhz", **CLOCK_MHZ, help="core clock override for the kernel model (a power-capped or down-clocked part)")
    p.add_argument("--system", help="with --model and --tp/--cp/--ep: the cluster whose fabric times the graph's collectives (see `accel-sim systems`); TP is placed inside a scale-up domain first, then CP, then EP")
    p.add_argument("--free-at-last-use", action="store_true",
                   help="free activations right after their last use (as torch.compile plans memory) instead of when the eager program drops them")
    p.add_argument("--device-file", action="append", default=[], metavar="FILE", help="a device file (docs/formats/device.md); repeatable")
    p.add_argument("--json", action="store_true", help="print the result as JSON (docs/formats/report.md)")
    p.add_argument("--quiet", action="store_true", help="no status lines or progress on stderr")
    add_timeout_argument(p)


def layout(args: argparse.Namespace) -> tuple[Any, list[Any]]:
    """The --system and one rank's parallel groups, placed by the core innermost first (TP, CP,
    EP), as `accel-sim train` places them."""
    if not getattr(args, "system", None):
        return None, []
    from accel_sim import _core
    from accel_sim.io.system_file import resolve_system

    spec = resolve_system(args.system).spec
    groups, _ = _core.place_groups(spec, [(name, getattr(args, name, 1)) for name in ("tp", "cp", "ep")])
    return spec, groups


def common(args: argparse.Namespace) -> dict:
    system, groups = layout(args)
    return {
        "system": system,
        "groups": groups,
        "dtype": args.dtype,
        "tf32": args.tf32,
        "cost_model": args.cost_model,
        "launch_overhead": not args.no_launch_overhead,
        "free_at_last_use": args.free_at_last_use,
        "device_files": args.device_file,
        "cuda_graphs": args.cuda_graphs,
        "clock_mhz": args.clock_mhz,
        "fuse": args.fuse,
        "attention_impl": args.attention_impl,
        "micro_batches": args.grad_accum,
        "stack": args.stack,
    }


def model_build_args(args: argparse.Namespace) -> dict:
    """build_model_graph's keyword arguments for --model NAME (`sweep` rebuilds with some changed)."""
    from accel_sim.errors import UsageError

    precision = args.precision
    phase = "train" if args.train else args.phase
    if precision and phase != "train":
        raise UsageError("--precision applies to a training step (--train or --phase train)")
    if args.grad_accum > 1 and phase != "train":
        raise UsageError("--grad-accum applies to a training step (--train or --phase train)")
    dtype = {"fp32": "fp32", "bf16-mixed": "bf16", "fp16-mixed": "fp16", "fp8-mixed": "bf16"}.get(
        precision, precision) or args.dtype
    masters = precision.endswith("-mixed") if precision else not args.no_master_weights
    choices: dict = {}
    recompute = args.recompute
    if args.stack:
        from accel_sim.commands.train import recompute_policy, stack_builder_choices

        stack, choices = stack_builder_choices(args.stack, {"tp": [args.tp], "cp": [args.cp]}, args.kernels, phase,
                                               args.optimizer, fp8_gemms=precision == "fp8-mixed")
        recompute = recompute_policy(stack, args.recompute).name
        if precision == "fp8-mixed" and stack.training.fp8 == "none":
            raise UsageError(f"--precision fp8-mixed: {stack.id} has no fp8 recipe "
                             f"({stack.sources.get('training.fp8', stack.path)})")
    return dict(model=args.model, phase=phase, batch=args.batch, seq=args.seq,
                context=args.context, kernels=args.kernels, tensor_parallel=args.tp,
                sequence_parallel=args.sp, expert_parallel=args.ep,
                context_parallel=args.cp, moe_impl=args.moe_impl, dtype=dtype,
                optimizer=args.optimizer, master_weights=masters,
                recompute=recompute, recompute_interval=args.recompute_interval,
                eager_attention=args.attention_impl == "eager",
                persistent_gradients=args.keep_grads or args.grad_accum > 1,
                fp8_gemms=precision == "fp8-mixed",
                weight_dtype=args.weight_dtype, kv_dtype=args.kv_dtype, **choices)


# Flags of simulate / compare / check / sweep that only some runs use. A flag the user typed that
# the run cannot honour is refused with the reason, never ignored.
_TRAINING_ONLY = ("optimizer", "precision", "grad_accum", "recompute", "recompute_interval", "keep_grads",
                  "no_master_weights")


_BUILDER_ONLY = ("phase", "context", "kernels", "moe_impl", "sp", "tp", "ep", "cp", "weight_dtype", "kv_dtype",
                 "system", "recompute", "recompute_interval", "keep_grads", "no_master_weights")


_CAPTURE_TIME = ("batch", "seq", "dtype", "train", "precision", "optimizer", "grad_accum")


def target_kind(args: argparse.Namespace) -> str:
    """'model' (--model), 'script' (.py, captured) or 'graph' (a saved .json)."""
    from accel_sim.errors import UsageError

    if (args.target is None) == (args.model is None):
        raise UsageError("give either a script/graph file or --model NAME (not both)")
    if args.model is not None:
        return "model"
    suffix = Path(args.target).suffix
    if suffix not in (".py", ".json"):
        raise UsageError(f"{args.target}: expected a Python script with get_model() or a graph .json file")
    return "script" if suffix == ".py" else "graph"


def refuse_inapplicable(args: argparse.Namespace, kind: str) -> None:
    """Refuses every typed flag that the run of `kind` would not use (flags.refuse)."""
    from accel_sim.commands.flags import refuse, refuse_attention_kernel_under_roofline, refuse_train_with_another_phase
    from accel_sim.errors import UsageError

    training = args.train or (kind == "model" and args.phase == "train")
    if kind == "graph":
        refuse(args, _CAPTURE_TIME, f"does not apply to the saved graph {args.target}: its shapes, dtypes and passes "
               "were fixed when it was captured (capture the script again with the flag)")
    if kind != "script":
        refuse(args, ("timeout",), "bounds a script's import, get_model() and capture; a --model graph or a saved "
               "graph runs no user code")
    if kind != "model":
        refuse(args, ("phase",), "applies to --model; a script's training step is --train")
        refuse(args, _BUILDER_ONLY, "applies to a graph built with --model NAME; a script or a saved graph runs "
               "the shapes and ops its own code makes")
    refuse_train_with_another_phase(args)
    if not training:
        refuse(args, _TRAINING_ONLY, "applies to a training step (--train, or --phase train with --model)")
    if kind == "model":
        phase = "train" if training else args.phase
        if phase == "decode":
            refuse(args, ("seq",), "applies to prefill and training; a decode step adds one token to --context "
                   "cached tokens per sequence")
        else:
            refuse(args, ("context",), f"applies to --phase decode (the cached tokens); {phase} runs --seq tokens")
        if phase == "train":
            refuse(args, ("kv_dtype",), "applies to prefill and decode: a training step keeps no KV cache")
        if args.system and args.tp == 1 and args.cp == 1 and args.ep == 1:
            refuse(args, ("system",), "times the collectives of a run with --tp, --cp or --ep above 1; this one has none")
    if args.cost_model == "roofline":
        refuse(args, ("clock_mhz",), "applies to the kernel cost model; the roofline has no clock (--cost-model kernel)")
    refuse_attention_kernel_under_roofline(args, eager_builds_core=kind == "model")
    if not getattr(args, "json", False):
        refuse(args, ("no_ops",), "applies to --json output")
    elif hasattr(args, "top"):
        refuse(args, ("top",), "sets the rows of the text tables; --json gives every op")
    if args.precision and (args.dtype or args.no_master_weights):
        raise UsageError("give --precision, or --dtype / --no-master-weights, not both")


def check_flags(args: argparse.Namespace) -> str:
    """The run's kind (target_kind) once every flag it would not use or cannot honour is refused:
    the rules that read the flags alone (a grid file's points are held to them when it is read)."""
    from accel_sim.errors import UsageError

    kind = target_kind(args)
    refuse_inapplicable(args, kind)
    if args.tf32 and (args.dtype in ("bf16", "fp16") or (args.precision or "fp32") != "fp32"):
        raise UsageError("--tf32 runs fp32 matmuls on TF32 tensor cores; this run's matmuls are 16-bit")
    if kind != "model" and args.precision == "fp8-mixed":
        raise UsageError("--precision fp8-mixed applies to --model (the builder's Transformer Engine-style fp8 GEMMs); "
                         "torch.autocast has no fp8 mode for a captured script")
    return kind


def check_devices(args: argparse.Namespace) -> None:
    """Resolves the run's devices (before a possibly long capture, so that a typo fails at once) and
    refuses a --clock-mhz they cannot honour."""
    from accel_sim.commands.flags import check_clock
    from accel_sim.device import resolve_device

    names = args.devices.split(",") if getattr(args, "devices", None) else [getattr(args, "device", "h100")]
    check_clock(args, [resolve_device(name.strip(), args.device_file).spec for name in names])


def check_built(args: argparse.Namespace, info: dict) -> None:
    """Refuses the flags the model built (BuiltModel.info) does not use."""
    from accel_sim.commands.flags import given
    from accel_sim.errors import UsageError

    if given(args, "seq") and "image_tokens" in info:
        raise UsageError(f"--seq does not apply to {info['model']}: an image model runs its image's "
                         f"{info['image_tokens']} patch tokens (its config's image_size and patch_size)")
    if given(args, "moe_impl") and "moe" not in info:
        raise UsageError(f"--moe-impl applies to mixture-of-experts models; {info['model']} is dense")
    refuse_tf32_without_fp32(args, info["dtype"])


def script_options(args: argparse.Namespace) -> dict:
    """load_target's keywords for the capture of a script: its dtype, training step and the axes
    --batch and --seq resize."""
    from accel_sim.commands.flags import given

    precision = args.precision
    mixed = precision if precision and precision.endswith("-mixed") else None
    return dict(dtype=args.dtype or (precision if precision and not mixed else None), train=args.train,
                optimizer=args.optimizer, autocast=mixed, accumulate=args.grad_accum > 1,
                resize={axis: getattr(args, axis) for axis in ("batch", "seq") if given(args, axis)})


def load(args: argparse.Namespace) -> Any:
    """The graph of the run (built, captured or read), after refusing the flags it would not use."""
    from accel_sim.api import build_model_graph, load_target

    kind = check_flags(args)
    check_devices(args)
    if kind == "model":
        built = build_model_graph(**model_build_args(args))
        check_built(args, built.info)
        return built
    if kind == "graph":
        graph = load_target(args.target)
    else:
        with watch_script(args.target, args.timeout, args.quiet):
            graph = load_target(args.target, **script_options(args))
    refuse_tf32_without_fp32(args, graph.get("metadata", {}).get("dtype", "fp32"))
    return graph


def refuse_tf32_without_fp32(args: argparse.Namespace, dtype: str) -> None:
    from accel_sim.errors import UsageError

    if args.tf32 and dtype != "fp32":
        raise UsageError(f"--tf32 runs fp32 matmuls on TF32 tensor cores; this run's model is {dtype}")
