"""Capture of PyTorch programs into accel-sim graphs (fake tensors, make_fx; no weights or compute).

- `load_script(path)`: run a user's script; `(model, example_inputs)` from its get_model().
- `capture_model(model, example_inputs, dtype=None, name=None)`: the "accel-sim-graph" dict of
  one forward call (format described in `graph_export.py`).
- `capture_training_step(model, example_inputs, optimizer="adamw", dtype=None, name=None)`: one
  training step (forward, loss, backward, optimizer), nodes tagged by pass.
"""

from __future__ import annotations

from accel_sim.capture.fx_capture import capture_model
from accel_sim.capture.script import load_script
from accel_sim.capture.train_capture import UpstreamGradients, capture_training_step

__all__ = ["capture_model", "capture_training_step", "load_script"]
