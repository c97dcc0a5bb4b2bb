"""`accel-sim fit`: its options, and its search for the largest batch or sequence length that fits each
device (accel_sim.fit_search probes and searches; accel_sim.report.fitting renders the result)."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from accel_sim.api import OPTIMIZERS
from accel_sim.commands.flags import COUNT, counts_up_to
from accel_sim.fit_search import MAX_LIMIT
from accel_sim.io.stack_file import ATTENTION_KERNELS, RECOMPUTE_POLICIES
from accel_sim.report.fitting import WHAT
from accel_sim.script_watch import add_timeout_argument, watch_script


def add_parser(sub: Any, dtypes: tuple[str, ...]) -> None:
    p = sub.add_parser("fit", help="the largest batch or sequence length that fits each device")
    p.add_argument("target", nargs="?", help="a Python script with get_model() -> (model, example_inputs)")
    p.add_argument("--model", metavar="NAME|CONFIG", help="a shipped model or an HF config.json, built by the model builder")
    p.add_argument("--devices", required=True, help="comma-separated device names, e.g. v100,a100,h100")
    p.add_argument("--axis", choices=("batch", "seq"), required=True, help="the dimension to grow: batch size or sequence length")
    p.add_argument("--phase", choices=("prefill", "decode", "train"), default="prefill", help="with --model: prefill, one decode step (seq: the cached context) or a training step (default: prefill)")
    p.add_argument("--train", action="store_true", help="the same as --phase train")
    p.add_argument("--batch", **COUNT, default=1, help="with --axis seq: the batch (--model, default: 1; a script: its example inputs resized along dim 0)")
    p.add_argument("--seq", **COUNT, default=2048, help="with --axis batch: the sequence length, or decode's context (--model, default: 2048; a script: its example inputs resized along dim 1)")
    p.add_argument("--max", **counts_up_to(MAX_LIMIT, "2^50: no device holds as many bytes, and each sequence or token takes at least one"),
                   help="largest value to try (default: 65536 for batch; the model's position limit, or 131072, for seq)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw", help="with --phase train (default: adamw)")
    p.add_argument("--no-master-weights", action="store_true", help="with --phase train: gradients and states in the weight dtype")
    p.add_argument("--recompute", choices=RECOMPUTE_POLICIES, default="none", help="with --phase train: activation recomputation; selective is the --stack's (default: none)")
    p.add_argument("--recompute-interval", **COUNT, default=1, metavar="N", help="with --recompute: checkpoint every N-th layer only (default: 1)")
    p.add_argument("--keep-grads", action="store_true", help="with --phase train: gradients kept between steps (zero_grad(set_to_none=False))")
    p.add_argument("--offload", choices=("optimizer",),
                   help="with --phase train: the optimizer on the host (ZeRO-Offload on one GPU): its states and step "
                        "on the CPU, each gradient streamed out behind the backward; the host memory it takes is "
                        "reported (parameter and activation offload: train and plan)")
    p.add_argument("--kernels", choices=("fused", "hf-eager"), default="fused", help="with --model: kernel style (default: fused)")
    p.add_argument("--attention-impl", choices=ATTENTION_KERNELS, default="flash2", help="with --model: eager builds the unfused attention core, whose scores take memory (default: a fused kernel)")
    p.add_argument("--stack", metavar="NAME|FILE", help="with --model: build as the framework runs it (docs/formats/stack.md): its fused or unfused SwiGLU and, in a training step, its cross-entropy (default: none)")
    p.add_argument("--tp", **COUNT, default=1, help="with --model: tensor-parallel degree (one rank's memory)")
    p.add_argument("--sp", action="store_true", help="with --model and --tp > 1: sequence parallelism")
    p.add_argument("--dtype", choices=dtypes, help="the model's dtype (a script: cast before capture)")
    p.add_argument("--free-at-last-use", action="store_true", help="free activations right after their last use, as torch.compile plans memory")
    p.add_argument("--device-file", action="append", default=[], metavar="FILE", help="a device file (docs/formats/device.md); repeatable")
    p.add_argument("--plot", metavar="FILE", help="write peak memory vs the axis, with each device's memory, as an SVG")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--quiet", action="store_true", help="no status line on stderr while a script runs")
    add_timeout_argument(p)


@dataclass
class FitRun:
    """`fit`'s answer as the command gives it: its options (`args`), the FitReport of accel_sim.fit_search
    (one row per device), what was probed in words and the stack it was built as (None: none).
    to_dict() is `fit --json`, text() its text report."""

    args: Any
    report: Any
    what: str
    stack: Any = None

    def to_dict(self) -> dict:
        from accel_sim.report.fitting import fit_json

        return fit_json(self)

    def text(self) -> str:
        from accel_sim.report.fitting import fit_text

        return fit_text(self)


def _refuse_inapplicable(args: argparse.Namespace, phase: str) -> None:
    """Refuses typed flags this search would not use (accel_sim.commands.flags)."""
    from accel_sim.commands.flags import refuse

    refuse(args, (args.axis,), f"is the axis searched (--axis {args.axis}); --max bounds the search")
    if args.offload and args.optimizer == "none":
        from accel_sim.errors import UsageError

        raise UsageError("--offload optimizer: --optimizer none runs no optimizer to put on the host")
    if phase != "train":
        refuse(args, ("optimizer", "no_master_weights", "recompute", "recompute_interval", "keep_grads", "offload"),
               "applies to a training step (--train or --phase train)")
    if args.target is None:
        refuse(args, ("timeout",), "bounds a script's import, get_model() and capture; --model runs no user code")
    if args.target is not None:
        refuse(args, ("phase",), "applies to --model; a script's training step is --train")
        refuse(args, ("kernels", "tp", "sp", "no_master_weights", "recompute", "recompute_interval", "keep_grads", "stack"),
               "applies to a graph built with --model NAME; a script runs the ops its own code makes")
        if args.attention_impl != "eager":
            refuse(args, ("attention_impl",), "changes memory only with --model and eager (the unfused core); a "
                   "script's attention is what its code runs")
    else:
        if args.attention_impl != "eager":
            refuse(args, ("attention_impl",), "changes memory only as eager (the unfused attention core); "
                   "the fused kernels keep the same memory")


def fit(args: argparse.Namespace) -> FitRun:
    """`fit`'s search: the largest value of the axis that fits each device (accel_sim.fit_search)."""
    from accel_sim.commands.flags import given, refuse_train_with_another_phase
    from accel_sim.device import resolve_device
    from accel_sim.errors import UsageError
    from accel_sim.fit_search import builder_probe, fit as search, script_probe
    from accel_sim.io.model_config import load_model_spec

    if (args.target is None) == (args.model is None):
        raise UsageError("give either a script or --model NAME (not both)")
    refuse_train_with_another_phase(args)
    phase = "train" if args.train else args.phase
    _refuse_inapplicable(args, phase)
    names = [d.strip() for d in args.devices.split(",") if d.strip()]
    if not names:
        raise UsageError("--devices names no device")
    specs = [resolve_device(name, args.device_file).spec for name in names]
    if args.model is not None:
        spec = load_model_spec(args.model, dtype=args.dtype)
        positions = spec.max_position_embeddings or 131072
        if args.axis == "batch" and args.seq > positions and spec.max_position_embeddings:
            raise UsageError(f"--seq {args.seq} is beyond {spec.name}'s {positions} positions (max_position_embeddings)")
        if args.axis == "seq" and args.max is not None and args.max > positions and spec.max_position_embeddings:
            raise UsageError(f"--max {args.max} is beyond {spec.name}'s {positions} positions (max_position_embeddings)")
        limit = args.max or (65536 if args.axis == "batch" else positions)
        fixed = f"seq {args.seq}" if args.axis == "batch" and phase != "decode" else (
            f"context {args.seq}" if args.axis == "batch" else f"batch {args.batch}")
        what = f"{spec.name}, {phase}, {fixed}" + (f", recompute {args.recompute}" if phase == "train" else "")
        choices: dict = {}
        recompute = args.recompute
        if args.stack:
            from accel_sim.commands.train import recompute_policy, stack_builder_choices

            stack, choices = stack_builder_choices(args.stack, {"tp": [args.tp]}, args.kernels, phase, args.optimizer)
            recompute = recompute_policy(stack, args.recompute).name
            what += f", stack {stack.id}"
        if args.offload:
            what += ", optimizer on the host"
        probe = builder_probe(args.model, args.axis, free_at_last_use=args.free_at_last_use,
                              optimizer_on_host=args.offload == "optimizer", phase=phase,
                              batch=args.batch, seq=args.seq, context=args.seq, kernels=args.kernels,
                              tensor_parallel=args.tp, sequence_parallel=args.sp, dtype=args.dtype,
                              optimizer=args.optimizer, master_weights=not args.no_master_weights,
                              recompute=recompute, recompute_interval=args.recompute_interval,
                              eager_attention=args.attention_impl == "eager",
                              persistent_gradients=args.keep_grads, **choices)
    else:
        if phase == "decode":
            raise UsageError("with a script, --train captures its training step; --phase decode applies to --model NAME")
        train = phase == "train"
        other = "seq" if args.axis == "batch" else "batch"
        resize = {other: getattr(args, other)} if given(args, other) else {}
        with watch_script(args.target, args.timeout, args.quiet):
            capture_at, original, positions = script_probe(args.target, args.axis, dtype=args.dtype,
                                                           optimizer_on_host=args.offload == "optimizer",
                                                           free_at_last_use=args.free_at_last_use, train=train,
                                                           optimizer=args.optimizer, resize=resize)

        def probe(value: int) -> int:  # each capture has its own --timeout
            with watch_script(args.target, args.timeout, args.quiet):
                return capture_at(value)

        default_limit = 65536 if args.axis == "batch" else (positions or 131072)
        if args.axis == "seq" and positions and args.max is not None and args.max > positions:
            raise UsageError(f"--max {args.max} is beyond the model's {positions} positions (max_position_embeddings)")
        limit = args.max or default_limit
        fixed = f", {other} {resize[other]}" if resize else ""
        what = (f"{args.target} {'training step (' + args.optimizer + ')' if train else 'forward'}{fixed}, its example "
                f"inputs resized along {WHAT[args.axis]} (script's own: {original})")
    stack = None
    if args.model is not None and args.stack:
        from accel_sim.io.stack_file import resolve_stack

        stack = resolve_stack(args.stack)
    report = search(probe, specs, args.axis, limit, what)
    if args.offload:
        held = capture_at if args.target is not None else probe
        report.host_bytes = held.host_bytes
    return FitRun(args, report, what, stack)
