"""`accel-sim serve` as a user runs it: workloads, traces, SLO search, capacity table, Perfetto trace."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli


def _serve(*args: str) -> dict:
    result = run_cli("serve", *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_single_request_ttft_is_the_prefill_latency_simulate_reports():
    d = _serve("--model", "llama-3-8b", "--device", "h100", "--qps", "1", "--requests", "1", "--input-len", "512",
               "--output-len", "1")
    r = d["results"][0]
    assert r["completed"] == 1 and r["rejected"] == 0
    sim = run_cli("simulate", "--model", "llama-3-8b", "--device", "h100", "--phase", "prefill", "--batch", "1",
                  "--seq", "512", "--cuda-graphs", "--json", "--no-ops")
    assert sim.returncode == 0, sim.stderr
    # A prefill of 512 tokens sits on the step-time grid: the step is the whole graph's latency.
    assert abs(r["ttft_s"]["p50"] / json.loads(sim.stdout)["latency_s"] - 1.0) < 1e-6


def test_serve_reports_percentiles_throughput_cost_and_memory():
    d = _serve("--model", "llama-3-8b", "--device", "h100", "--replicas", "2", "--qps", "8", "--requests", "400",
               "--input-len", "uniform:200:800", "--output-len", "lognormal:4.5:0.5:10:400", "--router", "least-outstanding")
    r = d["results"][0]
    assert d["schema"] == "accel-sim/serve" and r["device"] == "h100_sxm"
    assert r["completed"] == 400 and r["gpus"] == 2
    for key in ("ttft_s", "tpot_s", "itl_s", "e2e_s"):
        p = r[key]
        assert 0 < p["p50"] <= p["p90"] <= p["p99"] <= p["max"] * (1 + 1e-9)
    assert abs(r["requests_per_s"] * r["makespan_s"] - 400) < 1e-6
    # $/1M output tokens = price x GPUs x hours / millions of tokens.
    tokens = r["output_tokens_per_s"] * r["makespan_s"]
    price = 0.0
    from accel_sim.device import resolve_device
    price = resolve_device("h100").spec.price_usd_per_hour
    assert abs(r["cost_per_million_output_tokens_usd"] - price * 2 * r["makespan_s"] / 3600 / (tokens / 1e6)) < 1e-6
    m = r["memory_per_gpu"]
    assert m["kv_cache_bytes"] > 0 and m["weights_bytes"] > 15e9
    assert len(r["timeline"]) <= 200


def test_bad_trace_names_the_line(tmp_path):
    trace = tmp_path / "trace.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 10, "output_length": 5}\n'
                     '{"timestamp": 1000, "input_length": 10, "output_length": 5}\n'
                     '{"timestamp": 500, "input_length": 10, "output_length": 5}\n')
    r = run_cli("serve", "--model", "llama-3-8b", "--workload", str(trace))
    assert r.returncode == 2
    assert "trace.jsonl:3:" in r.stderr and "earlier" in r.stderr
    trace.write_text('{"input_length": 10, "output_length": 5}\n{"input_length": -4, "output_length": 5}\n')
    r = run_cli("serve", "--model", "llama-3-8b", "--workload", str(trace), "--qps", "2")
    assert r.returncode == 2 and "trace.jsonl:2:" in r.stderr
    trace.write_text('{"input_length": 10}\n')
    r = run_cli("serve", "--model", "llama-3-8b", "--workload", str(trace), "--qps", "2")
    assert r.returncode == 2 and "trace.jsonl:1:" in r.stderr and "output" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1


def test_trace_workload_with_timestamps_and_prefix_hashes(tmp_path):
    trace = tmp_path / "t.jsonl"
    lines = [{"timestamp": 250 * i, "input_length": 1024, "output_length": 8, "hash_ids": [1, 2 + i % 2]}
             for i in range(20)]
    trace.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    plain = _serve("--model", "llama-3-8b", "--workload", str(trace))["results"][0]
    cached = _serve("--model", "llama-3-8b", "--workload", str(trace), "--prefix-caching")["results"][0]
    assert plain["completed"] == cached["completed"] == 20
    # The first prompt finds nothing cached and publishes blocks 1 and 2; the second finds block 1
    # (512 tokens) and publishes block 3; the other 18 find both of their blocks, 1023 tokens each
    # (the last prompt token is always computed: its logits sample the first output token).
    assert abs(cached["prefix_hit_rate"] - (512 + 18 * 1023) / (20 * 1024)) < 1e-9
    assert cached["ttft_s"]["mean"] < plain["ttft_s"]["mean"]
    assert plain["prefix_hit_rate"] == 0


def test_find_max_qps_meets_the_slos_and_the_capacity_table(tmp_path):
    d = _serve("--model", "llama-3-8b", "--devices", "a100,h100", "--find-max-qps", "--slo-ttft-p99", "300ms",
               "--slo-tpot-p99", "20ms", "--requests", "300", "--input-len", "500", "--output-len", "100")
    by = {r["device"]: r for r in d["results"]}
    for r in by.values():
        assert r["max_qps"] > 0
        assert r["ttft_s"]["p99"] <= 0.3 and r["tpot_s"]["p99"] <= 0.02
    assert by["h100_sxm"]["max_qps"] > by["a100_80gb"]["max_qps"]
    text = run_cli("serve", "--model", "llama-3-8b", "--devices", "a100,h100", "--find-max-qps", "--slo-tpot-p99", "20ms",
                   "--requests", "200", "--qps", "50")
    assert text.returncode == 0, text.stderr
    assert "capacity" in text.stdout and "replicas for 50/s" in text.stdout
    # A device the model does not fit on gets a row saying why; the others are still searched.
    d = _serve("--model", "mixtral-8x7b", "--devices", "a100,h200", "--find-max-qps", "--slo-tpot-p99", "100ms",
               "--requests", "100")
    by = {r["device"]: r for r in d["results"]}
    assert "no memory is left for the KV cache" in by["a100_80gb"]["error"] and by["h200"]["max_qps"] > 0
    bad = run_cli("serve", "--model", "llama-3-8b", "--devices", "a100,h100", "--qps", "1", "--trace", str(tmp_path / "t.json"))
    assert bad.returncode == 2 and "one --device" in bad.stderr
    bad = run_cli("serve", "--model", "llama-3-8b", "--find-max-qps")
    assert bad.returncode == 2 and "SLO" in bad.stderr.replace("slo", "SLO")


def test_serve_trace_is_perfetto_json(tmp_path):
    out = tmp_path / "serve.json"
    d = _serve("--model", "llama-3-8b", "--replicas", "2", "--qps", "20", "--requests", "100", "--input-len", "300",
               "--output-len", "20", "--trace", str(out), "--trace-steps", "50")
    doc = json.loads(out.read_text())
    steps = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert len(steps) == min(50, d["results"][0]["steps"])
    for e in steps:
        assert {"name", "ph", "ts", "dur", "pid", "tid"} <= e.keys() and e["dur"] > 0
    assert {e["pid"] for e in steps} == {1, 2}
    assert any(e["ph"] == "C" for e in doc["traceEvents"])


def test_schedulers_and_disaggregation_run():
    for extra in (["--scheduler", "sarathi", "--chunk", "256"], ["--scheduler", "orca"], ["--scheduler", "static"],
                  ["--order", "sjf"], ["--replicas", "3", "--disaggregate", "1", "--tp", "2"],
                  ["--tp", "2", "--pp", "2", "--arrival", "gamma", "--burstiness", "2"], ["--fp8", "--kv-dtype", "fp8"]):
        d = _serve("--model", "llama-3-8b", "--qps", "10", "--requests", "150", "--input-len", "400",
                   "--output-len", "30", *extra)
        assert d["results"][0]["completed"] == 150, extra
    # fp8 weights and cache: half the weight bytes, twice the KV blocks of bf16's (less the same activations).
    bf16 = _serve("--model", "llama-3-8b", "--qps", "1", "--requests", "1")["results"][0]["memory_per_gpu"]
    fp8 = _serve("--model", "llama-3-8b", "--qps", "1", "--requests", "1", "--fp8", "--kv-dtype", "fp8")["results"][0]["memory_per_gpu"]
    assert fp8["weights_bytes"] < 0.6 * bf16["weights_bytes"]
    assert fp8["kv_blocks_per_engine"] > 2 * bf16["kv_blocks_per_engine"]
    bad = run_cli("serve", "--model", "llama-3-8b", "--qps", "1", "--replicas", "2", "--disaggregate", "2")
    assert bad.returncode == 2 and "prefill" in bad.stderr



# ---- requests the model can hold -------------------------------------------------------------------
# A request's prompt plus output must fit the model's positions: vLLM's max_model_len defaults to the
# config's max_position_embeddings and a longer request is refused. GPT-2 has 1,024.

def _error(*args: str) -> str:
    r = run_cli("serve", *args)
    assert r.returncode == 2, (r.returncode, r.stderr)
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def test_generated_lengths_beyond_the_models_positions_are_refused():
    # The default lengths, 1000 + 200, ran on GPT-2's 1,024 positions.
    assert _error("--model", "gpt2", "--qps", "2", "--requests", "10") == (
        "accel-sim: error: --input-len 1000 and --output-len 200 draw requests of up to 1,000 + 200 = 1,200 tokens, "
        "beyond gpt2's 1,024 positions (its config's max_position_embeddings), which a server refuses: "
        "bound the lengths to fit")
    assert "up to 1,000 + 100 = 1,100 tokens" in _error(
        "--model", "gpt2", "--qps", "2", "--input-len", "uniform:10:1000", "--output-len", "lognormal:3:1:1:100")
    assert "both unbounded log-normals" in _error(
        "--model", "gpt2", "--qps", "2", "--input-len", "lognormal:6:1", "--output-len", "lognormal:3:1")
    d = _serve("--model", "gpt2", "--qps", "2", "--requests", "10", "--input-len", "1000", "--output-len", "24")
    assert d["results"][0]["completed"] == 10


def test_an_unbounded_log_normal_is_clipped_to_what_the_positions_leave():
    # lognormal:7:1 draws e^(7 + 1 z): beyond 1,000 tokens a third of the time; it was clipped at 2^20.
    from accel_sim import _core
    from accel_sim.commands.parser import build_parser as _parser
    from accel_sim.commands.serve import serve_workload
    from accel_sim.io.model_config import load_model_spec

    args = _parser().parse_args(["serve", "--model", "gpt2", "--qps", "2", "--requests", "400",
                                 "--input-len", "lognormal:7:1", "--output-len", "24"])
    spec, _ = serve_workload(args, load_model_spec("gpt2"))
    assert (spec.input.min, spec.input.max) == (1, 1024 - 24)
    w = _core.generate_workload(spec)
    assert max(w.input_len) == 1000 and max(w.output_len) == 24


def test_trace_requests_beyond_the_models_positions_name_the_line(tmp_path):
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"input_len": 1000, "output_len": 24}\n{"input_len": 1000, "output_len": 25}\n')
    assert _error("--model", "gpt2", "--workload", str(trace), "--qps", "2") == (
        f"accel-sim: error: {trace}:2: 'input_len' 1000 + 'output_len' 25 = 1,025 tokens, beyond gpt2's 1,024 "
        "positions (its config's max_position_embeddings)")
    d = _serve("--model", "llama-3-8b", "--workload", str(trace), "--qps", "2")  # 8,192 positions
    assert d["results"][0]["completed"] == 2
    fitted = _error("--model", "gpt2", "--qps", "2", "--lengths-from", str(trace))
    assert "fitted to --lengths-from" in fitted and "1,000 + 25 = 1,025 tokens" in fitted


def test_a_length_beyond_int64_in_a_trace_is_one_line(tmp_path):
    # It reached the core's conversion as a TypeError traceback.
    trace = tmp_path / "big.jsonl"
    trace.write_text('{"arrival_s": 0, "input_len": 9223372036854775808, "output_len": 1}\n')
    assert _error("--model", "llama-3-8b", "--workload", str(trace)) == (
        f"accel-sim: error: {trace}:1: 'input_len' 9223372036854775808 is beyond 2,147,483,647 tokens (2^31 - 1), "
        "the most a request holds")


@pytest.mark.parametrize("flag,value,words", [
    ("--input-len", "3000000000", "a length is 1 to 2,147,483,647 tokens"),  # drawn as int32: it wrapped
    ("--output-len", "uniform:1:4294967297", "a length is 1 to 2,147,483,647 tokens"),
    ("--input-len", "lognormal:nan:1", "MU: 'nan' is not a finite number"),
    ("--input-len", "lognormal:5:inf:1:100", "SIGMA: 'inf' is not a finite number"),
    ("--input-len", "lognormal:5:-1:1:100", "SIGMA must be at least 0"),
    ("--slo-ttft-p99", "0", "a duration must be finite and above 0"),  # 0 meant no target
    ("--slo-tpot-p99", "1e400s", "a duration must be finite and above 0"),
])
def test_lengths_and_durations_out_of_range(flag, value, words):
    line = _error("--model", "llama-3-8b", "--qps", "2", "--requests", "10", flag, value)
    assert line.startswith(f"accel-sim: error: {flag} ") and words in line, line
