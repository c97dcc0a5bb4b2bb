"""Every flag of simulate / compare / check / fit either changes the run or is refused (exit 2,
one line saying why): a script's example inputs are resized by --batch and --seq, and flags that
only a --model graph, a training step, the kernel cost model or --json output use are refused
elsewhere instead of being ignored."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from accel_sim.cli.main import main
from conftest import REPO, mlp_graph

BLOCK = str(REPO / "examples" / "transformer_block.py")  # batch 8, seq 512, d_model 1024, fp32


def _json(*argv: str) -> dict:
    done = subprocess.run([sys.executable, "-m", "accel_sim.cli.main", *argv, "--json", "--quiet"],
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _block_gemm_flops(batch: int, seq: int, d: int = 1024) -> float:
    """The block's four linears (addmm): qkv (d -> 3d), proj (d -> d), fc1 (d -> 4d), fc2 (4d -> d),
    2 FLOPs per multiply-add over batch x seq tokens, 2 * B * S * d^2 * (3 + 1 + 4 + 4), plus one
    FLOP per output for the bias, B * S * d * (3 + 1 + 4 + 1)."""
    return 2.0 * batch * seq * d * d * 12 + batch * seq * d * 9


@pytest.mark.torch
def test_script_batch_and_seq_resize_the_example_inputs():
    own = _json("simulate", BLOCK, "--device", "h100")
    big = _json("simulate", BLOCK, "--device", "h100", "--batch", "64", "--seq", "256")

    def gemm_flops(d: dict) -> float:
        return sum(op["flops"] for op in d["ops"] if op["op"] in ("addmm", "mm"))

    assert gemm_flops(own) == _block_gemm_flops(8, 512)
    assert gemm_flops(big) == _block_gemm_flops(64, 256)
    assert big["capture"]["inputs_resized"] == {"batch": [8, 64], "seq": [512, 256]}
    # Every op of a forward pass works per token: 64 x 256 tokens are 4x the script's 8 x 512
    # (the causal attention's pairs grow with seq^2: 64 x 256^2 is 2x 8 x 512^2).
    assert big["latency_s"] > 2 * own["latency_s"]


@pytest.mark.torch
def test_script_seq_beyond_the_models_positions_is_refused():
    done = subprocess.run([sys.executable, "-m", "accel_sim.cli.main", "simulate", str(REPO / "examples" / "gpt2.py"),
                           "--seq", "1025", "--quiet"], capture_output=True, text=True, timeout=600)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"accel-sim: error: {REPO / 'examples' / 'gpt2.py'}: --seq 1025 is beyond the model's 1024 positions "
        "(its config's max_position_embeddings)"]


TOKEN_SCRIPT = ("import torch\n\n\ndef get_model():\n"
                "    return torch.nn.Embedding(100, 16), torch.zeros(2, 8, dtype=torch.long)\n")


@pytest.mark.torch
def test_resized_inputs_hold_no_bytes():
    # Capture reads shapes only: a batch of 2^40 sequences of 8 token ids (2^43 int64s, 64 TiB)
    # is resized without allocating them.
    import torch

    from accel_sim.capture.script import resize_inputs

    resized = resize_inputs(torch.nn.Embedding(100, 16), (torch.zeros(2, 8, dtype=torch.long),), "batch", 2**40, "s.py")
    assert resized[0].is_meta and resized[0].shape == (2**40, 8) and resized[0].dtype == torch.long


@pytest.mark.torch
@pytest.mark.parametrize("argv,message", [
    # 2^63 - 1 sequences of 8 int64 ids: more bytes than an int64 counts.
    (["simulate", "--batch", str(2**63 - 1)], "--batch 9223372036854775807: an example input of shape "
                                               "[9223372036854775807, 8] (int64) holds more bytes"),
    (["fit", "--axis", "batch", "--devices", "h100", "--seq", str(2**63 - 1)], "--seq 9223372036854775807: an "
                                                                                "example input of shape [2, "),
])
def test_a_resize_beyond_a_tensors_size_is_one_line(tmp_path, argv, message, capsys):
    script = tmp_path / "tokens.py"
    script.write_text(TOKEN_SCRIPT)
    assert main([argv[0], str(script), *argv[1:], "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


@pytest.mark.torch
@pytest.mark.parametrize("written,checked,differs", [
    # A batch of 4 against the script's own 2 sequences: half the memory passed as a gain.
    (["--batch", "4"], [], "--batch 4 there, the script's own batch here"),
    ([], ["--seq", "16"], "the script's own seq there, --seq 16 here"),
    ([], ["--dtype", "bf16"], "dtype fp32 there, dtype bf16 here"),
    ([], ["--train"], "a forward there, a training step (optimizer adamw (fused), precision fp32, gradient "
                      "accumulation false) here"),
])
def test_check_compares_a_script_only_with_a_baseline_of_the_same_run(tmp_path, written, checked, differs, capsys):
    script, baseline = tmp_path / "tokens.py", tmp_path / "baseline.json"
    script.write_text(TOKEN_SCRIPT)
    check = ["check", str(script), "--device", "h100", "--baseline", str(baseline), "--quiet"]
    assert main([*check, *written, "--write-baseline"]) == 0
    assert main([*check, *written]) == 0
    capsys.readouterr()
    assert main([*check, *checked]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"accel-sim: error: {baseline} was written for another run: {differs}; check the run it was written for, "
        "or write it again with --write-baseline"]


@pytest.mark.parametrize("checked,differs", [
    (["--seq", "256"], "seq 128 there, seq 256 here"),
    (["--seq", "128", "--phase", "train"], "phase prefill there, phase train here"),
    (["--seq", "128", "--dtype", "bf16"], "dtype fp32 there, dtype bf16 here"),
    (["--seq", "128", "--tp", "2"], "tensor_parallel 1 there, tensor_parallel 2 here"),
])
def test_check_compares_a_model_only_with_a_baseline_of_the_same_run(tmp_path, checked, differs, capsys):
    baseline = tmp_path / "baseline.json"
    check = ["check", "--model", "gpt2", "--device", "h100", "--baseline", str(baseline)]
    assert main([*check, "--seq", "128", "--write-baseline"]) == 0
    capsys.readouterr()
    assert main([*check, *checked]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"was written for another run: {differs};" in err[0], err


REFUSED = [
    # A script runs the shapes and ops its own code makes.
    ([BLOCK, "--tp", "2"], "--tp applies to a graph built with --model NAME"),
    ([BLOCK, "--kv-dtype", "fp8"], "--kv-dtype applies to a graph built with --model NAME"),
    ([BLOCK, "--weight-dtype", "int4"], "--weight-dtype applies to a graph built with --model NAME"),
    ([BLOCK, "--context", "100"], "--context applies to a graph built with --model NAME"),
    ([BLOCK, "--kernels", "hf-eager"], "--kernels applies to a graph built with --model NAME"),
    ([BLOCK, "--phase", "train"], "--phase applies to --model; a script's training step is --train"),
    ([BLOCK, "--train", "--no-master-weights"], "--no-master-weights applies to a graph built with --model NAME"),
    # Training-only flags outside a training step.
    ([BLOCK, "--optimizer", "sgd"], "--optimizer applies to a training step"),
    (["--model", "llama-3-8b", "--recompute", "full"], "--recompute applies to a training step"),
    (["--model", "llama-3-8b", "--grad-accum", "4"], "--grad-accum applies to a training step"),
    # --model: flags of another phase, a dense model, no collectives.
    (["--model", "llama-3-8b", "--phase", "decode", "--seq", "4096"], "--seq applies to prefill and training"),
    (["--model", "llama-3-8b", "--context", "4096"], "--context applies to --phase decode"),
    (["--model", "llama-3-8b", "--phase", "train", "--kv-dtype", "fp8"], "a training step keeps no KV cache"),
    (["--model", "llama-3-8b", "--moe-impl", "sequential"], "--moe-impl applies to mixture-of-experts models"),
    (["--model", "llama-3-8b", "--system", "dgx-h100"], "--system times the collectives of a run with --tp"),
    (["--model", "llama-3-8b", "--train", "--phase", "decode"], "--phase decode and --train ask for different runs"),
    (["--model", "vit-era5", "--seq", "512"], "--seq does not apply to vit-era5"),
    (["--model", "llama-3-8b", "--tf32"], "this run's model is bf16"),
    # Cost-model and output flags.
    (["--model", "llama-3-8b", "--cost-model", "roofline", "--clock-mhz", "1000"], "the roofline has no clock"),
    (["--model", "llama-3-8b", "--cost-model", "roofline", "--attention-impl", "flash3"], "the roofline costs every kernel alike"),
    (["--model", "llama-3-8b", "--no-ops"], "--no-ops applies to --json output"),
    (["--model", "llama-3-8b", "--json", "--top", "3"], "--top sets the rows of the text tables"),
    (["--model", "llama-3-8b", "--timeout", "5"], "--timeout bounds a script's import"),
]


@pytest.mark.parametrize("argv,message", REFUSED, ids=[" ".join(a[1:] if a[0] == BLOCK else a) for a, _ in REFUSED])
def test_inapplicable_flags_are_refused(argv, message, capsys):
    assert main(["simulate", *argv, "--device", "h100", "--quiet"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


def test_saved_graph_refuses_capture_time_flags(tmp_path, capsys):
    path = tmp_path / "mlp.json"
    path.write_text(json.dumps(mlp_graph()))
    for flag in (["--batch", "4"], ["--seq", "128"], ["--dtype", "bf16"], ["--train"], ["--tp", "2"]):
        assert main(["compare", str(path), "--devices", "a100,h100", *flag]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"accel-sim: error: {flag[0]} "), err


@pytest.mark.parametrize("argv,message", [
    (["--model", "gpt2", "--axis", "batch", "--batch", "4"], "--batch is the axis searched"),
    (["--model", "gpt2", "--axis", "seq", "--optimizer", "sgd"], "--optimizer applies to a training step"),
    (["--model", "gpt2", "--axis", "seq", "--attention-impl", "flash3"], "the fused kernels keep the same memory"),
    ([BLOCK, "--axis", "batch", "--tp", "2"], "--tp applies to a graph built with --model NAME"),
    ([BLOCK, "--axis", "batch", "--kernels", "hf-eager"], "--kernels applies to a graph built with --model NAME"),
])
def test_fit_refuses_inapplicable_flags(argv, message, capsys):
    assert main(["fit", *argv, "--devices", "h100"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0], err


@pytest.mark.parametrize("argv,needed", [
    (["--model", "gpt2", "--seq", "100000"], "seq 100000 needs 100000"),  # GPT-2's wpe has 1,024 rows
    (["--model", "gpt2", "--phase", "decode", "--context", "1024"], "context 1024 + 1 needs 1025"),
    (["--model", "bert-base-uncased", "--seq", "513"], "seq 513 needs 513"),  # BERT-base: 512 positions
])
def test_learned_position_tables_bound_the_sequence(argv, needed, capsys):
    assert main(["simulate", *argv, "--device", "h100"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "learned table of" in err[0] and needed in err[0], err
    # The last position that exists still runs.
    last = {"100000": "1024", "1024": "1023", "513": "512"}
    ok = [last.get(a, a) for a in argv]
    assert main(["simulate", *ok, "--device", "h100", "--json", "--no-ops"]) == 0


def test_a_config_with_another_head_is_refused(tmp_path, capsys):
    config = {"model_type": "llama", "architectures": ["LlamaForSequenceClassification"], "hidden_size": 256,
              "num_hidden_layers": 2, "num_attention_heads": 4, "intermediate_size": 512, "vocab_size": 1000,
              "max_position_embeddings": 512, "num_labels": 2}
    path = tmp_path / "classifier.json"
    path.write_text(json.dumps(config))
    assert main(["simulate", "--model", str(path), "--device", "h100"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "LlamaForSequenceClassification" in err[0] and "causal-LM head" in err[0], err
    config["architectures"] = ["LlamaForCausalLM"]
    path.write_text(json.dumps(config))
    assert main(["simulate", "--model", str(path), "--device", "h100", "--json", "--no-ops"]) == 0


@pytest.mark.parametrize("command", [["simulate", "--model", "llama-3-8b", "--device", "h100-nvl"],
                                     ["kernel", "matmul", "--m", "1024", "--n", "1024", "--k", "1024", "--device", "h100-nvl"]])
def test_a_clock_override_needs_the_devices_clock(command, capsys):
    # h100_nvl's file gives no clock_mhz: the kernel model would have nothing to scale from and
    # ignored the override.
    assert main([*command, "--clock-mhz", "1000"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "h100_nvl's file gives no clock_mhz" in err[0], err
