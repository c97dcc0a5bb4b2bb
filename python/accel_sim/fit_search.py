"""`accel-sim fit`: the largest batch size or sequence length that fits each device.

A probe builds (model builder) or captures (a script's get_model(), its example inputs resized
along the axis) the graph at one value and takes the peak of the core's liveness analysis
replayed through PyTorch's caching allocator (the segments it must hold); a device fits the
value when that plus its runtime reserve (CUDA context, libraries) fits its memory. The
core's largest_fitting() chooses which values to probe; probes are cached across devices, since
the peak does not depend on the device, only the capacity it is compared with does.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

from accel_sim import _core
from accel_sim.errors import UsageError

AXES = ("batch", "seq")
# The largest search limit: a device holds at most 1e6 GiB (a device file's bound, io/device_file.py),
# under 2^50 bytes, and every sequence and every token of a run takes at least a byte of it (its
# input alone), so no larger value can fit. (The core's search computes its guesses in doubles,
# exact to 2^53: beyond, a guess near 2^63 turned into a negative batch.)
MAX_LIMIT = 2**50


@dataclass
class FitRow:
    device: str
    memory_bytes: float
    largest: int  # 0: not even 1 fits
    peak_bytes: int  # needed at `largest`: the allocator's segments plus the runtime reserve
    next_peak_bytes: int | None  # needed at largest + 1; None when `largest` is the search limit
    at_limit: bool
    monotone: bool  # false: a larger value probed lower (allocator packing); one beyond may fit
    runtime_bytes: int = 0  # the device's runtime reserve: a probe fits when it plus this fits memory_bytes


@dataclass
class FitReport:
    axis: str
    what: str  # the model and the fixed dimensions, for the header
    limit: int
    rows: list[FitRow]
    probes: dict[int, int] = field(default_factory=dict)  # value -> allocator segments at the peak
    # With the optimizer offloaded (--offload optimizer): the host memory it takes (the states,
    # the gradients and a copy of the trainable parameters; the same at every value); else None.
    host_bytes: int | None = None

    def to_dict(self) -> dict:
        from accel_sim.report.json_report import SCHEMA_VERSION

        return {"schema": "accel-sim/fit", "schema_version": SCHEMA_VERSION, "axis": self.axis, "what": self.what, "limit": self.limit,
                "host_bytes": self.host_bytes, "rows": [vars(r) for r in self.rows],
                "probes": [{"value": v, "peak_bytes": p} for v, p in sorted(self.probes.items())]}


class Probe:
    """A probe's callable: peak bytes at a value along the axis. With the optimizer on the host it
    also keeps the host bytes of its last graph (`host_bytes`)."""

    def __init__(self, peak_at: Callable[[int], Any], free_at_last_use: bool, optimizer_on_host: bool) -> None:
        self._graph_at, self._free, self._on_host = peak_at, free_at_last_use, optimizer_on_host
        self.host_bytes: int | None = None

    def __call__(self, value: int) -> int:
        policy = _core.ReleasePolicy.last_use if self._free else _core.ReleasePolicy.recorded
        profile = _core.compute_memory_profile(self._graph_at(value), policy, self._on_host)
        if self._on_host:
            self.host_bytes = int(profile.host_bytes)
        # The caching allocator's segments in use at their peak (the device-independent part of
        # what must fit; the device adds its runtime reserve).
        return int(profile.peak_segment_bytes)


def builder_probe(model: str, axis: str, *, free_at_last_use: bool = False, optimizer_on_host: bool = False,
                  **build: Any) -> Probe:
    """Peak bytes of the model builder's graph with `axis` (batch, or seq / decode context) set;
    `optimizer_on_host`: the training step's optimizer offloaded (core compute_memory_profile)."""
    from accel_sim.api import build_model_graph

    key = "batch" if axis == "batch" else ("context" if build.get("phase") == "decode" else "seq")
    return Probe(lambda value: build_model_graph(model, **{**build, key: value}).graph, free_at_last_use,
                 optimizer_on_host)


def script_probe(path: str, axis: str, *, dtype: str | None = None, free_at_last_use: bool = False,
                 train: bool = False, optimizer: str = "adamw",
                 autocast: str | None = None, optimizer_on_host: bool = False,
                 resize: dict[str, int] | None = None) -> tuple[Probe, int, int | None]:
    """Peak of the script's model captured (its forward, or with `train` one training step)
    with its example inputs resized along `axis` (dim 0 for batch, dim 1 for seq, in every
    input whose size there equals the first input's), and the script's own value on that axis.
    `resize` sets the other axis first (e.g. {"batch": 4} for a sequence-length search). The third
    value is the model's position limit when its config gives one (None otherwise)."""
    from accel_sim.api import capture, to_core
    from accel_sim.capture import load_script
    from accel_sim.capture.script import axis_size, position_limit, resize_inputs

    model, inputs = load_script(path)
    for fixed, value in (resize or {}).items():
        inputs = resize_inputs(model, inputs, fixed, value, path)
    original = axis_size(inputs, axis, path)

    def graph_at(value: int) -> Any:
        resized = resize_inputs(model, inputs, axis, value, path)
        if train:
            from accel_sim.capture import capture_training_step

            graph = capture_training_step(model, resized, optimizer=optimizer, dtype=dtype, autocast=autocast,
                                          name=Path(path).stem)
        else:
            graph = capture(model, resized, dtype=dtype, name=Path(path).stem)
        return to_core(graph)

    return Probe(graph_at, free_at_last_use, optimizer_on_host), original, position_limit(model)


def fit(probe: Callable[[int], int], devices: list[Any], axis: str, limit: int, what: str) -> FitReport:
    """The largest value along `axis` fitting each device (specs), probing through `probe`."""
    if axis not in AXES:
        raise UsageError(f"unknown axis '{axis}' (known: {', '.join(AXES)})")
    if not 1 <= limit <= MAX_LIMIT:
        raise UsageError(f"--max must be from 1 to {MAX_LIMIT:,} (2^50; no device holds more bytes), got {limit:,}")
    cache: dict[int, int] = {}

    def cached(value: int) -> int:
        if value not in cache:
            try:
                cache[value] = int(probe(value))
            except (UsageError, _core.ConfigError) as e:  # say which value the search was trying
                raise UsageError(f"at {axis} {value:,}, a value the search probed (--max {limit:,} bounds it): {e}") \
                    from None
        return cache[value]

    rows = []
    for spec in devices:
        runtime = spec.runtime_reserved_bytes
        try:
            r = _core.largest_fitting(cached, spec.memory_bytes - runtime, limit)
        except ValueError as e:
            raise UsageError(str(e)) from None
        rows.append(FitRow(spec.id, spec.memory_bytes, r.largest, int(r.peak_bytes + runtime),
                           int(r.next_peak_bytes + runtime) if r.next_peak_bytes >= 0 else None, r.at_limit,
                           r.monotone, int(runtime)))
    return FitReport(axis, what, limit, rows, cache)


