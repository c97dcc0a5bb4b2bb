"""A pipeline-parallel step written as a Chrome / Perfetto trace (JSON Object Format)."""

from __future__ import annotations

import itertools
import json
from collections import defaultdict

import pytest
from accel_sim import _core
from accel_sim.report.pipeline_trace import write_pipeline_trace

F_S, B_S = 1e-3, 2e-3  # one micro-batch through one chunk


def load(path) -> dict:
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def check_format(doc: dict) -> None:
    assert set(doc) == {"traceEvents", "displayTimeUnit", "otherData"}
    assert doc["displayTimeUnit"] == "ms"
    for e in doc["traceEvents"]:
        assert {"ph", "pid", "tid", "name"} <= set(e), e
        assert e["ph"] in ("X", "M")
        if e["ph"] == "X":
            assert isinstance(e["ts"], (int, float)) and e["ts"] >= 0
            assert isinstance(e["dur"], (int, float)) and e["dur"] >= 0
            assert isinstance(e["cat"], str) and isinstance(e["args"], dict)


def thread_names(doc: dict) -> dict[int, str]:
    return {e["tid"]: e["args"]["name"] for e in doc["traceEvents"]
            if e["ph"] == "M" and e["name"] == "thread_name"}


def test_interleaved_step_by_hand(tmp_path):
    # pp 2, v 2, m 4, f 1 ms, b 2 ms, no send time: 16 passes of 3 ms per stage and a bubble of
    # (pp - 1)/v x (v f + v b) = 3 ms, worked out pass by pass in core/tests/simulate/pipeline_test.cc.
    schedule = _core.schedule_pipeline(2, 2, 4, F_S, B_S, 0.0)
    assert schedule.makespan_s == pytest.approx(27e-3)
    assert schedule.bubble_s == pytest.approx(3e-3)
    path = tmp_path / "step.json"
    write_pipeline_trace(path, schedule, title="pp 2 x v 2",
                         extra_tracks={"data-parallel": [("reduce-scatter", 25e-3, 28e-3)]},
                         metadata={"model": "test"})
    doc = load(path)
    check_format(doc)
    names = thread_names(doc)
    assert sorted(names.values()) == ["data-parallel", "stage 0", "stage 1"]  # no sends: no links
    spans = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    stage0 = [e["name"] for e in spans if names[e["tid"]] == "stage 0"]
    assert stage0[:6] == ["F0.c0", "F1.c0", "F0.c1", "F1.c1", "F2.c0", "B0.c1"]
    assert stage0[-1] == "B3.c0"
    (dp,) = [e for e in spans if names[e["tid"]] == "data-parallel"]
    assert (dp["name"], dp["cat"], dp["ts"], dp["dur"]) == ("reduce-scatter", "data-parallel",
                                                            pytest.approx(25e3), pytest.approx(3e3))
    assert doc["otherData"]["model"] == "test" and doc["otherData"]["title"] == "pp 2 x v 2"
    assert doc["otherData"]["makespan_s"] == pytest.approx(27e-3)


def test_every_stage_track_holds_its_passes_and_the_step_ends_at_the_makespan(tmp_path):
    pp, v, m, p2p = 4, 3, 8, 1e-4
    schedule = _core.schedule_pipeline(pp, v, m, F_S, B_S, p2p)
    path = tmp_path / "step.json"
    write_pipeline_trace(path, schedule, title="pp 4 x v 3")
    doc = load(path)
    check_format(doc)
    names = thread_names(doc)
    assert [names[t] for t in sorted(names) if "→" not in names[t]] == [f"stage {s}" for s in range(pp)]

    busy_us = defaultdict(float)
    sends = defaultdict(list)
    last_end_us = 0.0
    for e in doc["traceEvents"]:
        if e["ph"] != "X":
            continue
        last_end_us = max(last_end_us, e["ts"] + e["dur"])
        track = names[e["tid"]]
        if e["cat"] in ("forward", "backward"):
            assert track == f"stage {e['args']['stage']}"
            assert e["name"] == f"{e['cat'][0].upper()}{e['args']['micro_batch']}.c{e['args']['chunk']}"
            busy_us[track] += e["dur"]
        else:
            assert e["cat"] == "p2p" and track == f"stage {e['args']['stage']} → {e['args']['to_stage']}"
            assert e["dur"] == pytest.approx(p2p * 1e6)
            sends[track].append((e["ts"], e["ts"] + e["dur"]))
    # m v forwards and m v backwards per stage: 8 x 3 x 3 ms.
    assert busy_us == {f"stage {s}": pytest.approx(m * v * (F_S + B_S) * 1e6) for s in range(pp)}
    # Every model-stage boundary but none inside a stage is crossed twice per micro-batch.
    assert sum(len(s) for s in sends.values()) == 2 * m * (pp * v - 1)
    for spans in sends.values():  # one message at a time per link: no overlap on a track
        spans.sort()
        assert all(a_end <= b_start + 1e-6 for (_, a_end), (b_start, _) in itertools.pairwise(spans))
    assert last_end_us == pytest.approx(schedule.makespan_s * 1e6)


def test_interleaving_needs_a_multiple_of_the_stages():
    with pytest.raises(ValueError, match="multiple of the pipeline stages"):
        _core.schedule_pipeline(2, 2, 3, F_S, B_S, 0.0)
