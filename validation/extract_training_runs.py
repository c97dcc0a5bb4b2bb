"""Extracts the large training runs of validation/published.csv that `accel-sim train`
can reproduce into python/accel_sim/data/validation/training_runs.csv, each with the stack that ran
it (python/accel_sim/data/stacks).

Megatron-LM / NeMo (Megatron-Bridge), stack megatron-core (megatron-core-24.07 for NeMo 24.07's
performance summary): pre-training rows with a full parallel
configuration (gpus, TP, PP, CP, EP, virtual stages, global and micro batch, sequence length) of a
model whose config accel-sim ships (dense, NeMo's GPT3-5B and 20B, and the Qwen3, gpt-oss and
DeepSeek-V3 MoE models with their expert parallelism), on a system it has a file for. LoRA fine-tunes are runs with their
recipes' adapters. Left out, with the reason printed: supervised fine-tuning on packed sequences, FSDP, token-dropping MoE runs, expert parallelism spanning tensor-parallel ranks,
hybrid models, models without a shipped config.
The precision is the row's: its dtype column or its params' precision naming FP8 (NeMo 24.07's
tables are all "DGX-H100, FP8"; the Megatron-Bridge tables without a precision column footnote
their parenthesized values as "alternative FP8 quantization granularity", i.e. both figures are FP8
recipes) -> fp8-mixed, BF16 -> bf16-mixed; "unstated" where nothing says.

llm-foundry (MosaicML's MPT benchmark tables, scripts/train/benchmarking/README.md), stack
llm-foundry-2023 (the release the sweep ran, with flash-attn 1.x attention): PyTorch FSDP1 over all GPUs (FULL_SHARD -> ZeRO-3, SHARD_GRAD_OP -> ZeRO-2), no model
parallelism, activation checkpointing -> --recompute full, amp_fp8 -> fp8-mixed (Transformer
Engine), amp_bf16 and bf16 -> bf16-mixed (FSDP1 keeps fp32 sharded parameters under every
mixed-precision mode). The MPT models are the shipped mpt-* configs; each row sets n_positions to
its sequence length, as the benchmark's max_seq_len does (the table's parameter counts grow by
seq_len x d_model). GPUs: the section's a100_40gb / a100_80gb in DGX A100 nodes (the tables state
1600 Gbps RoCE between nodes, the DGX A100's 8 x 200 Gb/s), h100_80gb in DGX H100 nodes (the H100
sections state no fabric).

torchtitan (docs/performance.md: Llama 3 and Llama 2 on 64 A100 80GB in 2024; Llama 3.1 8B, 70B and 405B
on Meta's Grand Teton H100s, 96 GB HBM2e at 500 W, in December 2024), stack torchtitan-2024: FSDP2 over
all GPUs (ZeRO-3) with the table's TP, PP and CP, its local and global batch, and its activation
checkpointing as torchtitan spells it: selective op -> --recompute selective (the stack's op-level
policy), selective layer -> --recompute full --recompute-interval 2 (selective_ac_option 2), full,
no; torch.compile -> --compile (compile: true); torchao's float8 -> --precision fp8-mixed (the
stack's torchao recipe); async TP -> TP overlap (tp_overlap: true); under PP (1F1B) the local
batch in pp micro-batches, parameters and gradients unsharded through the step (ZeRO-1). The interleaved-1F1B
run is left out with the reason (its stages per rank are not stated). Each H100 row also gives the memory it reached (the caching allocator's peak reserved
bytes, the maximum over GPUs): measured_memory_gib. The A100 cluster's network is not stated; the
rows run on dgx_a100 (8 GPUs on NVLink, 200 Gb/s per GPU).

Korthikanti et al. 2022 (arXiv 2205.05198), stack megatron-lm-2022: GPT-3 22B, 175B, 530B and 1T on
A100, full recomputation or sequence parallelism with selective recomputation, iteration times
converted to tokens/s per GPU. These eight are the fit split: validation/fit_training_clock.py fits
the A100's sustained clock on them. Every other row is report-only: nothing is fitted to it.

Run: python validation/extract_training_runs.py [path/to/published.csv [path/to/output.csv]]
(standard library only)
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_INPUT = REPO_ROOT / "validation" / "published.csv"
OUTPUT = REPO_ROOT / "python" / "accel_sim" / "data" / "validation" / "training_runs.csv"
COLUMNS = ["id", "stack", "system", "device", "model", "overrides", "gpus", "tp", "pp", "cp", "dp", "ep", "virtual_stages",
           "zero", "recompute", "global_batch", "micro_batch", "seq", "precision", "measured_tokens_per_s_per_gpu",
           "split", "source", "notes", "lora_rank", "lora_targets", "sequence_parallel", "recompute_interval",
           "measured_memory_gib", "compile", "tp_overlap"]
# LoRA runs: the adapters each release's recipes put in (rank, targeted linears as the builder
# names them; empty: all). NeMo 1.x (the 24.07 container) defaults to target_modules
# ['attention_qkv'] with adapter_dim 32 (https://github.com/NVIDIA/NeMo/blob/main/examples/nlp/
# language_modeling/tuning/conf/megatron_gpt_finetuning_config.yaml); Megatron-Bridge's LoRA to
# linear_qkv, linear_proj, linear_fc1 and linear_fc2 with dim 32
# (https://github.com/NVIDIA-NeMo/Megatron-Bridge/blob/main/src/megatron/bridge/peft/lora.py).
LORA_NEMO_24_07 = (32, "q_proj k_proj v_proj")
LORA_BRIDGE = (32, "")
MODELS = {"LLAMA3_8B": "llama-3-8b", "LLAMA3-8B": "llama-3-8b", "LLAMA3_70B": "llama-3-70b", "LLAMA3-70B": "llama-3-70b",
          "LLAMA3.1_405B": "llama-3.1-405b", "LLAMA2-7B": "llama-2-7b", "LLAMA2-13B": "llama-2-13b",
          "LLAMA2-70B": "llama-2-70b", "GPT3-175B": "gpt3-175b", "Qwen3_30B_a3B": "qwen3-30b-a3b",
          "Qwen3_235B_a22B": "qwen3-235b-a22b", "GPT3-5B": "gpt3-5b", "GPT3-20B": "gpt3-20b",
          # The Megatron-Bridge tables from 26.02 on name gpt-oss-120b "GPT": the same EP 8 MoE
          # layouts as the 25.11 "GPT OSS 120B" rows, and the same model FLOPs per token (the
          # rows' model TFLOP/s over their tokens/s: 27.2 GFLOP in both).
          "GPT OSS 120B": "gpt-oss-120b", "GPT": "gpt-oss-120b", "DeepSeekV3": "deepseek-v3"}
# Models whose runs were added later: they come after the others, in this order, so that the
# earlier rows keep their ids.
LATER_MODELS = ({"qwen3-30b-a3b", "qwen3-235b-a22b"}, {"gpt3-5b", "gpt3-20b"})
# Shipped models left out with what their runs do that the tool does not model.
UNMODELLED_RUNS = {
    "deepseek-v3": "DeepSeek-V3 under Megatron-Bridge: its recipes' activation recomputation and pipeline layout "
                  "are not read yet, and without them the plan needs more than the GPU's memory",
    "gpt-oss-120b": "gpt-oss-120b under Megatron-Bridge: its recipes' selective recomputation (layernorm, moe_act) "
                    "and the attention sinks' kernel (Megatron-Core's unfused local attention below Transformer "
                    "Engine 2.8) are not modelled; without them the runs come out 1.3-3.2x fast and some need "
                    "more than the GPU's memory",
}
SYSTEMS = {"DGX-H100": "dgx_h100", "DGX-B200": "dgx_b200"}
# llm-foundry's GPU types (the section's hardware) -> (system, device).
FOUNDRY_GPUS = {"A100 40GB": ("dgx_a100", "a100_40gb"), "A100 80GB": ("dgx_a100", "a100_80gb"),
                "H100 80GB": ("dgx_h100", "h100_sxm")}
FOUNDRY_ZERO = {"FULL_SHARD": 3, "SHARD_GRAD_OP": 2, "NO_SHARD": 0}
# flash-attention's training speed table (training/README.md): model -> (config, micro-batch per
# GPU, ZeRO stage). The micro-batch is what the experiment yamls pick for an 80 GB GPU
# (datamodule.batch_size by train.gpu_mem; the global batch is 256 sequences for 125M-760M, 512
# for 1.3B and 2.7B, the rest gradient accumulation); 760M and up run DDPStrategyZero1 with
# ZeroRedundancyOptimizer, 125M and 355M plain DDP (configs/experiment/pile/*-flash*.yaml,
# https://github.com/Dao-AILab/flash-attention/tree/main/training).
FLASH_ATTENTION_RUNS = {"GPT3-125M": ("gpt3-125m", 32, 256, 0), "GPT3-355M": ("gpt3-355m", 16, 256, 0),
                        "GPT3-760M": ("gpt3-760m", 16, 256, 1), "GPT3-1.3B": ("gpt3-1.3b", 8, 512, 1),
                        "GPT3-2.7B": ("gpt3-2.7b-hd128", 4, 512, 1)}


def _int(value) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def _foundry_row(r: dict, skip) -> dict | None:
    """One llm-foundry benchmark row as a training run (see the module's docstring), or None."""
    p = json.loads(r["params_json"])
    if "tokens/s/GPU" not in r["unit"]:
        skip(f"metric {r['metric']!r}")
        return None
    gpu = next((v for k, v in FOUNDRY_GPUS.items() if k in r["hardware"]), None)
    zero = FOUNDRY_ZERO.get(p.get("fsdp_sharding"))
    if gpu is None or zero is None:
        skip(f"llm-foundry on {r['hardware']} with {p.get('fsdp_sharding')}")
        return None
    model, seq = f"mpt-{str(p['model']).split('-', 1)[1].lower()}", int(p["seq_len"])
    mbs, accum, gpus = int(p["micro_batch"]), int(p["grad_accum"]), int(p["gpus"])
    if mbs * accum * gpus != int(p["global_batch_seqs"]):
        skip("llm-foundry batch that is not micro x accumulation x GPUs")
        return None
    return {"stack": "llm-foundry-2023", "system": gpu[0], "device": gpu[1], "model": model,
            "overrides": json.dumps({"n_positions": seq}) if seq != 2048 else "", "gpus": gpus, "tp": 1, "pp": 1,
            "cp": 1, "dp": gpus, "ep": 1, "virtual_stages": 1, "zero": zero,
            "recompute": "full" if p.get("activation_checkpointing") else "none", "global_batch": mbs * accum * gpus,
            "micro_batch": mbs, "seq": seq, "precision": "fp8-mixed" if p["precision"] == "amp_fp8" else "bf16-mixed",
            "measured_tokens_per_s_per_gpu": float(r["value"]), "split": "report", "source": r["source"],
            "notes": f"{r['notes'].split(';')[0]}; precision {p['precision']}, mixed_precision {p['mp_mode']}"}


# Training rows of source families no extractor reads yet, by a fragment of their source or
# workload, with the reason `validate` lists them under.
# validate predicts the HF Trainer study's throughput with its memory rows (extract_memory.py), the
# same runs: their reason says so, and validate counts them as evaluated (validation.py
# TRAINING_ROWS_WITH_MEMORY).
WITH_MEMORY = "predicted with the training-memory rows of the same runs (HF Trainer BERT-large on V100, samples/s)"
OTHER_FAMILIES = (
    ("NVIDIA/Megatron-LM/blob", "Megatron-LM README strong scaling: MFU only, no batch or layout per row"),
    ("Efficient Training on a Single GPU", WITH_MEMORY),
    ("huggingface/transformers", WITH_MEMORY),
    ("MLPerf", "MLPerf time to train (minutes of a partial run): no tokens/s and no published layout"),
)


def _flash_attention_row(r: dict, skip) -> dict | None:
    """One row of flash-attention's training speed table as a training run, or None."""
    p = json.loads(r["params_json"])
    run = FLASH_ATTENTION_RUNS.get(p.get("model"))
    if run is None or r["unit"] != "tokens/s" or int(p["gpus"]) != 8:
        skip(f"flash-attention training row {p.get('model')} in {r['unit']}")
        return None
    model, mbs, gbs, zero = run
    return {"stack": "flash-attention-training", "system": "dgx_a100", "device": "a100_80gb", "model": model,
            "overrides": "", "gpus": 8, "tp": 1, "pp": 1, "cp": 1, "dp": 8, "ep": 1, "virtual_stages": 1, "zero": zero,
            "recompute": "none", "global_batch": gbs, "micro_batch": mbs, "seq": int(p["seq_len"]),
            "precision": "bf16-mixed", "measured_tokens_per_s_per_gpu": float(r["value"]) / 8, "split": "report",
            "source": r["source"], "notes": f"{r['workload']}; {r['value']} tokens/s over 8 GPUs"}


# torchtitan's models (docs/performance.md) -> the shipped configs of the same architecture (Llama 3.1
# 8B and 70B are Llama 3 8B and 70B with longer RoPE scaling), its hardware -> (system, device: empty
# for the system's own), its activation checkpointing -> (--recompute, --recompute-interval).
TORCHTITAN_MODELS = {"Llama 3.1 8B": "llama-3-8b", "Llama 3 8B": "llama-3-8b", "Llama 3 70B": "llama-3-70b",
                     "Llama 3.1 70B": "llama-3-70b", "Llama 3.1 405B": "llama-3.1-405b",
                     "Llama 2 13B": "llama-2-13b", "Llama 2 70B": "llama-2-70b"}
TORCHTITAN_GPUS = {"H100 SXM 96GB HBM2e": ("grand_teton_h100", ""), "A100 80GB": ("dgx_a100", "a100_80gb")}
TORCHTITAN_AC = {"selective op": ("selective", 1), "selective layer": ("full", 2), "full": ("full", 1), "no": ("none", 1)}


def _torchtitan_row(r: dict, skip) -> dict | None:
    """One run of torchtitan's performance tables as a training run of the torchtitan-2024 stack,
    or None (with the reason) for a run under torch.compile or torchao's float8."""
    p = json.loads(r["params_json"])
    if p.get("pp_schedule") == "Interleaved 1F1B":
        skip("torchtitan's interleaved 1F1B: its release's stages per rank and micro-batch count are not stated")
        return None
    gpu = next((v for k, v in TORCHTITAN_GPUS.items() if k in r["hardware"]), None)
    model = TORCHTITAN_MODELS.get(p["model"])
    if gpu is None or model is None:
        skip(f"torchtitan run of {p['model']} on {r['hardware']}: no system or shipped config")
        return None
    recompute, interval = TORCHTITAN_AC[p["activation_checkpointing"]]
    gpus, tp, pp, cp = int(p["gpus"]), int(p["TP"]), int(p["PP"]), int(p["CP"])
    # The local batch runs as one micro-batch, or under PP (1F1B) split into pp of them (its
    # pipeline_parallel_microbatches defaults to the PP degree); FSDP2 reshards after the
    # forward except under PP, where the pipeline keeps each stage's parameters gathered and its
    # gradients unsharded until the last backward: ZeRO-1 (the torchtitan stack's zero_stages).
    local = int(p["local_batch"])
    micro = local // pp if pp > 1 else local
    return {"stack": "torchtitan-2024", "system": gpu[0], "device": gpu[1], "model": model, "overrides": "",
            "gpus": gpus, "tp": tp, "pp": pp, "cp": cp, "dp": gpus // (tp * pp * cp), "ep": 1, "virtual_stages": 1,
            "zero": 1 if pp > 1 else 3, "recompute": recompute, "global_batch": int(p["global_batch"]), "micro_batch": micro,
            "seq": int(p["seq_len"]), "precision": "fp8-mixed" if p.get("float8") else "bf16-mixed",
            "measured_tokens_per_s_per_gpu": float(r["value"]),
            "split": "report", "source": r["source"],
            "notes": r["workload"],
            "recompute_interval": interval if interval > 1 else "",
            "measured_memory_gib": p.get("memory_gib", ""), "compile": "true" if p.get("compile") else "",
            "tp_overlap": "true" if p.get("async_tp") else ""}


# Korthikanti et al. 2022's GPT-3 models (arXiv 2205.05198): the shipped GPT-3 configs, 22B and 530B
# as the 175B one with the paper's width, depth and heads. Megatron-LM pads the GPT-2 vocabulary to a
# multiple of 128 x TP (51,200 at TP 8: --make-vocab-size-divisible-by) and trains GPT-3 with
# dropout 0.1 on the embeddings, the attention probabilities and each residual branch (GPT-3's, the
# 5as/h and 34sbh terms of the paper's activation count include the masks).
KORTHIKANTI_MODELS = {"Megatron GPT-3 175B": "gpt3-175b", "Megatron GPT-3 1T": "gpt3-1t"}
GPT3_DROPOUT = {"embd_pdrop": 0.1, "attn_pdrop": 0.1, "resid_pdrop": 0.1}


def _korthikanti_row(r: dict) -> dict:
    """One of Korthikanti et al.'s iterations as a training run of the megatron-lm-2022 stack: fit
    split, the rows validation/fit_training_clock.py fits the A100's sustained clock on."""
    p = json.loads(r["params_json"])
    model = KORTHIKANTI_MODELS.get(p["model"], "gpt3-175b")
    overrides = {"vocab_size": p["vocab"], **GPT3_DROPOUT}
    if model == "gpt3-175b" and p["model"] != "Megatron GPT-3 175B":
        overrides.update({"n_embd": p["hidden"], "n_layer": p["layers"], "n_head": p["heads"]})
    gpus, gbs, seq = int(p["gpus"]), int(p["gbs"]), int(p["seq_len"])
    return {"stack": "megatron-lm-2022", "system": "dgx_a100", "device": "a100_80gb", "model": model,
            "overrides": json.dumps(overrides, sort_keys=True), "gpus": gpus, "tp": p["TP"], "pp": p["PP"], "cp": 1,
            "dp": p["DP"], "ep": 1, "virtual_stages": p["VP"], "zero": 0, "recompute": p["recompute"],
            "global_batch": gbs, "micro_batch": p["mbs"], "seq": seq, "precision": "fp16-mixed",
            "measured_tokens_per_s_per_gpu": round(gbs * seq / float(r["value"]) / gpus, 3), "split": "fit",
            "source": r["source"], "notes": f"{p['model']}: {r['value']} s per iteration; {r['workload']}",
            "sequence_parallel": "true" if p["sequence_parallel"] else "false"}


def main(argv: list[str]) -> int:
    src = Path(argv[1]) if len(argv) > 1 else DEFAULT_INPUT
    out = Path(argv[2]) if len(argv) > 2 else OUTPUT
    skipped_out = out.with_name("training_runs_skipped.csv")
    with open(src, newline="", encoding="utf-8") as f:
        training = [r for r in csv.DictReader(f) if r["category"] == "training"]
    kept, foundry, flash, korthikanti, torchtitan, skipped, skipped_rows = [], [], [], [], [], {}, []
    later: list[list[dict]] = [[] for _ in LATER_MODELS]
    lora_runs: list[dict] = []
    row = None

    def skip(reason: str) -> None:
        skipped[reason] = skipped.get(reason, 0) + 1
        skipped_rows.append({"reason": reason, "source": row["source"], "hardware": row["hardware"],
                             "workload": row["workload"]})

    for row in training:
        r = row
        if "mosaicml/llm-foundry" in r["source"]:
            run = _foundry_row(r, skip)
            if run:
                foundry.append({"id": "", **run})
            continue
        if "arxiv.org/abs/2205.05198" in r["source"]:
            korthikanti.append({"id": "", **_korthikanti_row(r)})
            continue
        if "pytorch/torchtitan" in r["source"]:
            run = _torchtitan_row(r, skip)
            if run:
                torchtitan.append({"id": "", **run})
            continue
        if "Dao-AILab/flash-attention" in r["source"]:
            run = _flash_attention_row(r, skip)
            if run:
                flash.append({"id": "", **run})
            continue
        if not ("Megatron-Bridge" in r["source"] or "NVIDIA/NeMo/blob" in r["source"]):
            text = f"{r['source']} {r['workload']}"
            skip(next((why for key, why in OTHER_FAMILIES if key in text), "no extractor for this source family yet"))
            continue
        if "tokens/s/GPU" not in r["unit"]:
            skip(f"metric {r['metric']!r}")
            continue
        p = json.loads(r["params_json"])
        lora = None
        if "LoRA" in r["workload"] or p.get("task") == "LoRA":
            lora = LORA_NEMO_24_07 if "NeMo 24.07" in r["source"] else LORA_BRIDGE
            p.setdefault("seq_len", p.get("packed_seq_len"))
        elif p.get("task") or "SFT" in r["workload"]:
            skip("supervised fine-tuning on packed sequences: attention within each packed sample (cu_seqlens) "
                 "is not modelled, nor are the samples' lengths published")
            continue
        if _int(p.get("FSDP", 0)) not in (0, None):
            skip("FSDP")
            continue
        if "(tokendrop)" in str(p.get("model", "")):
            skip("MoE token dropping (a capacity factor drops tokens past each expert's share): not modelled, "
                 "the builder routes every token")
            continue
        # A parenthesized variant ("DeepSeekV3 (dropless)") is its base model's run.
        model = MODELS.get(str(p.get("model", "")).split(" (")[0])
        if model in UNMODELLED_RUNS:
            skip(UNMODELLED_RUNS[model])
            continue
        if model is None:
            skip(f"no shipped config for {p.get('model')}")
            continue
        system = next((v for k, v in SYSTEMS.items() if k in r["hardware"]), None)
        if system is None:
            skip(f"no system file for {r['hardware']}")
            continue
        gpus, tp, pp, cp, ep = (_int(p.get(k, 1)) for k in ("gpus", "TP", "PP", "CP", "EP"))
        vp = _int(p.get("VP", 1)) or 1
        gbs, mbs, seq = _int(p.get("gbs")), _int(p.get("mbs")), _int(p.get("seq_len"))
        if None in (gpus, tp, pp, cp, gbs, mbs, seq) or gpus % (tp * pp * cp):
            skip("incomplete parallel configuration")
            continue
        ep = ep or 1
        if (gpus // (tp * pp * cp)) % ep:
            # Megatron-Core forms expert-parallel groups over TP x DP ranks (expert tensor
            # parallelism 1); accel-sim's EP divides the data-parallel ranks.
            skip("expert parallelism across tensor-parallel ranks (EP not a divisor of DP): not modelled")
            continue
        text = str(p.get("precision", ""))
        precision = ("fp8-mixed" if "FP8" in text or r["dtype"].lower().startswith("fp8")
                     else "bf16-mixed" if text == "BF16" else "unstated")
        group = (lora_runs if lora else
                 next((later[i] for i, models in enumerate(LATER_MODELS) if model in models), kept))
        # NeMo 24.07's performance summary ran its own release (stack megatron-core-24.07).
        stack = "megatron-core-24.07" if "NeMo 24.07" in r["source"] else "megatron-core"
        group.append({"id": "", "stack": stack, "system": system, "device": "",
                     "model": model, "overrides": "", "gpus": gpus, "tp": tp, "pp": pp, "cp": cp,
                     "dp": gpus // (tp * pp * cp), "ep": ep, "virtual_stages": vp, "zero": "", "recompute": "none", "global_batch": gbs,
                     "micro_batch": mbs, "seq": seq, "precision": precision,
                     "measured_tokens_per_s_per_gpu": float(r["value"]), "split": "report", "source": r["source"],
                     "notes": p.get("software", "") + ("; LoRA on SQuAD packed to the sequence length: attention "
                                                         "runs over the whole sequence here" if lora else ""),
                     "lora_rank": lora[0] if lora else "", "lora_targets": lora[1] if lora else ""})
    # The first Megatron rows, llm-foundry's, flash-attention's, the later ones, LoRA, Korthikanti's,
    # torchtitan's: each family added after the others, so that theirs keep their ids.
    kept += foundry + flash + sum(later, []) + lora_runs + korthikanti + torchtitan
    for i, run in enumerate(kept, 1):
        run["id"] = f"t{i:03d}"
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(kept)
    with open(skipped_out, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["reason", "source", "hardware", "workload"], lineterminator="\n")
        w.writeheader()
        w.writerows(skipped_rows)
    print(f"wrote {len(kept)} rows to {out}, {len(skipped_rows)} left out (with their reasons) to {skipped_out}")
    for reason, n in sorted(skipped.items(), key=lambda kv: -kv[1]):
        print(f"  skipped {n:3d}: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
