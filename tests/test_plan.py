"""`accel-sim plan` (the search over parallel layouts) and `train --trace`, as a user runs them."""

from __future__ import annotations

import json
from pathlib import Path

from conftest import run_cli

REPO = Path(__file__).resolve().parent.parent


def _plan(*args: str) -> dict:
    result = run_cli("plan", *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_plan_prints_the_fastest_configurations_and_train_agrees():
    d = _plan("--model", "llama-3-8b", "--system", "dgx-h100", "--gpus", "64", "--global-batch", "256", "--seq", "4096",
              "--top", "5")
    assert d["candidates"] >= d["evaluated"] >= d["feasible"] > 0
    assert sum(d["pruned"].values()) + d["evaluated"] == d["candidates"]
    steps = [c["step_s"] for c in d["best"]]
    assert steps == sorted(steps) and len(steps) == 5
    # The best layout, run through `train`, gives the same step.
    best = d["best"][0]
    l = best["layout"]  # noqa: E741
    args = ["train", "--model", "llama-3-8b", "--system", "dgx-h100", "--gpus", "64", "--global-batch", "256",
            "--seq", "4096", "--json", "--tp", str(l["tp"]), "--pp", str(l["pp"]), "--dp", str(l["dp"]),
            "--cp", str(l["cp"]), "--microbatch", str(l["micro_batch"]), "--virtual-stages", str(l["virtual_stages"]),
            "--zero", str(l["zero"]), "--recompute", l["recompute"], "--order", l["order"]]
    if l["sequence_parallel"]:
        args.append("--sp")
    train = run_cli(*args)
    assert train.returncode == 0, train.stderr
    assert json.loads(train.stdout)["step_s"] == best["step_s"]
    # Every configuration that fits is within the device's memory; the infeasible ones say why.
    assert all(c["memory_per_gpu_bytes"] <= 80 * 2**30 + 5 * 2**30 for c in d["best"])
    assert all("GB per GPU" in c["reason"] for c in d["best_infeasible"])


def test_plan_405b_searches_a_million_layouts_and_beats_metas_split():
    # Llama 3.1 405B on 8,192 H100s, 16M-token batches of 8,192-token sequences (2,048 of them).
    # Meta trained it with TP 8, PP 16, DP 64 (Llama 3 paper, sec. 3.3.2): the search's best must
    # be no slower than the best that split allows.
    full = _plan("--model", "llama-3.1-405b", "--system", "dgx-h100", "--gpus", "8192", "--global-batch-tokens", "16M",
                 "--seq", "8192", "--top", "3")
    assert full["global_batch"] == 2048
    assert full["candidates"] >= 1_000_000
    meta = _plan("--model", "llama-3.1-405b", "--system", "dgx-h100", "--gpus", "8192", "--global-batch-tokens", "16M",
                 "--seq", "8192", "--top", "1", "--tp", "8", "--pp", "16", "--cp", "1")
    assert meta["best"][0]["layout"]["dp"] == 64
    assert full["best"][0]["step_s"] <= meta["best"][0]["step_s"]


def test_plan_never_ranks_first_an_mfu_far_above_the_best_published_run_of_its_class(tmp_path):
    # The class: dense GPT-3 models of 175B and more on A100 SXM4 80GB under Megatron-LM as it ran
    # them (stack megatron-lm-2022). Its published runs are Korthikanti et al.'s iterations
    # (arXiv 2205.05198; validation/published.csv, the fit split of the training runs), each one's
    # MFU counted as accel-sim counts model FLOPs: the MFU `train` gives its layout, scaled by the
    # measured over the predicted tokens/s.
    from accel_sim import validation

    published = validation.load_training_runs("fit")
    assert {r["stack"] for r in published} == {"megatron-lm-2022"}

    def measured_mfu(row: dict) -> float:
        e = validation.predict_training_run(row)
        return e.mfu * float(row["measured_tokens_per_s_per_gpu"]) / (e.tokens_per_s / int(row["gpus"]))

    best = max(published, key=measured_mfu)
    best_published = measured_mfu(best)
    # The abstract's own figure for its 530B run on 2,240 GPUs is 54.2% MFU; its 1T run on 512 is
    # the best of the eight here.
    assert best["model"] == "gpt3-1t" and 0.50 < best_published < 0.60
    # GPT-3 175B as those runs trained it (the 175B row's padded vocabulary and dropout) on 1,024
    # A100s, 1,536 sequences a step (Narayanan et al. 2021's batch): `plan`'s first configuration
    # may beat Korthikanti's own layouts (fewer TP ranks, interleaving, a big batch), but by no
    # more than a few points (5).
    row = next(r for r in published if r["model"] == "gpt3-175b" and '"n_embd"' not in r["overrides"])
    config = json.loads((REPO / "python" / "accel_sim" / "data" / "models" / "gpt3-175b.json").read_text())
    config.update(json.loads(row["overrides"]))
    path = tmp_path / "gpt3-175b-megatron.json"
    path.write_text(json.dumps(config))
    d = _plan("--model", str(path), "--system", "dgx-a100", "--seq", "2048", "--stack", "megatron-lm-2022",
              "--precision", "fp16-mixed", "--gpus", "1024", "--global-batch", "1536", "--top", "1")
    assert d["stack"]["id"] == "megatron-lm-2022"
    assert best_published - 0.05 < d["best"][0]["mfu"] <= best_published + 0.05


def test_plan_sweep_plots_time_to_train_and_mfu(tmp_path):
    out = tmp_path / "sweep.svg"
    result = run_cli("plan", "--model", "llama-3-8b", "--system", "dgx-h100,dgx-a100", "--gpus", "8,16,32",
                     "--global-batch", "128", "--seq", "2048", "--pp", "1", "--plot", str(out), "--quiet")
    assert result.returncode == 0, result.stderr
    assert "dgx_a100" in result.stdout and "dgx_h100" in result.stdout
    svg = out.read_text()
    # Two panels (days, MFU), one line per system in each, a point per GPU count.
    assert svg.count("<polyline") == 4
    assert svg.count("<circle") == 2 * 2 * 3
    # Time to train falls as GPUs are added.
    d = _plan("--model", "llama-3-8b", "--system", "dgx-h100", "--gpus", "8,32", "--global-batch", "128",
              "--seq", "2048", "--pp", "1")
    assert d[1]["best"][0]["tokens_per_s"] > d[0]["best"][0]["tokens_per_s"]


def test_plan_and_train_usage_errors_exit_2():
    base = ["--model", "llama-3-8b", "--system", "dgx-h100", "--seq", "4096"]
    for args in (["plan", *base, "--gpus", "64", "--global-batch", "64", "--plot", "x.svg"],   # no sweep to plot
                 ["plan", *base, "--gpus", "64", "--global-batch-tokens", "1000"],             # not whole sequences
                 ["plan", *base, "--gpus", "64", "--global-batch", "64", "--zero", "5"],
                 ["plan", *base, "--gpus", "64", "--global-batch", "64", "--recompute", "some"],
                 ["plan", *base, "--gpus", "64", "--global-batch", "64", "--order", "tp-dp"],
                 ["plan", "--model", "llama-3-8b", "--system", "no-such", "--seq", "4096", "--gpus", "8", "--global-batch", "8"],
                 ["train", *base, "--gpus", "8", "--dp", "8", "--global-batch", "8", "--order", "tp-tp-dp-pp-ep"],
                 ["train", *base, "--gpus", "8", "--dp", "8", "--global-batch", "8", "--scaleup-domain", "0"],
                 ["train", *base, "--gpus", "8", "--dp", "8", "--global-batch", "8", "--trace", "/nonexistent/t.json"],
                 ["plan", "--model", "llama-3-8b", "--system", ",", "--seq", "4096", "--gpus", "8", "--global-batch", "8"],
                 ["plan", *base, "--gpus", "8", "--global-batch", "8", "--threads", "-1"],
                 ["plan", *base, "--gpus", "8", "--global-batch", "8", "--threads", "1025"],
                 ["plan", *base, "--gpus", "8,16", "--global-batch", "8", "--plot", "/nonexistent/x.svg"]):
        result = run_cli(*args)
        assert result.returncode == 2, (args, result.stdout, result.stderr)
        assert result.stderr.strip().count("\n") == 0, result.stderr
    # A count beyond the core's int64: argparse's usage and error, not a binding's type dump.
    result = run_cli("plan", *base, "--gpus", str(2**63), "--global-batch", "8")
    assert result.returncode == 2 and "expected whole numbers from 1 to 9,223,372,036,854,775,807" in result.stderr
    assert "Traceback" not in result.stderr


def test_scaleup_domain_override_changes_tensor_parallel_time():
    # TP 8 inside one 8-GPU NVLink domain, then with 4-GPU domains it spans two and goes over the NICs.
    args = ["train", "--model", "llama-3-70b", "--system", "dgx-h100", "--gpus", "64", "--tp", "8", "--pp", "2",
            "--dp", "4", "--global-batch", "64", "--seq", "4096", "--sp", "--recompute", "full", "--json"]
    eight = json.loads(run_cli(*args).stdout)
    four = run_cli(*args, "--scaleup-domain", "4")
    assert four.returncode == 0, four.stderr
    assert json.loads(four.stdout)["breakdown_s"]["of_which_tp_comm"] > 1.5 * eight["breakdown_s"]["of_which_tp_comm"]


def test_train_trace_is_a_valid_chrome_trace_of_the_step(tmp_path):
    trace = tmp_path / "step.json"
    result = run_cli("train", "--model", "llama-3-8b", "--system", "dgx-h100", "--gpus", "16", "--tp", "2", "--pp", "4",
                     "--dp", "2", "--sp", "--global-batch", "16", "--seq", "2048", "--virtual-stages", "2",
                     "--trace", str(trace), "--json")
    assert result.returncode == 0, result.stderr
    step = json.loads(result.stdout)
    doc = json.loads(trace.read_text())
    events = doc["traceEvents"]
    assert all({"ph", "pid", "tid", "name"} <= e.keys() for e in events)
    spans = [e for e in events if e["ph"] == "X"]
    assert all(e["ts"] >= 0 and e["dur"] >= 0 for e in spans)
    threads = {e["tid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "thread_name"}
    assert sum(1 for name in threads.values() if name.startswith("stage ") and "→" not in name) == 4
    # Each stage runs every micro-batch's forward and backward: 8 micro-batches x the stage's time.
    m = step["micro_batches"]
    per_mb = step["breakdown_s"]["compute"] / m
    for tid, name in threads.items():
        if name.startswith("stage ") and "→" not in name:
            busy = sum(e["dur"] for e in spans if e["tid"] == tid) / 1e6
            assert abs(busy - m * per_mb) < 1e-6 * busy
    # The trace ends with the exposed data-parallel communication and the optimizer.
    end = max(e["ts"] + e["dur"] for e in spans) / 1e6
    assert end >= step["step_s"] * 0.99


def test_gpipe_and_expert_imbalance_options():
    base = ["train", "--model", "llama-3-8b", "--system", "dgx-h100", "--gpus", "8", "--pp", "4", "--dp", "2",
            "--global-batch", "16", "--seq", "2048", "--json"]
    f1b = json.loads(run_cli(*base).stdout)
    gpipe = json.loads(run_cli(*base, "--schedule", "gpipe").stdout)
    assert gpipe["step_s"] == f1b["step_s"]  # the same bubble
    assert gpipe["activation_bytes"] > f1b["activation_bytes"]  # 8 micro-batches in flight, not 4
    moe = ["train", "--model", "mixtral-8x7b", "--system", "dgx-h100", "--gpus", "16", "--tp", "2", "--dp", "8",
           "--ep", "8", "--sp", "--global-batch", "16", "--seq", "2048", "--recompute", "full", "--json"]
    even = json.loads(run_cli(*moe).stdout)
    skewed = json.loads(run_cli(*moe, "--expert-imbalance", "1.5").stdout)
    assert skewed["step_s"] > even["step_s"]
    assert run_cli(*moe, "--expert-imbalance", "0.5").returncode == 2
