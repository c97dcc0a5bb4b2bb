"""`simulate --trace` (Trace Event Format) and the HTML reports' structure, without a browser
(tests/test_browser_report.py opens them in Chromium)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from accel_sim.cli.main import main

_NUMBER = (int, float)


def _run(capsys, *args: str) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def check_trace_event_format(doc: dict) -> None:
    """The Trace Event Format's JSON Object Format as ui.perfetto.dev and chrome://tracing read it
    (Google's "Trace Event Format" document): an object whose `traceEvents` is a list of events;
    every event has `ph`; a complete event ("X") has name, ts and dur in microseconds, pid and
    tid; a counter ("C") has name, ts, pid and numeric args; metadata ("M") names a process or
    thread in args.name (or a sort index in args.sort_index)."""
    assert isinstance(doc, dict) and isinstance(doc.get("traceEvents"), list) and doc["traceEvents"]
    assert doc.get("displayTimeUnit", "ms") in ("ms", "ns")
    for e in doc["traceEvents"]:
        ph = e.get("ph")
        assert ph in ("X", "C", "M"), e
        assert isinstance(e.get("pid"), int), e
        if ph == "X":
            assert isinstance(e.get("name"), str) and e["name"], e
            assert isinstance(e.get("tid"), int), e
            assert isinstance(e.get("ts"), _NUMBER) and e["ts"] >= 0, e
            assert isinstance(e.get("dur"), _NUMBER) and e["dur"] >= 0, e
            assert isinstance(e.get("args", {}), dict), e
        elif ph == "C":
            assert isinstance(e.get("name"), str) and isinstance(e.get("ts"), _NUMBER), e
            assert e["args"] and all(isinstance(v, _NUMBER) for v in e["args"].values()), e
        else:
            assert e["name"] in ("process_name", "thread_name", "process_sort_index", "thread_sort_index"), e
            assert ("name" in e["args"]) if e["name"].endswith("_name") else ("sort_index" in e["args"]), e


def _threads(doc: dict) -> dict[int, str]:
    return {e["tid"]: e["args"]["name"] for e in doc["traceEvents"] if e["ph"] == "M" and e["name"] == "thread_name"}


def _op_events(doc: dict) -> list[dict]:
    streams = {tid for tid, name in _threads(doc).items() if name in ("compute", "communication")}
    return [e for e in doc["traceEvents"] if e["ph"] == "X" and e["tid"] in streams]


def test_trace_of_a_hand_worked_graph(capsys, tmp_path: Path, mlp_graph_file: Path):
    trace = tmp_path / "t.json"
    code, out, _ = _run(capsys, "simulate", str(mlp_graph_file), "--device", "a100", "--cost-model", "roofline",
                        "--trace", str(trace), "--json")
    assert code == 0
    doc = json.loads(trace.read_text())
    check_trace_event_format(doc)
    # a100_80gb.yaml: fp32 19.5 TFLOP/s, 2039 GB/s, 4 us launch (tests/test_cli.py works the same).
    mm = max(2 * 512 * 1024 * 4096 / 19.5e12, (2 + 16 + 8) * 1024**2 / 2039e9) + 4e-6
    relu = 2 * 512 * 4096 * 4 / 2039e9 + 4e-6
    ops = _op_events(doc)
    assert [e["name"] for e in ops] == ["mm · fc1", "relu · act", "mm · fc2"]
    assert [e["dur"] for e in ops] == pytest.approx([mm * 1e6, relu * 1e6, mm * 1e6], rel=1e-9)
    assert sum(e["dur"] for e in ops) / 1e6 == pytest.approx(json.loads(out)["latency_s"], rel=1e-12)
    assert ops[1]["ts"] == pytest.approx(ops[0]["ts"] + ops[0]["dur"])
    fc1 = ops[0]["args"]
    assert fc1["flops"] == 2 * 512 * 1024 * 4096 and fc1["bound"] == "compute"
    assert fc1["bytes_read"] == (2 + 16) * 1024**2 and fc1["bytes_written"] == 8 * 1024**2
    assert fc1["module"] == "fc1" and fc1["source"] == "mlp.py:10"
    # Live memory: x 2 MiB + weights 32 MiB resident; h1 8 MiB during fc1; h1 + h2 16 MiB during
    # relu; h2 + y 8 + 2 MiB during fc2 (h1 freed after relu); the output y stays.
    counter = [e for e in doc["traceEvents"] if e["ph"] == "C"]
    assert {e["name"] for e in counter} == {"live memory"}
    assert [e["args"]["bytes"] for e in counter] == [42 * 1024**2, 50 * 1024**2, 44 * 1024**2, 36 * 1024**2]
    assert max(e["args"]["bytes"] for e in counter) == json.loads(out)["peak_memory_bytes"]
    assert set(_threads(doc).values()) == {"passes", "layers", "compute"}  # no collectives: no communication track


def test_trace_of_a_tensor_parallel_training_step_sums_to_the_latency(capsys, tmp_path: Path):
    """Gradient accumulation repeats forward and backward per micro-batch, collectives run on
    their own stream; the ops' durations still add up to the reported step time."""
    trace = tmp_path / "t.json"
    code, out, _ = _run(capsys, "simulate", "--model", "gpt2", "--phase", "train", "--batch", "2", "--seq", "256",
                        "--tp", "2", "--sp", "--system", "dgx_h100", "--grad-accum", "3", "--device", "h100",
                        "--trace", str(trace), "--json", "--no-ops")
    assert code == 0
    d = json.loads(out)
    doc = json.loads(trace.read_text())
    check_trace_event_format(doc)
    ops = _op_events(doc)
    assert sum(e["dur"] for e in ops) / 1e6 == pytest.approx(d["latency_s"], rel=1e-9)
    threads = _threads(doc)
    comm = [e for e in ops if threads[e["tid"]] == "communication"]
    assert comm and all(e["args"]["op_class"] == "communication" for e in comm)
    assert {e["args"]["micro_batch"] for e in ops if e["args"]["pass"] != "optimizer"} == {0, 1, 2}
    assert sum(e["dur"] for e in comm) / 1e6 == pytest.approx(
        d["communication_time_s"] - 0.0, rel=1e-9)  # no overlap asked for: all of it exposed
    passes = [e for e in doc["traceEvents"] if e["ph"] == "X" and threads.get(e["tid"]) == "passes"]
    assert [e["name"] for e in passes][:2] == ["forward (micro-batch 0)", "backward (micro-batch 0)"]
    assert passes[-1]["name"] == "optimizer"
    assert sum(e["dur"] for e in passes) == pytest.approx(sum(e["dur"] for e in ops), rel=1e-9)
    # Spans do not overlap: the next starts where the last ended.
    ends = sorted((e["ts"], e["ts"] + e["dur"]) for e in ops)
    assert all(b[0] >= a[1] - 1e-6 for a, b in zip(ends, ends[1:]))


def _attr_urls(document: str) -> list[str]:
    return re.findall(r"""(?:src|href)\s*=\s*["']([^"']+)""", document) + re.findall(r"url\(([^)]+)\)", document)


def test_html_report_is_self_contained_and_holds_every_chart(capsys, tmp_path: Path):
    report = tmp_path / "r.html"
    code, out, _ = _run(capsys, "simulate", "--model", "llama3-8b", "--device", "h100", "--seq", "512",
                        "--html", str(report), "--json")
    assert code == 0
    d = json.loads(out)
    doc = report.read_text()
    assert doc.startswith("<!doctype html>") and doc.rstrip().endswith("</html>")
    # No resource from anywhere: links, scripts and images would fail offline.
    assert all(u.startswith("#") for u in _attr_urls(doc)), _attr_urls(doc)
    assert "<script src" not in doc and "<link" not in doc
    # The roofline holds one circle per op with FLOPs, bytes and time (not the collectives).
    expected = sum(1 for o in d["ops"] if o["flops"] > 0 and o["bytes_read"] + o["bytes_written"] > 0
                   and o["time_s"] > 0 and o["op_class"] != "communication")
    roofline = re.search(r'<svg[^>]*class="chart roofline"[^>]*>(.*?)</svg>', doc, re.S)
    assert roofline and f'data-points="{expected}"' in roofline.group(0)
    assert roofline.group(1).count('<circle class="pt"') == expected
    # The timeline's compute stream: one rect per op that takes time.
    timed = sum(1 for o in d["ops"] if o["time_s"] > 0)
    lane = re.search(r'<g class="lane" data-lane="compute stream" data-spans="(\d+)">(.*?)</g>', doc, re.S)
    assert lane and int(lane.group(1)) == timed and lane.group(2).count('<rect class="span"') == timed
    # The memory chart: the device limit and the peak as the report states them.
    assert f'data-peak-bytes="{d["peak_memory_bytes"]}"' in doc
    assert "device memory 80.00 GiB" in doc
    for section in ("summary", "roofline", "timeline", "memory", "uncovered", "top-ops"):
        assert f'id="{section}"' in doc


def test_compare_html_puts_devices_side_by_side(capsys, tmp_path: Path):
    report = tmp_path / "c.html"
    code, _, _ = _run(capsys, "compare", "--model", "llama3-8b", "--devices", "a100,h100,mi300x", "--phase", "decode",
                      "--html", str(report))
    assert code == 0
    doc = report.read_text()
    side = re.search(r'<table class="sortable side-by-side">(.*?)</table>', doc, re.S).group(1)
    assert all(name in side for name in ("NVIDIA A100", "NVIDIA H100", "AMD Instinct MI300X"))
    assert doc.count('class="chart roofline"') == 3


def test_html_and_trace_paths_are_checked(capsys, tmp_path: Path):
    code, _, err = _run(capsys, "simulate", "--model", "gpt2", "--seq", "1024", "--html", str(tmp_path / "r.txt"))
    assert code == 2 and "--html writes an .html file" in err
    code, _, err = _run(capsys, "simulate", "--model", "gpt2", "--seq", "1024", "--trace", str(tmp_path / "missing" / "t.json"))
    assert code == 2 and "cannot write trace" in err


def test_train_html_draws_the_pipeline(capsys, tmp_path: Path):
    report = tmp_path / "train.html"
    code, _, _ = _run(capsys, "train", "--model", "llama-3-8b", "--system", "dgx-h100", "--gpus", "16", "--tp", "2",
                      "--pp", "4", "--dp", "2", "--seq", "4096", "--microbatch", "1", "--global-batch", "16",
                      "--html", str(report))
    assert code == 0
    doc = report.read_text()
    # 1F1B over 4 stages, 16 / 2 = 8 micro-batches: each stage runs 8 forwards and 8 backwards.
    assert 'data-stages="4"' in doc
    for s in range(4):
        lane = re.search(rf'<g class="lane" data-lane="stage {s}" data-spans="(\d+)">', doc)
        assert lane and int(lane.group(1)) == 16
    assert all(u.startswith("#") for u in _attr_urls(doc))


def test_plan_html_lists_the_best_configurations(capsys, tmp_path: Path):
    report = tmp_path / "plan.html"
    code, _, _ = _run(capsys, "plan", "--model", "llama-3-8b", "--system", "dgx-h100", "--gpus", "8,16", "--seq", "4096",
                      "--global-batch", "64", "--top", "3", "--quiet", "--html", str(report))
    assert code == 0
    doc = report.read_text()
    assert doc.count('<table class="sortable plan-best">') == 2  # one per cluster size
    # The sweep plot: days and MFU at 8 and 16 GPUs, a chart each.
    assert 'class="chart plan-days"' in doc and 'class="chart plan-mfu"' in doc
    assert doc.count('<circle class="pt"') == 2 * 2


def test_serve_html_has_a_cdf_per_device(capsys, tmp_path: Path):
    report = tmp_path / "serve.html"
    code, _, _ = _run(capsys, "serve", "--model", "llama-3-8b", "--devices", "h100,a100", "--qps", "4",
                      "--requests", "200", "--quiet", "--html", str(report))
    assert code == 0
    doc = report.read_text()
    for cls in ("cdf-ttft", "cdf-e2e"):
        svg = re.search(rf'<svg[^>]*class="chart cdf {cls}"[^>]*>(.*?)</svg>', doc, re.S)
        assert svg and svg.group(1).count('<polyline class="series"') == 2
        # 200 requests, all complete: a point per request (fewer than the 400 a CDF keeps).
        counts = [int(n) for n in re.findall(r'data-points="(\d+)"', svg.group(1))]
        assert counts == [200, 200]
