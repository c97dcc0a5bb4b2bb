"""Graph files: the versioned JSON form of a captured graph (docs/formats/graph.md).

A graph is saved once (`accel-sim capture SCRIPT -o graph.json`) and simulated later without
PyTorch. `to_core` turns the dict form (from a file or from capture) into a `_core.Graph`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from accel_sim import _core
from accel_sim.errors import UsageError
from accel_sim.io import fields

FORMAT = "accel-sim-graph"
VERSION = 1

_KINDS = {
    "parameter": _core.StorageKind.parameter,
    "buffer": _core.StorageKind.buffer,
    "input": _core.StorageKind.input,
    "activation": _core.StorageKind.activation,
    "gradient": _core.StorageKind.gradient,
    "optimizer_state": _core.StorageKind.optimizer_state,
}


def save_graph(graph: dict, path: str | Path) -> None:
    """Writes a graph dict as JSON (compact: large graphs stay small)."""
    Path(path).write_text(json.dumps(graph, separators=(",", ":")), encoding="utf-8")


class GraphFile(dict):
    """A graph dict read from a file; `path` names the file in errors found later (to_core)."""

    path: str = ""


def load_graph(path: str | Path) -> dict:
    """Reads a graph file and checks its format and version."""
    p = Path(path)
    data = fields.parse_json(fields.read_text(p, "graph"), str(p), "graph file")
    check_header(data, str(p))
    fields.mapping(data.get("metadata", {}), str(p), "metadata")
    graph = GraphFile(data)
    graph.path = str(p)
    return graph


def check_header(data: Any, where: str) -> None:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UsageError(f"{where}: not an accel-sim graph (expected \"format\": \"{FORMAT}\")")
    version = data.get("version")
    if type(version) is not int or version != VERSION:
        raise UsageError(
            f"{where}: graph format version {version!r} is not supported (this accel-sim reads version {VERSION})"
        )


def _attr(value: Any, at: str, key: str) -> Any:
    """A node attribute as the core holds it: a bool, an int64, a finite float, a string or a
    list of int64s."""
    if isinstance(value, (bool, str)):
        return value
    if isinstance(value, int):
        return fields.integer(value, at, key, minimum=-fields.INT64_MAX, maximum=fields.INT64_MAX)
    if isinstance(value, float):
        return fields.number(value, at, key)
    if isinstance(value, list):
        return [fields.integer(v, at, f"{key}[{i}]", minimum=-fields.INT64_MAX, maximum=fields.INT64_MAX)
                for i, v in enumerate(value)]
    raise UsageError(f"{at}: '{key}' must be a bool, int, float, string or list of ints, got a {type(value).__name__}")


def _ids(value: Any, at: str, key: str, count: int, what: str) -> list[int]:
    ids = fields.sequence(value, at, key)
    out = []
    for i, v in enumerate(ids):
        n = fields.integer(v, at, f"{key}[{i}]")
        if n >= count:
            raise UsageError(f"{at}: '{key}[{i}]' is {what} {n}, but the graph has {count}")
        out.append(n)
    return out


def _storage(s: Any, index: int, where: str) -> tuple[int, Any, int]:
    at = f"{where}: storages[{index}]"
    fields.mapping(s, f"{where}", f"storages[{index}]")
    for key in ("id", "size_bytes", "kind"):
        if key not in s:
            raise UsageError(f"{at} lacks the key '{key}'")
    if fields.integer(s["id"], at, "id") != index:
        raise UsageError(f"{at} has id {s['id']} (ids must be 0, 1, 2, ...)")
    kind = _KINDS.get(s["kind"]) if isinstance(s["kind"], str) else None
    if kind is None:
        raise UsageError(f"{at}: unknown kind {s['kind']!r:.60} (known: {', '.join(_KINDS)})")
    released = fields.integer(s.get("released_after", -1), at, "released_after", minimum=-1,
                              maximum=fields.INT64_MAX)
    return fields.integer(s["size_bytes"], at, "size_bytes"), kind, released


def _tensor(t: Any, index: int, where: str, storages: int) -> tuple:
    at = f"{where}: tensors[{index}]"
    fields.mapping(t, f"{where}", f"tensors[{index}]")
    for key in ("id", "storage", "dtype", "shape"):
        if key not in t:
            raise UsageError(f"{at} lacks the key '{key}'")
    if fields.integer(t["id"], at, "id") != index:
        raise UsageError(f"{at} has id {t['id']} (ids must be 0, 1, 2, ...)")
    storage = fields.integer(t["storage"], at, "storage")
    if storage >= storages:
        raise UsageError(f"{at}: 'storage' is storage {storage}, but the graph has {storages}")
    dtype = fields.text(t["dtype"], at, "dtype")
    try:
        core_dtype = _core.parse_dtype(dtype)
    except ValueError as e:
        raise UsageError(f"{at}: {e}") from None
    shape = [fields.integer(d, at, f"shape[{i}]") for i, d in enumerate(fields.sequence(t["shape"], at, "shape"))]
    strides = [fields.integer(d, at, f"strides[{i}]")
               for i, d in enumerate(fields.sequence(t.get("strides", []), at, "strides"))]
    offset = fields.integer(t.get("offset", 0), at, "offset")
    # The core multiplies these out in int64 (elements, bytes, the extent a strided view reaches):
    # each product must fit, which Python's integers can tell before it overflows there.
    elements = math.prod(shape)
    extent = offset + sum((d - 1) * st for d, st in zip(shape, strides) if d > 0)
    if max(elements, extent + 1) * _core.dtype_size_bytes(core_dtype) > fields.COUNT_MAX:
        raise UsageError(f"{at}: shape {shape} of {dtype} is beyond 2^62 bytes")
    return storage, core_dtype, shape, strides, offset, fields.text(t.get("name", ""), at, "name")


def _node(n: Any, index: int, where: str, tensors: int) -> tuple:
    at = f"{where}: nodes[{index}]"
    fields.mapping(n, f"{where}", f"nodes[{index}]")
    for key in ("op", "inputs", "outputs"):
        if key not in n:
            raise UsageError(f"{at} lacks the key '{key}'")
    op = fields.text(n["op"], at, "op")
    attrs = {str(k): _attr(v, at, f"attrs.{k}") for k, v in fields.mapping(n.get("attrs", {}), at, "attrs").items()}
    pass_name = fields.text(n.get("pass", "forward"), at, "pass")
    try:
        core_pass = _core.parse_pass(pass_name)
    except ValueError as e:
        raise UsageError(f"{at}: {e}") from None
    return (op, fields.text(n.get("overload", "default"), at, "overload"),
            _ids(n["inputs"], at, "inputs", tensors, "tensor"), _ids(n["outputs"], at, "outputs", tensors, "tensor"),
            attrs, fields.text(n.get("module", ""), at, "module"), fields.text(n.get("module_type", ""), at, "module_type"),
            fields.text(n.get("source", ""), at, "source"), core_pass)


def to_core(graph: dict, where: str = "graph") -> Any:
    """Builds a `_core.Graph` from a graph dict, checking every entry first: errors name the
    entry and the key that is wrong."""
    where = getattr(graph, "path", "") or where
    check_header(graph, where)
    g = _core.Graph()
    g.name = str(graph.get("name", ""))
    fields.mapping(graph.get("metadata", {}), where, "metadata")
    for key in ("storages", "tensors", "nodes"):
        if key not in graph:
            raise UsageError(f"{where}: lacks the key '{key}'")
    storages = fields.sequence(graph["storages"], where, "storages")
    tensors = fields.sequence(graph["tensors"], where, "tensors")
    nodes = fields.sequence(graph["nodes"], where, "nodes")
    try:
        for index, s in enumerate(storages):
            g.add_storage(*_storage(s, index, where))
        for index, t in enumerate(tensors):
            g.add_tensor(*_tensor(t, index, where, len(storages)))
        for index, n in enumerate(nodes):
            g.add_node(*_node(n, index, where, len(tensors)))
        for i in _ids(graph.get("outputs", []), where, "outputs", len(tensors), "tensor"):
            g.add_output(i)
    except ValueError as e:  # the core's ConfigError: an id or shape its checks refuse
        raise UsageError(f"{where}: {e}") from None
    return g
