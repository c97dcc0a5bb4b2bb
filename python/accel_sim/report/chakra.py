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



# ---- a training step, one trace per pipeline stage (`train --chakra PREFIX`) ----------------

MEM_LOAD_NODE, COMM_SEND_NODE, COMM_RECV_NODE = 2, 5, 6
_INT32 = (7, 0)
_ALL_REDUCE, _ALL_GATHER, _REDUCE_SCATTER = 0, 2, 7


def _us(seconds: float) -> int:
    return max(1, int(round(seconds * 1e6))) if seconds > 0 else 0


def step_traces(e: Any, layout: Any, schedule: Any) -> list[tuple[bytes, dict]]:
    """One training step (the core's TrainingEstimate `e` of `layout`, its pipeline `schedule`
    from schedule_pipeline) as one Chakra trace per pipeline stage: what every rank of that stage
    runs, a template. ASTRA-sim reads one trace per NPU with NPU ids: a user copies stage r's to
    each rank of that stage and maps the stage numbers in comm_src and comm_dst, and the "dp"
    group, to that rank order's NPUs. Each pass (a micro-batch's forward or backward of a model
    chunk) is a COMP_NODE of its scheduled time (its TP/CP/EP collectives inside, as the stage
    profile costs them); an input from another stage a COMM_RECV_NODE and an output to one a
    COMM_SEND_NODE (comm_src and comm_dst the pipeline stages, comm_tag 2 (micro-batch x chunks +
    chunk) + 1 for gradients, comm_size the activations);
    then the data-parallel collectives over pg_name "dp" as the ZeRO stage runs them (ZeRO-0: an
    all-reduce of the gradients; 1 and 2: a reduce-scatter, the optimizer, an all-gather of the
    trainable parameters; 3: a gather of the parameters before each pass and a reduce-scatter after
    each backward), the optimizer as a COMP_NODE (is_cpu_op when it is offloaded), and offload's
    exposed transfers as a MEM_LOAD_NODE. Returns (bytes, counts) per stage."""
    traces = []
    v = layout.virtual_stages
    per_chunk_params = e.stage_parameter_bytes / v
    per_chunk_grads = e.stage_gradient_bytes / v
    events = sorted(schedule.events, key=lambda ev: (ev.start_s, ev.stage))
    for stage in range(layout.pp):
        out = [_message(_bytes(1, CHAKRA_VERSION.encode())
                        + _bytes(2, _attr("pipeline_stage", _INT64, stage))
                        + _bytes(2, _attr("pipeline_stages", _INT64, layout.pp)))]
        counts = {"nodes": 0, "compute": 0, "sends": 0, "receives": 0, "collectives": 0, "memory": 0}
        ids = iter(range(1 << 62))
        passes: dict[tuple, int] = {}  # (work, chunk, micro-batch) -> node id of the pass on this stage
        previous: int | None = None

        def emit(node_type: int, name: str, ctrl: list[int], data: list[int], start_s: float, duration_s: float,
                 attrs: list[bytes], kind: str) -> int:
            node_id = next(ids)
            out.append(_message(_node(node_id, name, node_type, ctrl, data, int(round(start_s * 1e6)),
                                      _us(duration_s), attrs)))
            counts["nodes"] += 1
            counts[kind] += 1
            return node_id

        def collective(name: str, comm_type: int, size: float, deps: list[int], start_s: float) -> int:
            return emit(COMM_COLL_NODE, name, [], deps, start_s, 0.0,
                        [_attr("comm_type", _INT64, comm_type), _attr("comm_size", _UINT64, int(size)),
                         _attr("pg_name", _STRING, "dp"), _attr("is_cpu_op", _BOOL, 0)], "collectives")

        pending_recv: dict[tuple, int] = {}
        reductions: list[int] = []
        last = None
        for ev in events:
            work = ev.work.name
            if work == "send" and ev.to_stage == stage:
                # The chunk that reads it: the next model stage's (forward) or the previous one's
                # (backward), one chunk on when the send wraps around the pipeline.
                forward = ev.payload.name == "forward"
                wraps = ev.to_stage < ev.stage if forward else ev.to_stage > ev.stage
                chunk = ev.chunk + ((1 if forward else -1) if wraps else 0)
                tag = 2 * (ev.micro_batch * v + ev.chunk) + (0 if forward else 1)
                pending_recv[(ev.payload.name, chunk, ev.micro_batch)] = emit(
                    COMM_RECV_NODE, f"recv {ev.payload.name} mb{ev.micro_batch} from stage {ev.stage}", [], [],
                    ev.start_s, ev.end_s - ev.start_s,
                    [_attr("comm_src", _INT32, ev.stage), _attr("comm_dst", _INT32, stage),
                     _attr("comm_tag", _INT32, tag), _attr("comm_size", _UINT64, int(e.p2p_bytes))], "receives")
            if ev.stage != stage:
                continue
            if work == "send":
                source = passes.get((ev.payload.name, ev.chunk, ev.micro_batch))
                emit(COMM_SEND_NODE, f"send {ev.payload.name} mb{ev.micro_batch} to stage {ev.to_stage}", [],
                     [source] if source is not None else [], ev.start_s, ev.end_s - ev.start_s,
                     [_attr("comm_src", _INT32, stage), _attr("comm_dst", _INT32, ev.to_stage),
                      _attr("comm_tag", _INT32, 2 * (ev.micro_batch * v + ev.chunk)
                            + (0 if ev.payload.name == "forward" else 1)),
                      _attr("comm_size", _UINT64, int(e.p2p_bytes))], "sends")
                continue
            data = []
            # Its input from another stage: the matching receive (forward: activations; backward:
            # their gradients), when one came.
            recv = pending_recv.pop((work, ev.chunk, ev.micro_batch), None)
            if recv is not None:
                data.append(recv)
            if work == "backward" and ("forward", ev.chunk, ev.micro_batch) in passes:
                data.append(passes[("forward", ev.chunk, ev.micro_batch)])
            if layout.zero >= 3 and e.dp_ranks > 1:  # FSDP: this chunk's parameters gathered before the pass
                data.append(collective(f"all_gather params {work} mb{ev.micro_batch}", _ALL_GATHER,
                                       per_chunk_params, [], ev.start_s))
            node = emit(COMP_NODE, f"{work} chunk{ev.chunk} mb{ev.micro_batch}",
                        [previous] if previous is not None else [], data, ev.start_s, ev.end_s - ev.start_s,
                        [_attr("is_cpu_op", _BOOL, 0)], "compute")
            passes[(work, ev.chunk, ev.micro_batch)] = node
            previous = last = node
            if work == "backward" and layout.zero >= 2 and e.dp_ranks > 1:
                reductions.append(collective(f"reduce_scatter grads mb{ev.micro_batch}", _REDUCE_SCATTER,
                                             per_chunk_grads, [node], ev.end_s))
        end = schedule.makespan_s
        # The optimizer waits for the last backward and every reduce-scatter issued behind one.
        tail = ([last] if last is not None else []) + reductions
        if e.dp_ranks > 1 and layout.zero == 0:
            tail = [collective("all_reduce grads", _ALL_REDUCE, e.stage_gradient_bytes, tail, end)]
        elif e.dp_ranks > 1 and layout.zero == 1:
            tail = [collective("reduce_scatter grads", _REDUCE_SCATTER, e.stage_gradient_bytes, tail, end)]
        on_host = e.host_optimizer_s > 0
        step = emit(COMP_NODE, "optimizer (CPU)" if on_host else "optimizer", [previous] if previous is not None else [],
                    tail, end, e.host_optimizer_s if on_host else e.optimizer_s,
                    [_attr("is_cpu_op", _BOOL, 1 if on_host else 0)], "compute")
        tail = [step]
        if e.offload_s > 0:
            tail = [emit(MEM_LOAD_NODE, "host-link transfers (exposed)", [], tail, end, e.offload_s,
                         [_attr("tensor_size", _UINT64, int(e.stage_trainable_bytes / max(1, e.dp_ranks)))],
                         "memory")]
        if e.dp_ranks > 1 and layout.zero in (1, 2):
            collective("all_gather params", _ALL_GATHER, e.stage_trainable_bytes, tail, end)
        traces.append((b"".join(out), counts))
    return traces


def write_step_chakra(prefix: str, e: Any, layout: Any, schedule: Any) -> list[tuple[str, dict]]:
    """Writes PREFIX.{stage}.et for each pipeline stage, the trace every rank of that stage runs
    (step_traces: ASTRA-sim's per-NPU files are copies of these, one per rank, their stage
    numbers mapped to NPU ids); returns (path, counts) per file."""
    written = []
    for stage, (data, counts) in enumerate(step_traces(e, layout, schedule)):
        path = f"{prefix}.{stage}.et"
        Path(path).write_bytes(data)
        written.append((path, counts))
    return written
