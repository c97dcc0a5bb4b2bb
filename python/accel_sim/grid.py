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
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import yaml

from accel_sim.errors import UsageError

COMMANDS = ("simulate", "train", "plan", "serve")

# Flags that choose output, not the workload: the grid's output is `sweep --out`.
_OUTPUT_FLAGS = {"json", "html", "trace", "trace_steps", "plot", "quiet", "help", "no_ops", "top", "debug", "threads"}

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


@functools.lru_cache(maxsize=None)
def _command_parser(command: str) -> argparse.ArgumentParser:
    from accel_sim.cli.main import _parser

    parser = _parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[command]


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
    from accel_sim.sweep import PARAMETERS

    return {n for n, p in PARAMETERS.items() if p.kind != "workload"} if command == "simulate" else set()


def _range(text: str, where: str) -> list[float]:
    """start:stop:n or start:stop:n:log, as `sweep --vary` reads them."""
    parts = [p.strip() for p in text.split(":")]
    log = len(parts) == 4 and parts[3] == "log"
    if len(parts) not in (3, 4) or (len(parts) == 4 and not log):
        raise UsageError(f"{where}: a range is start:stop:n or start:stop:n:log (got '{text}')")
    try:
        start, stop, n = float(parts[0]), float(parts[1]), int(parts[2])
    except ValueError:
        raise UsageError(f"{where}: a range is start:stop:n with numbers (got '{text}')") from None
    if n < 2 or not (math.isfinite(start) and math.isfinite(stop)):
        raise UsageError(f"{where}: a range needs finite ends and at least 2 points (got '{text}')")
    if log and (start <= 0 or stop <= 0):
        raise UsageError(f"{where}: a log range needs positive ends (got '{text}')")
    values = [start * (stop / start) ** (i / (n - 1)) if log else start + (stop - start) * i / (n - 1) for i in range(n)]
    values[-1] = stop
    return [float(f"{v:.12g}") for v in values]


def _convert(command: str, name: str, value: Any, where: str) -> Any:
    """One value of parameter `name`, checked and converted as the command line would."""
    if name in _sweep_parameters(command):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
            raise UsageError(f"{where}: {name} takes a positive number (got {value!r})")
        return float(value)
    action = _actions(command)[name]
    if action.nargs == 0:  # a switch (store_true)
        if not isinstance(value, bool):
            raise UsageError(f"{where}: {name} is a switch: true or false (got {value!r})")
        return value
    if action.type is int and isinstance(value, float) and value.is_integer():
        value = int(value)
    if action.type is int and isinstance(value, float):
        raise UsageError(f"{where}: {name} takes whole numbers (got {value!r})")
    if action.type is not None and not isinstance(value, bool):
        try:
            value = action.type(value) if isinstance(value, str) else action.type(str(value)) \
                if action.type not in (int, float) else action.type(value)
        except (ValueError, TypeError, argparse.ArgumentTypeError) as e:
            raise UsageError(f"{where}: {name}: {e}") from None
    elif not isinstance(value, (str, int, float)) or isinstance(value, bool):
        raise UsageError(f"{where}: {name} takes a value such as {action.metavar or action.dest} (got {value!r})")
    else:
        value = str(value)
    if isinstance(value, list):  # a flag that takes a comma list (plan's --gpus): one value per point
        if len(value) != 1:
            raise UsageError(f"{where}: {name} takes one value per point; list the values as a grid axis")
        value = value[0]
    if action.choices is not None and value not in action.choices:
        raise UsageError(f"{where}: {name} must be one of {', '.join(map(str, action.choices))} (got {value!r})")
    return value


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
    last axis varies fastest), or `listed` points. Plain data: cheap to send to workers."""

    path: str
    command: str
    fingerprint: str  # sha256 of the file's bytes: resuming checks it
    fixed: tuple[tuple[str, Any], ...]
    axes: tuple[tuple[str, tuple[Any, ...]], ...] = ()
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
        values = [v for _, v in self.fixed] + [v for _, vs in self.axes for v in vs] + \
                 [v for p in self.listed for _, v in p]
        names = [n for n, _ in self.fixed] + [n for n, vs in self.axes for _ in vs] + [n for p in self.listed for n, _ in p]
        for n, v in zip(names, values):
            types.setdefault(n, set()).add("bool" if isinstance(v, bool) else "int64" if isinstance(v, int)
                                           else "float64" if isinstance(v, float) else "string")
        cols = [("point", "int64")]
        for n in self.parameter_names():
            t = types.get(n, {"string"})
            cols.append((n, t.pop() if len(t) == 1 else "float64" if t <= {"int64", "float64"} else "string"))
        return cols + list(FIGURES[self.command]) + [("error", "string")]


def load_grid(path: str | Path) -> Grid:
    """The grid file at `path`, validated (docs/formats/grid.md)."""
    path = Path(path)
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise UsageError(f"cannot read grid file {path}: {e.strerror or e}") from None
    try:
        doc = yaml.safe_load(raw)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        at = f":{mark.line + 1}" if mark is not None else ""
        raise UsageError(f"{path}{at}: not valid YAML ({getattr(e, 'problem', None) or e})") from None
    if not isinstance(doc, dict):
        raise UsageError(f"{path}: a grid file is a mapping with command, fixed and grid (or points)")
    unknown = set(doc) - {"command", "fixed", "grid", "points"}
    if unknown:
        raise UsageError(f"{path}: unknown key '{sorted(unknown)[0]}' (a grid file has command, fixed, grid, points)")
    command = doc.get("command")
    if command not in COMMANDS:
        raise UsageError(f"{path}: command: must be one of {', '.join(COMMANDS)} (got {command!r})")
    fixed_doc = doc.get("fixed") or {}
    if not isinstance(fixed_doc, dict):
        raise UsageError(f"{path}: fixed: must map parameter names to values")
    fixed = []
    for name, value in fixed_doc.items():
        key = _check_name(command, name, f"{path}: fixed")
        fixed.append((key, _convert(command, key, value, f"{path}: fixed.{name}")))
    grid_doc, points_doc = doc.get("grid"), doc.get("points")
    if (grid_doc is None) == (points_doc is None):
        raise UsageError(f"{path}: give grid (a product of value lists) or points (a list of points), not both or neither")
    fixed_names = {n for n, _ in fixed}
    axes, listed = [], []
    if grid_doc is not None:
        if not isinstance(grid_doc, dict) or not grid_doc:
            raise UsageError(f"{path}: grid: must map parameter names to lists of values")
        for name, values in grid_doc.items():
            key = _check_name(command, name, f"{path}: grid")
            where = f"{path}: grid.{name}"
            if key in fixed_names:
                raise UsageError(f"{where}: also in fixed; give it in one place")
            if isinstance(values, str) and ":" in values:
                values = _range(values, where)
                if key in _actions(command) and _actions(command)[key].type is int:
                    values = [round(v) for v in values]  # as `sweep --vary` rounds a range of counts
            if not isinstance(values, list):
                values = [values]
            if not values:
                raise UsageError(f"{where}: no values")
            converted = tuple(_convert(command, key, v, where) for v in values)
            if len(set(map(repr, converted))) != len(converted):
                raise UsageError(f"{where}: values repeat")
            axes.append((key, converted))
    else:
        if not isinstance(points_doc, list) or not points_doc:
            raise UsageError(f"{path}: points: must be a list of parameter mappings")
        for i, p in enumerate(points_doc):
            where = f"{path}: points[{i}]"
            if not isinstance(p, dict):
                raise UsageError(f"{where}: must map parameter names to values")
            row = []
            for name, value in p.items():
                key = _check_name(command, name, where)
                if key in fixed_names:
                    raise UsageError(f"{where}.{name}: also in fixed; give it in one place")
                row.append((key, _convert(command, key, value, f"{where}.{name}")))
            listed.append(tuple(row))
    grid = Grid(str(path), command, hashlib.sha256(raw).hexdigest(), tuple(fixed), tuple(axes), tuple(listed))
    _check_required(grid, path)
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


def _namespace(grid: Grid, params: dict) -> argparse.Namespace:
    values = dict(_defaults(grid.command))
    actions = _actions(grid.command)
    sweep = {}
    for name, value in list(grid.fixed) + list(params.items()):
        if name in actions:
            values[actions[name].dest] = value
        else:
            sweep[name] = value
    values["quiet"] = True
    ns = argparse.Namespace(**values)
    ns.sweep_parameters = sweep
    return ns


def _one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}" if not isinstance(err, (UsageError, ValueError)) \
        else (text[0] if text else type(err).__name__)


def run_points(grid: Grid, indices: Sequence[int]) -> list[dict]:
    """One row per index, in order: {"point": i, parameters..., figures..., "error": None or a
    line}. A failing point gets None figures and its error; it never stops the others."""
    evaluate = _EVALUATORS[grid.command]
    names = grid.parameter_names()
    figures = [n for n, _ in FIGURES[grid.command]]
    fixed = dict(grid.fixed)
    rows = []
    for i in indices:
        params = grid.point(i)
        row = {"point": i, **{n: params.get(n, fixed.get(n)) for n in names}}
        try:
            got = evaluate(grid, params)
            row.update({n: got.get(n) for n in figures})
            row["error"] = None
        except Exception as e:  # noqa: BLE001 - a point's failure is data, not the sweep's end
            row.update({n: None for n in figures})
            row["error"] = _one_line(e)
        rows.append(row)
    return rows


# Per-process caches: the same model spec serves many points, and the last graph the next point
# when only the device or a device parameter changes (the last axis of a grid varies fastest).
_SPECS: dict[tuple, Any] = {}
_GRAPHS: dict[tuple, Any] = {}


@functools.lru_cache(maxsize=1)
def _simulate_keywords() -> frozenset[str]:
    """accel_sim.simulate's options other than those run_point sets per point."""
    import inspect

    import accel_sim

    return frozenset(inspect.signature(accel_sim.simulate).parameters) - {"system", "groups", "device_files", "dtype"}


_WORKLOAD_SHAPE = ("batch", "seq", "context")
_LEAN: dict[tuple, Any] = {}


def _simulate(grid: Grid, params: dict) -> dict:
    """A point of a simulate grid. A builder graph on a named device with no device or system
    parameter varied takes the lean path: what the point shares with its neighbours (options,
    device, the build options less the shape) is set up once, then the core builds and simulates
    and the row is read off its result by sweep.figures, as `sweep` reads it (tests/test_grid.py
    checks they agree); anything else goes through sweep.run_point."""
    from accel_sim import _core
    from accel_sim.sweep import figures

    key = tuple((k, v) for k, v in params.items() if k not in _WORKLOAD_SHAPE)
    lean = _LEAN.get(key)
    if lean is None:
        lean = _LEAN[key] = _lean_context(grid, params)
    if lean is False:
        return _simulate_general(grid, params)
    spec, options, device, sim, phase, micro, base = lean
    shape = base | {k: v for k, v in params.items() if k in _WORKLOAD_SHAPE}
    for flag, v in shape.items():
        if v < (0 if flag == "context" else 1):
            raise UsageError(f"{flag} must be {'non-negative' if flag == 'context' else 'at least 1'}")
    options.batch, options.seq, options.context = shape["batch"], shape["seq"], shape["context"]
    _GRAPHS.clear()
    try:
        graph = _core.build_graph(spec, options)
    except ValueError as e:
        raise UsageError(str(e)) from None
    r = _core.simulate(graph, device, sim)
    tokens = shape["batch"] * (1 if phase == "decode" else spec.image_tokens() if spec.patch_size > 0
                               else shape["seq"]) * micro
    return figures(r, tokens / r.latency_s if r.latency_s > 0 else None)


def _lean_context(grid: Grid, params: dict) -> Any:
    """(spec, build options, device spec, simulate options, phase, micro-batches, the shape given
    outside the varied ones) shared by the
    points that differ from `params` only in shape, or False where the lean path does not apply."""
    from accel_sim.api import _options, model_build_options
    from accel_sim.cli import main as cli
    from accel_sim.device import resolve_device

    args = _namespace(grid, params)
    if args.sweep_parameters or args.system or args.model is None or args.target is not None:
        return False
    build = cli._model_build_args(args)
    skey = (build["model"], build.get("dtype"), build.get("weight_dtype"), build.get("kv_dtype"))
    if skey not in _SPECS:
        from accel_sim.io.model_config import load_model_spec

        _SPECS[skey] = load_model_spec(str(build["model"]), dtype=build.get("dtype"),
                                       weight_dtype=build.get("weight_dtype"), kv_dtype=build.get("kv_dtype"))
    spec, options = model_build_options(**(build | {"model": _SPECS[skey], "dtype": None, "weight_dtype": None,
                                                     "kv_dtype": None}))
    common = {k: v for k, v in cli._common(args).items() if k in _simulate_keywords()}
    device = resolve_device(args.device, list(args.device_file)).spec
    sim = _options(common.get("cost_model", "kernel"), common.get("tf32", False), common.get("launch_overhead", True),
                   common.get("free_at_last_use", False), common.get("cuda_graphs", False), common.get("clock_mhz"),
                   common.get("fuse", False), common.get("attention_impl", "flash2"), common.get("micro_batches", 1))
    base = {"batch": options.batch, "seq": options.seq, "context": options.context}  # fixed or default
    return spec, options, device, sim, build["phase"], sim.micro_batches, base


def _simulate_general(grid: Grid, params: dict) -> dict:
    from accel_sim.api import build_model_graph, load_target
    from accel_sim.cli import main as cli
    from accel_sim.io.model_config import load_model_spec
    from accel_sim.sweep import SweepSetup, run_point

    args = _namespace(grid, params)
    if (args.target is None) == (args.model is None):
        raise UsageError("give either target (a graph file) or model (not both)")
    for flag in ("batch", "seq", "context", "tp", "ep", "cp"):
        if getattr(args, flag) < (0 if flag == "context" else 1):
            raise UsageError(f"{flag} must be {'non-negative' if flag == 'context' else 'at least 1'}")
    common = {k: v for k, v in cli._common(args).items() if k in _simulate_keywords()}
    build = cli._model_build_args(args) if args.model is not None else None
    setup = SweepSetup(build=build, simulate=common, system=args.system, device=args.device,
                       device_files=tuple(args.device_file))
    if build is not None:
        key = tuple(sorted(build.items()))
        graph = _GRAPHS.get(key)
        if graph is None:
            skey = (build["model"], build.get("dtype"), build.get("weight_dtype"), build.get("kv_dtype"))
            if skey not in _SPECS:
                _SPECS[skey] = load_model_spec(str(build["model"]), dtype=build.get("dtype"),
                                               weight_dtype=build.get("weight_dtype"), kv_dtype=build.get("kv_dtype"))
            # The last graph goes before the next is built: one graph alive at a time keeps the
            # allocator reusing the same memory (measured: about a fifth faster per point).
            _GRAPHS.clear()
            graph = build_model_graph(**(build | {"model": _SPECS[skey], "dtype": None, "weight_dtype": None,
                                                  "kv_dtype": None}))
            _GRAPHS[key] = graph
    else:
        key = ("target", args.target)
        graph = _GRAPHS.get(key) or _GRAPHS.setdefault(key, load_target(args.target, timeout_s=args.timeout or None))
    return run_point(setup, {"device": args.device, **args.sweep_parameters}, graph=graph)


def _train(grid: Grid, params: dict) -> dict:
    from accel_sim.cli.train import train_estimate

    args = _namespace(grid, params)
    _, _, _, e = train_estimate(args)
    return {"step_s": e.step_s, "tokens_per_s": e.tokens_per_s, "tflops_per_gpu": e.tflops_per_gpu, "mfu": e.mfu,
            "memory_per_gpu_bytes": e.memory_per_gpu_bytes, "activation_bytes": e.activation_bytes, "fits": e.fits,
            "reason": e.reason or None, "compute_s": e.compute_s, "bubble_s": e.bubble_s, "tp_comm_s": e.tp_comm_s,
            "pp_comm_s": e.pp_comm_s, "dp_comm_s": e.dp_comm_s, "optimizer_s": e.optimizer_s}


def _plan(grid: Grid, params: dict) -> dict:
    from accel_sim.cli.plan import _short, plan_runs

    args = _namespace(grid, params)
    args.gpus = [args.gpus] if isinstance(args.gpus, int) else args.gpus
    args.threads, args.top = 1, 1  # the sweep's workers share the cores; the best one is the row
    runs = plan_runs(args)
    if len(runs) != 1:
        raise UsageError("a grid point plans one system at one GPU count: vary system and gpus as grid axes")
    _, _, _, r, _ = runs[0]
    best = r.best[0] if r.best else None
    e = best.estimate if best else None
    return {"best": _short(best) if best else None, "step_s": e.step_s if e else None,
            "tokens_per_s": e.tokens_per_s if e else None, "mfu": e.mfu if e else None,
            "memory_per_gpu_bytes": e.memory_per_gpu_bytes if e else None, "candidates": r.candidates,
            "feasible": r.feasible}


def _serve(grid: Grid, params: dict) -> dict:
    from accel_sim.cli.serve import serve_runs

    args = _namespace(grid, params)
    rows, failed = serve_runs(args)
    if failed:
        raise UsageError(f"{failed[0][0].id}: {failed[0][1]}")
    _, _, r, found = rows[0]
    return {"max_qps": found.qps if found is not None else None, "requests_per_s": r.requests_per_s,
            "output_tokens_per_s": r.output_tokens_per_s, "ttft_p50_s": r.ttft.p50, "ttft_p99_s": r.ttft.p99,
            "tpot_p50_s": r.tpot.p50, "tpot_p99_s": r.tpot.p99, "e2e_p99_s": r.e2e.p99,
            "goodput_requests_per_s": r.goodput_requests_per_s, "slo_attainment": r.slo_attainment,
            "completed": r.completed, "rejected": r.rejected, "preemptions": r.preemptions,
            "cost_per_million_output_tokens_usd": r.cost_per_million_output_tokens_usd or None}


_EVALUATORS = {"simulate": _simulate, "train": _train, "plan": _plan, "serve": _serve}
