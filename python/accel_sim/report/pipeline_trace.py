"""A pipeline-parallel step (the core's `schedule_pipeline`) as a Chrome / Perfetto trace.

The file is the Trace Event Format's "JSON Object Format" ({"traceEvents": [...],
"displayTimeUnit": "ms", "otherData": {...}}), which ui.perfetto.dev and chrome://tracing open.
One process (named by `title`) holds, in this order:

* a thread per pipeline stage, "stage N", with a complete ("X") event per forward and backward
  pass named "F<micro-batch>.c<chunk>" / "B<micro-batch>.c<chunk>" (cat "forward" / "backward");
* after each stage, a thread per link it sends on, "stage N → M", with a complete event per send
  named after the pass whose output it carries (cat "p2p"; the core sends one message at a time
  per directed link, so the events of a thread never overlap);
* a thread per extra track, in the order given, with the caller's (name, start_s, end_s) spans
  (cat: the track's name).

Times are converted from seconds to the format's microseconds; nothing else is computed here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

_PID = 1
_US_PER_S = 1e6


def _pass_name(work: str, micro_batch: int, chunk: int) -> str:
    return f"{'F' if work == 'forward' else 'B'}{micro_batch}.c{chunk}"


def _complete(name: str, cat: str, tid: int, start_s: float, end_s: float, args: dict) -> dict:
    if not end_s >= start_s >= 0.0:
        raise ValueError(f"trace span {name!r} runs from {start_s} s to {end_s} s")
    return {"ph": "X", "name": name, "cat": cat, "pid": _PID, "tid": tid,
            "ts": start_s * _US_PER_S, "dur": (end_s - start_s) * _US_PER_S, "args": args}


def _thread(tid: int, name: str) -> list[dict]:
    return [{"ph": "M", "name": "thread_name", "pid": _PID, "tid": tid, "args": {"name": name}},
            {"ph": "M", "name": "thread_sort_index", "pid": _PID, "tid": tid, "args": {"sort_index": tid}}]


def pipeline_trace(schedule: Any, *, title: str,
                   extra_tracks: dict[str, list[tuple[str, float, float]]] | None = None,
                   metadata: dict | None = None) -> dict:
    """The trace document of `schedule` (an `accel_sim._core.PipelineSchedule`)."""
    events = list(schedule.events)
    stages = 1 + max((max(e.stage, e.to_stage) for e in events), default=0)
    links = sorted({(e.stage, e.to_stage) for e in events if e.work.name == "send"})

    meta = [{"ph": "M", "name": "process_name", "pid": _PID, "tid": 0, "args": {"name": title}}]
    stage_tid: dict[int, int] = {}
    link_tid: dict[tuple[int, int], int] = {}
    for s in range(stages):
        stage_tid[s] = len(stage_tid) + len(link_tid) + 1
        meta += _thread(stage_tid[s], f"stage {s}")
        for link in (link for link in links if link[0] == s):
            link_tid[link] = len(stage_tid) + len(link_tid) + 1
            meta += _thread(link_tid[link], f"stage {link[0]} → {link[1]}")

    spans = []
    for e in events:
        work = e.work.name
        args = {"stage": e.stage, "chunk": e.chunk, "micro_batch": e.micro_batch}
        if work == "send":
            payload = e.payload.name
            args |= {"to_stage": e.to_stage, "payload": "activations" if payload == "forward" else "gradients"}
            spans.append(_complete(_pass_name(payload, e.micro_batch, e.chunk), "p2p",
                                   link_tid[(e.stage, e.to_stage)], e.start_s, e.end_s, args))
        else:
            spans.append(_complete(_pass_name(work, e.micro_batch, e.chunk), work, stage_tid[e.stage],
                                   e.start_s, e.end_s, args))

    next_tid = len(stage_tid) + len(link_tid) + 1
    for track, track_spans in (extra_tracks or {}).items():
        meta += _thread(next_tid, track)
        spans += [_complete(name, track, next_tid, start_s, end_s, {}) for name, start_s, end_s in track_spans]
        next_tid += 1

    other = {"title": title, "makespan_s": schedule.makespan_s, "bubble_s": schedule.bubble_s}
    other.update(metadata or {})
    return {"traceEvents": meta + spans, "displayTimeUnit": "ms", "otherData": other}


def write_pipeline_trace(path: str | Path, schedule: Any, *, title: str,
                         extra_tracks: dict[str, list[tuple[str, float, float]]] | None = None,
                         metadata: dict | None = None) -> None:
    """Write `schedule` as a Chrome / Perfetto trace to `path` (see the module's docstring).

    `extra_tracks` adds a thread per entry, e.g. {"data-parallel": [("reduce-scatter", t0, t1)]};
    `metadata` goes into the file's "otherData" next to the title, makespan and bubble.
    """
    doc = pipeline_trace(schedule, title=title, extra_tracks=extra_tracks, metadata=metadata)
    Path(path).write_text(json.dumps(doc, separators=(",", ":")), encoding="utf-8")
