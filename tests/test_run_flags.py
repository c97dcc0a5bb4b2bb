"""Every flag of train / plan / serve / kernel / calibrate / sweep --vary either changes the run or
is refused (exit 2, one line saying why), and every numeric flag takes only the numbers it can
physically mean (one line naming the flag, never a traceback from the core's argument conversion
nor an inf or NaN in the output)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from accel_sim.cli.main import main
from accel_sim.io.device_file import builtin_device_files

TRAIN = ["train", "--model", "llama-3-8b", "--system", "dgx_h100", "--global-batch", "8", "--seq", "4096"]
SERVE = ["serve", "--model", "llama-3-8b", "--qps", "4", "--requests", "20", "--input-len", "500", "--output-len", "50"]
PLAN = ["plan", "--model", "llama-3-8b", "--system", "dgx_h100", "--gpus", "8", "--global-batch", "8", "--seq", "4096"]
SWEEP = ["sweep", "--model", "llama-3-8b"]
ATTENTION = ["kernel", "attention", "--heads", "8", "--seq-q", "512", "--head-dim", "64"]
# Traces written by the test: timestamps half a second apart, all at 0, and lengths only.
TIMED, AT_ONCE, PLAIN = "<timed trace>", "<trace at once>", "<plain trace>"
# A device file the test writes: the shipped H100 SXM as `acme_h1`.
DEVICE = "<device file>"

REFUSED = [
    # train: a layout without data, pipeline or sequence parallelism, a dense model, the roofline.
    (TRAIN + ["--gpus", "8", "--tp", "8", "--zero", "3"], "with --dp 1 and --cp 1 there is nothing to shard"),
    (TRAIN + ["--gpus", "8", "--tp", "8", "--no-overlap"], "context-parallel ranks); with --dp 1 and --cp 1 there is none"),
    (TRAIN + ["--gpus", "8", "--tp", "8", "--schedule", "gpipe"], "with --pp 1 there is no pipeline"),
    (TRAIN + ["--gpus", "8", "--tp", "8", "--no-tp-overlap"], "it needs --tp above 1 and --sp"),
    (TRAIN + ["--gpus", "8", "--dp", "8", "--seq", "1024", "--expert-imbalance", "2"],
     "applies to mixture-of-experts models; llama-3-8b is dense"),
    (["train", "--model", "mixtral-8x7b", "--system", "dgx_h100", "--global-batch", "16", "--seq", "1024", "--gpus", "16",
      "--tp", "8", "--dp", "2", "--expert-imbalance", "2"], "with --ep 1 every rank runs every expert"),
    (TRAIN + ["--gpus", "8", "--dp", "8", "--seq", "1024", "--cost-model", "roofline", "--attention-impl", "flash3"],
     "the roofline costs every kernel alike"),
    # train and plan: the device of the run and its clock.
    (TRAIN + ["--gpus", "8", "--dp", "8", "--seq", "1024", "--cost-model", "roofline", "--clock-mhz", "1000"],
     "--clock-mhz applies to the kernel cost model; the roofline has no clock"),
    (TRAIN + ["--gpus", "8", "--dp", "8", "--seq", "1024", "--device", "h100_nvl", "--clock-mhz", "1000"],
     "h100_nvl's file gives no clock_mhz"),
    (TRAIN + ["--gpus", "8", "--dp", "8", "--seq", "1024", "--device-file", DEVICE],
     "gives acme_h1, which this run does not use: its GPUs are h100_sxm (the device of dgx_h100); --device picks another"),
    (TRAIN + ["--gpus", "8", "--dp", "8", "--seq", "1024", "--device", "a100", "--device-file", DEVICE],
     "gives acme_h1, which this run does not use: its GPUs are a100_80gb (--device)"),
    (PLAN + ["--cost-model", "roofline", "--clock-mhz", "1000"], "the roofline has no clock"),
    (PLAN + ["--device-file", DEVICE], "gives acme_h1, which this run does not use"),
    # plan
    (PLAN + ["--json", "--train-tokens", "15T"], "--train-tokens sets the days to train in the text report"),
    (PLAN + ["--expert-imbalance", "2"], "llama-3-8b is dense"),
    # serve: the deployment.
    (SERVE + ["--system", "dgx_h100"], "this run's replicas are one GPU each"),
    (SERVE + ["--router", "least-outstanding"], "this run has one (--replicas 1, --pp 1)"),
    (SERVE + ["--replicas", "4", "--disaggregate", "2", "--scheduler", "orca"], "orca does not run under --disaggregate"),
    (SERVE + ["--chunk", "1024"], "vllm does not chunk prompts"),
    (SERVE + ["--scheduler", "sarathi", "--max-batched-tokens", "100"], "sarathi steps (and --disaggregate prefill steps) take --chunk tokens"),
    (SERVE + ["--scheduler", "static", "--max-batched-tokens", "100"], "static batches whole prompts"),
    (SERVE + ["--scheduler", "orca", "--watermark", "0.3"], "orca reserves each request's whole prompt and output"),
    (SERVE + ["--scheduler", "static", "--prefix-caching"], "static reserves each request's whole prompt and output"),
    (SERVE + ["--cost-model", "roofline", "--attention-impl", "flash3"], "the roofline costs every kernel alike"),
    (SERVE + ["--trace-steps", "5"], "give --trace FILE"),
    (SERVE + ["--cost-model", "roofline", "--clock-mhz", "1000"], "the roofline has no clock"),
    (SERVE + ["--devices", "h100,h100_nvl", "--clock-mhz", "1000"], "h100_nvl's file gives no clock_mhz"),
    (SERVE + ["--device-file", DEVICE], "gives acme_h1, which this run does not use: its GPUs are h100_sxm"),
    # serve: the workload.
    (SERVE + ["--prefix-caching"], "generated requests share no prefix"),
    (SERVE + ["--burstiness", "3"], "poisson arrivals have none"),
    (SERVE + ["--arrival", "constant", "--seed", "5"], "constant arrivals of fixed lengths draw nothing"),
    (SERVE + ["--find-max-qps", "--slo-ttft-p99", "200ms"], "--qps is not used: --find-max-qps searches the rate"),
    (["serve", "--model", "llama-3-8b", "--workload", TIMED, "--requests", "5"], "every request of the --workload trace runs"),
    (["serve", "--model", "llama-3-8b", "--workload", TIMED, "--input-len", "100"], "the --workload trace gives every request's lengths"),
    (["serve", "--model", "llama-3-8b", "--workload", TIMED, "--lengths-from", PLAIN], "the --workload trace gives every request's lengths"),
    (["serve", "--model", "llama-3-8b", "--workload", TIMED, "--seed", "3"], "timestamps are the arrivals"),
    (["serve", "--model", "llama-3-8b", "--workload", TIMED, "--arrival", "gamma"], "timestamps are the arrivals"),
    (["serve", "--model", "llama-3-8b", "--workload", PLAIN, "--qps", "2", "--arrival", "constant", "--seed", "3"],
     "constant arrivals of"),
    (["serve", "--model", "llama-3-8b", "--workload", TIMED, "--prefix-caching"], "has none"),
    (["serve", "--model", "llama-3-8b", "--workload", AT_ONCE, "--qps", "5"], "requests all arrive at once"),
    (["serve", "--model", "llama-3-8b", "--qps", "2", "--lengths-from", PLAIN, "--output-len", "100"],
     "drawn from log-normals fitted to --lengths-from"),
    # kernel and calibrate
    (ATTENTION + ["--forward"], "without --backward the forward is what is timed"),
    (["kernel", "matmul", "--m", "64", "--n", "64", "--k", "64", "--cost-model", "roofline", "--clock-mhz", "1000"],
     "the roofline has no clock"),
    (["calibrate", "--device", "h100", "--data", "--out-dir", "elsewhere"], "--data fits from measured kernels"),
    # sweep --vary
    (SWEEP + ["--vary", "batch=1,2", "--batch", "8"], "--batch is the parameter varied (--vary batch=1,2)"),
    (SWEEP + ["--phase", "decode", "--vary", "context=128,256", "--context", "512"], "--context is the parameter varied"),
    (SWEEP + ["--vary", "peak_tflops=500,1000", "--workers", "2"], "--workers applies to a grid sweep (--grid FILE)"),
    (SWEEP + ["--vary", "peak_tflops=500,1000", "--restart"], "--restart applies to a grid sweep"),
    (SWEEP + ["--vary", "peak_tflops=500,1000", "--metric", "mfu"], "--metric picks what --plot draws"),
    (SWEEP + ["--vary", "clock_mhz=1000,1500", "--cost-model", "roofline"], "the roofline has no clock"),
]


def _traces(tmp_path: Path) -> dict[str, str]:
    """The files that the tokens TIMED, AT_ONCE, PLAIN and DEVICE in the argument lists stand for."""
    paths = {TIMED: tmp_path / "timed.jsonl", AT_ONCE: tmp_path / "at_once.jsonl", PLAIN: tmp_path / "plain.jsonl",
             DEVICE: tmp_path / "acme_h1.yaml"}
    stock = next(p for p in builtin_device_files() if p.stem == "h100_sxm").read_text()
    paths[DEVICE].write_text(re.sub(r"(?m)^aliases: .*$", "aliases: []", stock.replace("id: h100_sxm", "id: acme_h1")))
    paths[TIMED].write_text("".join(json.dumps({"arrival_s": 0.5 * i, "input_len": 100 + i, "output_len": 10}) + "\n"
                                    for i in range(8)))
    paths[AT_ONCE].write_text("".join(json.dumps({"arrival_s": 3.0, "input_len": 100 + i, "output_len": 10}) + "\n"
                                      for i in range(8)))
    paths[PLAIN].write_text("".join(json.dumps({"input_len": 100 + 50 * i, "output_len": 10 + i}) + "\n"
                                    for i in range(8)))
    return {k: str(v) for k, v in paths.items()}


def _one_line(capsys) -> str:
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


@pytest.mark.parametrize("argv,message", REFUSED, ids=[" ".join(a[:1] + a[-4:]) for a, _ in REFUSED])
def test_inapplicable_flags_are_refused(argv, message, tmp_path, capsys):
    traces = _traces(tmp_path)
    argv = [traces.get(a, a) for a in argv]
    assert main([*argv, "--quiet"] if argv[0] in ("serve", "plan", "sweep") else argv) == 2
    line = _one_line(capsys)
    assert line.startswith("accel-sim: error: ") and message in line, line


# ---- flags that do apply -------------------------------------------------------------------------

def _json(argv: list[str], capsys) -> dict:
    assert main([*argv, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def test_sweep_of_tensor_parallelism_times_its_collectives_on_the_system(capsys):
    # The --system was refused as if the run had no collectives, because --tp itself is 1.
    d = _json(SWEEP + ["--vary", "tp=1,2", "--system", "dgx_h100", "--quiet"], capsys)
    comm = {p["tp"]: p["communication_time_s"] for p in d["points"]}
    assert comm[1] == 0 and comm[2] > 0
    alone = _json(SWEEP + ["--vary", "tp=1,2", "--quiet"], capsys)
    assert alone["points"][1]["communication_time_s"] == 0


def test_slo_targets_set_the_goodput_without_a_rate_search(capsys):
    loose = _json(SERVE + ["--slo-ttft-p99", "10s", "--quiet"], capsys)["results"][0]
    tight = _json(SERVE + ["--slo-ttft-p99", "1us", "--quiet"], capsys)["results"][0]
    # A 500-token prefill of an 8B model takes milliseconds: every request meets 10 s, none 1 us.
    assert loose["slo_attainment"] == 1.0 and tight["slo_attainment"] == 0.0


def test_replicas_apply_to_each_device_of_a_capacity_table(capsys):
    d = _json(SERVE + ["--devices", "a100,h100", "--replicas", "2", "--quiet"], capsys)
    assert [r["gpus"] for r in d["results"]] == [2, 2]


def test_causal_masking_halves_the_backward_kernels_work(capsys):
    full = _json(ATTENTION + ["--backward"], capsys)
    causal = _json(ATTENTION + ["--backward", "--causal"], capsys)
    # A causal 512 x 512 attention computes the 512 x 513 / 2 pairs on or below the diagonal.
    assert causal["flops"] / full["flops"] == pytest.approx(513 / 1024, rel=0.02)


# ---- numbers -------------------------------------------------------------------------------------

BIG = str(2**64)  # beyond int64 (the core's counts) and uint64 (its seed)

NUMBERS = [
    (SERVE + ["--seed", "-1"], "--seed"),
    (SERVE + ["--seed", BIG], "--seed"),
    (SERVE + ["--qps", "inf"], "--qps"),
    (SERVE + ["--requests", BIG], "--requests"),
    (SERVE + ["--arrival", "gamma", "--burstiness", "inf"], "--burstiness"),  # the gamma sampler never returned
    (SERVE + ["--max-seqs", BIG], "--max-seqs"),
    (SERVE + ["--replicas", BIG], "--replicas"),
    (SERVE + ["--trace", "t.json", "--trace-steps", "-1"], "--trace-steps"),
    (TRAIN + ["--gpus", "8", "--dp", "8", "--seq", BIG], "--seq"),
    (TRAIN + ["--gpus", "8", "--dp", "8", "--global-batch", BIG], "--global-batch"),
    (TRAIN + ["--gpus", BIG, "--dp", "8"], "--gpus"),
    (TRAIN + ["--gpus", "8", "--dp", "8", "--clock-mhz", "1e-300"], "--clock-mhz"),  # a kernel's time past 1e308 s
    (PLAN + ["--clock-mhz", "inf"], "--clock-mhz"),
    (SERVE + ["--clock-mhz", "0"], "--clock-mhz"),
    (PLAN + ["--top", BIG], "--top"),
    (PLAN + ["--threads", "1025"], "--threads"),  # the core's kMaxPlanThreads is 1,024
    (PLAN + ["--threads", "-1"], "--threads"),
    (["sweep", "--grid", "g.yaml", "--out", "o.csv", "--workers", "-1"], "--workers"),
    (["sweep", "--grid", "g.yaml", "--out", "o.csv", "--batch-size", "0"], "--batch-size"),
    (SERVE + ["--replicas", "2", "--disaggregate", "-1"], "--disaggregate"),
    (PLAN[:5] + ["--gpus", BIG] + PLAN[7:], "--gpus"),
    (PLAN[:7] + ["--global-batch", BIG] + PLAN[9:], "--global-batch"),
    (PLAN[:7] + ["--global-batch-tokens", "9" * 400] + PLAN[9:], "--global-batch-tokens"),
    (PLAN + ["--train-tokens", "9" * 400], "--train-tokens"),
    (["kernel", "matmul", "--m", BIG, "--n", "4", "--k", "4"], "--m"),
    (["kernel", "matmul", "--m", "4", "--n", "4", "--k", "4", "--clock-mhz", "nan"], "--clock-mhz"),
    (["kernel", "matmul", "--m", "4", "--n", "4", "--k", "4", "--clock-mhz", "inf"], "--clock-mhz"),
    (ATTENTION + ["--kv-heads", "0"], "--kv-heads"),  # 0 fell back to --heads
    (["kernel", "memory", "--op", "relu", "--elements", "inf"], "--elements"),
    (["kernel", "memory", "--op", "relu", "--elements", "1.5"], "--elements"),
    (["kernel", "allreduce", "--bytes", "1G", "--gpus", BIG], "--gpus"),
    (["kernel", "allreduce", "--bytes", "1G", "--gpus", "8", "--ranks-per-domain", "-1"], "--ranks-per-domain"),
    (["kernel", "allreduce", "--bytes", "1e400", "--gpus", "8"], "--bytes"),
    (["simulate", "--model", "llama-3-8b", "--batch", BIG], "--batch"),
    (["simulate", "--model", "llama-3-8b", "--clock-mhz", "nan"], "--clock-mhz"),
    (["compare", "--model", "llama-3-8b", "--devices", "a100,h100", "--tp", BIG], "--tp"),
    (["fit", "--model", "gpt2", "--devices", "h100", "--axis", "batch", "--seq", "128", "--max", BIG], "--max"),
]


@pytest.mark.parametrize("argv,flag", NUMBERS, ids=[" ".join(a[:1] + [x[:24] for x in a[-2:]]) for a, _ in NUMBERS])
def test_numbers_out_of_range_name_the_flag(argv, flag, capsys):
    with pytest.raises(SystemExit) as done:
        main(argv)
    assert done.value.code == 2
    line = _one_line(capsys)
    assert f"error: argument {flag}: expected " in line, line


def test_disaggregate_0_is_its_default_no_prefill_replicas(capsys):
    """--disaggregate takes 0, its default (every replica runs prefill and decode), as typed."""
    assert _json(SERVE + ["--disaggregate", "0", "--quiet"], capsys)["results"] == \
        _json(SERVE + ["--quiet"], capsys)["results"]


# ---- one rule, one message ---------------------------------------------------------------------

SAME_RULE = {
    "--clock-mhz applies to the kernel cost model; the roofline has no clock (--cost-model kernel)": [
        ["simulate", "--model", "llama-3-8b", "--cost-model", "roofline", "--clock-mhz", "1000"],
        ["kernel", "matmul", "--m", "64", "--n", "64", "--k", "64", "--cost-model", "roofline", "--clock-mhz", "1000"],
        TRAIN + ["--gpus", "8", "--dp", "8", "--seq", "1024", "--cost-model", "roofline", "--clock-mhz", "1000"],
        PLAN + ["--cost-model", "roofline", "--clock-mhz", "1000", "--quiet"],
        SERVE + ["--cost-model", "roofline", "--clock-mhz", "1000", "--quiet"],
    ],
    "--attention-impl picks the attention kernel the kernel cost model times; the roofline costs every kernel alike "
    "(eager, which builds the unfused attention core, is taken)": [
        ["simulate", "--model", "llama-3-8b", "--cost-model", "roofline", "--attention-impl", "flash3"],
        TRAIN + ["--gpus", "8", "--dp", "8", "--seq", "1024", "--cost-model", "roofline", "--attention-impl", "flash3"],
        PLAN + ["--cost-model", "roofline", "--attention-impl", "flash3", "--quiet"],
    ],
    "--phase decode and --train ask for different runs; give one": [
        ["simulate", "--model", "llama-3-8b", "--train", "--phase", "decode"],
        ["fit", "--model", "gpt2", "--devices", "h100", "--axis", "batch", "--train", "--phase", "decode"],
    ],
}


@pytest.mark.parametrize("message", SAME_RULE, ids=[m.split(";")[0][:40] for m in SAME_RULE])
def test_a_rule_of_several_commands_says_the_same_on_each(message, capsys):
    for argv in SAME_RULE[message]:
        assert main(argv) == 2, argv
        assert _one_line(capsys) == f"accel-sim: error: {message}", argv
