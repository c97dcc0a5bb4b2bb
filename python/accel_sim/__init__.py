"""accel-sim: how fast will this run, and will it fit, on hardware you don't have.

    import accel_sim
    r = accel_sim.simulate(model, example_inputs, device="h100")
    print(r.latency_s, r.peak_memory_bytes, r.fits)
    t = accel_sim.train(model="llama-3-8b", system="dgx_h100", gpus=8, dp=8, global_batch=64, seq=4096)
    print(t.estimate.step_s, t.estimate.mfu)
"""

from __future__ import annotations

from accel_sim.api import (
    BuiltModel,
    build_model_graph,
    capture,
    compare,
    list_devices,
    load_target,
    simulate,
)
from accel_sim.device import Device
from accel_sim.runs import fit, kernel, plan, serve, serve_plan, sweep, train, validate
from accel_sim.simulation_report import CompareReport, OpRow, SimulationReport
from accel_sim.version import __version__
from accel_sim.errors import UsageError


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
    "fit",
    "kernel",
    "list_devices",
    "load_target",
    "plan",
    "serve",
    "serve_plan",
    "simulate",
    "sweep",
    "train",
    "validate",
    "__version__",
]
