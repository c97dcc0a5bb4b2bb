"""`accel-sim`: parses the command line (accel_sim.commands.parser), runs the command and prints it.

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

from accel_sim.cli.fit import cmd_fit
from accel_sim.cli.kernels import cmd_calibrate, cmd_kernel, cmd_validate
from accel_sim.cli.plan import cmd_plan
from accel_sim.cli.serve import cmd_serve
from accel_sim.cli.serve_plan import cmd_serve_plan
from accel_sim.cli.sweep import cmd_sweep
from accel_sim.cli.systems import cmd_stacks, cmd_systems
from accel_sim.cli.train import cmd_train
from accel_sim.commands import simulate
from accel_sim.commands.flags import check_numbers
from accel_sim.commands.parser import build_parser
from accel_sim.script_watch import watch_script


def _cmd_simulate(args: argparse.Namespace) -> int:
    import accel_sim
    from accel_sim.report.tables import simulation_text

    graph = simulate.load(args)
    common = simulate.common(args)
    common.pop("dtype")
    report = accel_sim.simulate(graph, device=args.device, **common)
    if args.html:
        from accel_sim.report.html_report import simulation_html, write_html

        write_html(args.html, simulation_html(report))
    if args.trace:
        from accel_sim.report.sim_trace import write_simulation_trace

        write_simulation_trace(args.trace, report)
    if args.chakra:
        from accel_sim.errors import UsageError
        from accel_sim.report.chakra import write_chakra

        try:
            write_chakra(args.chakra, report)
        except OSError as err:
            raise UsageError(f"cannot write the Chakra trace to {args.chakra}: {err.strerror}") from None
    if args.json:
        print(json.dumps(report.to_dict(include_ops=not args.no_ops), indent=1))
    else:
        print(simulation_text(report, top=args.top))
        written = [f"  wrote {what}: {path}" for path, what in ((args.html, "HTML report"),
                                                             (args.trace, "trace (open it in ui.perfetto.dev)"),
                                                             (args.chakra, "Chakra execution trace")) if path]
        if written:
            print("\n" + "\n".join(written))
    return 0


def _cmd_compare(args: argparse.Namespace) -> int:
    import accel_sim
    from accel_sim.report.tables import comparison_text

    devices = [d.strip() for d in args.devices.split(",") if d.strip()]
    graph = simulate.load(args)
    common = simulate.common(args)
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
    from accel_sim.report.checks import check_json, check_text

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
    graph = simulate.load(args)
    common = simulate.common(args)
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
        print(json.dumps(check_json(checks), indent=1) if args.json else check_text(checks))
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
    from accel_sim.report.checks import capture_json, capture_text

    print(json.dumps(capture_json(graph, args.output), indent=1) if args.json else capture_text(graph, args.output))
    return 0


def _cmd_devices(args: argparse.Namespace) -> int:
    from accel_sim.device import Device, catalog
    from accel_sim.io.device_file import DeviceCatalog, load_device_file
    from accel_sim.report.catalogues import devices_catalogue_text, devices_json

    entries = catalog().entries + [load_device_file(p) for p in args.device_file]
    DeviceCatalog(entries)  # names must stay unambiguous
    devices = [Device.from_entry(e) for e in entries]
    print(json.dumps(devices_json(devices), indent=1) if args.json else devices_catalogue_text(devices))
    return 0


def _cmd_models(args: argparse.Namespace) -> int:
    from accel_sim import _core
    from accel_sim.io.model_config import BUILDER_MODEL_TYPES, load_model_spec, shipped_models
    from accel_sim.report.catalogues import models_text

    rows = []
    for entry in shipped_models():
        supported = entry.family in BUILDER_MODEL_TYPES
        params = _core.parameter_count(load_model_spec(entry.id)) if supported else entry.params
        rows.append({"id": entry.id, "family": entry.family, "aliases": list(entry.aliases),
                     "parameters": params, "builder": supported, "hub_id": entry.hub_id,
                     "source": entry.source})
    print(json.dumps(rows, indent=1) if args.json else models_text(rows))
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
    "serve-plan": cmd_serve_plan,
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
    args = build_parser().parse_args(argv)
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
