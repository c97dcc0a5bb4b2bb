"""accel-sim: how fast will this run, and will it fit, on hardware you don't have.

    import accel_sim
    r = accel_sim.simulate(model, example_inputs, device="h100")
    print(r.latency_s, r.peak_memory_bytes, r.fits)
"""

from __future__ import annotations

from accel_sim.api import (
    BuiltModel,
    CompareReport,
    OpRow,
    SimulationReport,
    build_model_graph,
    capture,
    compare,
    list_devices,
    load_target,
    simulate,
)
from accel_sim.device import Device
from accel_sim.errors import UsageError

__version__ = "0.1.0"

__all__ = [
    "BuiltModel",
    "CompareReport",
    "Device",
    "OpRow",
    "SimulationReport",
    "UsageError",
    "build_model_graph",
    "capture",
    "compare",
    "list_devices",
    "load_target",
    "simulate",
    "__version__",
]
