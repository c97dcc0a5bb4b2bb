"""Graph files: the versioned JSON form of a captured graph (docs/formats/graph.md).

A graph is saved once (`accel-sim capture SCRIPT -o graph.json`) and simulated later without
PyTorch. `to_core` turns the dict form (from a file or from capture) into a `_core.Graph`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from accel_sim import _core
from accel_sim.errors import UsageError

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


def load_graph(path: str | Path) -> dict:
    """Reads a graph file and checks its format and version."""
    p = Path(path)
    if not p.is_file():
        raise UsageError(f"graph file not found: {p}")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UsageError(f"{p}: not a JSON graph file ({e})") from None
    check_header(data, str(p))
    return data


def check_header(data: Any, where: str) -> None:
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UsageError(f"{where}: not an accel-sim graph (expected \"format\": \"{FORMAT}\")")
    if data.get("version") != VERSION:
        raise UsageError(
            f"{where}: graph format version {data.get('version')!r} is not supported (this accel-sim reads version {VERSION})"
        )


def to_core(graph: dict, where: str = "graph") -> Any:
    """Builds a `_core.Graph` from a graph dict. Errors name the entry that is wrong."""
    check_header(graph, where)
    g = _core.Graph()
    g.name = str(graph.get("name", ""))
    section = "storages"
    index = 0
    try:
        for index, s in enumerate(graph["storages"]):
            if s["id"] != index:
                raise UsageError(f"{where}: storages[{index}] has id {s['id']} (ids must be 0, 1, 2, ...)")
            kind = _KINDS.get(s["kind"])
            if kind is None:
                raise UsageError(f"{where}: storages[{index}]: unknown kind {s['kind']!r}")
            g.add_storage(int(s["size_bytes"]), kind, int(s.get("released_after", -1)))
        section = "tensors"
        for index, t in enumerate(graph["tensors"]):
            if t["id"] != index:
                raise UsageError(f"{where}: tensors[{index}] has id {t['id']} (ids must be 0, 1, 2, ...)")
            g.add_tensor(
                int(t["storage"]),
                _core.parse_dtype(t["dtype"]),
                [int(d) for d in t["shape"]],
                [int(d) for d in t.get("strides", [])],
                int(t.get("offset", 0)),
                str(t.get("name", "")),
            )
        section = "nodes"
        for index, n in enumerate(graph["nodes"]):
            g.add_node(
                n["op"],
                n.get("overload", "default"),
                [int(i) for i in n["inputs"]],
                [int(i) for i in n["outputs"]],
                n.get("attrs", {}),
                n.get("module", ""),
                n.get("module_type", ""),
                n.get("source", ""),
                _core.parse_pass(n.get("pass", "forward")),
            )
        section = "outputs"
        for index, t in enumerate(graph.get("outputs", [])):
            g.add_output(int(t))
    except KeyError as e:
        raise UsageError(f"{where}: {section}[{index}] lacks the key {e}") from None
    except (TypeError, ValueError) as e:
        raise UsageError(f"{where}: {section}[{index}]: {e}") from None
    return g
