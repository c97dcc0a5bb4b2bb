"""Grid sweeps: a YAML file names a command (`simulate`, `train`, `plan`, `serve`) and the values
of its parameters; the cartesian product of the `grid:` lists (or the `points:` listed) is the
sweep. Format: docs/formats/grid.md.

    grid = load_grid("grid.yaml")          # validated: errors name the file and the key
    len(grid), grid.point(17)               # points are decoded from their index, never listed
    rows = run_points(grid, [0, 1, 2])      # one row per point: parameters, figures, error

A parameter is a flag of the command, written as its long name without dashes (`batch`,
`global_batch`, `slo_ttft_p99`), plus for `simulate` the device and system parameters of `sweep
--vary` (`memory_bandwidth_gbs`, `peak_tflops`, `memory_gb`, `clock_mhz`, `link_bandwidth_gbs`).
Each point runs exactly what the command runs with those flags; every figure comes from the core.
`run_points` never raises for a bad point: its row carries the one-line error instead.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import itertools
import math
import reprlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence


from accel_sim.errors import UsageError
from accel_sim.io import fields
from accel_sim.io.fields import INT64_MAX   # the core's integers are int64
from accel_sim.design_sweep import RangeValues, parse_range, refuse_repeats

# The most points one sweep takes. The driver holds every row until it writes the table (_Table:
# 9 bytes a number, 8 a string, 2 a bool, a state byte: 169 bytes for a 20-column simulate row)
# and journals each as a JSON line (200 bytes for that row, measured): 10^7 points are 1.7 GB of
# memory and 2 GB of journal, 75 s of the driver's own work at the 7.5 us a point of
# bench/RESULTS.md, and an hour of simulate points on two cores at the 1,392 points/s per core
# measured there. Ten times that would not fit the memory of the machine measured (24 GB).
MAX_POINTS = 10_000_000

# The largest grid file read. PyYAML builds Python objects node by node: 1 MiB of listed points
# (33,000 of them) reads in 2.2 s with libyaml's parser, 5.6 s without (measured on the machine of
# bench/RESULTS.md). A larger sweep is a product of ranges, or several files.
MAX_FILE_BYTES = 1 << 20

COMMANDS = ("simulate", "train", "plan", "serve")

# Flags that choose output, not the workload: the grid's output is `sweep --out`.
# plan's train_tokens sets the days to train of its text report, which a row does not hold.
_OUTPUT_FLAGS = {"json", "html", "trace", "trace_steps", "plot", "quiet", "help", "no_ops", "top", "debug", "threads",
                 "train_tokens"}

# The headline figures of each command, in column order, with their types.
FIGURES: dict[str, tuple[tuple[str, str], ...]] = {
    "simulate": (("latency_s", "float64"), ("tokens_per_s", "float64"), ("peak_memory_bytes", "int64"),
                 ("required_bytes", "float64"), ("memory_capacity_bytes", "float64"), ("fits", "bool"),
                 ("compute_bound_time_s", "float64"), ("memory_bound_time_s", "float64"),
                 ("launch_overhead_time_s", "float64"), ("communication_time_s", "float64"), ("bound", "string"),
                 ("mfu", "float64")),
    "train": (("step_s", "float64"), ("tokens_per_s", "float64"), ("tflops_per_gpu", "float64"), ("mfu", "float64"),
              ("memory_per_gpu_bytes", "float64"), ("activation_bytes", "float64"), ("fits", "bool"),
              ("reason", "string"), ("compute_s", "float64"), ("bubble_s", "float64"), ("tp_comm_s", "float64"),
              ("pp_comm_s", "float64"), ("dp_comm_s", "float64"), ("optimizer_s", "float64")),
    "plan": (("best", "string"), ("step_s", "float64"), ("tokens_per_s", "float64"), ("mfu", "float64"),
             ("memory_per_gpu_bytes", "float64"), ("candidates", "int64"), ("feasible", "int64")),
    "serve": (("max_qps", "float64"), ("requests_per_s", "float64"), ("output_tokens_per_s", "float64"),
              ("ttft_p50_s", "float64"), ("ttft_p99_s", "float64"), ("tpot_p50_s", "float64"),
              ("tpot_p99_s", "float64"), ("e2e_p99_s", "float64"), ("goodput_requests_per_s", "float64"),
              ("slo_attainment", "float64"), ("completed", "int64"), ("rejected", "int64"), ("preemptions", "int64"),
              ("cost_per_million_output_tokens_usd", "float64")),
}


def _command_parser(command: str) -> argparse.ArgumentParser:
    from accel_sim.commands.parser import command_parser

    return command_parser(command)


@functools.lru_cache(maxsize=None)
def _actions(command: str) -> dict[str, argparse.Action]:
    """The command's flags by their name in a grid file (the long option without dashes)."""
    out = {}
    for a in _command_parser(command)._actions:
        longs = [s for s in a.option_strings if s.startswith("--")]
        if longs:
            out[longs[0][2:].replace("-", "_")] = a
        elif not a.option_strings and a.dest != "help":
            out[a.dest] = a  # a positional (simulate's script or graph file)
    return out


def _sweep_parameters(command: str) -> set[str]:
    from accel_sim.design_sweep import PARAMETERS

    return {n for n, p in PARAMETERS.items() if p.kind != "workload"} if command == "simulate" else set()


def _range(text: str, where: str, integer: bool = False) -> RangeValues:
    """start:stop:n or start:stop:n:log, as `sweep --vary` reads them; n is checked against
    MAX_POINTS before anything is computed."""
    return parse_range(text, where, integer=integer, most=MAX_POINTS,
                       beyond=lambda n: f"points a sweep takes (docs/formats/grid.md): split it into "
                                        f"{math.ceil(n / MAX_POINTS):,} ranges of at most {MAX_POINTS:,}, one grid file each")


_SCALARS = (str, int, float)   # bool is an int


def _describe(value: Any) -> str:
    if value is None:
        return "no value"
    kind = "a list " if isinstance(value, list) else "a mapping " if isinstance(value, dict) else \
        f"a {type(value).__name__} " if not isinstance(value, _SCALARS) else ""
    return kind + reprlib.repr(value)   # depth and length bounded: nested or self-containing YAML too


def _check_number(name: str, value: Any, where: str) -> Any:
    """VALUE as the core takes it: ints within int64, floats finite (a list of ints: each)."""
    for v in value if isinstance(value, list) else [value]:
        if isinstance(v, bool):
            continue
        if isinstance(v, int) and not -INT64_MAX - 1 <= v <= INT64_MAX:
            raise UsageError(f"{where}: {name}: {v:,} is beyond the 64-bit integers the core takes "
                             f"(at most {INT64_MAX:,})")
        if isinstance(v, float) and not math.isfinite(v):
            raise UsageError(f"{where}: {name} takes a finite number (got {v!r})")
    return value


def _convert(command: str, name: str, value: Any, where: str) -> Any:
    """One value of parameter `name`, checked and converted as the command line would, and as
    the core takes it (ints within int64, finite floats)."""
    if not isinstance(value, _SCALARS):   # a list, a mapping, a date, nothing
        what = "one value" if isinstance(value, (list, dict)) or value is None else "a number or a name"
        raise UsageError(f"{where}: {name} takes {what} (got {_describe(value)})")
    if name in _sweep_parameters(command):
        from accel_sim.design_sweep import PARAMETERS

        if isinstance(value, str):   # YAML 1.1 reads 1e3 (no dot) as text
            value = fields.finite_text(value, f"{where}: {name}")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise UsageError(f"{where}: {name} takes a positive number (got {value!r})")
        try:
            value = float(value)
        except OverflowError:
            raise UsageError(f"{where}: {name} takes a finite number (got one of {len(str(value))} digits)") from None
        _check_number(name, value, where)
        PARAMETERS[name].check(value, where)   # the range a device or system file holds
        if name in _actions(command):   # also a flag (clock_mhz): and the flag's own range
            _check_range(_actions(command)[name], name, value, where)
        return value
    action = _actions(command)[name]
    if action.nargs == 0:  # a switch (store_true)
        if not isinstance(value, bool):
            raise UsageError(f"{where}: {name} is a switch: true or false (got {value!r})")
        return value
    if isinstance(value, bool) and action.choices is not None and {"on", "off"} <= set(action.choices):
        value = "on" if value else "off"   # YAML reads a bare on / off as true / false
    if action.type is int and isinstance(value, float) and value.is_integer():
        value = int(value)
    if action.type is int and (isinstance(value, (bool, float)) or isinstance(value, str) and not _is_int(value)):
        raise UsageError(f"{where}: {name} takes whole numbers (got {value!r})")
    if action.type is float and isinstance(value, bool):
        raise UsageError(f"{where}: {name} takes a number (got {value!r})")
    if action.type is float and isinstance(value, str):   # YAML 1.1 reads 1e3 (no dot) as text
        value = fields.finite_text(value, f"{where}: {name}")
    if action.type is not None and not isinstance(value, bool):
        try:
            value = action.type(value) if isinstance(value, str) else action.type(str(value)) \
                if action.type not in (int, float) else action.type(value)
        except (ValueError, TypeError, OverflowError, argparse.ArgumentTypeError) as e:
            raise UsageError(f"{where}: {name}: {e}") from None
    elif isinstance(value, bool):
        raise UsageError(f"{where}: {name} takes a value such as {action.metavar or action.dest} (got {value!r})")
    else:
        value = str(value)
    _check_number(name, value, where)
    if isinstance(value, list):  # a flag that takes a comma list (plan's --gpus): one value per point
        if len(value) != 1:
            raise UsageError(f"{where}: {name} takes one value per point; list the values as a grid axis")
        value = value[0]
    if action.choices is not None and value not in action.choices:
        raise UsageError(f"{where}: {name} must be one of {', '.join(map(str, action.choices))} (got {value!r})")
    _check_range(action, name, value, where)
    return value


def _check_range(action: argparse.Action, name: str, value: Any, where: str) -> None:
    """The range the flag's action holds on the command line (accel_sim.commands.flags: COUNT,
    POSITIVE, SECONDS, ...), as the command line words it."""
    check = getattr(action, "check", None)
    expected = check(value) if check is not None else None
    if expected is not None:
        raise UsageError(f"{where}: {name} takes {expected} (got {value!r})")


def _is_int(text: str) -> bool:
    try:
        int(text)
    except ValueError:
        return False
    return True


def _numeric_range(command: str, name: str) -> bool:
    """Whether a range's values are this parameter's values as they stand (a device parameter, or
    a flag of type int or float without choices): then its ends stand for all of them."""
    if name in _sweep_parameters(command):
        return True
    action = _actions(command)[name]
    return action.type in (int, float) and action.choices is None and action.nargs != 0


def _check_name(command: str, name: Any, where: str) -> str:
    if not isinstance(name, str):
        raise UsageError(f"{where}: a parameter name must be a string (got {name!r})")
    key = name.replace("-", "_")
    if key in _OUTPUT_FLAGS:
        raise UsageError(f"{where}: {name} chooses output, not the workload: a grid's output is `sweep --out`")
    if key not in _actions(command) and key not in _sweep_parameters(command):
        known = sorted((set(_actions(command)) | _sweep_parameters(command)) - _OUTPUT_FLAGS)
        raise UsageError(f"{where}: {command} has no parameter '{name}' (known: {', '.join(known)})")
    return key


@dataclass(frozen=True)
class Grid:
    """A validated grid: `fixed` values for every point, `axes` whose product is the points (the
    last axis varies fastest; an axis is a tuple of values, or the RangeValues of a range), or
    `listed` points. Plain data: cheap to send to workers."""

    path: str
    command: str
    fingerprint: str  # sha256 of the file's bytes: resuming checks it
    fixed: tuple[tuple[str, Any], ...]
    axes: tuple[tuple[str, Sequence[Any]], ...] = ()
    listed: tuple[tuple[tuple[str, Any], ...], ...] = ()

    def __len__(self) -> int:
        if self.listed:
            return len(self.listed)
        return math.prod(len(v) for _, v in self.axes)

    def point(self, index: int) -> dict:
        """The varied parameters of point `index` (0-based, the order of the product)."""
        if not 0 <= index < len(self):
            raise IndexError(index)
        if self.listed:
            return dict(self.listed[index])
        out = {}
        for name, values in reversed(self.axes):
            index, k = divmod(index, len(values))
            out[name] = values[k]
        return dict(reversed(list(out.items())))

    def parameter_names(self) -> list[str]:
        varied = [n for n, _ in self.axes] if not self.listed else list(dict.fromkeys(n for p in self.listed for n, _ in p))
        return [n for n, _ in self.fixed if n not in varied] + varied

    def columns(self) -> list[tuple[str, str]]:
        """The result table's columns: point, the parameters, the command's figures, error."""
        types: dict[str, set[str]] = {}

        def kind(v: Any) -> str:
            return "bool" if isinstance(v, bool) else "int64" if isinstance(v, int) else \
                "float64" if isinstance(v, float) else "string"

        for n, v in list(self.fixed) + [pair for p in self.listed for pair in p]:
            types.setdefault(n, set()).add(kind(v))
        for n, vs in self.axes:   # a range's type without listing it
            types.setdefault(n, set()).update({"int64" if vs.integer else "float64"} if isinstance(vs, RangeValues)
                                              else map(kind, vs))
        cols = [("point", "int64")]
        for n in self.parameter_names():
            t = types.get(n, {"string"})
            cols.append((n, t.pop() if len(t) == 1 else "float64" if t <= {"int64", "float64"} else "string"))
        return cols + list(FIGURES[self.command]) + [("error", "string")]


def _read(path: Path) -> bytes:
    """The file's bytes, at most MAX_FILE_BYTES of them (a device or pipe is not read to its end)."""
    try:
        with open(path, "rb") as f:
            raw = f.read(MAX_FILE_BYTES + 1)
    except OSError as e:
        raise UsageError(f"cannot read grid file {path}: {e.strerror or e}") from None
    if len(raw) > MAX_FILE_BYTES:
        raise UsageError(f"{path}: a grid file is at most {MAX_FILE_BYTES >> 20} MiB (docs/formats/grid.md): give a "
                         "large sweep as ranges (start:stop:n) under grid:, or split it into several files")
    return raw


def _product_advice(counts: list[tuple[str, int]]) -> str:
    """How to split a product of COUNTS (axis, values) into files of at most MAX_POINTS points:
    the largest axes fixed one value a file, then the next one cut into parts."""
    rest = math.prod(n for _, n in counts)
    fixed, files = [], 1
    for name, n in sorted(counts, key=lambda c: -c[1]):
        if rest <= MAX_POINTS:
            break
        others = rest // n
        if others <= MAX_POINTS:
            part = MAX_POINTS // others
            files *= math.ceil(n / part)
            return (f"split it into {files:,} grid files" + (f" that each fix {' and '.join(fixed)} and" if fixed
                                                             else " that each") +
                    f" take at most {part:,} of the {n:,} values of {name}")
        fixed.append(name)
        files *= n
        rest = others
    return f"split it into {files:,} grid files, one for each value of {' and '.join(fixed)}"


def load_grid(path: str | Path) -> Grid:
    """The grid file at `path`, validated (docs/formats/grid.md): errors name the file and the
    key. Sizes are checked before anything is listed: the file (MAX_FILE_BYTES), each range's
    count and the product of the axes (MAX_POINTS)."""
    path = Path(path)
    raw = _read(path)
    doc = fields.parse_yaml(raw, str(path), "grid")   # strict: a key given twice, nesting past 16 levels
    if not isinstance(doc, dict):
        raise UsageError(f"{path}: a grid file is a mapping with command, fixed and grid (or points)")
    unknown = sorted(map(str, set(doc) - {"command", "fixed", "grid", "points"}))
    if unknown:
        raise UsageError(f"{path}: unknown key '{unknown[0]}' (a grid file has command, fixed, grid, points)")
    command = doc.get("command")
    if not isinstance(command, str) or command not in COMMANDS:
        raise UsageError(f"{path}: command: must be one of {', '.join(COMMANDS)} (got {_describe(command)})")
    fixed_doc = doc.get("fixed")
    if fixed_doc is None:
        fixed_doc = {}
    if not isinstance(fixed_doc, dict):
        raise UsageError(f"{path}: fixed: must map parameter names to values (got {_describe(fixed_doc)})")
    fixed = []
    for name, value in fixed_doc.items():
        key = _check_name(command, name, f"{path}: fixed")
        if key in {n for n, _ in fixed}:
            raise UsageError(f"{path}: fixed.{name}: given twice (as {key.replace('_', '-')} and {key})")
        fixed.append((key, _convert(command, key, value, f"{path}: fixed.{name}")))
    grid_doc, points_doc = doc.get("grid"), doc.get("points")
    if (grid_doc is None) == (points_doc is None):
        raise UsageError(f"{path}: give grid (a product of value lists) or points (a list of points), not both or neither")
    fixed_names = {n for n, _ in fixed}
    axes, listed = [], []
    if grid_doc is not None:
        if not isinstance(grid_doc, dict) or not grid_doc:
            raise UsageError(f"{path}: grid: must map parameter names to lists of values (got {_describe(grid_doc)})")
        # First the names and how many values each axis has (a range's count from its text), so
        # that a product too large is refused before any value is listed or converted.
        raw_axes = []
        for name, values in grid_doc.items():
            key = _check_name(command, name, f"{path}: grid")
            where = f"{path}: grid.{name}"
            if key in fixed_names:
                raise UsageError(f"{where}: also in fixed; give it in one place")
            if key in {k for k, _, _ in raw_axes}:
                raise UsageError(f"{where}: given twice (as {key.replace('_', '-')} and {key})")
            if isinstance(values, str) and ":" in values:
                integer = key in _actions(command) and _actions(command)[key].type is int
                values = _range(values, where, integer)  # as `sweep --vary` rounds a range of counts
            elif not isinstance(values, list):
                values = [values]
            if not len(values):
                raise UsageError(f"{where}: no values")
            raw_axes.append((key, where, values))
        points = math.prod(len(v) for _, _, v in raw_axes)
        if points > MAX_POINTS:
            counts = [(k, len(v)) for k, _, v in raw_axes]
            sizes = " x ".join(f"{k} {n:,}" for k, n in counts)
            raise UsageError(f"{path}: grid: {points:,} points ({sizes}) is more than the {MAX_POINTS:,} a sweep "
                             f"takes (docs/formats/grid.md): {_product_advice(counts)}")
        for key, where, values in raw_axes:
            if isinstance(values, RangeValues) and _numeric_range(command, key):
                for end in (values[0], values[-1]):   # monotonic: the ends bound every value
                    _convert(command, key, end, where)
                refuse_repeats(values, where)
                axes.append((key, values))
                continue
            converted = tuple(_convert(command, key, v, where) for v in values)
            refuse_repeats(converted, where)
            axes.append((key, converted))
    else:
        if not isinstance(points_doc, list) or not points_doc:
            raise UsageError(f"{path}: points: must be a list of parameter mappings (got {_describe(points_doc)})")
        if len(points_doc) > MAX_POINTS:
            raise UsageError(f"{path}: points: {len(points_doc):,} points is more than the {MAX_POINTS:,} a sweep "
                             "takes (docs/formats/grid.md): split them into several files")
        for i, p in enumerate(points_doc):
            where = f"{path}: points[{i}]"
            if not isinstance(p, dict):
                raise UsageError(f"{where}: must map parameter names to values (got {_describe(p)})")
            row = []
            for name, value in p.items():
                key = _check_name(command, name, where)
                if key in fixed_names:
                    raise UsageError(f"{where}.{name}: also in fixed; give it in one place")
                if key in {k for k, _ in row}:
                    raise UsageError(f"{where}.{name}: given twice (as {key.replace('_', '-')} and {key})")
                row.append((key, _convert(command, key, value, f"{where}.{name}")))
            listed.append(tuple(row))
    grid = Grid(str(path), command, hashlib.sha256(raw).hexdigest(), tuple(fixed), tuple(axes), tuple(listed))
    _check_required(grid, path)
    _check_rules(grid, path)
    return grid


def _check_required(grid: Grid, path: Path) -> None:
    """Flags the command requires must be fixed or varied; simulate needs a model or a graph."""
    given = set(grid.parameter_names())
    for name, action in _actions(grid.command).items():
        if action.required and name not in given:
            raise UsageError(f"{path}: {grid.command} needs '{name}' (in fixed, grid or points)")
    if grid.command == "simulate" and not given & {"model", "target"}:
        raise UsageError(f"{path}: simulate needs 'model' (a shipped model or config.json) or 'target' (a graph file)")


# ---------------------------------------------------------------------------------------------
# Evaluation


@functools.lru_cache(maxsize=None)
def _defaults(command: str) -> dict:
    return {a.dest: a.default for a in _command_parser(command)._actions if a.dest != "help"}


def point_namespace(grid: Grid, params: dict) -> argparse.Namespace:
    """The command line of a point: its flags' values, each flag the grid gives recorded as typed
    (so that the command refuses what it would not use, as it refuses a typed flag), and the
    device parameters apart (`sweep_parameters`)."""
    from accel_sim.commands.flags import mark_given

    values = dict(_defaults(grid.command))
    actions = _actions(grid.command)
    lists = _list_flags(grid.command)
    sweep, typed = {}, []
    for name, value in list(grid.fixed) + list(params.items()):
        if name in actions:
            values[actions[name].dest] = [value] if name in lists else value
            typed.append(actions[name].dest)
        else:
            sweep[name] = value
    values["quiet"] = True
    ns = argparse.Namespace(**values)
    mark_given(ns, typed)
    ns.sweep_parameters = sweep
    return ns


@functools.lru_cache(maxsize=None)
def _list_flags(command: str) -> frozenset[str]:
    """The flags whose value on the command line is a list: repeatable (--device-file) or a comma
    list (plan's --gpus, --tp, ...). A point gives one value; the command takes the list of it."""
    from accel_sim.commands.parser import list_valued

    return frozenset(name for name, action in _actions(command).items() if list_valued(action))


def refuse_point_flags(command: str, args: argparse.Namespace) -> None:
    """The command's own rules that refuse a flag from the flags' names and values alone (no file
    read, no model loaded): a UsageError for a point that gives a flag its run would not use."""
    if command == "simulate":
        from accel_sim.commands import simulate
        from accel_sim.design_sweep import SweepSetup, check

        simulate.check_flags(args)
        setup = SweepSetup(simulate={"cost_model": args.cost_model}, system=args.system)
        for name in args.sweep_parameters:   # link_bandwidth_gbs needs a system
            check(setup, name)
    elif command == "train":
        from accel_sim.commands.train import refuse_layout_flags

        refuse_layout_flags(args)
    elif command == "serve":
        from accel_sim.commands.serve import device_names, refuse_inapplicable

        refuse_inapplicable(args, device_names(args))


# The most points whose flags are checked against the rules when a grid file is read (about 20 us
# each); the others are checked as they run.
MAX_CHECKED_AT_LOAD = 100_000


def _rule_class(command: str, name: str, value: Any) -> Any:
    """What the rules of refuse_point_flags can tell apart of a value: a name, a switch or a choice is
    itself; a count is 0, 1 or more (tp == 1, dp x cp == 1, disaggregate); a rate, a size or a
    device parameter only whether it is given."""
    action = _actions(command).get(name)
    if action is None or action.choices is not None or action.type not in (int, float):
        return value if action is not None else None
    return min(value, 2) if action.type is int else None


def _representatives(command: str, name: str, values: Sequence[Any]) -> list[tuple[int, Any]]:
    """(index, value) of the first value of each rule class of an axis. A range is monotonic, so
    its counts of 0 and 1 are among its three smallest values."""
    n = len(values)
    indices = sorted({i for i in (0, 1, 2, n - 3, n - 2, n - 1) if 0 <= i < n}) if isinstance(values, RangeValues) \
        else range(n)
    seen, out = set(), []
    for i in indices:
        c = _rule_class(command, name, values[i])
        if c not in seen:
            seen.add(c)
            out.append((i, values[i]))
    return out


def _check_rules(grid: Grid, path: Path) -> None:
    """Refuses a grid whose points give a flag their run would not use (refuse_point_flags), naming the
    first such point: one point of each combination of what the rules tell apart is checked, at
    most MAX_CHECKED_AT_LOAD of them."""
    if grid.listed:
        seen, candidates = set(), []
        for i, point in enumerate(grid.listed):
            key = tuple((n, _rule_class(grid.command, n, v)) for n, v in point)
            if key not in seen:
                seen.add(key)
                candidates.append((i, dict(point)))
    else:
        reps = [[(name, i, v) for i, v in _representatives(grid.command, name, values)] for name, values in grid.axes]
        sizes = [len(values) for _, values in grid.axes]

        def index(combo) -> int:
            i = 0
            for (_, k, _), size in zip(combo, sizes):
                i = i * size + k
            return i

        candidates = ((index(c), {name: v for name, _, v in c}) for c in itertools.product(*reps))
    for i, params in itertools.islice(candidates, MAX_CHECKED_AT_LOAD):
        try:
            refuse_point_flags(grid.command, point_namespace(grid, params))
        except UsageError as e:
            shown = ", ".join(f"{k} {v}" for k, v in params.items())
            raise UsageError(f"{path}: point {i} ({shown}): {e}") from None


