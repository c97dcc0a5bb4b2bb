"""A simulated graph as a Chakra execution trace (MLCommons Chakra, the workload format ASTRA-sim
reads), one rank's: `simulate --chakra FILE`.

The schema is Chakra's et_def.proto (https://github.com/mlcommons/chakra,
schema/protobuf/et_def.proto): a GlobalMetadata message, then one Node per op that launches a
kernel, each written as a varint length and the message's protobuf encoding (Chakra's
protolib.encodeMessage). The encoding is protobuf's wire format
(https://protobuf.dev/programming-guides/encoding/), written here so that no protobuf package
is needed:

* a compute op is a COMP_NODE with its simulated time (duration_micros, whole microseconds, at
  least 1 for an op that takes time), its start (start_time_micros), and attributes num_ops
  (FLOPs), tensor_size (bytes moved) and is_cpu_op (false);
* a collective is a COMM_COLL_NODE with comm_type (Chakra's CollectiveCommType) and comm_size
  (the bytes of its result on this rank), for ASTRA-sim's network backends to time (its duration
  is the simulation's with --system, 0 without);
* data_deps are the kernels that produced the op's inputs (through views, which launch nothing
  and become no node); ctrl_deps chain each compute op to the compute op before it, as the
  simulation ran them on one stream.

Nothing is computed here: the times, FLOPs and bytes are the core's simulation result.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

CHAKRA_VERSION = "0.0.4"  # the schema version Chakra's converters write in GlobalMetadata

# et_def.proto's enums.
COMP_NODE, COMM_COLL_NODE = 4, 7
COMM_TYPES = {"accel_sim::all_reduce": 0, "accel_sim::all_gather": 2, "accel_sim::all_to_all": 6,
              "accel_sim::reduce_scatter": 7, "accel_sim::broadcast": 5}
# AttributeProto's oneof fields used here: field number and wire type.
_INT64, _UINT64, _BOOL, _STRING = (9, 0), (13, 0), (27, 0), (29, 2)


def _varint(n: int) -> bytes:
    if n < 0:
        n += 1 << 64  # int64 values are their two's complement as uint64
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _key(field: int, wire: int) -> bytes:
    return _varint(field << 3 | wire)


def _uint(field: int, value: int) -> bytes:
    return _key(field, 0) + _varint(value) if value else b""  # proto3: a zero is not written


def _bytes(field: int, value: bytes) -> bytes:
    return _key(field, 2) + _varint(len(value)) + value


def _packed(field: int, values: list[int]) -> bytes:
    return _bytes(field, b"".join(_varint(v) for v in values)) if values else b""


def _attr(name: str, kind: tuple[int, int], value: Any) -> bytes:
    field, wire = kind
    body = _bytes(1, name.encode())
    if wire == 2:
        body += _bytes(field, str(value).encode())
    else:
        body += _key(field, 0) + _varint(int(value))
    return body


def _node(node_id: int, name: str, node_type: int, ctrl: list[int], data: list[int], start_us: int,
          duration_us: int, attrs: list[bytes]) -> bytes:
    return (_uint(1, node_id) + _bytes(2, name.encode()) + _uint(3, node_type) + _packed(4, ctrl) + _packed(5, data)
            + _uint(6, start_us) + _uint(7, duration_us) + b"".join(_bytes(10, a) for a in attrs))


def _message(body: bytes) -> bytes:
    return _varint(len(body)) + body


def chakra_trace(report: Any) -> tuple[bytes, dict]:
    """The trace of a SimulationReport (accel_sim.simulation_report) as bytes, and what it holds
    ({"nodes", "compute", "collectives"})."""
    g, result = report.graph, report.result
    producers: dict[int, list[int]] = {}  # tensor -> the kernels it comes from
    out = [_message(_bytes(1, CHAKRA_VERSION.encode()))]
    counts = {"nodes": 0, "compute": 0, "collectives": 0}
    previous_compute = None
    for r in result.ops:
        node = g.node(r.node)
        deps = sorted({p for t in node.inputs for p in producers.get(t, [])})
        collective = r.count.op_class.name == "communication"  # a node even when untimed here (no --system)
        if not collective and (not r.count.launches_kernel or (r.fused_into >= 0 and r.fused_into != r.node)):
            for t in node.outputs:  # a view (or an op fused into another) passes its inputs on
                producers[t] = deps
            continue
        start_us = int(round(r.start_s * 1e6))
        duration_us = max(1, int(round(r.cost.time_s * 1e6))) if r.cost.time_s > 0 else 0
        name = f"{node.module_path}:{node.op}" if node.module_path else node.op
        if collective:
            if node.op not in COMM_TYPES:
                raise ValueError(f"op {node.op} is a collective Chakra has no type for")
            attrs = [_attr("comm_type", _INT64, COMM_TYPES[node.op]),
                     _attr("comm_size", _UINT64, int(r.count.communication_bytes)),
                     _attr("is_cpu_op", _BOOL, 0)]
            out.append(_message(_node(r.node, name, COMM_COLL_NODE, [], deps, start_us, duration_us, attrs)))
            counts["collectives"] += 1
        else:
            attrs = [_attr("num_ops", _UINT64, int(r.count.flops)),
                     _attr("tensor_size", _UINT64, int(r.count.bytes)),
                     _attr("is_cpu_op", _BOOL, 0)]
            ctrl = [previous_compute] if previous_compute is not None else []
            out.append(_message(_node(r.node, name, COMP_NODE, ctrl, deps, start_us, duration_us, attrs)))
            previous_compute = r.node
            counts["compute"] += 1
        counts["nodes"] += 1
        for t in node.outputs:
            producers[t] = [r.node]
    return b"".join(out), counts


def write_chakra(path: str | Path, report: Any) -> dict:
    """Writes `report`'s Chakra trace to `path`; returns what it holds."""
    data, counts = chakra_trace(report)
    Path(path).write_bytes(data)
    return counts

