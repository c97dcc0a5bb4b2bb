"""`accel-sim fit`: the largest batch or sequence length that fits each device."""

from __future__ import annotations

import argparse
import json

from accel_sim.script_watch import watch_script

_WHAT = {"batch": "batch", "seq": "sequence length"}


def _refuse_inapplicable(args: argparse.Namespace, phase: str) -> None:
    """Refuses typed flags this search would not use (accel_sim.commands.flags)."""
    from accel_sim.commands.flags import refuse

    refuse(args, (args.axis,), f"is the axis searched (--axis {args.axis}); --max bounds the search")
    if phase != "train":
        refuse(args, ("optimizer", "no_master_weights", "recompute", "recompute_interval", "keep_grads"),
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


def cmd_fit(args: argparse.Namespace) -> int:
    from accel_sim.commands.flags import given, refuse_train_with_another_phase
    from accel_sim.device import resolve_device
    from accel_sim.errors import UsageError
    from accel_sim.fit import builder_probe, fit, script_probe, write_svg
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
        probe = builder_probe(args.model, args.axis, free_at_last_use=args.free_at_last_use, phase=phase,
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
                f"inputs resized along {_WHAT[args.axis]} (script's own: {original})")
    report = fit(probe, specs, args.axis, limit, what)
    if args.plot:
        write_svg(report, args.plot)
    if args.json:
        out = report.to_dict()
        if args.model is not None:
            from accel_sim.io.stack_file import resolve_stack

            out["stack"] = resolve_stack(args.stack).as_dict() if args.stack else None
        print(json.dumps(out, indent=1))
        return 0
    gib = 2**30
    print(f"accel-sim fit · largest {_WHAT[args.axis]} that fits · {what}")
    print()
    header = ("device", "memory", f"largest {args.axis}", "needed at it", f"needed at {args.axis} + 1")
    rows = []
    for r in report.rows:
        largest = "none" if r.largest == 0 else f"{r.largest}" + (" (search limit)" if r.at_limit else "")
        rows.append((r.device, f"{r.memory_bytes / gib:.1f} GiB", largest,
                     f"{r.peak_bytes / gib:.2f} GiB" + (" (at 1)" if r.largest == 0 else ""),
                     "-" if r.next_peak_bytes is None or r.largest == 0 else f"{r.next_peak_bytes / gib:.2f} GiB"))
    widths = [max(len(h), *(len(row[i]) for row in rows)) for i, h in enumerate(header)]
    print(("  " + "  ".join(h.ljust(w) for h, w in zip(header, widths))).rstrip())
    print("  " + "  ".join("-" * w for w in widths))
    for row in rows:
        print(("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths))).rstrip())
    print()
    print(f"  peak: the liveness analysis of the {'built' if args.model else 'captured'} graph "
          f"({'freed at last use' if args.free_at_last_use else 'freed when the program drops it'}) replayed through "
          f"PyTorch's caching allocator, plus each device's runtime reserve (CUDA context, libraries); "
          f"{len(report.probes)} value{'s' if len(report.probes) != 1 else ''} probed")
    dips = [r.device for r in report.rows if not r.monotone]
    if dips:
        print(f"  note ({', '.join(dips)}): a larger {args.axis} needed less than a smaller one among the probes "
              f"(the allocator packs some sizes better); the answer fits and the next value does not, "
              f"but a value beyond it may fit again")
    if args.plot:
        print(f"  wrote {args.plot}")
    return 0
