"""Checked reading of data files and of the values in them, at the edge of the program.

Device, system, model-config and graph files come from users and from other tools; a value of the
wrong kind must stop the run with one line naming the file, the key and what was expected,
before it reaches the core as an infinity, a NaN, a string, or an integer the core cannot hold.
Every reader of a data file goes through `read_text`, and every number in one through `number`
or `integer`; YAML files are parsed by `parse_yaml` (`StrictYamlLoader`).
"""

from __future__ import annotations

import json
import math
import reprlib
from pathlib import Path
from typing import Any

import yaml

from accel_sim.errors import UsageError

# The core's integer fields are int64 (std::int64_t); sizes and counts beyond 2^62 would overflow
# its byte arithmetic (a count times an element size), so files are held to that.
INT64_MAX = 2**63 - 1
COUNT_MAX = 2**62


def read_text(path: str | Path, what: str) -> str:
    """The UTF-8 text of a data file; a missing, unreadable or non-UTF-8 file is a UsageError."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"{what} file not found: {p}")
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise UsageError(f"{p}: cannot read the {what} file ({e.strerror or e})") from None
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw[:e.start].count(b"\n") + 1
        raise UsageError(f"{p}: line {line}: byte 0x{raw[e.start]:02x} is not UTF-8 text "
                         f"(a {what} file is UTF-8)") from None


def parse_json(text: str, where: str, what: str) -> Any:
    """JSON without NaN and Infinity (not JSON), with errors as one line naming the place."""

    def constant(name: str) -> Any:
        raise ValueError(f"{name} is not a JSON number")

    try:
        return json.loads(text, parse_constant=constant)
    except json.JSONDecodeError as e:
        raise UsageError(f"{where}: line {e.lineno}: not a JSON {what} ({e.msg})") from None
    except (ValueError, RecursionError) as e:  # NaN/Infinity, ints of over 4,300 digits, deep nesting
        message = "nested too deeply" if isinstance(e, RecursionError) else str(e).splitlines()[0]
        raise UsageError(f"{where}: not a JSON {what} ({message})") from None


class BadYaml(Exception):
    """A YAML document StrictYamlLoader refuses: the line (from 1) and what is wrong there."""

    def __init__(self, line: int, message: str) -> None:
        super().__init__(line, message)
        self.line, self.message = line, message


try:  # libyaml's parser, PyYAML's composer: it keeps Python's recursion limit, libyaml's does not (a crash)
    from yaml._yaml import CParser as _Parser

    class _YamlBase(yaml.composer.Composer, _Parser, yaml.constructor.SafeConstructor, yaml.resolver.Resolver):
        def __init__(self, stream: Any) -> None:
            _Parser.__init__(self, stream)
            yaml.composer.Composer.__init__(self)
            yaml.constructor.SafeConstructor.__init__(self)
            yaml.resolver.Resolver.__init__(self)
except ImportError:
    _YamlBase = yaml.SafeLoader  # type: ignore[misc,assignment]


class StrictYamlLoader(_YamlBase):  # type: ignore[misc,valid-type]
    """YAML's safe loader that refuses a key given twice in a mapping (YAML would keep the last
    silently) and nesting deeper than MAX_DEPTH levels (the data files need at most four), raising
    BadYaml."""

    MAX_DEPTH = 16
    depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        self.depth += 1
        try:
            if self.depth > self.MAX_DEPTH:
                raise BadYaml(self.peek_event().start_mark.line + 1, f"nested more than {self.MAX_DEPTH} levels deep")
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node: Any, deep: bool = False) -> Any:
        if isinstance(node, yaml.MappingNode):
            seen = set()
            for key_node, _ in node.value:
                if key_node.tag == "tag:yaml.org,2002:merge":
                    continue
                key = self.construct_object(key_node, deep=True)
                try:
                    if key in seen:
                        raise BadYaml(key_node.start_mark.line + 1, f"{reprlib.repr(key)} is given twice in the same mapping")
                    seen.add(key)
                except TypeError:  # an unhashable key: the base loader reports it
                    pass
        return super().construct_mapping(node, deep)


def parse_yaml(text: str | bytes, where: str, what: str) -> Any:
    """A YAML document read by StrictYamlLoader; what it or YAML refuses is one line naming the
    place (and the line)."""
    try:
        return yaml.load(text, Loader=StrictYamlLoader)
    except BadYaml as e:
        raise UsageError(f"{where}:{e.line}: {e.message}") from None
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f":{mark.line + 1}" if mark is not None else ""
        problem = " ".join(str(getattr(e, "problem", None) or e).split())  # a reader error spans two lines
        raise UsageError(f"{where}{at}: not valid YAML ({problem})") from None
    except (ValueError, OverflowError, RecursionError) as e:  # an int of 4,300 digits, a timestamp out of range
        raise UsageError(f"{where}: not a {what} file YAML can read ({type(e).__name__}: "
                         f"{str(e).splitlines()[0][:80] if str(e) else 'nested too deeply'})") from None


def read_yaml(path: str | Path, what: str) -> Any:
    """The parsed YAML of a data file (read_text, parse_yaml)."""
    return parse_yaml(read_text(path, what), str(path), what)


def _named(where: str, key: str) -> str:
    return f"{where}: '{key}'" if key else where


def number(value: Any, where: str, key: str, *, minimum: float | None = None, maximum: float | None = None,
           above: float | None = None) -> float:
    """A finite real number (not a bool, not a string) in [minimum, maximum] and > above."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{_named(where, key)} must be a number, got {_shown(value)}")
    if isinstance(value, int) and abs(value) > 1e300:
        raise UsageError(f"{_named(where, key)} is out of range, got an integer of {len(str(abs(value)))} digits")
    if not math.isfinite(value):
        raise UsageError(f"{_named(where, key)} must be a finite number, got {value}")
    if above is not None and not value > above:
        raise UsageError(f"{_named(where, key)} must be greater than {above:g}, got {value}")
    if minimum is not None and value < minimum:
        raise UsageError(f"{_named(where, key)} must be at least {minimum:g}, got {value}")
    if maximum is not None and value > maximum:
        raise UsageError(f"{_named(where, key)} must be at most {maximum:g}, got {value}")
    return float(value)


def finite_text(text: str, where: str) -> float:
    """A finite number written as text (a flag's value, a part of a spec); `where` leads the
    error: "--vary batch=1,x: 'x' is not a finite number"."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise UsageError(f"{where}: {text!r} is not a finite number")
    return value


def integer(value: Any, where: str, key: str, *, minimum: int = 0, maximum: int = COUNT_MAX) -> int:
    """An integer (a float with an integral value is accepted, as YAML and JSON writers produce
    them) in [minimum, maximum]."""
    if isinstance(value, float) and math.isfinite(value) and value.is_integer() and abs(value) <= 2**53:
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise UsageError(f"{_named(where, key)} must be an integer, got {_shown(value)}")
    if not minimum <= value <= maximum:
        shown = value if abs(value) < 10**30 else f"an integer of {len(str(abs(value)))} digits"
        raise UsageError(f"{_named(where, key)} must be an integer in [{minimum}, {maximum}], got {shown}")
    return value


def _of_kind(value: Any, kind: type, expected: str, where: str, key: str) -> Any:
    # bool is an int in Python, and an int is not a bool: each kind is checked as itself.
    if not isinstance(value, kind) or (kind is not bool and isinstance(value, bool)):
        raise UsageError(f"{_named(where, key)} must be {expected}, got {_shown(value)}")
    return value


def boolean(value: Any, where: str, key: str) -> bool:
    """true or false, not a string or a number that looks like one."""
    return _of_kind(value, bool, "true or false", where, key)


def text(value: Any, where: str, key: str) -> str:
    return _of_kind(value, str, "a string", where, key)


def mapping(value: Any, where: str, key: str) -> dict:
    return _of_kind(value, dict, "a mapping of keys to values", where, key)


def sequence(value: Any, where: str, key: str) -> list:
    return _of_kind(value, list, "a list", where, key)


def _shown(value: Any) -> str:
    """A value as an error message shows it: its repr, cut short, and its type for containers."""
    if isinstance(value, (dict, list, tuple, set)):
        return f"a {type(value).__name__}"
    shown = repr(value)
    return shown if len(shown) <= 60 else shown[:57] + "..."
