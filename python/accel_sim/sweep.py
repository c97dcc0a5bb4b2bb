"""Design sweeps: the same workload at each value of one device or workload parameter.

    from accel_sim.sweep import SweepSetup, parse_vary, run_sweep
    name, values = parse_vary("memory_bandwidth_gbs=2000:8000:7")
    setup = SweepSetup(build={"model": "llama3-8b", "phase": "decode"})
    rows = run_sweep(setup, ["h100"], name, values)

Device parameters (peak FLOP/s, bandwidth, capacity, clock) are applied to the device by the core
(`with_device_parameter`), the link bandwidth to the --system's scale-up fabric
(`with_scaleup_bandwidth`); workload parameters (batch, seq, context, tp, ep, cp) rebuild the
builder graph. `run_point` is the work of one point as a plain function of plain data (a setup and
a dict of parameter values, the device among them) returning a plain dict, so a grid of points can
be handed to a process pool as it stands. Every figure in a row is the simulation report's (the
core's result); this module only converts the user's units (GB/s, TFLOP/s) to the core's SI units.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from accel_sim import _core
from accel_sim.errors import UsageError
from accel_sim.io import fields

_GIB = 1024.0**3
_INT64_MAX = 2**63 - 1  # the builder's batch, sequence and parallel degrees are int64_t
# The most values of one `--vary`: its rows are kept, printed and plotted, and computed on one
# core, 0.56 ms a point for a Llama-3-8B decode step (bench/RESULTS.md): 100,000 are a minute. A
# larger sweep is a grid file (`sweep --grid`, docs/formats/grid.md), run on every core.
MAX_VARY_VALUES = 100_000


@dataclass(frozen=True)
class Parameter:
    """A parameter `sweep --vary` knows: its name as users write it, what it changes, its axis
    label and the factor from its unit to the core's SI unit."""

    name: str
    kind: str  # device | system | workload
    label: str  # axis label: the quantity and its unit
    to_si: float = 1.0
    integer: bool = False
    core: Any = None  # _core.DeviceParameter for device parameters
    build_arg: str = ""  # build_model_graph's keyword for workload parameters
    # The range of a device or system value, in the parameter's unit: the bounds the device and
    # system files hold (io/device_file.py, io/system_file.py), beyond any part.
    bounds: tuple[float, float] | None = None

    def check(self, value: float, where: str) -> None:
        if self.bounds is not None and not self.bounds[0] <= value <= self.bounds[1]:
            raise UsageError(f"{where}: {self.name} must be in [{self.bounds[0]:g}, {self.bounds[1]:g}] "
                             f"({self.label}), as a device or system file holds it (got {value:g})")


PARAMETERS: dict[str, Parameter] = {p.name: p for p in (
    # Device. The peak is the dense matrix peak of the run's matmul dtype; every other compute
    # rate of the part is scaled by the same factor (core: with_device_parameter).
    Parameter("peak_tflops", "device", "peak matmul TFLOP/s (dense, the run's dtype)", 1e12,
              core=_core.DeviceParameter.peak_flops_per_s, bounds=(1e-9, 1e6)),
    Parameter("memory_bandwidth_gbs", "device", "memory bandwidth (GB/s)", 1e9,
              core=_core.DeviceParameter.memory_bandwidth_bytes_per_s, bounds=(1e-6, 1e6)),
    # GiB, as HBM capacities are quoted and as accel_sim.Device(memory_gb=...) takes them.
    Parameter("memory_gb", "device", "memory capacity (GiB)", _GIB, core=_core.DeviceParameter.memory_bytes,
              bounds=(2.0**-20, 1e6)),
    Parameter("clock_mhz", "device", "core clock (MHz)", 1e6, core=_core.DeviceParameter.clock_hz, bounds=(1e-3, 1e5)),
    # System: the scale-up (NVLink-class) bandwidth per GPU and direction of --system.
    Parameter("link_bandwidth_gbs", "system", "scale-up link bandwidth per GPU (GB/s)", 1e9, bounds=(1e-6, 1e6)),
    # Workload: rebuilds the graph.
    Parameter("batch", "workload", "batch (sequences)", integer=True, build_arg="batch"),
    Parameter("seq", "workload", "sequence length (tokens)", integer=True, build_arg="seq"),
    Parameter("context", "workload", "cached context (tokens per sequence)", integer=True, build_arg="context"),
    Parameter("tp", "workload", "tensor-parallel GPUs", integer=True, build_arg="tensor_parallel"),
    Parameter("ep", "workload", "expert-parallel GPUs", integer=True, build_arg="expert_parallel"),
    Parameter("cp", "workload", "context-parallel GPUs", integer=True, build_arg="context_parallel"),
)}

# The figures a row holds that `--metric` can plot: key, axis label, factor from SI to the label's unit.
METRICS: dict[str, tuple[str, str, float]] = {
    "latency": ("latency_s", "latency (ms)", 1e3),
    "throughput": ("tokens_per_s", "throughput (tokens/s)", 1.0),
    "memory": ("required_bytes", "memory needed (GiB)", 1.0 / _GIB),
    "mfu": ("mfu", "MFU (%)", 100.0),
}


def parameter(name: str) -> Parameter:
    if name not in PARAMETERS:
        raise UsageError(f"unknown sweep parameter '{name}' (known: {', '.join(PARAMETERS)})")
    return PARAMETERS[name]


def parse_vary(text: str) -> tuple[str, list[float]]:
    """'NAME=SPEC' -> (name, values). SPEC: start:stop:n (n evenly spaced values, both ends
    included), start:stop:n:log (geometric), or a comma-separated list."""
    name, sep, spec = text.partition("=")
    name = name.strip()
    if not sep or not name or not spec.strip():
        raise UsageError(f"--vary takes NAME=SPEC, e.g. memory_bandwidth_gbs=2000:8000:7 or batch=1,2,4 (got '{text}')")
    p = parameter(name)
    if ":" in spec:
        parts = [s.strip() for s in spec.split(":")]
        log = len(parts) == 4 and parts[3] == "log"
        if len(parts) not in (3, 4) or (len(parts) == 4 and not log):
            raise UsageError(f"--vary {text}: a range is start:stop:n or start:stop:n:log")
        start, stop = fields.finite_text(parts[0], f"--vary {text}"), fields.finite_text(parts[1], f"--vary {text}")
        try:
            n = int(parts[2])
        except ValueError:
            raise UsageError(f"--vary {text}: the number of points '{parts[2]}' is not an integer") from None
        if n < 2:
            raise UsageError(f"--vary {text}: a range needs at least 2 points (got {n})")
        if n > MAX_VARY_VALUES:
            raise UsageError(f"--vary {text}: a range of {n:,} values is more than the {MAX_VARY_VALUES:,} a one-parameter "
                             "sweep takes: ask for fewer, or run a grid file (sweep --grid)")
        if log and (start <= 0 or stop <= 0):
            raise UsageError(f"--vary {text}: a log range needs positive ends")
        if log:
            values = [start * (stop / start) ** (i / (n - 1)) for i in range(n)]
        else:
            values = [start + (stop - start) * i / (n - 1) for i in range(n)]
        values[-1] = stop
        values = [float(f"{v:.12g}") for v in values]  # 2000:8000:7 reads 3000, not 2999.9999999999995
    else:
        values = [fields.finite_text(v.strip(), f"--vary {text}") for v in spec.split(",") if v.strip()]
        if not values:
            raise UsageError(f"--vary {text}: no values")
        if len(values) > MAX_VARY_VALUES:
            raise UsageError(f"--vary: {len(values):,} values is more than the {MAX_VARY_VALUES:,} a one-parameter sweep "
                             "takes: ask for fewer, or run a grid file (sweep --grid)")
    if p.integer:
        ints = [round(v) for v in values]
        if ":" not in spec and any(v != i for v, i in zip(values, ints)):
            raise UsageError(f"--vary {text}: {name} takes whole numbers")
        if len(set(ints)) != len(ints):
            raise UsageError(f"--vary {text}: the values repeat once rounded to whole numbers; ask for fewer points")
        values = [float(i) for i in ints]
    minimum = 0 if name == "context" else 1 if p.integer else None
    for v in values:
        if (minimum is not None and v < minimum) or (minimum is None and v <= 0):
            what = "non-negative" if name == "context" else "at least 1" if p.integer else "positive"
            raise UsageError(f"--vary {text}: {name} must be {what} (got {v:g})")
        if p.integer and v > _INT64_MAX:
            raise UsageError(f"--vary {text}: {name} must be at most 2^63 - 1, what the core's counts hold (got {v:g})")
        p.check(v, f"--vary {text}")
    return name, values


@dataclass(frozen=True)
class SweepSetup:
    """What stays fixed across a sweep, as plain data.

    build: build_model_graph's keyword arguments (the model included); None when the graph is a
      capture or a graph file, which is passed to run_point as `graph` (workload parameters then
      cannot vary).
    simulate: accel_sim.simulate's keyword arguments other than device, system and groups
      (cost_model, launch_overhead, tf32, ...).
    system: a --system name whose fabric times the collectives; None: one rank, none timed.
    device: the device of points whose params name none.
    """

    build: dict | None = None
    simulate: dict = field(default_factory=dict)
    system: str | None = None
    device: str = "h100"
    device_files: tuple[str, ...] = ()


def check(setup: SweepSetup, name: str) -> None:
    """Usage errors of varying `name` under `setup`, before any point runs."""
    p = parameter(name)
    if p.kind == "workload" and setup.build is None:
        raise UsageError(f"varying {name} rebuilds the graph: give --model NAME (a capture or graph file has fixed shapes)")
    phase = (setup.build or {}).get("phase", "prefill")
    if name == "seq" and phase == "decode":
        raise UsageError("a decode step has one new token per sequence: vary context (the cached tokens), not seq")
    if name == "context" and phase != "decode":
        raise UsageError(f"context is the cached tokens of a decode step (--phase decode); {phase} takes seq")
    if name == "link_bandwidth_gbs" and not setup.system:
        raise UsageError("link_bandwidth_gbs varies the scale-up bandwidth of --system: give --system (and --tp > 1 "
                         "so the graph has collectives to time)")
    if name == "clock_mhz" and setup.simulate.get("clock_mhz") is not None:
        raise UsageError("give --clock-mhz or --vary clock_mhz, not both")
    if name == "clock_mhz" and setup.simulate.get("cost_model") == "roofline":
        raise UsageError("clock_mhz scales the kernel cost model's compute rates; the roofline has no clock "
                         "(--cost-model kernel)")


def _layout(setup: SweepSetup, build: dict | None, link_bytes_per_s: float | None) -> tuple[Any, list[Any]]:
    """The system (its link bandwidth set when varied) and one rank's groups, placed by the core."""
    if not setup.system:
        return None, []
    from accel_sim.io.system_file import resolve_system

    spec = resolve_system(setup.system).spec
    if link_bytes_per_s is not None:
        spec = _core.with_scaleup_bandwidth(spec, link_bytes_per_s)
    build = build or {}
    sizes = [("tp", build.get("tensor_parallel", 1)), ("cp", build.get("context_parallel", 1)),
             ("ep", build.get("expert_parallel", 1))]
    groups, _ = _core.place_groups(spec, sizes)
    return spec, groups


def run_point(setup: SweepSetup, params: dict, graph: Any = None) -> dict:
    """One point: `params` maps parameter names (and optionally "device") to values in the
    user's units; returns the row (plain data). `graph` (a BuiltModel, core Graph or graph dict)
    is this point's graph when the caller has it (built once for several devices); None builds
    it from setup.build with the workload parameters of `params`."""
    import accel_sim
    from accel_sim.api import build_model_graph
    from accel_sim.device import Device, resolve_device

    params = dict(params)
    device_name = params.pop("device", setup.device)
    build = dict(setup.build) if setup.build is not None else None
    for name, value in params.items():
        if parameter(name).kind == "workload":
            if build is None:
                raise UsageError(f"varying {name} rebuilds the graph: give --model NAME")
            build[PARAMETERS[name].build_arg] = int(value)
    if graph is None:
        if build is None:
            raise UsageError("run_point needs a graph or setup.build")
        graph = build_model_graph(**build)

    for name, value in params.items():
        PARAMETERS[name].check(value, "the point")
    link = params.get("link_bandwidth_gbs")
    system, groups = _layout(setup, build, link * PARAMETERS["link_bandwidth_gbs"].to_si if link is not None else None)
    options = dict(setup.simulate) | {"system": system, "groups": groups}
    device = resolve_device(device_name, list(setup.device_files))
    changes = [(PARAMETERS[n], v) for n, v in params.items() if PARAMETERS[n].kind == "device"]
    if changes:
        spec = device.spec
        dtype = _core.DType.bf16
        if any(p.name == "peak_tflops" for p, _ in changes):
            # The peak to set is that of the run's own matmul dtype: one simulation finds it.
            dtype = accel_sim.simulate(graph, device=device, **options).result.reference_dtype
        for p, value in changes:
            spec = _core.with_device_parameter(spec, p.core, value * p.to_si, dtype, bool(options.get("tf32")))
        device = Device.from_entry(dataclasses.replace(device.entry, spec=spec, peak_tflops={}))
    report = accel_sim.simulate(graph, device=device, **options)
    return {
        "device": device.id,
        **{name: (int(v) if PARAMETERS[name].integer else v) for name, v in params.items()},
        **figures(report.result, report.tokens_per_s),
    }


def figures(r: Any, tokens_per_s: float | None) -> dict:
    """The headline figures of a point, read off the core's SimulationResult (a sweep's row, a
    grid's simulate row)."""
    return {
        "latency_s": r.latency_s,
        "tokens_per_s": tokens_per_s,
        "peak_memory_bytes": r.memory.peak_bytes,
        "required_bytes": r.required_bytes,
        "memory_capacity_bytes": r.memory_capacity_bytes,
        "fits": r.fits,
        "compute_bound_time_s": r.compute_bound_time_s,
        "memory_bound_time_s": r.memory_bound_time_s,
        "launch_overhead_time_s": r.launch_overhead_time_s,
        "communication_time_s": r.communication_time_s,
        "bound": _core.dominant_bound(r).name,
        "mfu": r.model_flops_utilization,
    }


def run_sweep(setup: SweepSetup, devices: Sequence[str], name: str, values: Sequence[float], *,
              graph: Any = None, progress: Callable[[int, int], None] | None = None) -> list[dict]:
    """Every device at every value of `name`, rows in device-then-value order. A device or
    system parameter reuses one graph (`graph`, or one built from setup.build); a workload
    parameter builds one per value, shared by the devices."""
    from accel_sim.api import build_model_graph

    check(setup, name)
    workload = PARAMETERS[name].kind == "workload"
    if graph is None and not workload:
        graph = build_model_graph(**setup.build)
    total, done = len(devices) * len(values), 0
    rows: dict[tuple[int, int], dict] = {}
    for j, value in enumerate(values):
        point_graph = graph
        if workload:
            point_graph = build_model_graph(**(setup.build | {PARAMETERS[name].build_arg: int(value)}))
        for i, device in enumerate(devices):
            rows[(i, j)] = run_point(setup, {"device": device, name: value}, graph=point_graph)
            done += 1
            if progress:
                progress(done, total)
    return [rows[(i, j)] for i in range(len(devices)) for j in range(len(values))]
