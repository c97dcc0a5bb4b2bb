"""A grid's points evaluated: each point's options filled from the grid file as its command line
would be (grid.py), run through the command's library (accel_sim.commands) and read off as one row
of figures; a failing point's row carries its one-line error. grid_run.py calls run_points in
whatever process runs a batch."""

from __future__ import annotations

import argparse
import functools
from typing import Any, Sequence

from accel_sim.errors import UsageError
from accel_sim.grid import FIGURES, Grid, point_namespace, refuse_point_flags


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

    from accel_sim.api import simulate

    return frozenset(inspect.signature(simulate).parameters) - {"system", "groups", "device_files", "dtype"}


_WORKLOAD_SHAPE = ("batch", "seq", "context")


_LEAN: dict[tuple, Any] = {}


def _simulate(grid: Grid, params: dict) -> dict:
    """A point of a simulate grid. A builder graph on a named device with no device or system
    parameter varied takes the lean path: what the point shares with its neighbours (options,
    device, the build options less the shape, the flags' checks) is set up once, then the core
    builds and simulates and the row is read off its result by sweep.figures, as `sweep` reads it
    (tests/test_grid.py checks they agree); anything else goes through sweep.run_point."""
    from accel_sim import _core
    from accel_sim.design_sweep import figures

    # The shape's names belong to the key: the flags' checks depend on which of them are given.
    key = (tuple((k, v) for k, v in params.items() if k not in _WORKLOAD_SHAPE),
           tuple(k for k in params if k in _WORKLOAD_SHAPE))
    lean = _LEAN.get(key)
    if lean is None:
        lean = _LEAN[key] = _lean_context(grid, params)
    if lean is False:
        return _simulate_general(grid, params)
    spec, options, device, sim, phase, micro, base = lean
    shape = base | {k: v for k, v in params.items() if k in _WORKLOAD_SHAPE}
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
    outside the varied ones) shared by the points that differ from `params` only in the values of
    their shape, once the flags are checked as `simulate` checks them; or False where the lean
    path does not apply."""
    from accel_sim.api import _options, model_build_options
    from accel_sim.commands import simulate
    from accel_sim.device import resolve_device

    args = point_namespace(grid, params)
    if args.sweep_parameters or args.system or args.model is None or args.target is not None or args.stack:
        return False
    refuse_point_flags("simulate", args)
    simulate.check_devices(args)
    build = simulate.model_build_args(args)
    simulate.check_built(args, _model_graph(build).info)   # what the model is does not depend on its shape
    spec, options = model_build_options(**(build | {"model": _spec(build), "dtype": None, "weight_dtype": None,
                                                     "kv_dtype": None}))
    common = {k: v for k, v in simulate.common(args).items() if k in _simulate_keywords()}
    device = resolve_device(args.device, list(args.device_file)).spec
    sim = _options(common.get("cost_model", "kernel"), common.get("tf32", False), common.get("launch_overhead", True),
                   common.get("free_at_last_use", False), common.get("cuda_graphs", False), common.get("clock_mhz"),
                   common.get("fuse", False), common.get("attention_impl") or "flash2", common.get("micro_batches", 1))
    base = {"batch": options.batch, "seq": options.seq, "context": options.context}  # fixed or default
    return spec, options, device, sim, build["phase"], sim.micro_batches, base


def _spec(build: dict) -> Any:
    """The model spec build_model_graph(**build) builds from, loaded once per model and dtypes."""
    from accel_sim.io.model_config import load_model_spec

    key = (build["model"], build.get("dtype"), build.get("weight_dtype"), build.get("kv_dtype"))
    if key not in _SPECS:
        _SPECS[key] = load_model_spec(str(build["model"]), dtype=build.get("dtype"),
                                      weight_dtype=build.get("weight_dtype"), kv_dtype=build.get("kv_dtype"))
    return _SPECS[key]


def _model_graph(build: dict) -> Any:
    """build_model_graph(**build), the last one kept for the next point."""
    from accel_sim.api import build_model_graph

    key = tuple(sorted(build.items()))
    graph = _GRAPHS.get(key)
    if graph is None:
        spec = _spec(build)
        # The last graph goes before the next is built: one graph alive at a time keeps the
        # allocator reusing the same memory (measured: about a fifth faster per point).
        _GRAPHS.clear()
        graph = _GRAPHS[key] = build_model_graph(**(build | {"model": spec, "dtype": None, "weight_dtype": None,
                                                             "kv_dtype": None}))
    return graph


def _target_graph(args: argparse.Namespace) -> dict:
    """The graph of a target, as `simulate` loads it: a script captured with its options (its
    inputs resized to a given batch or seq) within `timeout` seconds, or a graph file read; the
    last one kept for the next point."""
    from accel_sim.api import load_target
    from accel_sim.commands import simulate

    options = simulate.script_options(args) if simulate.target_kind(args) == "script" else {}
    key = ("target", args.target, repr(sorted(options.items())))
    graph = _GRAPHS.get(key)
    if graph is None:
        _GRAPHS.clear()
        graph = _GRAPHS[key] = load_target(args.target, **options, timeout_s=args.timeout or None) if options \
            else load_target(args.target)
    return graph


def _simulate_general(grid: Grid, params: dict) -> dict:
    """A point through sweep.run_point, its flags checked and its graph built, captured or read as
    `simulate` does (accel_sim.commands.simulate.load)."""
    from accel_sim.commands import simulate
    from accel_sim.design_sweep import SweepSetup, run_point

    args = point_namespace(grid, params)
    refuse_point_flags("simulate", args)
    simulate.check_devices(args)
    common = {k: v for k, v in simulate.common(args).items() if k in _simulate_keywords()}
    build = simulate.model_build_args(args) if args.model is not None else None
    setup = SweepSetup(build=build, simulate=common, system=args.system, device=args.device,
                       device_files=tuple(args.device_file))
    if build is not None:
        graph = _model_graph(build)
        simulate.check_built(args, graph.info)
    else:
        graph = _target_graph(args)
        simulate.refuse_tf32_without_fp32(args, graph.get("metadata", {}).get("dtype", "fp32"))
    return run_point(setup, {"device": args.device, **args.sweep_parameters}, graph=graph)


def _train(grid: Grid, params: dict) -> dict:
    from accel_sim.commands.train import train_estimate

    args = point_namespace(grid, params)
    _, _, _, e = train_estimate(args)
    return {"step_s": e.step_s, "tokens_per_s": e.tokens_per_s, "tflops_per_gpu": e.tflops_per_gpu, "mfu": e.mfu,
            "memory_per_gpu_bytes": e.memory_per_gpu_bytes, "activation_bytes": e.activation_bytes, "fits": e.fits,
            "reason": e.reason or None, "compute_s": e.compute_s, "bubble_s": e.bubble_s, "tp_comm_s": e.tp_comm_s,
            "pp_comm_s": e.pp_comm_s, "dp_comm_s": e.dp_comm_s, "optimizer_s": e.optimizer_s}


def _plan(grid: Grid, params: dict) -> dict:
    from accel_sim.commands.plan import plan_runs
    from accel_sim.report.training import short_layout

    args = point_namespace(grid, params)
    args.threads, args.top = 1, 1  # the sweep's workers share the cores; the best one is the row
    runs = plan_runs(args)
    if len(runs) != 1:
        raise UsageError("a grid point plans one system at one GPU count: vary system and gpus as grid axes")
    _, _, _, r, _ = runs[0]
    best = r.best[0] if r.best else None
    e = best.estimate if best else None
    return {"best": short_layout(best) if best else None, "step_s": e.step_s if e else None,
            "tokens_per_s": e.tokens_per_s if e else None, "mfu": e.mfu if e else None,
            "memory_per_gpu_bytes": e.memory_per_gpu_bytes if e else None, "candidates": r.candidates,
            "feasible": r.feasible}


def _serve(grid: Grid, params: dict) -> dict:
    from accel_sim.commands.serve import serve_runs

    args = point_namespace(grid, params)
    rows, failed = serve_runs(args)
    if failed:
        raise UsageError(f"{failed[0][0].id}: {failed[0][1]}")
    _, _, r, found, _ = rows[0]
    return {"max_qps": found.qps if found is not None else None, "requests_per_s": r.requests_per_s,
            "output_tokens_per_s": r.output_tokens_per_s, "ttft_p50_s": r.ttft.p50, "ttft_p99_s": r.ttft.p99,
            "tpot_p50_s": r.tpot.p50, "tpot_p99_s": r.tpot.p99, "e2e_p99_s": r.e2e.p99,
            "goodput_requests_per_s": r.goodput_requests_per_s, "slo_attainment": r.slo_attainment,
            "completed": r.completed, "rejected": r.rejected, "preemptions": r.preemptions,
            "cost_per_million_output_tokens_usd": r.cost_per_million_output_tokens_usd or None}


_EVALUATORS = {"simulate": _simulate, "train": _train, "plan": _plan, "serve": _serve}
