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
