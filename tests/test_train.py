"""The training step from the CLI and the API: memory by category, time by pass, errors."""

from __future__ import annotations

import json

import pytest

from conftest import run_cli, run_validate

LLAMA3_8B = 8_030_261_248


def test_train_step_reports_memory_by_category_and_time_by_pass():
    result = run_cli("simulate", "--model", "llama-3-8b", "--device", "h100", "--phase", "train",
                     "--batch", "1", "--seq", "1024", "--json", "--no-ops")
    assert result.returncode == 0, result.stderr
    d = json.loads(result.stdout)
    m = d["memory"]
    # bf16 weights (2 B), fp32 master weights + Adam moments (12 B), fp32 gradients (4 B).
    assert m["parameter_bytes"] == 2 * LLAMA3_8B
    assert m["optimizer_state_bytes"] == 12 * LLAMA3_8B
    assert 0 < m["peak_gradient_bytes"] <= 4 * LLAMA3_8B
    assert d["peak_memory_bytes"] >= 18 * LLAMA3_8B
    assert d["fits"] is False  # 144 GB of state does not fit an 80 GB H100
    t = d["pass_time_s"]
    assert t["forward"] > 0 and t["optimizer"] > 0
    # Backward runs two GEMMs per forward GEMM: about twice the forward's time.
    assert 1.8 < t["backward"] / t["forward"] < 2.6
    assert abs(t["forward"] + t["backward"] + t["optimizer"] - d["latency_s"]) < 1e-9
    assert d["model_info"]["optimizer"] == "adamw" and d["model_info"]["master_weights"] is True
    assert d["model_info"]["kv_cache_bytes"] == 0


def test_train_text_report_and_optimizer_choice():
    result = run_cli("simulate", "--model", "gpt2", "--device", "a100", "--phase", "train",
                     "--batch", "8", "--seq", "1024", "--optimizer", "sgd", "--no-master-weights")
    assert result.returncode == 0, result.stderr
    assert "step         forward" in result.stdout
    assert "training step: sgd, gradients and states in fp32" in result.stdout
    ops = run_cli("simulate", "--model", "gpt2", "--device", "a100", "--phase", "train", "--seq", "256",
                  "--json")
    rows = json.loads(ops.stdout)["ops"]
    passes = {r["pass_name"] for r in rows}
    assert passes == {"forward", "backward", "optimizer"}
    assert any(r["op"] == "_fused_adamw_" for r in rows)


def test_train_usage_errors():
    bad = run_cli("simulate", "--model", "llama-3-8b", "--device", "h100", "--phase", "train",
                  "--kernels", "hf-eager", "--precision", "fp8-mixed")
    assert bad.returncode == 2 and "fused kernels only" in bad.stderr and "Traceback" not in bad.stderr


def test_weight_and_kv_dtypes_from_the_command_line():
    # Llama-3-8B decode with int4 weights (groups of 128) and an fp8 KV cache: block weights
    # 6,979,321,856 / 2 B + scales 6,979,321,856 / 32 B; embedding and LM head bf16
    # (2 * 525,336,576 * 2 B); norms 65 * 4096 * 2 B.
    result = run_cli("simulate", "--model", "llama-3-8b", "--device", "h100", "--phase", "decode",
                     "--context", "1000", "--weight-dtype", "int4", "--kv-dtype", "fp8", "--json", "--no-ops")
    assert result.returncode == 0, result.stderr
    d = json.loads(result.stdout)
    assert d["memory"]["parameter_bytes"] == 3_489_660_928 + 218_103_808 + 2_101_346_304 + 532_480
    # K and V: 2 * 32 layers * 8 KV heads * 128 dims * 1 byte per token, 1001 tokens.
    assert d["model_info"]["kv_cache_bytes"] == 65_536 * 1001
    assert d["model_info"]["weight_dtype"] == "int4" and d["model_info"]["kv_cache_dtype"] == "fp8_e4m3"
    text = run_cli("simulate", "--model", "llama-3-8b", "--device", "h100", "--phase", "decode",
                   "--weight-dtype", "int8")
    assert "bf16 (int8 weights)" in text.stdout
    bad = run_cli("simulate", "--model", "llama-3-8b", "--device", "h100", "--phase", "train",
                  "--weight-dtype", "int4")
    assert bad.returncode == 2 and "training needs floating-point weights" in bad.stderr


def test_quantization_config_of_a_checkpoint(tmp_path):
    from accel_sim.io.model_config import load_model_config, spec_from_hf_config

    config, _ = load_model_config("llama-3-8b")
    awq = {**config, "quantization_config": {"quant_method": "awq", "bits": 4, "group_size": 64}}
    assert spec_from_hf_config(awq, "awq.json").int4_group_size == 64
    fp8 = {**config, "quantization_config": {"quant_method": "fp8", "fmt": "e4m3"}}
    assert str(spec_from_hf_config(fp8, "fp8.json").weight_dtype).endswith("fp8_e4m3")
    path = tmp_path / "bnb.json"
    path.write_text(json.dumps({**config, "quantization_config": {"quant_method": "bitsandbytes", "bits": 4}}))
    bad = run_cli("simulate", "--model", str(path), "--device", "h100")
    assert bad.returncode == 2 and "quantization_config with quant_method 'bitsandbytes'" in bad.stderr


def test_recompute_policies_from_the_command_line():
    def run(policy):
        result = run_cli("simulate", "--model", "gpt2", "--device", "a100", "--phase", "train", "--batch", "8",
                         "--seq", "1024", "--recompute", policy, "--json", "--no-ops")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    none, selective, full = run("none"), run("selective"), run("full")
    assert full["model_info"]["recompute"] == "full"
    # GPT-2's config has dropout 0.1 (resid_pdrop, embd_pdrop, attn_pdrop): masks are kept for backward.
    assert none["model_info"]["dropout"] == {"hidden": 0.1, "embedding": 0.1, "attention": 0.1}
    # Selective checkpoints the core attention as Megatron-LM does: FlashAttention keeps no scores,
    # so what it saves is the fp32 log-sum-exp, made again in the backward with the kernel:
    # 12 layers x 8 sequences x 12 heads x 1,024 positions x 4 bytes = 4,718,592 bytes, and more
    # backward time.
    assert none["peak_memory_bytes"] - selective["peak_memory_bytes"] == 4_718_592
    assert selective["pass_time_s"]["backward"] > none["pass_time_s"]["backward"]
    # Korthikanti's 34 sbh bytes per layer are 16 sbh 2-byte values and two 1-byte dropout masks;
    # GPT-2 runs in fp32, so a layer keeps 16 * 4 + 2 = 66 sbh bytes, and with full recompute its
    # input, 4 sbh bytes. Over 12 layers with sbh = 1024 * 8 * 768 the peak (in the loss's
    # backward, when every layer's saved values are still held) drops by 12 * 62 sbh bytes, plus
    # the small fp32 norm statistics and log-sum-exps.
    saved = none["memory"]["peak_activation_bytes"] - full["memory"]["peak_activation_bytes"]
    assert abs(saved / (12 * 62 * 1024 * 8 * 768) - 1) < 0.01
    # The layers' forward runs again in backward: more backward time, same forward.
    assert full["pass_time_s"]["forward"] == none["pass_time_s"]["forward"]
    assert full["pass_time_s"]["backward"] > none["pass_time_s"]["backward"]
    bad = run_cli("simulate", "--model", "gpt2", "--recompute", "full")
    assert bad.returncode == 2 and "--phase train" in bad.stderr
    script = run_cli("simulate", "examples/gpt2.py", "--recompute", "full")
    assert script.returncode == 2 and "--recompute applies to a graph built with --model NAME" in script.stderr


def test_training_memory_matches_published_runs_within_ten_percent():
    # HF's BERT-large fine-tunes on a 16 GB V100 (published.csv via validation/extract_memory.py):
    # NVML's memory used after training = the caching allocator's reserved segments + the CUDA
    # context, plain (batch 4), gradient accumulation (batch 1) and with gradient checkpointing.
    result = run_validate("--json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["training_memory"]
    assert len(rows) == 9
    # Adafactor and bitsandbytes' 8-bit Adam against AdamW at batch 4 in fp32: what each saves
    # (AdamW's two fp32 states against Adafactor's factored second moment, against 8-bit states
    # with a per-2,048 absmax) is within 10% of what the study measured (2,654 and 1,864 MiB).
    fp32_b4 = {r["optimizer"]: r for r in rows if r["precision"] == "fp32" and r["batch"] == "4"}
    for opt in ("adafactor", "adam8bit"):
        saved = fp32_b4["adamw"]["predicted_mib"] - fp32_b4[opt]["predicted_mib"]
        measured = float(fp32_b4["adamw"]["measured_mib"]) - float(fp32_b4[opt]["measured_mib"])
        assert abs(saved / measured - 1) <= 0.10, (opt, saved, measured)
    # The two fp16-autocast AdamW runs are reported too (16-bit activations where autocast keeps
    # softmax and LayerNorm outputs in fp32: the batch-4 run comes out short); the fp32 ones hold.
    rows = [r for r in rows if r["optimizer"] == "adamw"]
    assert sorted(r["precision"] for r in rows) == ["amp-fp16", "amp-fp16", "fp32", "fp32", "fp32"]
    rows = [r for r in rows if r["precision"] == "fp32"]
    for row in rows:
        assert abs(row["error"]) <= 0.10, row
        # Reserved segments hold at least what was allocated; allocated blocks at least the live bytes.
        assert row["reserved_mib"] >= row["allocated_mib"] >= row["logical_mib"]
    by_batch = {(r["batch"], r["gradient_checkpointing"]): r["predicted_mib"] for r in rows}
    assert by_batch[("4", "false")] > by_batch[("1", "false")] > by_batch[("1", "true")]
    # The same runs' samples/s under hf-trainer-2021 (eager attention, transformers' loop AdamW:
    # eight kernels per parameter): the fp32 AdamW runs within 10% of what HF Trainer reported
    # (8.86, 7.75, 5.99 samples/s), every run predicted and feasible.
    for row in rows:
        assert row["stack"] == "hf-trainer-2021"
        assert abs(row["samples_per_s_error"]) <= 0.10, row


def test_keep_grads_and_allocator_in_the_report():
    def run(*extra):
        result = run_cli("simulate", "--model", "gpt2", "--device", "v100", "--phase", "train", "--batch", "2",
                         "--seq", "512", "--json", "--no-ops", *extra)
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    plain, kept = run(), run("--keep-grads")
    a = plain["allocator"]
    assert a["required_bytes"] == a["peak_segment_bytes"] + a["runtime_reserved_bytes"]
    assert a["peak_reserved_bytes"] >= a["peak_segment_bytes"] >= a["peak_allocated_bytes"] >= plain["peak_memory_bytes"]
    assert plain["fits"] == (a["required_bytes"] <= plain["memory_capacity_bytes"])
    assert kept["model_info"]["gradients_kept_between_steps"] is True
    assert kept["peak_memory_bytes"] > plain["peak_memory_bytes"]


def test_mfu_of_a_llama_step_next_to_its_roofline_bound():
    # Llama-3-8B, batch 1, seq 4096, one H100: model FLOPs = 6 N T + 3 x forward causal attention
    # with N = 7,504,658,432 parameters in matmuls (everything but the input embedding table).
    result = run_cli("simulate", "--model", "llama-3-8b", "--device", "h100", "--phase", "train", "--batch", "1",
                     "--seq", "4096", "--json", "--no-ops")
    assert result.returncode == 0, result.stderr
    d = json.loads(result.stdout)
    attention = 32 * 4 * 32 * (4096 * 4097 / 2) * 128
    assert d["model_flops"] == 6 * 7_504_658_432 * 4096 + 3 * attention
    assert abs(d["mfu"] / (d["model_flops"] / (d["latency_s"] * 989.4e12)) - 1) < 1e-12
    # The roofline's times are a lower bound, so its MFU bounds the kernel model's from above.
    assert 0.2 < d["mfu"] < d["mfu_roofline_bound"] < 1
    assert abs(d["tokens_per_s"] * d["latency_s"] / 4096 - 1) < 1e-12
    text = run_cli("simulate", "--model", "llama-3-8b", "--device", "h100", "--phase", "train", "--batch", "1",
                   "--seq", "4096")
    assert "MFU" in text.stdout and "roofline bound" in text.stdout


def test_precision_modes_for_a_built_step():
    def run(precision):
        result = run_cli("simulate", "--model", "llama-3-8b", "--device", "h100", "--train", "--precision", precision,
                         "--batch", "1", "--seq", "4096", "--json", "--no-ops")
        assert result.returncode == 0, result.stderr
        return json.loads(result.stdout)

    mixed, pure, fp8 = run("bf16-mixed"), run("bf16"), run("fp8-mixed")
    assert mixed["model_info"]["master_weights"] is True and pure["model_info"]["master_weights"] is False
    # bf16-mixed: 18 bytes per parameter of state; pure bf16: weights, gradients and two moments in 2 bytes each.
    assert mixed["memory"]["optimizer_state_bytes"] == 12 * LLAMA3_8B
    assert pure["memory"]["optimizer_state_bytes"] == 4 * LLAMA3_8B
    # fp8 GEMMs at twice the bf16 rate: the same model FLOPs (the Llama blocks have no biases), a shorter step.
    assert fp8["model_info"]["fp8_gemms"] is True
    assert fp8["model_flops"] == mixed["model_flops"]
    assert fp8["latency_s"] < mixed["latency_s"]
    both = run_cli("simulate", "--model", "llama-3-8b", "--train", "--precision", "bf16", "--dtype", "fp16")
    assert both.returncode == 2 and "not both" in both.stderr
    prefill = run_cli("simulate", "--model", "llama-3-8b", "--precision", "fp8-mixed")
    assert prefill.returncode == 2 and "training step" in prefill.stderr


def _train_json(*args: str) -> dict:
    result = run_cli("train", "--model", "llama-3-8b", "--system", "dgx_h100", *args, "--json")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def test_context_parallel_ranks_share_the_optimizer_shards():
    # Llama-3-8B on 64 H100s with ZeRO-1, 4,096 tokens per rank: CP 1 x DP 64 at seq 4,096 and
    # CP 8 x DP 8 at seq 32,768. Megatron-LM's distributed optimizer shards over the data- and
    # context-parallel ranks together, 64 in both, so beside the activations each GPU holds the
    # bf16 weights (2 B), the bf16 gradients (2 B: the default megatron-core stack's
    # grad_reduce_in_fp32 = False) and 1/64 of the fp32 master weights and Adam moments (12 B) of
    # the 8,030,261,248 parameters, and the 512 MiB runtime reserve:
    # 16,060,522,496 + 16,060,522,496 + 1,505,673,984 + 536,870,912 = 34,163,589,888 bytes.
    # The activations of 4,096 tokens are the same too (K and V are gathered again in the
    # backward, not kept whole).
    one = _train_json("--gpus", "64", "--dp", "64", "--global-batch", "64", "--seq", "4096")
    eight = _train_json("--gpus", "64", "--cp", "8", "--dp", "8", "--global-batch", "8", "--seq", "32768")
    for d in (one, eight):
        assert d["memory_per_gpu_bytes"] - d["activation_bytes"] == 34_163_589_888
    assert eight["activation_bytes"] == one["activation_bytes"]
    # With no data parallelism the CP ranks still reduce their gradients (and ZeRO has them to
    # shard over): GPT-2 on CP 2, the all-reduce exposed.
    cp = run_cli("train", "--model", "gpt2", "--system", "dgx_h100", "--gpus", "2", "--cp", "2", "--global-batch", "1",
                 "--seq", "1024", "--zero", "0", "--no-overlap", "--json")
    assert cp.returncode == 0, cp.stderr
    assert json.loads(cp.stdout)["breakdown_s"]["dp_comm_exposed"] > 0


def test_selective_recompute_checkpoints_the_core_attention_in_train_and_plan():
    # Llama-3-8B, fp8 GEMMs, seq 2,048, one sequence per rank: selective recomputation makes the
    # attention output (the output projection keeps its e4m3 copy) and FlashAttention's
    # log-sum-exp again in the backward instead of keeping them: per layer 2 x 2,048 x 4,096 B
    # + 4 x 32 heads x 2,048 B = 17,039,360 B, 545,259,520 B over 32 layers.
    flags = ["--gpus", "64", "--global-batch", "64", "--seq", "2048", "--precision", "fp8-mixed"]
    none = _train_json(*flags, "--dp", "64", "--recompute", "none")
    selective = _train_json(*flags, "--dp", "64", "--recompute", "selective")
    assert none["memory_per_gpu_bytes"] - selective["memory_per_gpu_bytes"] == 545_259_520
    assert selective["breakdown_s"]["compute"] > none["breakdown_s"]["compute"]  # the kernel runs again
    plan = run_cli("plan", "--model", "llama-3-8b", "--system", "dgx_h100", *flags, "--tp", "1", "--pp", "1",
                   "--cp", "1", "--microbatch", "1", "--zero", "1", "--recompute", "none,selective", "--offload", "none",
                   "--json")
    assert plan.returncode == 0, plan.stderr
    d = json.loads(plan.stdout)
    memory = {c["layout"]["recompute"]: c["memory_per_gpu_bytes"] for c in d["best"] + d["best_infeasible"]}
    assert memory == {"none": none["memory_per_gpu_bytes"], "selective": selective["memory_per_gpu_bytes"]}


def test_the_builder_only_optimizers_are_refused_for_a_captured_step():
    # Adafactor and 8-bit Adam are built by the model builder; a captured script's step runs
    # torch.optim's functional kernels, which have neither.
    r = run_cli("simulate", "examples/gpt2.py", "--train", "--optimizer", "adam8bit")
    assert r.returncode == 2 and "unknown optimizer 'adam8bit' for a captured step" in r.stderr
    built = run_cli("simulate", "--model", "gpt2", "--phase", "train", "--seq", "128", "--optimizer", "adam8bit",
                    "--json", "--no-ops")
    assert built.returncode == 0, built.stderr


def test_lora_trains_the_adapters_alone():
    # Llama-2-7B (6,738,415,616 parameters) on 8 H100s, DP 8, bf16-mixed under megatron-core
    # (bf16 gradients, the distributed optimizer over 8 ranks: 12 / 8 bytes of fp32 masters and
    # Adam moments per trained parameter). Beside the activations and the 512 MiB runtime reserve,
    # a full step holds 2 + 2 + 1.5 = 5.5 bytes per parameter; a rank-8 LoRA step holds the bf16
    # weights (2 B) and 5.5 B per adapter parameter. The stack's adapters sit one per fused
    # projection: per layer A 8 x 4096 beside q/k/v, o and gate/up, 8 x 11,008 beside down, and
    # B 8 x (3 x 4096 + 4096 + 2 x 11,008 + 4096) = 526,336 parameters; 16,842,752 over 32 layers.
    n, adapters, reserve = 6_738_415_616, 16_842_752, 512 * 2**20
    args = ("--model", "llama-2-7b", "--gpus", "8", "--dp", "8", "--seq", "4096", "--global-batch", "32")
    full = _train_json(*args)
    lora = _train_json(*args, "--lora-rank", "8")
    assert full["memory_per_gpu_bytes"] - full["activation_bytes"] == 5.5 * n + reserve
    assert lora["memory_per_gpu_bytes"] - lora["activation_bytes"] == 2 * n + 5.5 * adapters + reserve
    assert lora["lora"] == {"rank": 8, "targets": "all", "layout": "fused"}
    # No weight-gradient GEMMs: the step is faster than the full one.
    assert lora["step_s"] < full["step_s"]
    # Llama-2-70B on one DGX H100 (TP 2, PP 4): NeMo's LoRA recipe runs it; training it in full
    # needs more than the GPUs hold.
    big = ("--model", "llama-2-70b", "--gpus", "8", "--tp", "2", "--pp", "4", "--dp", "1", "--sp", "--seq", "4096",
           "--global-batch", "32", "--precision", "fp8-mixed")
    assert run_cli("train", "--system", "dgx_h100", *big, "--lora-rank", "32", "--json").returncode == 0
    refused = run_cli("train", "--system", "dgx_h100", *big)
    assert refused.returncode == 2 and "infeasible" in refused.stderr
    # Flags that do not apply are refused.
    for extra, why in ((("--stack", "torchtitan", "--lora-rank", "8"), "has no LoRA adapters"),
                       (("--lora-targets", "q_proj"), "give --lora-rank"),
                       (("--lora-rank", "8", "--lora-targets", "q_proj,fc9"), "name linears from"),
                       (("--lora-rank", "8", "--lora-targets", "qkv_proj"), "not a linear of model")):
        r = run_cli("train", "--system", "dgx_h100", *args, *extra)
        assert r.returncode == 2 and why in r.stderr, (extra, r.stderr)


def test_lora_fine_tunes_match_published_runs():
    # NeMo's LoRA fine-tunes of Llama 2 (24.07, adapters on attention_qkv) and Llama 3 70B
    # (Megatron-Bridge 26.06, adapters on every linear) on DGX H100, tokens/s per GPU
    # (published.csv via validation/extract_training_runs.py; report-only).
    result = run_validate("--json")
    assert result.returncode == 0, result.stderr
    runs = [r for r in json.loads(result.stdout)["training_runs"] if "LoRA" in r["layout"]]
    assert len(runs) == 4
    # The 70B run packs SQuAD samples to 4,096 tokens and its attention stays within each sample
    # (cu_seqlens); the builder attends over the whole sequence, so it comes out slow (-21% at the
    # sustained clock): 25% for it.
    for r in runs:
        assert r["predicted_tokens_per_s_per_gpu"] is not None, r
        assert abs(r["error"]) <= (0.10 if r["stack"] == "megatron-core-24.07" else 0.25), r


# Llama-3-8B's parameters (the shipped config; 8.03 B).
LLAMA3_8B_PARAMS = 8_030_261_248


def test_optimizer_offload_moves_the_states_and_the_step_to_the_host():
    # Llama-3-8B on a DGX H100, DP 8, Megatron-Core's distributed optimizer (ZeRO-1) with
    # --optimizer-cpu-offload. The node's CPUs step all 8 shards at once: 30 bytes of DRAM traffic
    # for each 12 of fp32 master weights and Adam moments (DeepSpeed's and torch's CPU Adam read
    # and write the three states, read the gradient, write the 16-bit weight), at 0.53 of the
    # 563.2 GB/s of 16 channels of DDR5-4400 (the dgx_h100 host block): 30 N / 298.5 GB/s. The
    # host holds the states (12 N), the gradient shards (bf16: 2 N) and the 16-bit weights' copy
    # (2 N); each GPU drops its 12 N / 8 of states.
    n = LLAMA3_8B_PARAMS
    flags = ("--gpus", "8", "--dp", "8", "--global-batch", "8", "--seq", "4096")
    plain = _train_json(*flags)
    off = _train_json(*flags, "--offload", "optimizer")
    assert off["layout"]["offload"] == ["optimizer"] and plain["layout"]["offload"] == []
    assert off["breakdown_s"]["host_optimizer"] == pytest.approx(30 * n / (563.2e9 * 0.53), rel=1e-9)
    assert off["breakdown_s"]["optimizer"] == 0 and plain["breakdown_s"]["optimizer"] > 0
    assert off["host_memory_per_node_bytes"] == 16 * n
    assert plain["memory_per_gpu_bytes"] - off["memory_per_gpu_bytes"] == 12 * n / 8
    # The 16-bit shard comes back over the 50 GB/s host link after the step: 2 N / 8 bytes.
    assert off["breakdown_s"]["offload_exposed"] >= 2 * n / 8 / 50e9
    assert off["step_s"] == pytest.approx(plain["step_s"] - plain["breakdown_s"]["optimizer"]
                                          + off["breakdown_s"]["host_optimizer"] + off["breakdown_s"]["offload_exposed"],
                                          rel=1e-9)


def test_offload_is_refused_where_the_system_or_the_stack_cannot_run_it():
    base = ("train", "--model", "llama-3-8b", "--gpus", "8", "--dp", "8", "--global-batch", "8", "--seq", "2048")
    cases = [
        (("--system", "tpu_v5p", "--gpus", "4", "--dp", "4", "--offload", "optimizer"), "gives no host memory"),
        (("--system", "dgx_h100", "--offload", "parameters"), "megatron-core offloads optimizer, activations"),
        (("--system", "dgx_h100", "--offload", "optimizer", "--zero", "0"), "needs ZeRO >= 1"),
        (("--system", "dgx_h100", "--offload", "nvme"), "is not something to offload"),
        (("--system", "dgx_h100", "--offload", "optimizer,optimizer"), "names one kind twice"),
        (("--system", "dgx_h100", "--stack", "megatron-lm-2022", "--offload", "optimizer"), "megatron-lm-2022 offloads nothing"),
        (("--system", "dgx_h100", "--gpus", "8", "--dp", "4", "--pp", "2", "--offload", "activations"),
         "activation offload runs with pp = 1"),
    ]
    for extra, message in cases:
        args = list(base)
        for i in range(0, len(extra), 2):  # a later flag replaces the base's
            if extra[i] in args:
                args[args.index(extra[i]) + 1] = extra[i + 1]
            else:
                args += [extra[i], extra[i + 1]]
        result = run_cli(*args)
        assert result.returncode == 2, (extra, result.stdout)
        assert message in result.stderr, (extra, result.stderr)


def test_parameter_offload_under_deepspeed_takes_zero_3_and_a_single_gpu_takes_zero_offload():
    # DeepSpeed's ZeRO-Infinity offloads parameters under stage 3 (the default --zero it takes);
    # ZeRO-Offload on one GPU runs the optimizer on the CPU with nothing to shard.
    deep = _train_json("--gpus", "8", "--dp", "8", "--global-batch", "8", "--seq", "2048", "--stack", "deepspeed",
                       "--offload", "optimizer,parameters")
    assert deep["layout"]["zero"] == 3 and deep["layout"]["offload"] == ["optimizer", "parameters"]
    one = _train_json("--gpus", "1", "--global-batch", "1", "--seq", "2048", "--stack", "deepspeed",
                      "--offload", "optimizer", "--recompute", "full")
    assert one["layout"]["zero"] >= 1 and one["breakdown_s"]["host_optimizer"] > 0
    # One GPU's states alone on one node's CPUs: 30 N / (0.53 x 563.2 GB/s).
    assert one["breakdown_s"]["host_optimizer"] == pytest.approx(30 * LLAMA3_8B_PARAMS / (563.2e9 * 0.53), rel=1e-9)


def test_plan_searches_the_offloads_the_stack_runs_where_the_system_has_a_host():
    common = ("plan", "--model", "llama-3-8b", "--gpus", "8", "--global-batch", "8", "--seq", "2048",
              "--tp", "1", "--pp", "1", "--cp", "1", "--microbatch", "1", "--top", "50", "--json")
    with_host = run_cli(*common, "--system", "dgx_h100")
    assert with_host.returncode == 0, with_host.stderr
    seen = {tuple(c["layout"]["offload"]) for c in json.loads(with_host.stdout)["best"]}
    assert ("optimizer",) in seen and () in seen and seen <= {(), ("optimizer",), ("activations",), ("optimizer", "activations")}
    narrowed = run_cli(*common, "--system", "dgx_h100", "--offload", "none")
    assert {tuple(c["layout"]["offload"]) for c in json.loads(narrowed.stdout)["best"]} == {()}
    no_host = run_cli(*common, "--system", "tpu_v5p", "--gpus", "4")
    assert no_host.returncode == 0, no_host.stderr
    assert all(c["layout"]["offload"] == [] for c in json.loads(no_host.stdout)["best"])
    refused = run_cli(*common, "--system", "dgx_h100", "--offload", "none,parameters")
    assert refused.returncode == 2 and "megatron-core offloads" in refused.stderr


# Llama-3-8B's block linears: q and o 4096 x 4096, k and v 4096 x 1024, gate, up and down
# 4096 x 14336, in 32 layers.
LLAMA3_8B_BLOCK_WEIGHTS = 32 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336)


def test_2d_tensor_parallelism_summa_and_context():
    # --cp-2d P x Q is P-way TP with SP and Q-way CP. --tp-2d P x Q is 2D SUMMA on that grid:
    # every block weight sharded over all P Q ranks where 1D TP shards it over P. Without ZeRO,
    # each block element a rank holds costs 2 bytes (bf16) + 2 (bf16 gradients, megatron-core's
    # grad_reduce_in_fp32 off) + 12 (fp32 masters and moments): SUMMA 4 x 2 holds 1/4 - 1/8 of
    # the block weights fewer, 16 / 8 = 2 bytes per block weight.
    flags = ("--gpus", "8", "--global-batch", "1", "--seq", "4096", "--zero", "0")
    ctx = _train_json(*flags, "--cp-2d", "4x2")
    same = _train_json(*flags, "--tp", "4", "--cp", "2", "--sp")
    assert ctx["step_s"] == same["step_s"] and ctx["layout"] == same["layout"]
    summa = _train_json(*flags, "--tp-2d", "4x2", "--stack", "megatron-core-summa")
    assert summa["layout"]["summa"] and not ctx["layout"]["summa"]
    held = lambda d: d["memory_per_gpu_bytes"] - d["activation_bytes"]  # noqa: E731
    assert held(ctx) - held(summa) == 2 * LLAMA3_8B_BLOCK_WEIGHTS
    for extra, message in ((("--tp-2d", "4x2"), "megatron-core runs 1D tensor parallelism"),
                           (("--tp-2d", "4x2", "--tp", "4", "--stack", "megatron-core-summa"), "sets --tp and --cp"),
                           (("--tp-2d", "8x1", "--stack", "megatron-core-summa"), "needs both sides above 1"),
                           (("--tp-2d", "4x2", "--cp-2d", "4x2"), "not both"),
                           (("--tp-2d", "4by2"), "expected a grid P x Q")):
        bad = run_cli("train", "--model", "llama-3-8b", "--system", "dgx_h100", *flags, *extra)
        assert bad.returncode == 2 and message in bad.stderr, (extra, bad.stderr)


def test_plan_searches_summa_under_a_stack_that_runs_it():
    common = ("plan", "--model", "llama-3-8b", "--system", "dgx_h100", "--gpus", "16", "--global-batch", "16",
              "--seq", "8192", "--pp", "1", "--microbatch", "1", "--offload", "none", "--top", "200", "--json")
    both = json.loads(run_cli(*common, "--stack", "megatron-core-summa").stdout)
    layouts = both["best"] + both["best_infeasible"]
    assert {c["layout"]["summa"] for c in layouts} == {True, False}
    assert all(c["layout"]["tp"] > 1 and c["layout"]["cp"] > 1 and c["layout"]["sequence_parallel"]
               for c in layouts if c["layout"]["summa"])
    only = json.loads(run_cli(*common, "--stack", "megatron-core-summa", "--summa", "on").stdout)
    assert all(c["layout"]["summa"] for c in only["best"] + only["best_infeasible"])
    plain = json.loads(run_cli(*common).stdout)
    assert not any(c["layout"]["summa"] for c in plain["best"] + plain["best_infeasible"])
    refused = run_cli(*common, "--summa", "on")
    assert refused.returncode == 2 and "runs 1D tensor parallelism" in refused.stderr
