"""What accel_sim.simulate and compare return: a SimulationReport (one graph on one device: the
core's result, the ops in order, the groups, the hints, the latency band) and a CompareReport (one
report per device and the verdict). They render themselves through report/ (to_dict, the text
and HTML reports)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from functools import cached_property
from typing import Any

from accel_sim import _core
from accel_sim.device import Device
from accel_sim.errors import UsageError


_GROUPINGS = {
    "op": _core.GroupBy.op,
    "op_class": _core.GroupBy.op_class,
    "module": _core.GroupBy.module,
    "layer": _core.GroupBy.layer,
    "module_type": _core.GroupBy.module_type,
}


@dataclass(frozen=True)
class OpRow:
    """One op of a simulated graph, in execution order."""

    index: int
    op: str
    module: str
    module_type: str
    source: str
    pass_name: str  # forward | backward | optimizer
    fused_into: int  # with fuse: index of the chain's first op, which carries its time; -1 otherwise
    op_class: str
    bound: str
    flops: float
    bytes_read: float
    bytes_written: float
    time_s: float
    start_s: float
    compute_time_s: float
    memory_time_s: float
    launch_overhead_s: float
    energy_j: float
    known: bool
    input_shapes: list[list[int]]
    output_shapes: list[list[int]]
    dtype: str


class SimulationReport:
    """The simulation of one graph on one device. Figures are in SI units (s, bytes, FLOP)."""

    def __init__(self, graph: Any, device: Device, result: Any, options: Any, metadata: dict, stack: Any = None):
        self.graph = graph
        self.device = device
        self.result = result
        self.options = options
        self.metadata = metadata
        self.stack = stack  # the software stack the run was costed under (io/stack_file.StackEntry), or None

    @property
    def name(self) -> str:
        return self.graph.name

    @property
    def model_info(self) -> dict | None:
        """Facts of a builder graph (phase, shape, parameters, KV-cache bytes); None for captures."""
        return self.metadata.get("model_info")

    @property
    def latency_s(self) -> float:
        return self.result.latency_s

    @property
    def fusion_gain_s(self) -> float:
        """Time torch.compile-style fusion of elementwise chains would save (0 when already fused),
        from the core (it simulates the graph once more, fused)."""
        if not hasattr(self, "_fusion_gain_s"):
            self._fusion_gain_s = _core.fusion_saving_s(self.graph, self.device.spec, self.options, self.result)
        return self._fusion_gain_s

    @property
    def mfu_roofline_bound(self) -> float:
        """MFU the same graph would reach at the plain roofline's times (a lower bound on the
        latency, so an upper bound on MFU), from the core (one more simulation)."""
        if not hasattr(self, "_mfu_roofline"):
            if self.options.cost_model == "roofline":
                self._mfu_roofline = self.result.model_flops_utilization
            else:
                # The same run (fusion, TP overlap, fp8 weight cache, system ...) at roofline times.
                roofline = copy.copy(self.options)
                roofline.cost_model = "roofline"
                self._mfu_roofline = _core.simulate(self.graph, self.device.spec, roofline).model_flops_utilization
        return self._mfu_roofline

    @property
    def tokens_per_s(self) -> float | None:
        """Tokens processed per second for a builder graph (prefill and training: batch x seq;
        decode: batch); None for a capture, whose token count the graph does not say."""
        info = self.model_info
        if not info or self.result.latency_s <= 0:
            return None
        tokens = info["batch"] * (1 if info["phase"] == "decode" else info["seq"]) * self.options.micro_batches
        return tokens / self.result.latency_s

    @property
    def latency_band(self) -> tuple[float, str]:
        """(fraction, basis): the latency's error band from the cost model's measured error per
        op class on this device (`accel-sim validate`), weighted by each class's time."""
        from accel_sim.kernel_rows import class_errors

        errors, basis = class_errors(self.device.spec, self.options.cost_model)
        return _core.latency_error_band(self.result, errors), basis

    @property
    def peak_memory_bytes(self) -> int:
        return self.result.memory.peak_bytes

    @property
    def memory_capacity_bytes(self) -> float:
        return self.result.memory_capacity_bytes

    @property
    def fits(self) -> bool:
        return self.result.fits

    @property
    def flops(self) -> float:
        return self.result.total_flops

    @property
    def bytes(self) -> float:
        return self.result.total_bytes

    @property
    def memory(self) -> Any:
        return self.result.memory

    @property
    def peak_op(self) -> OpRow | None:
        n = self.result.memory.peak_node
        return self.ops[n] if n >= 0 else None

    @property
    def uncovered_ops(self) -> list[dict]:
        return [{"op": u.op, "count": u.count, "time_s": u.time_s} for u in self.result.uncovered_ops]

    @cached_property
    def ops(self) -> list[OpRow]:
        rows = []
        g = self.graph
        for r in self.result.ops:
            node = g.node(r.node)
            rows.append(
                OpRow(
                    index=r.node,
                    op=node.op,
                    module=node.module_path,
                    module_type=node.module_type,
                    source=node.source,
                    pass_name=node.pass_name,
                    fused_into=r.fused_into,
                    op_class=r.count.op_class.name,
                    bound=r.cost.bound.name,
                    flops=r.count.flops,
                    bytes_read=r.count.bytes_read,
                    bytes_written=r.count.bytes_written,
                    time_s=r.cost.time_s,
                    start_s=r.start_s,
                    compute_time_s=r.cost.compute_time_s,
                    memory_time_s=r.cost.memory_time_s,
                    launch_overhead_s=r.cost.launch_overhead_s,
                    energy_j=r.energy_j,
                    known=r.count.known,
                    input_shapes=[list(g.tensor(t).shape) for t in node.inputs],
                    output_shapes=[list(g.tensor(t).shape) for t in node.outputs],
                    dtype=_core.dtype_name(r.count.compute_dtype),
                )
            )
        return rows

    @cached_property
    def timeline(self) -> Any:
        """The run as it executes, from the core: spans per stream (every micro-batch) and live
        memory over time (`accel_sim._core.ExecutionTimeline`)."""
        return _core.execution_timeline(self.graph, self.result, self.options)

    @cached_property
    def roofline(self) -> Any:
        """The device's roofline with every op placed by arithmetic intensity and achieved FLOP/s,
        from the core (`accel_sim._core.RooflineChart`)."""
        return _core.roofline_chart(self.graph, self.result, self.device.spec, self.options.cost)

    def groups(self, by: str = "op") -> list[Any]:
        """Time grouped by `op`, `op_class`, `module`, `layer` or `module_type`, largest first."""
        if by not in _GROUPINGS:
            raise UsageError(f"unknown grouping '{by}' (known: {', '.join(_GROUPINGS)})")
        return _core.group_ops(self.graph, self.result, _GROUPINGS[by])

    @cached_property
    def hints(self) -> list[Any]:
        return _core.advise(self.graph, self.result, self.device.spec)

    def to_dict(self, include_ops: bool = True) -> dict:
        from accel_sim.report.json_report import simulation_to_dict

        return simulation_to_dict(self, include_ops=include_ops)


class CompareReport:
    """One graph simulated on several devices, with the core's verdict."""

    def __init__(self, reports: list[SimulationReport], comparison: Any):
        self.reports = reports
        self.comparison = comparison

    @property
    def fastest(self) -> SimulationReport | None:
        i = self.comparison.fastest_index
        return self.reports[i] if i >= 0 else None

    @property
    def best_value(self) -> SimulationReport | None:
        i = self.comparison.best_value_index
        return self.reports[i] if i >= 0 else None

    def to_dict(self, include_ops: bool = False) -> dict:
        from accel_sim.report.json_report import comparison_to_dict

        return comparison_to_dict(self, include_ops=include_ops)
