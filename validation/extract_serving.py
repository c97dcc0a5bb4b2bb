"""Extracts the LLM inference rows of validation/published.csv that a serving simulation
can reproduce into python/accel_sim/data/validation/serving_runs.csv.

A row is kept when its source gives the whole configuration: a model whose config accel-sim ships,
a device it has a file for, the tensor-parallel degree, the batch (or the request count and the
running-batch cap), fixed input and output lengths, and the precision. Every kept row is
report-only (split "report"): nothing is fitted to them.

Kinds
-----
static_throughput  TensorRT-LLM v0.6.1 "Peak Throughput" tables (docs/source/performance.md at
                   commit 138f96d45f90b9667426f7c47297d8c06bafac73), measured by gptSessionBenchmark:
                   `batch` sequences of `input_len` tokens prefilled together, then decoded together
                   until each has `output_len` tokens (the first comes from the prefill; the
                   document measures TTFT "with a single output token"). A maintainer gives the
                   formula: throughput = output tokens x batch size / total runtime, prefill
                   included (NVIDIA/TensorRT-LLM issue #43).
ttft               The same document's "Low Latency" tables (TensorRT-LLM v0.5 data): batch 1, an
                   `input_len` prompt, output length 1: the prefill's time, in ms.
batch_latency      vLLM's benchmark_latency (AMD ROCm performance-results pages, the Oracle OCI
                   MI300X blog): one generate() call on `batch` prompts of `input_len` tokens, each
                   producing `output_len` tokens; the mean end-to-end time, in s.
offline_throughput vLLM offline throughput on AMD's pages: `num_requests` prompts of fixed lengths
                   submitted at once ("infinite request rate"), at most `batch` (max_num_seqs) in
                   flight; tokens/s of the whole TP group.

Columns: `stack` is the serving stack (python/accel_sim/data/stacks/) the row ran: tensorrt-llm-0.6
for the TensorRT-LLM tables (masked multi-head attention in the generation phase: the document's
commands do not enable the experimental XQA kernels), vllm for AMD's vLLM rows (V1 engine, the default
from 0.8.0; their releases are 0.8.5 to 0.10.2) and vllm-0.6 for Oracle's (a 2024 blog on Llama 3.1,
before V1). `tp` is also the GPU count (one replica). `num_requests` equals `batch` but for
offline_throughput. `counts` says which tokens a throughput counts: "output" (generated tokens
only) or "total" (prompt and generated); empty for latencies. `per_gpu` is 1 when the value is per
GPU.

Decisions
---------
* "LLaMA 7B" / "LLaMA 70B" are Llama 2 (the document's methodology builds "Llama2-7b" and
  "Llama2-70b"): llama-2-7b, llama-2-70b. "Llama 3.1 70B" uses the llama-3-70b config: Llama 3.1
  70B has its shapes (hidden 8192, 80 layers, 64 query and 8 KV heads, FFN 28672, vocab 128256);
  only the RoPE scaling and the context length differ, which change no op's work here.
* Per GPU. The H100 table's header is "Throughput (out tok/s/GPU)". The A100 table's header at
  this commit is "Throughput (out tok/s)"; a later revision of the same file (commit
  77d24b5fa178f11ed7fafdd9833b7245e075f721, the same numbers, a note on XQA kernels added) heads
  both the A100 and the L40S tables "Throughput (out tok/s/GPU)", and there the A100 and L40S
  headers are wider than their unchanged separator rows, i.e. "/GPU" was added to headers
  written earlier. The source's own correction is taken: A100 rows are per GPU (per_gpu 1). This
  was decided from the document alone, before any prediction was compared.
* A100 variant. The document does not name it. Its A100 Falcon-180B rows run fp16 weights at
  TP 8: 178.6e9 parameters x 2 B = 357 GB, more than 8 x 40 GB; its LLaMA-70B row at batch 1280
  (TP 4) needs 34.5 GB of weights and 26.8 GB of fp16 KV cache (1280 x 256 tokens x 327,680 B)
  per GPU. So the A100s are 80 GB parts, and one machine is assumed for the whole table:
  a100_80gb. SXM4 is assumed (the document's own system is an "H100-HBM3-80GB", an SXM part);
  a100_pcie_80gb is the alternative the source does not rule out.
* Precision. TensorRT-LLM's H100 engines are built with --enable_fp8 --fp8_kv_cache (fp8 GEMMs,
  fp8 KV cache; the Low Latency tables reuse those engines); its A100 engines drop both options
  (fp16). AMD's checkpoints amd/Llama-3.1-*-Instruct-FP8-KV carry fp8 weights and an fp8 KV
  cache. Oracle's blog says "Llama 3.1 405B FP8" and shows no command line: precision fp8,
  kv_cache_dtype "unstated".
* Which tokens AMD's throughput counts. AMD's tables head the column "Throughput" with no unit
  split, and vLLM's throughput benchmark prints requests/s, total tokens/s and output tokens/s
  (benchmarks/benchmark_throughput.py). The figure is read as output tokens/s, for two reasons.
  Oracle's blog on the same benchmark on 8 MI300X (Llama 3.1 405B FP8; its batch-latency table
  is the one AMD's pages repeat, 3.530 s at batch 1 to 17.750 s at 256) heads its
  benchmark_throughput column "Output throughput in TPS"
  (https://blogs.oracle.com/cloud-infrastructure/serving-llama-31-405b-model-with-amd-mi300x-gpus).
  And the times the figures imply only make physical sense that way: read as prompt + output,
  Llama 3.1 70B's 1,500 requests of 2,048 + 2,048 tokens (8,352.6 tok/s) would take 736 s
  against 420 s for 3,200 requests of 128 + 2,048 (16,581.5 tok/s), although both decode 2,048
  steps over a comparable number of cached tokens (1,500 x 3,072 against 3,200 x 1,152 on
  average) and the 3.1M extra prompt tokens are 4.3e17 FLOP, about 70 s on the 8 GPUs at 30% of
  their fp8 peak; read as output tokens the two take 368 s and 395 s. The first reading was
  questioned because the model's errors on these rows grew with the prompt's share (+27% on
  128/2048 to +148% on 2048/2048); the reading taken rests on the two reasons above, neither of
  which uses the model.
* Batch. The table's batch is taken as measured. The document's example commands are older than
  the v0.6.1 numbers (the GPT-J engine is built with --max_batch_size 64, the table runs 1024).

Skipped, each printed with its reason: the BERT rows of NVIDIA DeepLearningExamples (encoder
forward latency, no generation: not a serving workload), the vLLM issue #12315 rows (ShareGPT
prompts: no fixed input or output lengths; A100 variant not stated), Oracle's benchmark_throughput
rows (number of prompts and max_num_seqs not stated), the MLPerf summary rows (a secondary
summary with approximate values; no lengths, batch or precision), and any row whose model,
device or configuration is not mapped.

Run: python validation/extract_serving.py [path/to/published.csv [path/to/output.csv]]
(standard library only; deterministic: rows keep the input's order)
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_INPUT = REPO_ROOT / "validation" / "published.csv"
OUTPUT = REPO_ROOT / "python" / "accel_sim" / "data" / "validation" / "serving_runs.csv"
COLUMNS = ["id", "kind", "model", "device", "tp", "batch", "num_requests", "input_len", "output_len", "precision",
           "kv_cache_dtype", "stack", "measured", "unit", "counts", "per_gpu", "split", "source", "notes"]
MODELS = {"GPT-J 6B": "gpt-j-6b", "LLaMA 7B": "llama-2-7b", "LLaMA 70B": "llama-2-70b", "Falcon 180B": "falcon-180b",
          "Llama 3.1 70B": "llama-3-70b", "Llama 3.1 405B": "llama-3.1-405b", "Llama 3.1 405B FP8": "llama-3.1-405b"}
MODEL_NOTES = {"Llama 3.1 70B": "llama-3-70b config: Llama 3.1 70B has its shapes"}
TRTLLM = "NVIDIA/TensorRT-LLM/blob/138f96d45f90b9667426f7c47297d8c06bafac73/docs/source/performance.md"


class Skip(Exception):
    """A row left out, with the reason."""


def _int(p: dict, key: str) -> int:
    value = p.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise Skip(f"'{key}' missing or not a positive integer ({value!r})")
    return value


def _gpus(hardware: str) -> int:
    count = hardware.split("x ", 1)[0]
    return int(count) if count.isdigit() else 1


def _device(r: dict) -> tuple[str, str]:
    """The device id, and a note when the source leaves the variant open."""
    hw = r["hardware"]
    if "H100 SXM" in hw:
        return "h100_sxm", ""
    if "MI300X" in hw:
        return "mi300x", ""
    if "A100" in hw and TRTLLM in r["source"]:
        return "a100_80gb", "A100 variant not stated: 80 GB SXM4 (the table's Falcon-180B and LLaMA-70B rows need 80 GB)"
    raise Skip(f"no device mapping for {hw!r}")


def _model(p: dict) -> tuple[str, str]:
    name = str(p.get("model", ""))
    if name not in MODELS:
        raise Skip(f"no shipped config for {name!r}")
    return MODELS[name], MODEL_NOTES.get(name, "")


def _row(r: dict) -> dict:
    """The serving_runs.csv row of a published row, or Skip."""
    src, metric = r["source"], r["metric"]
    if "DeepLearningExamples" in src:
        raise Skip("encoder forward latency (BERT), no generation: an encoder run (validation/extract_encoder.py)")
    if "vllm-project/vllm/issues/12315" in src:
        raise Skip("ShareGPT prompts: no fixed input/output lengths; A100 variant not stated")
    if "MLPerf" in r["workload"]:
        raise Skip("secondary summary with approximate values; no lengths, batch or precision")
    p = json.loads(r["params_json"])
    tp = _int(p, "TP")
    if _gpus(r["hardware"]) != tp:
        raise Skip(f"{r['hardware']!r} is not one TP-{tp} replica")
    model, model_note = _model(p)
    device, device_note = _device(r)
    notes = [n for n in (str(p.get("software", "")), model_note, device_note) if n]
    row = {"model": model, "device": device, "tp": tp, "input_len": _int(p, "isl"), "measured": float(r["value"]),
           "split": "report", "source": src, "counts": "", "per_gpu": 0}
    if TRTLLM in src:
        row["stack"] = "tensorrt-llm-0.6"
        fp8 = r["dtype"].startswith("fp8")
        row["precision"] = row["kv_cache_dtype"] = "fp8" if fp8 else "fp16"
        batch = _int(p, "batch")
        row.update(batch=batch, num_requests=batch)
        if "Peak Throughput" in src:
            row.update(kind="static_throughput", output_len=_int(p, "osl"), unit="tok/s", counts="output", per_gpu=1)
            if not fp8:
                notes.append("per GPU: a later revision of the file (77d24b5) heads this table 'out tok/s/GPU'")
        elif "Low Latency" in src:
            row.update(kind="ttft", output_len=1, unit="ms")
        else:
            raise Skip("TensorRT-LLM table not recognised")
    elif "amd.com" in src or "blogs.oracle.com" in src:
        # AMD's pages name vLLM 0.8.5 to 0.10.2 (V1); Oracle's 2024 blog predates V1 (0.8.0).
        row["stack"] = "vllm" if "amd.com" in src else "vllm-0.6"
        if not r["dtype"].startswith("fp8"):
            raise Skip(f"precision {r['dtype']!r} not mapped")
        row["precision"] = "fp8"
        row["kv_cache_dtype"] = "fp8" if "FP8 KV" in r["dtype"] else "unstated"
        if row["kv_cache_dtype"] == "unstated":
            notes.append("KV-cache dtype not stated")
        row["output_len"] = _int(p, "osl")
        if metric.startswith("throughput (tokens/s"):
            row.update(kind="offline_throughput", batch=_int(p, "max_num_seqs"), num_requests=_int(p, "num_prompts"),
                       unit="tok/s", counts="output")
            notes.append("AMD's Throughput column read as output tokens/s (see Decisions)")
        elif metric.startswith("end-to-end latency") or metric == "average latency":
            batch = _int(p, "batch")
            row.update(kind="batch_latency", batch=batch, num_requests=batch, unit="s")
            notes.append("vLLM benchmark_latency")
        elif "benchmark_throughput" in src:
            raise Skip("vLLM benchmark_throughput: number of prompts and max_num_seqs not stated")
        else:
            raise Skip(f"metric {metric!r} not mapped")
    else:
        raise Skip("source not covered by this extractor")
    row["notes"] = "; ".join(notes)
    return row


def main(argv: list[str]) -> int:
    src = Path(argv[1]) if len(argv) > 1 else DEFAULT_INPUT
    out = Path(argv[2]) if len(argv) > 2 else OUTPUT
    with open(src, newline="", encoding="utf-8") as f:
        rows = [(i + 2, r) for i, r in enumerate(csv.DictReader(f)) if r["category"] == "inference"]
    kept, skipped = [], []
    for line, r in rows:
        try:
            row = _row(r)
        except Skip as reason:
            skipped.append((line, r, str(reason)))
            continue
        kept.append({"id": f"s{len(kept) + 1:03d}", **row})
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(kept)
    kinds: dict[str, int] = {}
    for row in kept:
        kinds[row["kind"]] = kinds.get(row["kind"], 0) + 1
    print(f"wrote {len(kept)} rows to {out}: " + ", ".join(f"{k} {n}" for k, n in sorted(kinds.items())))
    print(f"skipped {len(skipped)} of {len(rows)} inference rows:")
    for line, r, reason in skipped:
        print(f"  line {line}: {r['workload'][:60]} [{r['params_json'][:60]}]: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
