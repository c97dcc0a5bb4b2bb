"""capture_model: trace one forward call of a PyTorch model into an "accel-sim-graph" document.

How: every parameter, buffer and input becomes a FakeTensor (shape, dtype, strides and storage
identity, no bytes) in one `FakeTensorMode` with static shapes; `make_fx` traces
`torch.func.functional_call(model, state, inputs)` below autograd, recording each node's module
stack and stack trace. Parameters and buffers are explicit graph inputs (FX input
nodes), which the export labels "parameter"/"buffer". Nothing is computed and no weight is
allocated: a meta-device Llama-3-70B captures in a few hundred MB.

Attention is recorded as one `accel_sim::attention` node (`attention.py`, `hf.py`); a mask the
model built from constants is read for the query-key pairs it allows (`masks.py`).
"""

from __future__ import annotations

import contextlib
import logging
import sys
import traceback
from collections.abc import Iterator
from typing import Any

import torch
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import (
    DataDependentOutputException,
    DynamicOutputShapeException,
    FakeTensor,
    FakeTensorMode,
    UnsupportedOperatorException,
)
from torch.fx.experimental.proxy_tensor import get_innermost_proxy_mode, make_fx

from accel_sim import script_run
from accel_sim.capture import attention as _attention  # noqa: F401  (registers accel_sim::attention)
from accel_sim.capture.attention import SdpaRouting
from accel_sim.capture.graph_export import DTYPE_NAMES, export_graph, source_location
from accel_sim.capture.hf import cache_tensors, hf_capture_settings
from accel_sim.capture.lifetime import PythonLifetimes
from accel_sim.capture.masks import recognise_attention_masks
from accel_sim.errors import UsageError

CAST_DTYPES: dict[str, torch.dtype] = {
    "bf16": torch.bfloat16,
    "fp16": torch.float16,
    "fp32": torch.float32,
}

_DATA_DEPENDENT_HINT = (
    "the model reads tensor values (.item()/.tolist()/nonzero/bool(tensor)) during forward, "
    "but capture sees only shapes; pass shape-only inputs (e.g. no attention_mask for unpadded "
    "batches) or make the code path value-free"
)


class _FakeState:
    """Turns real or meta tensors into FakeTensors on the fake CPU device, one per original tensor.

    Tied tensors (the same object under two names) and views of one storage map to one fake
    storage: real tensors through the fake mode's memo, meta tensors by wrapping the meta tensor
    itself (a FakeTensor is a meta tensor plus a device).
    """

    def __init__(self, mode: FakeTensorMode, cast_dtype: torch.dtype | None) -> None:
        self.mode = mode
        self.cast_dtype = cast_dtype
        self._by_id: dict[int, torch.Tensor] = {}
        self._originals: list[torch.Tensor] = []  # keeps ids unique while the map is alive
        self._real_by_fake: dict[int, torch.Tensor] = {}

    def fake(self, tensor: torch.Tensor) -> torch.Tensor:
        known = self._by_id.get(id(tensor))
        if known is not None:
            return known
        if isinstance(tensor, FakeTensor):
            if tensor.fake_mode is not self.mode:
                raise UsageError(
                    "example inputs are FakeTensors of another FakeTensorMode; "
                    "pass real or meta tensors"
                )
            fake = tensor
        elif tensor.device.type == "meta":
            converter = self.mode.fake_tensor_converter
            fake = converter.from_meta_and_device(self.mode, tensor.detach(), torch.device("cpu"))
        else:
            fake = self.mode.from_tensor(tensor.detach(), static_shapes=True)
        if (
            self.cast_dtype is not None
            and fake.is_floating_point()
            and fake.dtype != self.cast_dtype
        ):
            with self.mode:
                fake = fake.to(self.cast_dtype)
        self._by_id[id(tensor)] = fake
        self._originals.append(tensor)
        if not isinstance(tensor, FakeTensor) and tensor.device.type != "meta":
            self._real_by_fake[id(fake)] = tensor
        return fake

    def real_value(self, fake: torch.Tensor) -> torch.Tensor | None:
        """The values behind `fake` when it stands for a real tensor (cast as the fake is)."""
        real = self._real_by_fake.get(id(fake))
        if real is None:
            return None
        return real.detach().to(fake.dtype)


def _input_name(path: tuple[Any, ...]) -> str:
    parts = []
    for key in path:
        for attribute in ("idx", "key", "name"):
            if hasattr(key, attribute):
                parts.append(str(getattr(key, attribute)))
                break
        else:
            parts.append(str(key))
    return "input." + ".".join(parts) if parts else "input"


def _split_inputs(example_inputs: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    if isinstance(example_inputs, dict):
        return (), dict(example_inputs)
    if isinstance(example_inputs, (tuple, list)):
        return tuple(example_inputs), {}
    return (example_inputs,), {}


def _output_tensors(value: Any) -> Iterator[torch.Tensor]:
    """Every tensor in a forward's result (tuples, lists, dicts, ModelOutputs, HF caches)."""
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _output_tensors(item)
    elif isinstance(value, dict):  # includes transformers' ModelOutput
        for item in value.values():
            yield from _output_tensors(item)
    else:
        inner = cache_tensors(value)
        if inner is not None:
            yield from inner


def _dominant_float_dtype(tensors: list[torch.Tensor]) -> str | None:
    counts: dict[torch.dtype, int] = {}
    for tensor in tensors:
        if tensor.is_floating_point():
            counts[tensor.dtype] = counts.get(tensor.dtype, 0) + tensor.numel()
    if not counts:
        return None
    dtype = max(counts, key=counts.__getitem__)
    return DTYPE_NAMES.get(dtype)


def _library_versions() -> dict[str, str]:
    versions = {"torch_version": torch.__version__}
    transformers = sys.modules.get("transformers")
    if transformers is not None:
        versions["transformers_version"] = transformers.__version__
    return versions


def _user_frame(error: BaseException) -> str:
    frames = traceback.extract_tb(error.__traceback__)
    text = "".join(f'File "{f.filename}", line {f.lineno}, in {f.name}\n' for f in frames)
    return source_location(text)


def _one_line(text: str, limit: int = 300) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _data_dependent(error: BaseException) -> bool:
    if isinstance(error, (DataDependentOutputException, DynamicOutputShapeException)):
        return True
    guard = getattr(torch.fx.experimental.symbolic_shapes, "GuardOnDataDependentSymNode", None)
    return guard is not None and isinstance(error, guard)


def _usage_error(error: BaseException) -> UsageError:
    where = _user_frame(error)
    at = f" at {where}" if where else ""
    if _data_dependent(error):
        op = getattr(error, "func", None)
        what = f"op {op}" if op is not None else type(error).__name__
        return UsageError(f"capture failed{at}: {_DATA_DEPENDENT_HINT} ({what})")
    if isinstance(error, UnsupportedOperatorException):
        return UsageError(
            f"capture failed{at}: op {error.func} has no shape-only (fake/meta) implementation; "
            "register one with torch.library.register_fake"
        )
    if isinstance(error, (SystemExit, KeyboardInterrupt)):
        return UsageError(f"capture failed{at}: the model's code {script_run.describe(error)}")
    return UsageError(f"capture failed{at}: {type(error).__name__}: {_one_line(str(error))}")


@contextlib.contextmanager
def _quiet_fake_tensor_log() -> Iterator[None]:
    """FakeTensorMode logs a traceback per failing meta kernel; the UsageError says it in a line."""
    logger = logging.getLogger("torch._subclasses.fake_tensor")
    previous = logger.level
    logger.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        logger.setLevel(previous)


class FakeInputs:
    """A model's parameters, buffers and example inputs as FakeTensors, in graph-input order
    (parameters, buffers, the inputs' tensors), with their (kind, name) labels, and the way back
    from a flat list of traced tensors to the state dict and the call's arguments."""

    def __init__(self, model: torch.nn.Module, state: _FakeState, args: tuple, kwargs: dict) -> None:
        self.parameters = {n: state.fake(p) for n, p in model.named_parameters()}
        self.buffers = {n: state.fake(b) for n, b in model.named_buffers()}
        leaves, self._spec = pytree.tree_flatten_with_path((args, kwargs))
        self._leaves: list[Any] = []
        self.graph_inputs: list[tuple[str, str]] = [("parameter", n) for n in self.parameters]
        self.graph_inputs += [("buffer", n) for n in self.buffers]
        for path, leaf in leaves:
            if isinstance(leaf, torch.Tensor):
                self._leaves.append(state.fake(leaf))
                self.graph_inputs.append(("input", _input_name(path[1:])))
            else:
                self._leaves.append(leaf)
        self._positions = [i for i, leaf in enumerate(self._leaves) if isinstance(leaf, torch.Tensor)]
        self._names = list(self.parameters) + list(self.buffers)

    def flat(self) -> list[torch.Tensor]:
        return [*self.parameters.values(), *self.buffers.values(), *(self._leaves[i] for i in self._positions)]

    def unpack(self, flat: tuple) -> tuple[dict[str, torch.Tensor], tuple, dict, tuple]:
        """(state dict, args, kwargs, the traced tensors after the inputs)."""
        tensors = dict(zip(self._names, flat[: len(self._names)], strict=True))
        rest = flat[len(self._names):]
        leaves = list(self._leaves)
        for position, tensor in zip(self._positions, rest[: len(self._positions)], strict=True):
            leaves[position] = tensor
        call_args, call_kwargs = pytree.tree_unflatten(leaves, self._spec)
        return tensors, call_args, call_kwargs, tuple(rest[len(self._positions):])


def report_tracing() -> None:
    """Called first thing inside the traced function: tells the ScriptRun entered around the
    capture (if any) which graph the tracer fills, so that a status line can count its ops."""
    if script_run.active() is not None:
        proxy_mode = get_innermost_proxy_mode()
        if proxy_mode is not None:
            script_run.tracing(proxy_mode.tracer.graph)


def trace(fn: Any, model: torch.nn.Module, mode: FakeTensorMode, lifetimes: PythonLifetimes,
          flat_inputs: list[Any], extra: contextlib.AbstractContextManager | None = None,
          state: _FakeState | None = None) -> torch.fx.GraphModule:
    """`make_fx` of `fn` over the fake `flat_inputs`, with module stacks relative to `model`
    and HF's capture settings; the model's own failure under fake tensors (a sys.exit() or a
    KeyboardInterrupt it raises included) becomes a one-line UsageError. `extra` is one more
    context to trace under. Attention masks built from constants, or from the inputs `state`
    knows the real values of, are read for the pairs they allow (`masks.py`)."""
    fn._orig_mod = model  # make_fx records nn_module_stack relative to this root
    try:
        with _quiet_fake_tensor_log(), hf_capture_settings(model), mode, extra or contextlib.nullcontext():
            graph_module = make_fx(fn, record_module_stack=True, record_stack_traces=True)(*flat_inputs)
    except UsageError:
        raise
    except (Exception, SystemExit, KeyboardInterrupt) as error:  # the model's own code failed
        if not script_run.raised_by_script(error):
            raise
        raise _usage_error(error) from error
    finally:
        lifetimes.active = False
        script_run.tracing(None)

    def input_value(position: int) -> torch.Tensor | None:
        tensor = flat_inputs[position]
        return state.real_value(tensor) if state is not None and isinstance(tensor, torch.Tensor) else None

    recognise_attention_masks(graph_module, input_value)
    return graph_module


def capture_model(
    model: torch.nn.Module,
    example_inputs: Any,
    *,
    dtype: str | None = None,
    name: str | None = None,
) -> dict[str, Any]:
    """Trace `model(*example_inputs)` (or `model(**example_inputs)`) into an "accel-sim-graph" dict.

    "example_inputs" is a tensor, a tuple/list of positional arguments or a dict of keyword
    arguments; tensors may be real, meta or absent weights alike, non-tensor values pass through.
    "dtype" ("bf16", "fp16", "fp32") casts floating parameters, buffers and inputs first, as if
    the model ran in that precision. Raises UsageError when the model cannot be captured.
    """
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"capture needs a torch.nn.Module, got {type(model).__name__}")
    if dtype is not None and dtype not in CAST_DTYPES:
        raise UsageError(f"unknown dtype {dtype!r}; choose one of {', '.join(CAST_DTYPES)}")
    cast_dtype = CAST_DTYPES.get(dtype) if dtype is not None else None

    # Real tensors kept as plain attributes (not parameters or buffers) are fakified when used.
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    state = _FakeState(mode, cast_dtype)

    inputs = FakeInputs(model, state, *_split_inputs(example_inputs))
    parameters, buffers, graph_inputs = inputs.parameters, inputs.buffers, inputs.graph_inputs

    def forward(*flat: torch.Tensor) -> list[torch.Tensor]:
        report_tracing()
        tensors, call_args, call_kwargs, _ = inputs.unpack(flat)
        with SdpaRouting(), lifetimes:
            result = torch.func.functional_call(
                model, tensors, call_args, call_kwargs, tie_weights=True, strict=False
            )
            outputs = list(_output_tensors(result))
            del result, call_args, call_kwargs, tensors
        return outputs

    lifetimes = PythonLifetimes()
    script_run.enter_phase("tracing the forward")
    graph_module = trace(forward, model, mode, lifetimes, inputs.flat(), state=state)
    script_run.enter_phase("exporting the graph")

    metadata: dict[str, Any] = _library_versions()
    metadata["dtype"] = (
        dtype or _dominant_float_dtype([*parameters.values(), *buffers.values()]) or "fp32"
    )
    return export_graph(
        graph_module,
        graph_inputs,
        name=name or type(model).__name__,
        metadata=metadata,
        released_at=lifetimes.released_at,
    )
