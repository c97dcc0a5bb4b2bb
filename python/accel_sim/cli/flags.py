"""Which options the user typed, and the refusal of those that do not apply to a run.

argparse fills every option's default into the namespace, so afterwards a flag the user typed and
one left at its default look alike, and a command that does not use a flag would ignore it
silently. `record_given` makes every option of a parser tree note its destination when the user
types it; `given` asks whether they did, and `refuse` turns a typed flag that the run cannot honour
into a one-line usage error (exit 2) saying why.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
from typing import Any, Iterable, NoReturn

from accel_sim.errors import UsageError

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


def flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def refuse(args: argparse.Namespace, dests: Iterable[str], why: str) -> None:
    """A UsageError for the first of `dests` the user gave: '--flag <why>'."""
    for dest in dests:
        if given(args, dest):
            raise UsageError(f"{flag(dest)} {why}")


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
