"""`accel-sim`: simulate, compare, sweep, check, capture, devices.

Usage errors (bad file, unknown device, a script without get_model() or that exits, one running
past --timeout, ...) print one line on stderr and exit with status 2; `--debug` shows the
traceback instead. `check` exits 1 when a metric regressed past its limit, and 0 only when it
compared this run with its baseline and the run passed. A Ctrl-C exits with status 130.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import Any, Sequence

from accel_sim.cli.fit import add_parser as add_fit_parser
from accel_sim.cli.flags import CLOCK_MHZ, COUNT, WHOLE, Parser, check_numbers, record_given
from accel_sim.api import OPTIMIZERS
from accel_sim.io.stack_file import ATTENTION_KERNELS, RECOMPUTE_POLICIES
from accel_sim.cli.fit import cmd_fit
from accel_sim.cli.kernels import add_parsers as add_kernel_parsers
from accel_sim.cli.plan import add_parser as add_plan_parser
from accel_sim.cli.plan import cmd_plan
from accel_sim.cli.script_watch import add_timeout_argument, watch_script
from accel_sim.cli.systems import add_stacks_parser, add_systems_parser, cmd_stacks, cmd_systems
from accel_sim.cli.serve import add_parser as add_serve_parser
from accel_sim.cli.serve import cmd_serve
from accel_sim.cli.sweep import add_parser as add_sweep_parser
from accel_sim.cli.sweep import cmd_sweep
from accel_sim.cli.train import add_parser as add_train_parser
from accel_sim.cli.train import cmd_train
from accel_sim.cli.kernels import cmd_calibrate, cmd_kernel, cmd_validate
from accel_sim.io.model_config import KV_DTYPES, WEIGHT_DTYPES
from accel_sim.report.json_report import SCHEMA_VERSION

_DTYPES = ("fp32", "bf16", "fp16")
_PRECISIONS = ("fp32", "bf16-mixed", "fp16-mixed", "fp8-mixed", "bf16", "fp16")



def _percent(text: str) -> float:
    """'5%' -> 0.05; '0.05' -> 0.05."""
    try:
        value = float(text[:-1]) / 100.0 if text.endswith("%") else float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a percentage such as 5% (got {text!r})") from None
    if not math.isfinite(value) or value < 0:
        raise argparse.ArgumentTypeError(f"a regression limit must be a finite, non-negative percentage (got {text!r})")
    return value


def _add_simulation_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("target", nargs="?", help="a Python script with get_model() -> (model, example_inputs), or a graph .json")
    p.add_argument("--model", metavar="NAME|CONFIG", help="build the graph from a shipped model (see `accel-sim models`) or an HF config.json instead of a script")
    p.add_argument("--phase", choices=("prefill", "decode", "train"), default="prefill", help="with --model: prefill (batch x seq new tokens), one decode step, or one training step on batch x seq tokens (default: prefill)")
    p.add_argument("--train", action="store_true", help="one training step: for a script, capture its forward, loss, backward and optimizer step; with --model, the same as --phase train")
    p.add_argument("--precision", choices=_PRECISIONS, help="training precision: bf16-mixed / fp16-mixed compute in 16 bits with fp32 weights, gradients and optimizer states (a script: torch.autocast; --model: fp32 master weights); fp8-mixed (--model): bf16-mixed with the blocks' GEMMs in fp8 as Transformer Engine runs them; bf16 / fp16: everything in 16 bits; fp32")
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
    p.add_argument("--dtype", choices=_DTYPES, help="cast the model and its float inputs before capture (half precision); with --model: the weight/activation/KV dtype")
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


def version_text() -> str:
    """`accel-sim --version`: the package version and what identifies this project's command: its
    compiled engine (imported here, so a broken install fails) and the file formats it reads and
    writes. A CI job compares it with the version it meant to install (examples/ci/)."""
    import accel_sim
    from accel_sim import _core  # noqa: F401  (the engine must load)
    from accel_sim.io.graph_file import FORMAT, VERSION

    return f"accel-sim {accel_sim.__version__} (engine accel_sim._core; graph format {FORMAT} v{VERSION}; " \
           f"report schema {SCHEMA_VERSION})"


class _VersionAction(argparse.Action):
    """Like argparse's "version" action, with the text made only when asked for."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        print(version_text())
        parser.exit()


def _parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="accel-sim",
        description="Predict latency and memory of PyTorch models on accelerators you do not have.",
    )
    parser.add_argument("--version", action=_VersionAction,
                        help="print the version, the engine and the formats of this accel-sim, and exit")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("simulate", help="latency, memory and bottlenecks on one device")
    _add_simulation_args(p)
    p.add_argument("--device", default="h100", help="device name or alias (default: h100); see `accel-sim devices`")
    p.add_argument("--top", **COUNT, default=10, help="rows per breakdown table (default: 10)")
    p.add_argument("--no-ops", action="store_true", help="with --json: leave out the per-op rows")
    p.add_argument("--html", metavar="FILE", help="also write a self-contained HTML report (roofline, timeline, memory, breakdowns)")
    p.add_argument("--trace", metavar="FILE", help="also write the timeline as a Perfetto / Chrome trace (JSON)")

    p = sub.add_parser("compare", help="the same model on several devices, with a verdict")
    _add_simulation_args(p)
    p.add_argument("--devices", required=True, help="comma-separated device names, e.g. v100,a100,h100")
    p.add_argument("--html", metavar="FILE", help="also write a self-contained HTML report with the devices side by side")

    p = sub.add_parser("check", help="CI gate: fail when latency or peak memory grew past a limit")
    _add_simulation_args(p)
    p.add_argument("--device", default="h100", help="device name or alias (default: h100)")
    p.add_argument("--baseline", required=True, metavar="FILE", help="baseline JSON (written by --write-baseline)")
    p.add_argument("--max-regression", type=_percent, default=0.05, metavar="PCT", help="allowed growth of latency and peak memory (default: 5%%)")
    p.add_argument("--max-latency-regression", type=_percent, metavar="PCT", help="allowed latency growth (overrides --max-regression)")
    p.add_argument("--max-memory-regression", type=_percent, metavar="PCT", help="allowed peak-memory growth (overrides --max-regression)")
    p.add_argument("--write-baseline", action="store_true", help="write the baseline file from this run and exit 0")

    p = sub.add_parser("capture", help="capture a script's model into a graph .json (needs torch)")
    p.add_argument("script", help="a Python script with get_model()")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="graph file to write")
    p.add_argument("--dtype", choices=_DTYPES, help="cast the model and its float inputs before capture")
    p.add_argument("--train", action="store_true", help="capture one training step (forward, loss, backward, optimizer)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw", help="with --train (default: adamw)")
    p.add_argument("--precision", choices=("bf16-mixed", "fp16-mixed"), help="with --train: torch.autocast mixed precision")
    p.add_argument("--json", action="store_true", help="print a summary of the written graph as JSON")
    p.add_argument("--quiet", action="store_true", help="no status line on stderr")
    add_timeout_argument(p)

    p = sub.add_parser("models", help="list the shipped model configs (params, family, builder support)")
    p.add_argument("--json", action="store_true", help="print as JSON")

    add_fit_parser(sub, _DTYPES)
    add_kernel_parsers(sub)
    add_systems_parser(sub)
    add_stacks_parser(sub)
    add_train_parser(sub)
    add_serve_parser(sub)
    add_plan_parser(sub)
    add_sweep_parser(sub, _add_simulation_args)

    p = sub.add_parser("devices", help="list the known devices and their numbers")
    p.add_argument("--device-file", action="append", default=[], metavar="FILE", help="also list this device file")
    p.add_argument("--json", action="store_true", help="print as JSON")
    return record_given(parser)


def _layout(args: argparse.Namespace) -> tuple[Any, list[Any]]:
    """The --system and one rank's parallel groups, placed by the core innermost first (TP, CP,
    EP), as `accel-sim train` places them."""
    if not getattr(args, "system", None):
        return None, []
    from accel_sim import _core
    from accel_sim.io.system_file import resolve_system

    spec = resolve_system(args.system).spec
    groups, _ = _core.place_groups(spec, [(name, getattr(args, name, 1)) for name in ("tp", "cp", "ep")])
    return spec, groups


def _common(args: argparse.Namespace) -> dict:
    system, groups = _layout(args)
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


def _model_build_args(args: argparse.Namespace) -> dict:
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
        from accel_sim.cli.train import recompute_policy, stack_builder_choices

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


def _target_kind(args: argparse.Namespace) -> str:
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


def _refuse_inapplicable(args: argparse.Namespace, kind: str) -> None:
    """Refuses every typed flag that the run of `kind` would not use (flags.refuse)."""
    from accel_sim.cli.flags import refuse, refuse_attention_kernel_under_roofline, refuse_train_with_another_phase
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


def _check_flags(args: argparse.Namespace) -> str:
    """The run's kind (_target_kind) once every flag it would not use or cannot honour is refused:
    the rules that read the flags alone (a grid file's points are held to them when it is read)."""
    from accel_sim.errors import UsageError

    kind = _target_kind(args)
    _refuse_inapplicable(args, kind)
    if args.tf32 and (args.dtype in ("bf16", "fp16") or (args.precision or "fp32") != "fp32"):
        raise UsageError("--tf32 runs fp32 matmuls on TF32 tensor cores; this run's matmuls are 16-bit")
    if kind != "model" and args.precision == "fp8-mixed":
        raise UsageError("--precision fp8-mixed applies to --model (the builder's Transformer Engine-style fp8 GEMMs); "
                         "torch.autocast has no fp8 mode for a captured script")
    return kind


def _check_devices(args: argparse.Namespace) -> None:
    """Resolves the run's devices (before a possibly long capture, so that a typo fails at once) and
    refuses a --clock-mhz they cannot honour."""
    from accel_sim.cli.flags import check_clock
    from accel_sim.device import resolve_device

    names = args.devices.split(",") if getattr(args, "devices", None) else [getattr(args, "device", "h100")]
    check_clock(args, [resolve_device(name.strip(), args.device_file).spec for name in names])


def _check_built(args: argparse.Namespace, info: dict) -> None:
    """Refuses the flags the model built (BuiltModel.info) does not use."""
    from accel_sim.cli.flags import given
    from accel_sim.errors import UsageError

    if given(args, "seq") and "image_tokens" in info:
        raise UsageError(f"--seq does not apply to {info['model']}: an image model runs its image's "
                         f"{info['image_tokens']} patch tokens (its config's image_size and patch_size)")
    if given(args, "moe_impl") and "moe" not in info:
        raise UsageError(f"--moe-impl applies to mixture-of-experts models; {info['model']} is dense")
    _refuse_tf32_without_fp32(args, info["dtype"])


def _script_options(args: argparse.Namespace) -> dict:
    """load_target's keywords for the capture of a script: its dtype, training step and the axes
    --batch and --seq resize."""
    from accel_sim.cli.flags import given

    precision = args.precision
    mixed = precision if precision and precision.endswith("-mixed") else None
    return dict(dtype=args.dtype or (precision if precision and not mixed else None), train=args.train,
                optimizer=args.optimizer, autocast=mixed, accumulate=args.grad_accum > 1,
                resize={axis: getattr(args, axis) for axis in ("batch", "seq") if given(args, axis)})


def _load(args: argparse.Namespace) -> Any:
    """The graph of the run (built, captured or read), after refusing the flags it would not use."""
    from accel_sim.api import build_model_graph, load_target

    kind = _check_flags(args)
    _check_devices(args)
    if kind == "model":
        built = build_model_graph(**_model_build_args(args))
        _check_built(args, built.info)
        return built
    if kind == "graph":
        graph = load_target(args.target)
    else:
        with watch_script(args.target, args.timeout, args.quiet):
            graph = load_target(args.target, **_script_options(args))
    _refuse_tf32_without_fp32(args, graph.get("metadata", {}).get("dtype", "fp32"))
    return graph


def _refuse_tf32_without_fp32(args: argparse.Namespace, dtype: str) -> None:
    from accel_sim.errors import UsageError

    if args.tf32 and dtype != "fp32":
        raise UsageError(f"--tf32 runs fp32 matmuls on TF32 tensor cores; this run's model is {dtype}")


def _cmd_simulate(args: argparse.Namespace) -> int:
    import accel_sim
    from accel_sim.report.tables import simulation_text

    graph = _load(args)
    common = _common(args)
    common.pop("dtype")
    report = accel_sim.simulate(graph, device=args.device, **common)
    if args.html:
        from accel_sim.report.html_report import simulation_html, write_html

        write_html(args.html, simulation_html(report))
    if args.trace:
        from accel_sim.report.sim_trace import write_simulation_trace

        write_simulation_trace(args.trace, report)
    if args.json:
        print(json.dumps(report.to_dict(include_ops=not args.no_ops), indent=1))
    else:
        print(simulation_text(report, top=args.top))
        written = [f"  wrote {what}: {path}" for path, what in ((args.html, "HTML report"),
                                                             (args.trace, "trace (open it in ui.perfetto.dev)")) if path]
        if written:
            print("\n" + "\n".join(written))
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    import accel_sim
    from accel_sim.report.tables import comparison_text

    devices = [d.strip() for d in args.devices.split(",") if d.strip()]
    graph = _load(args)
    common = _common(args)
    common.pop("dtype")
    result = accel_sim.compare(graph, devices=devices, **common)
    if args.html:
        from accel_sim.report.html_report import comparison_html, write_html

        write_html(args.html, comparison_html(result))
    print(json.dumps(result.to_dict(), indent=1) if args.json else comparison_text(result))
    if args.html and not args.json:
        print(f"\n  wrote HTML report: {args.html}")
    return 0


def _read_baseline(path: Path) -> dict:
    """The baseline's latency_s, peak_memory_bytes, device id and the definition of its run
    (`_run_definition`, None for a baseline that records none), checked: read before the
    (possibly long) capture, so that a missing or broken baseline fails at once."""
    from accel_sim.errors import UsageError
    from accel_sim.io import fields

    if not path.is_file():
        raise UsageError(f"baseline {path} not found; create it with --write-baseline")
    where = str(path)
    baseline = fields.mapping(fields.parse_json(fields.read_text(path, "baseline"), where, "baseline"), where, "")
    figures = {"latency_s": fields.number(baseline.get("latency_s"), where, "latency_s", above=0.0),
               "peak_memory_bytes": fields.number(baseline.get("peak_memory_bytes"), where, "peak_memory_bytes",
                                                  minimum=0.0)}
    device = baseline.get("device")
    device_id = None
    if device is not None:
        device_id = fields.text(fields.mapping(device, where, "device").get("id"), where, "device.id")
    run = None
    if "capture" in baseline or "model_info" in baseline:
        capture = fields.mapping(baseline.get("capture", {}), where, "capture")
        model_info = baseline.get("model_info")
        run = _run_definition(capture, None if model_info is None else fields.mapping(model_info, where, "model_info"),
                              where)
        run["stack"] = _stack_phrase(baseline.get("stack"), where)
    return {**figures, "device_id": device_id, "run": run}


def _stack_phrase(stack: Any, where: str) -> str:
    """The software stack of a run as a message shows it (a report's `stack`: None, or its id)."""
    from accel_sim.io import fields

    if stack is None:
        return "no --stack"
    return "--stack " + fields.text(fields.mapping(stack, where, "stack").get("id"), where, "stack.id")


# What defines a run of --model, in its report's model_info: the model, its shapes and layout,
# its dtypes and its training step.
_MODEL_RUN_FIELDS = ("model", "phase", "batch", "seq", "context", "tensor_parallel", "sequence_parallel",
                     "expert_parallel", "context_parallel", "dtype", "weight_dtype", "kv_cache_dtype", "optimizer",
                     "master_weights", "recompute", "gradients_kept_between_steps")


def _run_definition(capture: dict, model_info: dict | None, where: str) -> dict[str, str]:
    """What defines a simulate run, each part as a phrase a message can show, from its report's
    `capture` and `model_info`: a --model graph's fields (_MODEL_RUN_FIELDS), or a script's sizes
    (--batch and --seq, or the script's own), dtype and training step. Two runs whose definitions
    differ are not one run before and after a change: `check` refuses to compare them."""
    from accel_sim.io import fields

    def shown(value: Any) -> str:
        text = value if isinstance(value, str) else json.dumps(value)
        return text if len(text) <= 60 else text[:57] + "..."

    if model_info is not None:
        return {"graph": "a graph built with --model",
                **{key: f"{key} {shown(model_info[key])}" for key in _MODEL_RUN_FIELDS if key in model_info}}
    run = {"graph": "a captured script or a saved graph"}
    resized = fields.mapping(capture.get("inputs_resized", {}), where, "capture.inputs_resized")
    for axis in ("batch", "seq"):
        if axis in resized:
            sizes = fields.sequence(resized[axis], where, f"capture.inputs_resized.{axis}")
            run[axis] = f"--{axis} {shown(sizes[-1]) if sizes else '?'}"
        else:
            run[axis] = f"the script's own {axis}"
    run["dtype"] = f"dtype {shown(capture.get('dtype'))}"
    step = capture.get("training_step")
    if step is None:
        run["step"] = "a forward"
    else:
        step = fields.mapping(step, where, "capture.training_step")
        run["step"] = "a training step (" + ", ".join(f"{key.replace('_', ' ')} {shown(step.get(key))}" for key in
                                                      ("optimizer", "precision", "gradient_accumulation")) + ")"
    return run


def _refuse_another_run(path: str, baseline: dict, current: dict) -> None:
    """A UsageError naming the first part of the run definitions that differs."""
    from accel_sim.errors import UsageError

    for key in dict.fromkeys([*baseline, *current]):
        there, here = baseline.get(key, f"no {key}"), current.get(key, f"no {key}")
        if there != here:
            raise UsageError(f"{path} was written for another run: {there} there, {here} here; check the run it "
                             "was written for, or write it again with --write-baseline")


def _cmd_check(args: argparse.Namespace) -> int:
    """Exit 0 only when this run was compared with the baseline and passed (or --write-baseline
    wrote it); 1 when a metric grew past its limit; 2 (a UsageError) for anything else."""
    import accel_sim
    from accel_sim import _core
    from accel_sim.device import resolve_device
    from accel_sim.errors import UsageError
    from accel_sim.report.tables import table

    # Absolute, and read now: before the capture, which may take minutes and runs the user's
    # code (which may change the working directory).
    baseline_path = Path(args.baseline).absolute()
    if args.write_baseline:
        if not baseline_path.parent.is_dir():
            raise UsageError(f"cannot write baseline {args.baseline}: no directory {baseline_path.parent}")
        baseline = None
    else:
        baseline = _read_baseline(Path(args.baseline))
        device_id = resolve_device(args.device, args.device_file).id
        if baseline["device_id"] and baseline["device_id"] != device_id:
            raise UsageError(f"{args.baseline} was written for device '{baseline['device_id']}', not '{device_id}'")
    graph = _load(args)
    common = _common(args)
    common.pop("dtype")
    report = accel_sim.simulate(graph, device=args.device, **common)
    current = report.to_dict(include_ops=False)
    for key, value in (("latency_s", report.latency_s), ("peak_memory_bytes", float(report.peak_memory_bytes))):
        if not math.isfinite(value) or value < 0:
            raise UsageError(f"this run's {key} is {value}, which no baseline can be compared with")
    if baseline is not None and baseline["run"] is not None:
        _refuse_another_run(args.baseline, baseline["run"],
                            _run_definition(current["capture"], current["model_info"], "this run")
                            | {"stack": _stack_phrase(current["stack"], "this run")})
    if baseline is None:
        try:
            baseline_path.write_text(json.dumps(current, indent=1), encoding="utf-8")
        except OSError as e:
            raise UsageError(f"cannot write baseline {args.baseline} ({e.strerror or e})") from None
        print(f"wrote baseline {args.baseline}: latency {current['latency_s'] * 1e3:.3f} ms, "
              f"peak memory {current['peak_memory_bytes'] / 1024**3:.3f} GiB on {report.device.id}")
        return 0
    base_latency, base_memory = baseline["latency_s"], baseline["peak_memory_bytes"]
    latency_limit = args.max_latency_regression if args.max_latency_regression is not None else args.max_regression
    memory_limit = args.max_memory_regression if args.max_memory_regression is not None else args.max_regression
    checks = [
        _core.check_metric("latency_s", base_latency, report.latency_s, latency_limit),
        _core.check_metric("peak_memory_bytes", base_memory, float(report.peak_memory_bytes), memory_limit),
    ]
    failed = [c for c in checks if c.exceeded]
    try:
        if args.json:
            print(json.dumps({
                "schema": "accel-sim/check",
                "schema_version": SCHEMA_VERSION,
                "passed": not failed,
                "checks": [
                    {"metric": c.metric, "baseline": c.baseline, "current": c.current,
                     "change_fraction": c.change_fraction, "max_increase_fraction": c.max_increase_fraction,
                     "exceeded": c.exceeded} for c in checks
                ],
            }, indent=1))
        else:
            fmt = {"latency_s": lambda v: f"{v * 1e3:,.3f} ms", "peak_memory_bytes": lambda v: f"{v / 1024**3:,.3f} GiB"}
            rows = [(c.metric, fmt[c.metric](c.baseline), fmt[c.metric](c.current), f"{c.change_fraction * 100:+.1f}%",
                     f"{c.max_increase_fraction * 100:.1f}%", "FAIL" if c.exceeded else "ok") for c in checks]
            print(table(["metric", "baseline", "current", "change", "limit", "result"], rows,
                        [False, True, True, True, True, False]))
        sys.stdout.flush()
    except BrokenPipeError:
        _reader_left()  # the verdict stands: a reader that left must not turn a regression into a pass
    for c in failed:
        what = "latency" if c.metric == "latency_s" else "peak memory"
        print(f"accel-sim check: {what} grew {c.change_fraction * 100:.1f}%, over the "
              f"{c.max_increase_fraction * 100:.1f}% limit", file=sys.stderr)
    return 1 if failed else 0


def _cmd_capture(args: argparse.Namespace) -> int:
    from accel_sim.api import load_target
    from accel_sim.errors import UsageError
    from accel_sim.io.graph_file import save_graph

    if Path(args.script).suffix != ".py":
        raise UsageError(f"{args.script}: capture takes a Python script with get_model()")
    if args.precision and not args.train:
        raise UsageError("--precision applies to a training step (--train)")
    with watch_script(args.script, args.timeout, args.quiet):
        graph = load_target(args.script, dtype=args.dtype, train=args.train, optimizer=args.optimizer,
                            autocast=args.precision)
    save_graph(graph, args.output)
    if args.json:
        print(json.dumps({
            "schema": "accel-sim/capture",
            "schema_version": SCHEMA_VERSION,
            "output": args.output,
            "name": graph["name"],
            "metadata": graph["metadata"],
            "num_nodes": len(graph["nodes"]),
            "num_tensors": len(graph["tensors"]),
            "num_storages": len(graph["storages"]),
        }, indent=1))
    else:
        print(f"wrote {args.output}: {len(graph['nodes'])} ops, {len(graph['tensors'])} tensors")
    return 0


def _cmd_devices(args: argparse.Namespace) -> int:
    from accel_sim.device import Device, catalog
    from accel_sim.io.device_file import DeviceCatalog, load_device_file
    from accel_sim.report.tables import devices_text

    entries = catalog().entries + [load_device_file(p) for p in args.device_file]
    DeviceCatalog(entries)  # names must stay unambiguous
    devices = [Device.from_entry(e) for e in entries]
    if args.json:
        print(json.dumps([
            {
                "id": d.spec.id,
                "name": d.spec.name,
                "vendor": d.spec.vendor,
                "aliases": list(d.entry.aliases),
                "memory_bytes": d.spec.memory_bytes,
                "memory_bandwidth_bytes_per_s": d.spec.memory_bandwidth_bytes_per_s,
                "peak_tflops": d.entry.peak_tflops,
                "kernel_launch_overhead_s": d.spec.kernel_launch_overhead_s,
                "price_usd_per_hour": d.spec.price_usd_per_hour or None,
                "file": d.entry.path,
            }
            for d in devices
        ], indent=1))
    else:
        print(devices_text(devices))
        print(f"\n  {len(devices)} devices · peaks are dense TFLOP/s · sources in each device file")
    return 0


def _cmd_models(args: argparse.Namespace) -> int:
    from accel_sim import _core
    from accel_sim.io.model_config import BUILDER_MODEL_TYPES, load_model_spec, shipped_models
    from accel_sim.report.tables import table

    rows = []
    for entry in shipped_models():
        supported = entry.family in BUILDER_MODEL_TYPES
        params = _core.parameter_count(load_model_spec(entry.id)) if supported else entry.params
        rows.append({"id": entry.id, "family": entry.family, "aliases": list(entry.aliases),
                     "parameters": params, "builder": supported, "hub_id": entry.hub_id,
                     "source": entry.source})
    if args.json:
        print(json.dumps(rows, indent=1))
        return 0
    print(table(["id", "family", "params", "--model", "aliases"],
                [(r["id"], r["family"], f"{r['parameters'] / 1e9:,.2f} B" if r["parameters"] else "-",
                  "yes" if r["builder"] else "capture", ", ".join(r["aliases"])) for r in rows],
                [False, False, True, False, False]))
    print(f"\n  {len(rows)} models · '--model' = the C++ builder supports the family; others need a script (capture)")
    return 0


_COMMANDS = {
    "simulate": _cmd_simulate,
    "compare": _cmd_compare,
    "check": _cmd_check,
    "capture": _cmd_capture,
    "devices": _cmd_devices,
    "models": _cmd_models,
    "kernel": cmd_kernel,
    "fit": cmd_fit,
    "systems": cmd_systems,
    "stacks": cmd_stacks,
    "train": cmd_train,
    "serve": cmd_serve,
    "plan": cmd_plan,
    "sweep": cmd_sweep,
    "validate": cmd_validate,
    "calibrate": cmd_calibrate,
}


def _reader_left() -> None:
    """The reader of stdout went away (`accel-sim ... | head`): what is still to print goes
    nowhere, quietly, as Unix tools do."""
    os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    code = 0
    try:
        from accel_sim import _core
        from accel_sim.errors import UsageError

        check_numbers(args)
        code = _COMMANDS[args.command](args)
        sys.stdout.flush()  # inside the try: a reader that left is met here, not at exit
        return code
    except BrokenPipeError:
        _reader_left()
        return code  # the command's own status when it had finished (check: its verdict)
    except KeyboardInterrupt:
        if args.debug:
            raise
        print("accel-sim: interrupted", file=sys.stderr)
        return 130  # 128 + SIGINT, as a shell reports a command that Ctrl-C ended
    except SystemExit as e:
        # No command of accel-sim raises SystemExit: this one came from code it ran (a model's
        # sys.exit() that no narrower handler turned into a usage error). Exiting with its status
        # could report success for work that never finished.
        if args.debug:
            import traceback

            traceback.print_exc()  # and still exit 2: re-raising would exit with the script's status
        print(f"accel-sim: error: {args.command} was stopped by sys.exit({e.code!r}) in code it ran "
              "(the model's script?); nothing was reported", file=sys.stderr)
        return 2
    except MemoryError:
        if args.debug:
            raise
        print(f"accel-sim: error: {args.command} ran out of memory: the run is larger than this machine holds "
              "(fewer requests, points, layers or a smaller shape)", file=sys.stderr)
        return 2
    except Exception as e:  # noqa: BLE001 - usage errors become one line; the rest keeps its traceback
        from accel_sim import _core
        from accel_sim.errors import UsageError

        if args.debug or not isinstance(e, (UsageError, _core.ConfigError)):
            raise
        print(f"accel-sim: error: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
