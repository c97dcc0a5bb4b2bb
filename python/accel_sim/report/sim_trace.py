"""A simulation's timeline (the core's `execution_timeline`) as a Chrome / Perfetto trace.

The file is the Trace Event Format's "JSON Object Format" ({"traceEvents": [...],
"displayTimeUnit": "ms", "otherData": {...}}), which ui.perfetto.dev and chrome://tracing open.
One process, named after the model and device, holds:

* a thread per stream, "compute" (kernels) and "communication" (collectives, when the graph has
  any), with a complete ("X") event per op that takes time: named "<op> · <module path>", with
  args index, op, module, module type, source, pass, micro-batch, op class, bound, FLOPs, bytes
  read and written, compute/memory/launch times and shapes (cat: the op class). The ops run back
  to back, so their durations sum to the reported latency;
* a thread "passes" with a span per forward, backward and optimizer run (each micro-batch), and a
  thread "layers" with a span per run of consecutive ops in one layer (the core's layer key);
* a counter ("C") track "live memory" with the bytes live over time (the core's samples).

Times are converted from seconds to the format's microseconds; nothing else is computed here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from accel_sim import _core

_PID = 1
_US = 1e6
_TIDS = {"passes": 1, "layers": 2, "compute": 3, "communication": 4}


def runs(spans: list[Any], key) -> list[tuple[Any, float, float]]:
    """Consecutive spans with the same key merged: (key, start, end); None keys are skipped. The
    spans tile the run, so a run is a key's stretch of the timeline (the trace's pass and layer
    tracks, the HTML timeline's lanes)."""
    out: list[list] = []
    for s in spans:
        k = key(s)
        if k is None:
            continue
        if out and out[-1][0] == k and out[-1][2] == s.start_s:
            out[-1][2] = s.end_s
        else:
            out.append([k, s.start_s, s.end_s])
    return [tuple(r) for r in out]


def layer_key(ops: list[Any]):
    """A key for `runs`: the layer of a span's op (the core's layer_of), None outside modules."""
    return lambda s: _core.layer_of(ops[s.node].module) if ops[s.node].module else None


def simulation_trace(report: Any) -> dict:
    """The trace document of `report` (an `accel_sim.api.SimulationReport`)."""
    timeline = report.timeline
    ops = report.ops
    spans = list(timeline.spans)
    title = f"{report.name or 'graph'} on {report.device.spec.name}"
    streams = {"compute"} | {s.stream.name for s in spans}
    meta = [{"ph": "M", "name": "process_name", "pid": _PID, "tid": 0, "args": {"name": title}}]
    for name, tid in _TIDS.items():
        if name in ("compute", "communication") and name not in streams:
            continue
        meta.append({"ph": "M", "name": "thread_name", "pid": _PID, "tid": tid, "args": {"name": name}})
        meta.append({"ph": "M", "name": "thread_sort_index", "pid": _PID, "tid": tid, "args": {"sort_index": tid}})

    events = []
    for s in spans:
        op = ops[s.node]
        name = f"{op.op} · {op.module}" if op.module else op.op
        args = {"index": op.index, "op": op.op, "module": op.module, "module_type": op.module_type,
                "source": op.source, "pass": op.pass_name, "micro_batch": s.micro_batch,
                "op_class": op.op_class, "bound": op.bound, "flops": op.flops,
                "bytes_read": op.bytes_read, "bytes_written": op.bytes_written,
                "compute_time_s": op.compute_time_s, "memory_time_s": op.memory_time_s,
                "launch_overhead_s": op.launch_overhead_s, "dtype": op.dtype,
                "input_shapes": op.input_shapes, "output_shapes": op.output_shapes}
        events.append({"ph": "X", "name": name, "cat": op.op_class, "pid": _PID, "tid": _TIDS[s.stream.name],
                       "ts": s.start_s * _US, "dur": (s.end_s - s.start_s) * _US, "args": args})
    micro = report.options.micro_batches > 1
    for (pass_name, mb), start, end in runs(spans, lambda s: (ops[s.node].pass_name, s.micro_batch)):
        label = f"{pass_name} (micro-batch {mb})" if micro and pass_name != "optimizer" else pass_name
        events.append({"ph": "X", "name": label, "cat": "pass", "pid": _PID, "tid": _TIDS["passes"],
                       "ts": start * _US, "dur": (end - start) * _US, "args": {"pass": pass_name, "micro_batch": mb}})
    for layer, start, end in runs(spans, layer_key(ops)):
        events.append({"ph": "X", "name": layer, "cat": "layer", "pid": _PID, "tid": _TIDS["layers"],
                       "ts": start * _US, "dur": (end - start) * _US, "args": {}})
    for m in timeline.memory:
        events.append({"ph": "C", "name": "live memory", "pid": _PID, "tid": 0, "ts": m.t_s * _US,
                       "args": {"bytes": m.live_bytes}})
    spec = report.device.spec
    other = {"title": title, "device": spec.id, "latency_s": report.latency_s,
             "peak_memory_bytes": report.peak_memory_bytes, "memory_capacity_bytes": spec.memory_bytes,
             "cost_model": report.options.cost_model, "micro_batches": report.options.micro_batches}
    return {"traceEvents": meta + events, "displayTimeUnit": "ms", "otherData": other}


def write_simulation_trace(path: str | Path, report: Any) -> None:
    from accel_sim.errors import UsageError

    doc = simulation_trace(report)
    try:
        Path(path).write_text(json.dumps(doc, separators=(",", ":")), encoding="utf-8")
    except OSError as err:
        raise UsageError(f"cannot write trace {path}: {err.strerror or err}") from None
