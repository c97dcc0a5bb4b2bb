"""Design sweeps: the same workload at each value of one device or workload parameter.

    from accel_sim.design_sweep import SweepSetup, parse_vary, run_sweep
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
import math
from collections.abc import Sequence as SequenceABC
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from accel_sim import _core
from accel_sim.errors import UsageError
from accel_sim.io import device_file, fields, system_file

_GIB = 1024.0**3
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
    # system files hold (io/device_file.py, io/system_file.py), beyond any part, taken from them.
    bounds: tuple[float, float] | None = None

    def check(self, value: float, where: str) -> None:
        if self.bounds is not None and not self.bounds[0] <= value <= self.bounds[1]:
            raise UsageError(f"{where}: {self.name} must be in [{self.bounds[0]:g}, {self.bounds[1]:g}] "
                             f"({self.label}), as a device or system file holds it (got {value:g})")


PARAMETERS: dict[str, Parameter] = {p.name: p for p in (
    # Device. The peak is the dense matrix peak of the run's matmul dtype; every other compute
    # rate of the part is scaled by the same factor (core: with_device_parameter).
    Parameter("peak_tflops", "device", "peak matmul TFLOP/s (dense, the run's dtype)", 1e12,
              core=_core.DeviceParameter.peak_flops_per_s,
              bounds=(device_file.PEAK_MIN_TFLOPS, device_file.PEAK_MAX_TFLOPS)),
    Parameter("memory_bandwidth_gbs", "device", "memory bandwidth (GB/s)", 1e9,
              core=_core.DeviceParameter.memory_bandwidth_bytes_per_s,
              bounds=device_file.BOUNDS["memory_bandwidth_gbs"][::2]),
    # GiB, as HBM capacities are quoted and as accel_sim.Device(memory_gb=...) takes them.
    Parameter("memory_gb", "device", "memory capacity (GiB)", _GIB, core=_core.DeviceParameter.memory_bytes,
              bounds=device_file.BOUNDS["memory_gib"][::2]),
    Parameter("clock_mhz", "device", "core clock (MHz)", 1e6, core=_core.DeviceParameter.clock_hz,
              bounds=device_file.CLOCK_MHZ_RANGE),
    # System: the scale-up (NVLink-class) bandwidth per GPU and direction of --system.
    Parameter("link_bandwidth_gbs", "system", "scale-up link bandwidth per GPU (GB/s)", 1e9,
              bounds=(system_file.MIN_GBS, system_file.MAX_GBS)),
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


SIGNIFICANT_DIGITS = 12


def kept_digits(value: float) -> float:
    """VALUE kept to SIGNIFICANT_DIGITS significant digits: the float arithmetic of a range's
    spacing (2999.9999999999995 for 3000) is below them, and values that agree in them repeat."""
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


@dataclass(frozen=True)
class RangeValues(SequenceABC):
    """The values of a range `start:stop:n[:log]` of `sweep --vary` and of a grid file (n evenly
    or geometrically spaced, both ends included, kept to 12 significant digits; rounded to whole
    numbers for a parameter that takes them), each computed from its index: a range of 10^7
    values is four numbers, never a list."""

    start: float
    stop: float
    n: int
    log: bool
    integer: bool

    def __len__(self) -> int:
        return self.n

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.n))]
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(i)
        if i == self.n - 1:
            v = self.stop
        elif self.log:
            v = self.start * (self.stop / self.start) ** (i / (self.n - 1))
        else:
            v = self.start + (self.stop - self.start) * i / (self.n - 1)
        v = kept_digits(v)  # 2000:8000:7 reads 3000, not 2999.9999999999995
        return round(v) if self.integer else v

    def repeats(self) -> bool:
        """Whether two values are equal (after the 12 digits and the rounding). The values are
        monotonic, so only neighbours can be; the spacing settles it for any usual range, and
        the rest are compared one neighbour at a time."""
        a, b, n = self.start, self.stop, self.n
        if a == b:
            return True
        big, small = max(abs(a), abs(b)), min(abs(a), abs(b))
        # 12 significant digits move a value by at most 5e-12 of itself; 2e-11 leaves room for that
        # on both neighbours and for the float arithmetic.
        if self.log:
            ratio = math.expm1(abs(math.log(b / a)) / (n - 1))   # neighbours differ by this fraction
            if not self.integer and ratio > 2e-11:
                return False
            if self.integer and small * ratio > 1 + 2e-11 * big:   # more than 1 apart: they round apart
                return False
        else:
            step = abs(b - a) / (n - 1)
            if not self.integer and step > 2e-11 * big:
                return False
            if self.integer and step > 1 + 2e-11 * big:
                return False
            if (self.integer and a.is_integer() and b.is_integer() and (b - a) % (n - 1) == 0
                    and abs(b - a) * n < 2**53 and big < 1e12):
                return False   # whole steps between whole ends: every value exact
            if self.integer and abs(b - a) == n - 1 and abs(a % 1 - 0.5) > 2e-11 * big + 1e-9:
                return False   # steps of exactly 1 from an end off the halfway point: a + i rounds to round(a) + i
        last = self[0]
        for i in range(1, n):
            value = self[i]
            if value == last:
                return True
            last = value
        return False


def parse_range(spec: str, where: str, *, integer: bool, most: int, beyond: Callable[[int], str]) -> RangeValues:
    """start:stop:n or start:stop:n:log, as `sweep --vary` and a grid file write a range; n is
    checked against MOST before any value is computed, and a range of more is refused with
    "a range of N values is more than the MOST " + beyond(N)."""
    parts = [s.strip() for s in spec.split(":")]
    log = len(parts) == 4 and parts[3] == "log"
    if len(parts) not in (3, 4) or (len(parts) == 4 and not log):
        raise UsageError(f"{where}: a range is start:stop:n or start:stop:n:log (got '{spec}')")
    start, stop = fields.finite_text(parts[0], where), fields.finite_text(parts[1], where)
    try:
        n = int(parts[2])
    except ValueError:
        raise UsageError(f"{where}: the number of points '{parts[2]}' is not an integer") from None
    if n < 2:
        raise UsageError(f"{where}: a range needs at least 2 points (got {n})")
    if n > most:
        raise UsageError(f"{where}: a range of {n:,} values is more than the {most:,} {beyond(n)}")
    if log and (start <= 0 or stop <= 0):
        raise UsageError(f"{where}: a log range needs positive ends (got '{spec}')")
    return RangeValues(start, stop, n, log, integer)


def refuse_repeats(values: Sequence[Any], where: str) -> None:
    """Refuses values of which two are equal: a range's once kept to 12 significant digits (and
    rounded to whole numbers for a parameter that takes them), a list's numbers kept to 12
    significant digits, its other values (names, switches) as they stand. A repeated value is the
    same point run twice, and two rows no table or plot tells apart."""
    if isinstance(values, RangeValues):
        if values.repeats():
            kept = "once rounded to whole numbers" if values.integer else \
                f"(kept to {SIGNIFICANT_DIGITS} significant digits)"
            raise UsageError(f"{where}: the values repeat {kept}; ask for fewer points")
        return
    seen: dict = {}   # kept value -> the value as given
    for v in values:
        key = kept_digits(v) if isinstance(v, float) else repr(v)
        if key in seen:
            kept = "" if seen[key] == v else f" (kept to {SIGNIFICANT_DIGITS} significant digits)"
            raise UsageError(f"{where}: the values repeat{kept}; ask for fewer points")
        seen[key] = v


def parse_vary(text: str) -> tuple[str, list[float]]:
    """'NAME=SPEC' -> (name, values). SPEC: start:stop:n (n evenly spaced values, both ends
    included), start:stop:n:log (geometric), or a comma-separated list."""
    name, sep, spec = text.partition("=")
    name = name.strip()
    if not sep or not name or not spec.strip():
        raise UsageError(f"--vary takes NAME=SPEC, e.g. memory_bandwidth_gbs=2000:8000:7 or batch=1,2,4 (got '{text}')")
    p = parameter(name)
    where = f"--vary {text}"
    if ":" in spec:
        values: Sequence[float] = parse_range(spec, where, integer=p.integer, most=MAX_VARY_VALUES,
                                              beyond=lambda n: "a one-parameter sweep takes: ask for fewer, or run "
                                                               "a grid file (sweep --grid)")
    else:
        values = [fields.finite_text(v.strip(), where) for v in spec.split(",") if v.strip()]
        if not values:
            raise UsageError(f"{where}: no values")
        if len(values) > MAX_VARY_VALUES:
            raise UsageError(f"--vary: {len(values):,} values is more than the {MAX_VARY_VALUES:,} a one-parameter sweep "
                             "takes: ask for fewer, or run a grid file (sweep --grid)")
        if p.integer and any(not v.is_integer() for v in values):
            raise UsageError(f"{where}: {name} takes whole numbers")
    refuse_repeats(values, where)
    values = [float(v) for v in values]
    minimum = 0 if name == "context" else 1 if p.integer else None
    for v in values:
        if (minimum is not None and v < minimum) or (minimum is None and v <= 0):
            what = "non-negative" if name == "context" else "at least 1" if p.integer else "positive"
            raise UsageError(f"{where}: {name} must be {what} (got {v:g})")
        if p.integer and v > fields.INT64_MAX:   # the builder's batch, sequence and degrees are int64_t
            raise UsageError(f"{where}: {name} must be at most 2^63 - 1, what the core's counts hold (got {v:g})")
        p.check(v, where)
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
    from accel_sim.api import build_model_graph, simulate
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
            dtype = simulate(graph, device=device, **options).result.reference_dtype
        for p, value in changes:
            spec = _core.with_device_parameter(spec, p.core, value * p.to_si, dtype, bool(options.get("tf32")))
        device = Device.from_entry(dataclasses.replace(device.entry, spec=spec, peak_tflops={}))
    report = simulate(graph, device=device, **options)
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
