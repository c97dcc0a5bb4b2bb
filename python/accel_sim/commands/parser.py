"""The command line of accel-sim as data: every command's options (names, defaults, choices, help)
in one argparse tree, which the CLI parses (accel_sim.cli.main) and grid files read
(accel_sim.grid: a point's parameters are the command's flags)."""

from __future__ import annotations

import argparse
import functools
from typing import Any

from accel_sim.api import OPTIMIZERS
from accel_sim.commands import fit, kernels, plan, serve, serve_plan, sweep, systems, train
from accel_sim.commands.flags import COUNT, Parser, check_numbers, flag, mark_given, record_given
from accel_sim.commands.simulate import DTYPES, add_simulation_args, percent
from accel_sim.errors import UsageError
from accel_sim.report.json_report import SCHEMA_VERSION
from accel_sim.script_watch import add_timeout_argument
from accel_sim.version import __version__


def version_text() -> str:
    """`accel-sim --version`: the package version and what identifies this project's command: its
    compiled engine (imported here, so a broken install fails) and the file formats it reads and
    writes. A CI job compares it with the version it meant to install (examples/ci/)."""
    from accel_sim import _core  # noqa: F401  (the engine must load)
    from accel_sim.io.graph_file import FORMAT, VERSION

    return f"accel-sim {__version__} (engine accel_sim._core; graph format {FORMAT} v{VERSION}; " \
           f"report schema {SCHEMA_VERSION})"


class _VersionAction(argparse.Action):
    """Like argparse's "version" action, with the text made only when asked for."""

    def __init__(self, option_strings: list[str], dest: str, **kwargs: Any) -> None:
        super().__init__(option_strings, dest, nargs=0, default=argparse.SUPPRESS, **kwargs)

    def __call__(self, parser: argparse.ArgumentParser, *args: Any) -> None:
        print(version_text())
        parser.exit()


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(
        prog="accel-sim",
        description="Predict latency and memory of PyTorch models on accelerators you do not have.",
    )
    parser.add_argument("--version", action=_VersionAction,
                        help="print the version, the engine and the formats of this accel-sim, and exit")
    parser.add_argument("--debug", action="store_true", help="show tracebacks for errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("simulate", help="latency, memory and bottlenecks on one device")
    add_simulation_args(p)
    p.add_argument("--device", default="h100", help="device name or alias (default: h100); see `accel-sim devices`")
    p.add_argument("--top", **COUNT, default=10, help="rows per breakdown table (default: 10)")
    p.add_argument("--no-ops", action="store_true", help="with --json: leave out the per-op rows")
    p.add_argument("--html", metavar="FILE", help="also write a self-contained HTML report (roofline, timeline, memory, breakdowns)")
    p.add_argument("--trace", metavar="FILE", help="also write the timeline as a Perfetto / Chrome trace (JSON)")
    p.add_argument("--chakra", metavar="FILE",
                   help="also write the simulated ops as a Chakra execution trace (one rank's), the workload format "
                        "ASTRA-sim reads: compute nodes with their times, collectives with their type and size, "
                        "their dependencies")

    p = sub.add_parser("compare", help="the same model on several devices, with a verdict")
    add_simulation_args(p)
    p.add_argument("--devices", required=True, help="comma-separated device names, e.g. v100,a100,h100")
    p.add_argument("--html", metavar="FILE", help="also write a self-contained HTML report with the devices side by side")

    p = sub.add_parser("check", help="CI gate: fail when latency or peak memory grew past a limit")
    add_simulation_args(p)
    p.add_argument("--device", default="h100", help="device name or alias (default: h100)")
    p.add_argument("--baseline", required=True, metavar="FILE", help="baseline JSON (written by --write-baseline)")
    p.add_argument("--max-regression", type=percent, default=0.05, metavar="PCT", help="allowed growth of latency and peak memory (default: 5%%)")
    p.add_argument("--max-latency-regression", type=percent, metavar="PCT", help="allowed latency growth (overrides --max-regression)")
    p.add_argument("--max-memory-regression", type=percent, metavar="PCT", help="allowed peak-memory growth (overrides --max-regression)")
    p.add_argument("--write-baseline", action="store_true", help="write the baseline file from this run and exit 0")

    p = sub.add_parser("capture", help="capture a script's model into a graph .json (needs torch)")
    p.add_argument("script", help="a Python script with get_model()")
    p.add_argument("-o", "--output", required=True, metavar="FILE", help="graph file to write")
    p.add_argument("--dtype", choices=DTYPES, help="cast the model and its float inputs before capture")
    p.add_argument("--train", action="store_true", help="capture one training step (forward, loss, backward, optimizer)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw", help="with --train (default: adamw)")
    p.add_argument("--precision", choices=("bf16-mixed", "fp16-mixed"), help="with --train: torch.autocast mixed precision")
    p.add_argument("--json", action="store_true", help="print a summary of the written graph as JSON")
    p.add_argument("--quiet", action="store_true", help="no status line on stderr")
    add_timeout_argument(p)

    p = sub.add_parser("models", help="list the shipped model configs (params, family, builder support)")
    p.add_argument("--json", action="store_true", help="print as JSON")

    fit.add_parser(sub, DTYPES)
    kernels.add_parsers(sub)
    systems.add_systems_parser(sub)
    systems.add_stacks_parser(sub)
    train.add_parser(sub)
    serve.add_parser(sub)
    serve_plan.add_parser(sub)
    plan.add_parser(sub)
    sweep.add_parser(sub, add_simulation_args)

    p = sub.add_parser("devices", help="list the known devices and their numbers")
    p.add_argument("--device-file", action="append", default=[], metavar="FILE", help="also list this device file")
    p.add_argument("--json", action="store_true", help="print as JSON")
    return record_given(parser)


@functools.lru_cache(maxsize=None)
def command_parser(command: str) -> argparse.ArgumentParser:
    """The argparse parser of `accel-sim COMMAND` (its options: names, defaults, choices); a
    command with kinds is named with its kind: "kernel matmul"."""
    return _descend(command)[0]


def _descend(command: str) -> tuple[argparse.ArgumentParser, dict[str, str]]:
    """The parser of COMMAND ("kernel matmul": the kind's), and the sub-command choices argparse
    would store on the way ({"command": "kernel", "kernel_kind": "matmul"})."""
    parser, chosen = build_parser(), {}
    for word in command.split():
        sub = next((a for a in parser._actions if isinstance(a, argparse._SubParsersAction)), None)
        if sub is None or word not in sub.choices:
            known = ", ".join(sorted(sub.choices)) if sub is not None else "none"
            raise TypeError(f"no command {command!r} (at {word!r}: {known})")
        chosen[sub.dest] = word
        parser = sub.choices[word]
    return parser, chosen


def list_valued(action: argparse.Action) -> bool:
    """Whether the option holds a list: repeatable (--device-file) or a comma list (plan's --gpus)."""
    if isinstance(action, argparse._AppendAction):
        return True
    if action.type in (None, int, float) or action.nargs == 0:
        return False
    if getattr(action.type, "comma_list", False):  # a list of names ("bf16,fp8"), which "1" is not
        return True
    try:
        return isinstance(action.type("1"), list)
    except (ValueError, TypeError, argparse.ArgumentTypeError):
        return False


def _python_value(action: argparse.Action, value: Any) -> Any:
    """`value` given from Python as the command line would hold it: text converted by the option's
    type, one value of a list option a list of one, a number checked to be of the option's kind
    (a bool is not a number, nor 2.5 a count); a TypeError or ValueError saying what was expected."""
    if list_valued(action):
        if isinstance(action, argparse._AppendAction):  # repeatable: a text or a list of texts
            return [str(v) for v in value] if isinstance(value, (list, tuple)) else [str(value)]
        items = value if isinstance(value, (list, tuple)) else [value]
        return action.type(",".join(str(v) for v in items))  # a comma list, as typed
    if isinstance(value, (list, tuple, dict, set)):
        raise TypeError(f"expected one value, got {value!r}")
    if isinstance(action, argparse._StoreConstAction):  # a switch
        if not isinstance(value, bool):
            raise TypeError(f"expected True or False, got {value!r}")
        return value
    if isinstance(value, str):
        return action.type(value) if action.type is not None else value
    if action.type is None:
        return str(value)  # an option the command reads as text (serve's --input-len 512 or lognormal:...)
    if isinstance(value, bool) or (action.type is int and not isinstance(value, int)) or \
            (action.type is float and not isinstance(value, (int, float))):
        raise TypeError(f"expected {'a whole number' if action.type is int else 'a number'}, got {value!r}")
    return float(value) if action.type is float else value


def command_options(command: str, values: dict, hidden: set[str] | frozenset[str] = frozenset()) -> argparse.Namespace:
    """What `accel-sim COMMAND` would parse from a command line that gives `values` (keyed by the
    options' destinations: global_batch for --global-batch), for the Python API: every other
    option at its default, a text value converted as the command line converts it, one value of a
    list option taken as a list of one, every value checked against its option's choices and
    range, and each recorded as given, so that a run refuses an option it would not use as it
    refuses the flag. An unknown option, or a required one missing, is a TypeError; the options
    it lists leave out those `hidden` (the command line's output flags)."""
    parser = command_parser(command)
    actions = {a.dest: a for a in parser._actions if a.dest != "help"}
    unknown = sorted(set(values) - set(actions))
    if unknown:
        raise TypeError(f"{command}() got unknown options {', '.join(unknown)}; its options: "
                        f"{', '.join(sorted(set(actions) - set(hidden)))}")
    missing = sorted(d for d, a in actions.items() if a.required and values.get(d) is None)
    if missing:
        raise TypeError(f"{command}() needs {', '.join(missing)}")
    namespace = argparse.Namespace(**{d: a.default for d, a in actions.items()}, **_descend(command)[1])
    given = []
    for dest, value in values.items():
        action = actions[dest]
        if value is None or (value is False and isinstance(action, argparse._StoreTrueAction)):
            continue  # the default, as a command line that leaves the flag out
        try:
            value = _python_value(action, value)
        except (ValueError, TypeError, argparse.ArgumentTypeError) as e:
            raise UsageError(f"{flag(dest)}: {e}") from None
        if action.choices is not None and value not in action.choices:
            raise UsageError(f"{flag(dest)}: {value!r} is not one of {', '.join(map(str, action.choices))}")
        check = getattr(action, "check", None)
        if check is not None and (expected := check(value)) is not None:
            raise UsageError(f"{flag(dest)}: expected {expected}, got {value!r}")
        setattr(namespace, dest, value)
        given.append(dest)
    mark_given(namespace, given)
    check_numbers(namespace)
    return namespace
