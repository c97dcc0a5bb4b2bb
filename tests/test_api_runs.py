"""accel_sim.train, plan and serve give what the command line gives: the same JSON and the same text
from the same options, and the same refusals."""

from __future__ import annotations

import contextlib
import io
import json
import re

import pytest

import accel_sim
from accel_sim.cli.main import main


def cli(argv: list[str]) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(argv) == 0
    return out.getvalue()


def _no_clock(d):
    """A plan's JSON less its search's wall-clock seconds."""
    if isinstance(d, list):
        return [_no_clock(x) for x in d]
    return {k: v for k, v in d.items() if k != "search_s"}


TRAIN = dict(model="llama-3-8b", system="dgx_h100", gpus=16, tp=2, dp=8, sp=True, global_batch=64, microbatch=2,
             seq=4096, recompute="selective", stack="megatron-core")
TRAIN_ARGV = ["train", "--model", "llama-3-8b", "--system", "dgx_h100", "--gpus", "16", "--tp", "2", "--dp", "8", "--sp",
              "--global-batch", "64", "--microbatch", "2", "--seq", "4096", "--recompute", "selective",
              "--stack", "megatron-core"]


def test_train_gives_what_the_command_gives():
    run = accel_sim.train(**TRAIN)
    assert run.to_dict() == json.loads(cli(TRAIN_ARGV + ["--json"]))
    assert run.text() + "\n" == cli(TRAIN_ARGV)
    # The estimate is the core's: 64 sequences of 4,096 tokens in one step.
    assert run.estimate.tokens_per_s == pytest.approx(64 * 4096 / run.estimate.step_s)


def test_plan_gives_what_the_command_gives_for_one_run_and_a_sweep():
    options = dict(model="gpt3-1.3b", system="dgx_a100", gpus=8, seq=2048, global_batch=512, threads=1)
    argv = ["plan", "--model", "gpt3-1.3b", "--system", "dgx_a100", "--gpus", "8", "--seq", "2048", "--global-batch",
            "512", "--threads", "1", "--quiet"]
    run = accel_sim.plan(**options)
    assert _no_clock(run.to_dict()) == _no_clock(json.loads(cli(argv + ["--json"])))
    assert run.best is not None and run.best.estimate.step_s == run.runs[0][3].best[0].estimate.step_s
    # A list option takes a list: two GPU counts are a sweep, one search each.
    sweep = accel_sim.plan(**(options | {"gpus": [8, 16]}))
    assert [gpus for _, _, gpus, _, _ in sweep.runs] == [8, 16]
    assert _no_clock(sweep.to_dict()) == _no_clock(json.loads(cli(argv[:6] + ["8,16"] + argv[7:] + ["--json"])))


def test_serve_gives_what_the_command_gives():
    options = dict(model="llama-3-8b", device="a100", stack="vllm", qps=2, requests=100, input_len=256, output_len=64,
                   seed=3)
    argv = ["serve", "--model", "llama-3-8b", "--device", "a100", "--stack", "vllm", "--qps", "2", "--requests", "100",
            "--input-len", "256", "--output-len", "64", "--seed", "3", "--quiet"]
    run = accel_sim.serve(**options)
    assert json.loads(json.dumps(run.to_dict(), default=lambda v: None)) == json.loads(cli(argv + ["--json"]))
    assert run.text() + "\n" == cli(argv)
    assert run.result.completed == 100


def test_the_api_refuses_what_the_command_refuses():
    # An option the run would not use, as the flag: expert imbalance on a dense model.
    with pytest.raises(accel_sim.UsageError, match="--expert-imbalance applies to mixture-of-experts models"):
        accel_sim.train(**(TRAIN | {"expert_imbalance": 1.5}))
    # Out of range, a choice that is not one, an unknown option, a missing one, and the CLI's output flags.
    with pytest.raises(accel_sim.UsageError, match="--tp: expected a whole number from 1"):
        accel_sim.train(**(TRAIN | {"tp": 0}))
    with pytest.raises(accel_sim.UsageError, match="--recompute: 'some' is not one of"):
        accel_sim.train(**(TRAIN | {"recompute": "some"}))
    with pytest.raises(TypeError, match="unknown options tensor_parallel"):
        accel_sim.train(**(TRAIN | {"tensor_parallel": 2}))
    with pytest.raises(TypeError, match="train\\(\\) needs global_batch"):
        accel_sim.train(**{k: v for k, v in TRAIN.items() if k != "global_batch"})
    with pytest.raises(TypeError, match="json choose what the command line prints"):
        accel_sim.train(**(TRAIN | {"json": True}))
    # A configuration that does not fit is refused with its reason, as `train` refuses it.
    with pytest.raises(accel_sim.UsageError, match="infeasible"):
        accel_sim.train(**(TRAIN | {"model": "llama-3-70b", "tp": 1, "dp": 16, "sp": False, "recompute": "none"}))


def test_fit_and_kernel_give_what_the_commands_give():
    options = dict(model="llama-3-8b", devices="a100,h100", axis="batch", seq=2048)
    argv = ["fit", "--model", "llama-3-8b", "--devices", "a100,h100", "--axis", "batch", "--seq", "2048"]
    run = accel_sim.fit(**options)
    assert run.to_dict() == json.loads(cli(argv + ["--json"]))
    assert run.text() + "\n" == cli(argv)
    # A kernel: 2 x 4096^3 FLOPs of a square matmul, whatever its time.
    matmul = accel_sim.kernel("matmul", m=4096, n=4096, k=4096, device="h100")
    assert matmul.estimate.flops == 2 * 4096**3
    argv = ["kernel", "matmul", "--m", "4096", "--n", "4096", "--k", "4096", "--device", "h100"]
    assert matmul.to_dict() == json.loads(cli(argv + ["--json"]))
    assert matmul.text() + "\n" == cli(argv)
    # A collective on a system; an unknown kind is a TypeError naming the kinds.
    ring = accel_sim.kernel("allreduce", system="dgx_h100", gpus=8, bytes=1e9)
    assert ring.to_dict() == json.loads(cli(["kernel", "allreduce", "--system", "dgx_h100", "--gpus", "8", "--bytes",
                                             "1e9", "--json"]))
    with pytest.raises(TypeError, match="no command 'kernel conv'"):
        accel_sim.kernel("conv", device="h100")


def test_validate_gives_what_the_command_printed():
    from test_golden import HERE, masked

    run = accel_sim.validate()
    assert masked(run.text() + "\n") == masked((HERE / "outputs" / "validate-text.txt").read_text(encoding="utf-8"))
    assert run.to_dict()["training_runs_summary"]["rows"] == run.run_stats.rows > 0


def test_sweep_gives_what_the_command_gives():
    options = dict(model="llama-3-8b", batch=4, seq=1024, devices="h100", vary="memory_bandwidth_gbs=2000:4000:3")
    argv = ["sweep", "--model", "llama-3-8b", "--batch", "4", "--seq", "1024", "--devices", "h100", "--vary",
            "memory_bandwidth_gbs=2000:4000:3"]
    run = accel_sim.sweep(**options)
    assert run.to_dict() == json.loads(cli(argv + ["--json"]))
    assert run.text() + "\n" == cli(argv)
    assert [r["memory_bandwidth_gbs"] for r in run.rows] == [2000.0, 3000.0, 4000.0]


def test_python_values_the_command_line_could_not_hold_are_one_line_errors():
    # What a typo in Python looks like: each a UsageError naming the flag, never a binding's traceback.
    for bad, message in (({"tp": 2.5}, "--tp: expected a whole number, got 2.5"),
                         ({"sp": "yes"}, "--sp: expected True or False, got 'yes'"),
                         ({"seq": [1, 2]}, "--seq: expected one value, got [1, 2]"),
                         ({"tp": True}, "--tp: expected a whole number, got True")):
        with pytest.raises(accel_sim.UsageError, match=re.escape(message)):
            accel_sim.train(**(TRAIN | bad))
    with pytest.raises(accel_sim.UsageError, match="--gpus: expected whole numbers separated by commas"):
        accel_sim.plan(model="llama-3-8b", system="dgx_h100", gpus="8,x", seq=2048, global_batch=16)
