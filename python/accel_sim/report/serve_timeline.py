"""A serving simulation's steps (the core's ServeResult.steps_recorded) as a Chrome / Perfetto trace.

The file is the Trace Event Format's "JSON Object Format" ({"traceEvents": [...],
"displayTimeUnit": "ms", "otherData": {...}}), which ui.perfetto.dev and chrome://tracing open:

* a process per replica ("replica N"), a thread per engine in it (a pipeline-parallel replica runs
  one virtual engine per stage), with a complete ("X") event per step named by its work
  ("prefill 3 · decode 61"; args: prefill tokens and sequences, decode sequences, KV use after);
* a counter ("C") track per replica, "KV cache used", with the KV-cache utilization after each step.

Times are converted from seconds to the format's microseconds; nothing else is computed here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_US_PER_S = 1e6


def _step_name(s: Any) -> str:
    parts = []
    if s.prefill_seqs:
        parts.append(f"prefill {s.prefill_seqs}")
    if s.decode_seqs:
        parts.append(f"decode {s.decode_seqs}")
    return " · ".join(parts) or "idle"


def serve_trace(result: Any, *, replicas: int, engines_per_replica: int, title: str) -> dict:
    meta, events = [], []
    for r in range(replicas):
        meta.append({"ph": "M", "name": "process_name", "pid": r + 1, "tid": 0, "args": {"name": f"replica {r}"}})
        meta.append({"ph": "M", "name": "process_sort_index", "pid": r + 1, "tid": 0, "args": {"sort_index": r}})
        for v in range(engines_per_replica):
            name = "engine" if engines_per_replica == 1 else f"virtual engine {v}"
            meta.append({"ph": "M", "name": "thread_name", "pid": r + 1, "tid": v + 1, "args": {"name": name}})
    for s in result.steps_recorded:
        pid, tid = s.engine // engines_per_replica + 1, s.engine % engines_per_replica + 1
        args = {"prefill_tokens": s.prefill_tokens, "prefill_seqs": s.prefill_seqs, "decode_seqs": s.decode_seqs,
                "kv_utilization": s.kv_utilization}
        events.append({"ph": "X", "name": _step_name(s), "cat": "step", "pid": pid, "tid": tid,
                       "ts": s.start_s * _US_PER_S, "dur": (s.end_s - s.start_s) * _US_PER_S, "args": args})
        events.append({"ph": "C", "name": "KV cache used", "pid": pid, "tid": 0, "ts": s.end_s * _US_PER_S,
                       "args": {"fraction": s.kv_utilization}})
    return {"traceEvents": meta + events, "displayTimeUnit": "ms",
            "otherData": {"title": title, "steps": len(result.steps_recorded), "steps_total": result.steps}}


def write_serve_trace(path: str | Path, result: Any, *, replicas: int, engines_per_replica: int, title: str) -> None:
    from accel_sim.errors import UsageError

    doc = serve_trace(result, replicas=replicas, engines_per_replica=engines_per_replica, title=title)
    try:
        Path(path).write_text(json.dumps(doc))
    except OSError as err:
        raise UsageError(f"cannot write trace {path}: {err.strerror or err}") from None
