"""FX graph of fake tensors -> the "accel-sim-graph" document (JSON-ready dict) for the C++ core.

Format, version 1 (see the schema in docs/formats/graph.md when present):

* storages: one per distinct fake storage, ids dense in order of first appearance (graph inputs
  first); kind "parameter" | "buffer" | "input" | "activation"; size_bytes of the whole storage.
  Views and in-place results share their base's storage, so aliasing is explicit.
* tensors: one per distinct tensor value (graph input or op output): storage, dtype, shape,
  strides, offset (elements); graph inputs carry their name.
* nodes: one per ATen/custom op with a tensor output, in execution order: op (packet name without
  the aten namespace, "ns::name" otherwise), overload, tensor inputs in schema order, non-tensor
  arguments in attrs by schema argument name, tensor outputs, module path/type and source line.
* outputs: the tensor ids the traced function returns.

No costs are computed here: that is the C++ core's job.
"""

from __future__ import annotations

import math
import operator
import os
import sysconfig
from collections.abc import Iterable
from typing import Any

import torch
import torch.fx

from accel_sim.errors import UsageError
from accel_sim.capture.norms import ATEN_NAMES

FORMAT_NAME = "accel-sim-graph"
FORMAT_VERSION = 1

DTYPE_NAMES: dict[torch.dtype, str] = {
    torch.float64: "fp64",
    torch.float32: "fp32",
    torch.float16: "fp16",
    torch.bfloat16: "bf16",
    torch.float8_e4m3fn: "fp8_e4m3",
    torch.float8_e5m2: "fp8_e5m2",
    torch.int64: "int64",
    torch.int32: "int32",
    torch.int16: "int16",
    torch.int8: "int8",
    torch.uint8: "uint8",
    torch.bool: "bool",
    torch.complex64: "complex64",
    torch.complex128: "complex128",
}

# FX node meta key: {"attrs": {...}, "drop": (argument names,)}, attrs written over the node's
# own and arguments left out of its inputs and attrs (set by `masks.recognise_attention_masks`).
EXPORT_OVERRIDES = "accel_sim_export"

# Arguments that describe the capturing host rather than the computation.
_HOST_ARGUMENTS = frozenset({"device", "pin_memory"})

_TORCH_DIR = os.path.dirname(torch.__file__) + os.sep
_CAPTURE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
_STDLIB_DIR = sysconfig.get_paths()["stdlib"] + os.sep


def _is_library_frame(path: str) -> bool:
    """Frames of torch, of this capture package and of the Python standard library."""
    if path.startswith((_TORCH_DIR, _CAPTURE_DIR)):
        return True
    return path.startswith(_STDLIB_DIR) and "-packages" + os.sep not in path


def dtype_name(dtype: torch.dtype) -> str:
    """The file-format name of a torch dtype ("bf16", "int64", ...)."""
    try:
        return DTYPE_NAMES[dtype]
    except KeyError:
        raise UsageError(
            f"the model uses dtype {dtype}, which the accel-sim graph format cannot represent"
        ) from None


def _json_scalar(value: Any) -> Any:
    """A non-tensor argument as a JSON value; non-finite floats become "inf", "-inf", "nan"."""
    if isinstance(value, bool) or value is None or isinstance(value, str):
        return value
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        value = value.node.pytype(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return value
        return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")
    if isinstance(value, torch.dtype):
        return dtype_name(value)
    if isinstance(value, (list, tuple)):
        # A list of flags (native_layer_norm_backward's output_mask) is written as 0/1 ints.
        return [int(v) if isinstance(v, bool) else _json_scalar(v) for v in value]
    return str(value).removeprefix(
        "torch."
    )  # torch.layout, torch.memory_format ("contiguous_format"), ...


def source_location(stack_trace: str | None) -> str:
    """ "file.py:LINE" of the innermost frame of user or model code in an FX stack trace."""
    if not stack_trace:
        return ""
    source = ""
    for line in stack_trace.splitlines():
        line = line.strip()
        if not line.startswith('File "'):
            continue
        path, _, rest = line[len('File "') :].partition('", line ')
        number = rest.split(",", 1)[0]
        absolute = os.path.abspath(path)
        if _is_library_frame(absolute):
            continue
        source = f"{os.path.basename(path)}:{number}"
    return source


def _module_of(node: torch.fx.Node) -> tuple[str, str]:
    stack = node.meta.get("nn_module_stack") or {}
    if not stack:
        return "", ""
    path, module_class = list(stack.values())[-1]
    if not isinstance(module_class, str):
        module_class = module_class.__qualname__
    return path, module_class.rsplit(".", 1)[-1]


def _op_name(target: torch._ops.OpOverload) -> tuple[str, str]:
    namespace, _, name = target._schema.name.partition("::")
    op = name if namespace == "aten" else f"{namespace}::{name}"
    return ATEN_NAMES.get(op, op), target._overloadname


class _GraphBuilder:
    """Assigns dense storage/tensor ids while walking the graph."""

    def __init__(self) -> None:
        self.storages: list[dict[str, Any]] = []
        self.tensors: list[dict[str, Any]] = []
        self._storage_ids: dict[int, int] = {}
        self._alive: list[torch.Tensor] = []  # keeps storages alive so their addresses stay unique

    def add_tensor(self, value: torch.Tensor, kind: str, name: str | None = None) -> int:
        storage = value.untyped_storage()
        key = storage._cdata
        storage_id = self._storage_ids.get(key)
        if storage_id is None:
            storage_id = len(self.storages)
            self._storage_ids[key] = storage_id
            self.storages.append(
                {"id": storage_id, "size_bytes": int(storage.nbytes()), "kind": kind}
            )
            self._alive.append(value)
        tensor_id = len(self.tensors)
        entry: dict[str, Any] = {
            "id": tensor_id,
            "storage": storage_id,
            "dtype": dtype_name(value.dtype),
            "shape": [int(s) for s in value.shape],
            "strides": [int(s) for s in value.stride()],
            "offset": int(value.storage_offset()),
        }
        if name is not None:
            entry["name"] = name
        self.tensors.append(entry)
        return tensor_id

    def storage_keys(self) -> list[tuple[int, int]]:
        """(storage address, storage id) pairs."""
        return list(self._storage_ids.items())


def _flatten(value: Any) -> Iterable[Any]:
    if isinstance(value, (list, tuple)):
        for item in value:
            yield from _flatten(item)
    else:
        yield value


def export_graph(
    graph_module: torch.fx.GraphModule,
    graph_inputs: list[tuple[str, str]],
    *,
    name: str,
    metadata: dict[str, Any],
    released_at: dict[int, torch.fx.Node | None] | None = None,
    pass_starts: tuple[frozenset[str], ...] | None = None,
    gradient_storages: set[int] | None = None,
) -> dict[str, Any]:
    """The "accel-sim-graph" document of a make_fx graph.

    "graph_inputs" gives (kind, name) for each graph input (an FX input node) in order: kind is "parameter",
    "buffer" or "input"; name the parameter/buffer FQN or "input.<path>". "released_at" maps a
    storage address to the FX node traced when the program dropped its last reference (None:
    held to the end); it becomes the storage's "released_after" node index. "pass_starts" (a
    training step) gives the names of the FX nodes traced before the backward and before the
    optimizer began (after an optional first set, a prelude tagged optimizer);
    "gradient_storages" the storage addresses of the parameter gradients.
    """
    builder = _GraphBuilder()
    # Tensor ids of each FX node's value, nested like the value (None where not a tensor).
    ids: dict[torch.fx.Node, Any] = {}
    nodes: list[dict[str, Any]] = []
    outputs: list[int] = []
    input_index = 0
    exported_before: dict[torch.fx.Node, int] = {}  # FX node -> index of the last node emitted by then

    def tensor_ids_of(arg: Any) -> list[int]:
        found: list[int] = []
        for item in _flatten(arg):
            if isinstance(item, torch.fx.Node):
                found.extend(i for i in _flatten(ids.get(item)) if i is not None)
        return found

    def add_outputs(value: Any) -> Any:
        if isinstance(value, torch.Tensor):
            return builder.add_tensor(value, "activation")
        if isinstance(value, (list, tuple)):
            return [add_outputs(v) for v in value]
        return None

    def pass_of(node: torch.fx.Node) -> str:
        if pass_starts is None:
            return "forward"
        if len(pass_starts) == 3 and node.name in pass_starts[0]:
            return "optimizer"  # a prelude (zeroing the gradient buffers) counts once per step
        forward, backward = pass_starts[-2:]
        if node.name in forward:
            return "forward"
        return "backward" if node.name in backward else "optimizer"

    for node in graph_module.graph.nodes:
        exported_before[node] = len(nodes) - 1
        value = node.meta.get("val")
        if node.op == "placeholder":
            kind, tensor_name = graph_inputs[input_index]
            input_index += 1
            if isinstance(value, torch.Tensor):
                ids[node] = builder.add_tensor(value, kind, tensor_name)
        elif node.op == "get_attr":
            attribute = getattr(graph_module, node.target, None)
            tensor = value if isinstance(value, torch.Tensor) else attribute
            if isinstance(tensor, torch.Tensor):
                ids[node] = builder.add_tensor(tensor, "buffer", f"constant.{node.target}")
        elif node.op == "call_function" and node.target is operator.getitem:
            source, index = node.args
            element = ids.get(source)
            ids[node] = (
                element[index] if isinstance(element, list) and index < len(element) else None
            )
        elif node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
            ids[node] = add_outputs(value)
            output_ids = [i for i in _flatten(ids[node]) if i is not None]
            # An op that returns nothing but updates its arguments (torch.optim's fused and
            # foreach kernels) is kept: the catalogue counts what it writes from its inputs.
            mutates = any(a.alias_info is not None and a.alias_info.is_write for a in node.target._schema.arguments)
            if not output_ids and not mutates:
                continue
            op, overload = _op_name(node.target)
            inputs: list[int] = []
            attrs: dict[str, Any] = {}
            overrides = node.meta.get(EXPORT_OVERRIDES, {})
            for position, argument in enumerate(node.target._schema.arguments):
                if argument.name in overrides.get("drop", ()):
                    continue
                if position < len(node.args) and not argument.kwarg_only:
                    arg = node.args[position]
                elif argument.name in node.kwargs:
                    arg = node.kwargs[argument.name]
                elif argument.has_default_value():
                    arg = argument.default_value  # written out so readers need no schema table
                else:
                    continue
                if arg is None:
                    continue
                if any(isinstance(item, torch.fx.Node) for item in _flatten(arg)):
                    inputs.extend(tensor_ids_of(arg))
                elif argument.name not in _HOST_ARGUMENTS:
                    attrs[argument.name] = _json_scalar(arg)
            attrs.update(overrides.get("attrs", {}))
            module, module_type = _module_of(node)
            nodes.append(
                {
                    "op": op,
                    "overload": overload,
                    "inputs": inputs,
                    "outputs": output_ids,
                    "attrs": attrs,
                    "module": module,
                    "module_type": module_type,
                    "source": source_location(node.meta.get("stack_trace")),
                    **({"pass": pass_of(node)} if pass_starts is not None else {}),
                }
            )
            exported_before[node] = len(nodes) - 1
        elif node.op == "output":
            outputs = tensor_ids_of(node.args[0])
        # Other call_function targets (symbolic-int arithmetic, asserts) carry no tensor.

    if gradient_storages:
        for key, storage_id in builder.storage_keys():
            if key in gradient_storages and builder.storages[storage_id]["kind"] == "activation":
                builder.storages[storage_id]["kind"] = "gradient"
    if released_at is not None and nodes:
        for key, storage_id in builder.storage_keys():
            storage = builder.storages[storage_id]
            if storage["kind"] not in ("activation", "gradient"):
                continue
            node = released_at.get(key)
            index = exported_before.get(node, len(nodes) - 1) if node is not None else len(nodes) - 1
            storage["released_after"] = max(index, 0)

    return {
        "format": FORMAT_NAME,
        "version": FORMAT_VERSION,
        "name": name,
        "metadata": metadata,
        "storages": builder.storages,
        "tensors": builder.tensors,
        "nodes": nodes,
        "outputs": outputs,
    }
