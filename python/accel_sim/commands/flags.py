"""Which options the user typed, the refusal of those that do not apply to a run, and the range
of every numeric option.

argparse fills every option's default into the namespace, so afterwards a flag the user typed and
one left at its default look alike, and a command that does not use a flag would ignore it
silently. `record_given` makes every option of a parser tree note its destination when the user
types it; `given` asks whether they did, and `refuse` turns a typed flag that the run cannot honour
into a one-line usage error (exit 2) saying why.

argparse's `type=int` and `type=float` take "inf", "nan", negative numbers and integers no C++
field holds. A numeric option declared with one of the argument sets below (`COUNT`, `WHOLE`,
`SEED`, `POSITIVE`, `FRACTION`, ...: `p.add_argument("--tp", **COUNT, default=1)`) takes only the
values it can physically mean, with a one-line error naming the flag (`Parser`). The options keep
`type=int` or `type=float` (grid files read a flag's type to convert and round their values) and
check the converted number in their action; `check_numbers` is the floor under every number.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
from typing import Any, Callable, Iterable, NoReturn

from accel_sim.errors import UsageError
from accel_sim.io.device_file import CLOCK_MHZ_RANGE
from accel_sim.io.fields import INT64_MAX

_GIVEN = "_options_given"



class Parser(argparse.ArgumentParser):
    """argparse with its usage errors on one line (`accel-sim simulate: error: ...` and where the
    options are listed) and exit status 2, as every other usage error of accel-sim prints."""

    def error(self, message: str) -> NoReturn:
        message = " ".join(message.split())
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")

    def exit(self, status: int = 0, message: str | None = None) -> NoReturn:
        if message:
            sys.stderr.write(message)
        sys.exit(status)


@functools.cache
def _recording(cls: type) -> type:
    """A subclass of the argparse action class `cls` that notes its destination when it runs
    (argparse runs an option's action only when the option is on the command line)."""

    def __call__(self: Any, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        given = getattr(namespace, _GIVEN, None)
        if given is None:
            given = set()
            setattr(namespace, _GIVEN, given)
        given.add(self.dest)
        cls.__call__(self, parser, namespace, values, option_string)

    return type(cls.__name__, (cls,), {"__call__": __call__})


def record_given(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Makes every optional argument of `parser` and of its sub-commands (recursively) record
    that it was given. A sub-command's namespace is copied into its parent's, set included."""
    for action in parser._actions:  # argparse keeps an option's group actions here too
        if isinstance(action, argparse._SubParsersAction):
            for child in set(action.choices.values()):
                record_given(child)
        elif action.option_strings and not isinstance(action, (argparse._HelpAction, argparse._VersionAction)):
            action.__class__ = _recording(type(action))
    return parser


def given(args: argparse.Namespace, dest: str) -> bool:
    """True when the user typed the option stored at `dest` (False for namespaces built in code)."""
    return dest in getattr(args, _GIVEN, ())


def mark_given(args: argparse.Namespace, dests: Iterable[str]) -> None:
    """Records `dests` as typed on `args`: a namespace built in code that stands for a command line
    (a grid file's point) is refused what that command line would be."""
    recorded = getattr(args, _GIVEN, None)
    if recorded is None:
        recorded = set()
        setattr(args, _GIVEN, recorded)
    recorded.update(dests)


def flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def refuse(args: argparse.Namespace, dests: Iterable[str], why: str) -> None:
    """A UsageError for the first of `dests` the user gave: '--flag <why>'."""
    for dest in dests:
        if given(args, dest):
            raise UsageError(f"{flag(dest)} {why}")


# ---- rules that several commands keep ---------------------------------------------------------


def check_clock(args: argparse.Namespace, devices: list[Any]) -> None:
    """Refuses a --clock-mhz the run cannot honour: the roofline has no clock, and a device file
    without `clock_mhz` gives no clock for the override to scale its peaks from (the kernel model
    would ignore it, core/src/cost/kernel.cc). Judged on the value, not on whether it was typed:
    a grid point sets the clock in code, and an override ignored would be a silent wrong answer."""
    if args.clock_mhz is None:
        return
    if args.cost_model == "roofline":
        raise UsageError("--clock-mhz applies to the kernel cost model; the roofline has no clock (--cost-model kernel)")
    for device in devices:
        if not device.clock_hz > 0:
            raise UsageError(f"--clock-mhz scales a device's peaks by the new clock over the clock they are quoted at; "
                             f"{device.id}'s file gives no clock_mhz")


def refuse_attention_kernel_under_roofline(args: argparse.Namespace, eager_builds_core: bool) -> None:
    """Refuses a typed --attention-impl under the roofline, which costs every kernel alike; where
    `eager_builds_core` (a --model graph), eager still changes the graph and is taken."""
    if args.cost_model != "roofline" or (eager_builds_core and args.attention_impl == "eager"):
        return
    refuse(args, ("attention_impl",), "picks the attention kernel the kernel cost model times; the roofline costs "
           "every kernel alike" + (" (eager, which builds the unfused attention core, is taken)" if eager_builds_core
                                   else ""))


def refuse_train_with_another_phase(args: argparse.Namespace) -> None:
    """Refuses --train with a typed --phase other than train."""
    if args.train and args.phase != "train":
        refuse(args, ("phase",), f"{args.phase} and --train ask for different runs; give one")


def check_numbers(args: argparse.Namespace) -> None:
    """Every number parsed from the command line is finite and fits the core's int64 fields:
    argparse's int() and float() accept 'inf', 'nan' and integers of any length, which would reach
    the core as a non-finite figure or fail in its binding. Each flag's own range is its
    command's to check."""
    for dest, value in vars(args).items():
        for v in value if isinstance(value, list) else (value,):
            if isinstance(v, float) and not math.isfinite(v):
                raise UsageError(f"{flag(dest)} must be a finite number, got {v}")
            if isinstance(v, int) and not isinstance(v, bool) and not -(2**63) <= v < 2**63:
                raise UsageError(f"{flag(dest)} is out of range ({len(str(abs(v)))} digits; at most 2^63 - 1)")


# ---- numeric options ------------------------------------------------------------------------------
# Each set is add_argument's keywords for one kind of number: argparse converts the text with `type`,
# then the option's action checks the number and reports "argument --flag: expected ..., got ..."
# (one line, exit 2) when it is out of range.


class _Checked(argparse._StoreAction):
    """Stores a converted number once `check` accepts it (`check` returns what was expected, or
    None)."""

    def __init__(self, *args: Any, check: Callable[[Any], str | None], **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.check = check

    def __call__(self, parser: Any, namespace: Any, values: Any, option_string: str | None = None) -> None:
        expected = self.check(values)
        if expected is not None:
            raise argparse.ArgumentError(self, f"expected {expected}, got {values!r}")
        super().__call__(parser, namespace, values, option_string)


def counts_up_to(high: int, why: str) -> dict:
    """A whole number from 1 to `high` (a bound on work, `why` says where it comes from)."""
    return _integer(1, high, f"a whole number from 1 to {high:,} ({why})")


def whole_up_to(high: int, why: str) -> dict:
    """A whole number from 0 to `high` (a bound on work where 0 means the default, `why` says both)."""
    return _integer(0, high, f"a whole number from 0 to {high:,} ({why})")


def count_list(text: str, high: int = INT64_MAX) -> list[int]:
    """'1,2,4' -> [1, 2, 4]: whole numbers from 1 to `high` separated by commas, in the order typed
    (plan's --gpus, serve-plan's --tp); an argparse type error saying what was expected."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected whole numbers separated by commas (got {text!r})") from None
    if not values or min(values) < 1 or max(values) > high:
        raise argparse.ArgumentTypeError(f"expected whole numbers from 1 to {high:,} separated by commas (got {text!r})")
    return values


def _integer(low: int, high: int, what: str) -> dict:
    return {"type": int, "action": _Checked, "check": lambda v: None if low <= v <= high else what}


def _real(accept: Callable[[float], bool], what: str) -> dict:
    return {"type": float, "action": _Checked, "check": lambda v: None if math.isfinite(v) and accept(v) else what}


# A whole number of things, at least 1 (GPUs, sequences, tokens, requests, degrees): the core's int64_t.
COUNT = _integer(1, INT64_MAX, "a whole number from 1 to 2^63 - 1")
# A whole number, at least 0 (0 meaning none, or the default where the help says so).
WHOLE = _integer(0, INT64_MAX, "a whole number from 0 to 2^63 - 1")
# A random seed: the core's uint64_t, within the int64 every number of the command line fits (check_numbers).
SEED = _integer(0, INT64_MAX, "a seed from 0 to 2^63 - 1")
# A time limit in seconds, at least 0 (0 means none).
SECONDS = _real(lambda v: v >= 0, "a finite number of seconds, at least 0")
# A finite number above 0 (a rate, a clock, a size).
POSITIVE = _real(lambda v: v > 0, "a finite number above 0")
# A finite factor of at least 1 (the busiest over the mean).
AT_LEAST_ONE = _real(lambda v: v >= 1, "a finite number of at least 1")
# A share of something, in (0, 1].
FRACTION = _real(lambda v: 0 < v <= 1, "a fraction in (0, 1]")
# A share kept back, in [0, 1) (all of it kept back leaves nothing to use).
RESERVE_FRACTION = _real(lambda v: 0 <= v < 1, "a fraction in [0, 1)")
# A core clock in MHz: the range of a clock set by hand (io/device_file.py), which sweep --vary
# clock_mhz also holds.
CLOCK_MHZ = _real(lambda v: CLOCK_MHZ_RANGE[0] <= v <= CLOCK_MHZ_RANGE[1],
                  f"a clock in MHz from {CLOCK_MHZ_RANGE[0]:g} to {CLOCK_MHZ_RANGE[1]:,.0f}")
# A number of elements written as 1e9 or 1000000000: whole, at least 1 (the core's double).
ELEMENTS = _real(lambda v: 1 <= v <= INT64_MAX and v.is_integer(), "a whole number of at least 1")
