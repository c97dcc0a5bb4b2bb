"""load_script: run a user's model script and take (model, example_inputs) from its get_model().

The script contract (see examples/): a Python file that defines `get_model()` returning
`(model, example_inputs)`, where model is a torch.nn.Module and example_inputs a tensor, a
tuple/list of positional arguments or a dict of keyword arguments.
"""

from __future__ import annotations

import importlib.util
import itertools
import os
import sys
from typing import Any

import torch

from accel_sim import script_run
from accel_sim.errors import UsageError

_module_counter = itertools.count()


def load_script(path: str) -> tuple[torch.nn.Module, Any]:
    """Import the script at "path" as a fresh module and return what its get_model() returns.

    The script's directory is on sys.path while it is imported and while get_model() runs, so it
    can import its neighbours. Raises UsageError with a one-line message when the file is
    missing, fails to import, has no get_model(), or get_model() fails (sys.exit() and a
    KeyboardInterrupt the script raises included) or returns something else than
    (nn.Module, inputs). Reports its phase to the ScriptRun entered around it, if any.
    """
    if not os.path.isfile(path):
        raise UsageError(
            f"{path}: no such file; pass the path of a Python script that defines get_model()"
        )
    absolute = os.path.abspath(path)
    stem = os.path.splitext(os.path.basename(absolute))[0]
    safe_stem = "".join(c if c.isalnum() else "_" for c in stem)
    module_name = f"accel_sim_script_{next(_module_counter)}_{safe_stem}"
    spec = importlib.util.spec_from_file_location(module_name, absolute)
    if spec is None or spec.loader is None:
        raise UsageError(f"{path}: cannot be imported as a Python module; pass a .py file")
    module = importlib.util.module_from_spec(spec)
    directory = os.path.dirname(absolute)
    sys.path.insert(0, directory)
    sys.modules[module_name] = module
    try:
        script_run.enter_phase(f"importing {os.path.basename(path)}")
        try:
            spec.loader.exec_module(module)
        except (Exception, SystemExit, KeyboardInterrupt) as error:
            if not script_run.raised_by_script(error):
                raise
            raise UsageError(f"{path}: importing it {script_run.describe(error)}") from error
        get_model = getattr(module, "get_model", None)
        if not callable(get_model):
            raise UsageError(
                f"{path} defines no get_model(); it must return (model, example_inputs)"
            )
        script_run.enter_phase("get_model()")
        try:
            result = get_model()
        except (Exception, SystemExit, KeyboardInterrupt) as error:
            if not script_run.raised_by_script(error):
                raise
            ended = " instead of returning (model, example_inputs)" if isinstance(error, SystemExit) else ""
            raise UsageError(f"{path}: get_model() {script_run.describe(error)}{ended}") from error
    finally:
        try:
            sys.path.remove(directory)
        except ValueError:
            pass
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        raise UsageError(
            f"{path}: get_model() returned {type(result).__name__}; "
            "it must return (model, example_inputs)"
        )
    model, example_inputs = result
    if not isinstance(model, torch.nn.Module):
        raise UsageError(
            f"{path}: get_model() returned a {type(model).__name__} as model; "
            "it must be a torch.nn.Module"
        )
    return model, example_inputs


AXIS_DIMS = {"batch": 0, "seq": 1}


def first_tensor(inputs: Any) -> torch.Tensor | None:
    """The first tensor of example inputs (a tensor, a tuple/list, or a dict of them)."""
    if isinstance(inputs, torch.Tensor):
        return inputs
    values = inputs.values() if isinstance(inputs, dict) else inputs if isinstance(inputs, (list, tuple)) else ()
    for v in values:
        t = first_tensor(v)
        if t is not None:
            return t
    return None


def _resized(inputs: Any, dim: int, old: int, new: int, flag: str) -> Any:
    """`inputs` with every tensor whose size along `dim` is `old` made `new` there. The new tensors
    are on the meta device: capture reads only shapes and dtypes (it makes every input a
    FakeTensor), so no bytes are allocated, however large the size asked for."""
    if isinstance(inputs, torch.Tensor):
        if inputs.dim() > dim and inputs.shape[dim] == old:
            shape = list(inputs.shape)
            shape[dim] = new
            try:
                return torch.empty(shape, dtype=inputs.dtype, device="meta")
            except RuntimeError:  # its elements' bytes overflow the int64 torch sizes storage in
                dtype = str(inputs.dtype).removeprefix("torch.")
                raise UsageError(f"{flag}: an example input of shape {shape} ({dtype}) holds more bytes than a "
                                 "tensor's 64-bit size can count") from None
        return inputs
    if isinstance(inputs, dict):
        return {k: _resized(v, dim, old, new, flag) for k, v in inputs.items()}
    if isinstance(inputs, (list, tuple)):
        return type(inputs)(_resized(v, dim, old, new, flag) for v in inputs)
    return inputs


def axis_size(inputs: Any, axis: str, where: str) -> int:
    """The example inputs' size along `axis` (batch: dim 0, seq: dim 1 of the first input)."""
    first = first_tensor(inputs)
    dim = AXIS_DIMS[axis]
    if first is None or first.dim() <= dim:
        raise UsageError(f"{where}: get_model()'s first example input has no {axis} dimension (dim {dim}) to resize")
    return int(first.shape[dim])


def position_limit(model: torch.nn.Module) -> int | None:
    """The positions a model's config allows (HF max_position_embeddings / n_positions), if it says."""
    config = getattr(model, "config", None)
    for key in ("max_position_embeddings", "n_positions"):
        value = getattr(config, key, None)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def resize_inputs(model: torch.nn.Module, inputs: Any, axis: str, value: int, where: str) -> Any:
    """The example inputs resized along `axis` (dim 0 for batch, dim 1 for seq) to `value`, in
    every input whose size there equals the first input's, as `accel-sim fit` resizes them. A
    sequence longer than the model's position limit is refused."""
    if value < 1:
        raise UsageError(f"--{axis} must be at least 1 (got {value})")
    original = axis_size(inputs, axis, where)
    if axis == "seq":
        limit = position_limit(model)
        if limit is not None and value > limit:
            raise UsageError(f"{where}: --seq {value} is beyond the model's {limit} positions (its config's "
                             "max_position_embeddings)")
    return _resized(inputs, AXIS_DIMS[axis], original, value, f"{where}: --{axis} {value}")
