"""Extracts the training-memory measurements of validation/published.csv that the
model builder can reproduce into python/accel_sim/data/validation/training_memory.csv.

The rows are HF's single-GPU training study (BERT-large sequence classification, seq 512, on a
V100-SXM2 16GB, driver 460.91.03, CUDA 11.2, PyTorch ~1.10): GPU memory used after training as
NVML reports it, which includes the CUDA context (measured in the same study as the memory used
after `torch.ones((1, 1)).to("cuda")`) and whatever PyTorch's caching allocator kept reserved.
Kept: the AdamW runs (plain, gradient accumulation, gradient accumulation with gradient
checkpointing) in fp32, and under fp16 autocast as precision "amp-fp16": fp32 weights, gradients
and states with the 16-bit copies of the weights the autocast forward keeps for the backward, which
the builder counts as 16-bit weights beside fp32 masters (the same bytes per parameter; its
activations are all 16-bit where autocast keeps a LayerNorm's or softmax's output in fp32). Left
out, with the reason printed: an optimizer the builder does not have. The Adafactor and bitsandbytes
8-bit Adam runs are kept (optimizer adafactor, adam8bit) after the AdamW ones.
The same study's training throughput of each run (the calibration set's training rows with the
same parameters: samples/s over the study's 512 samples, HF Trainer's train_samples_per_second)
is the row's measured_samples_per_s, predicted by `validate` with the run's stack, hf-trainer-2021
(python/accel_sim/data/stacks/hf-trainer-2021.yaml: eager attention, transformers' own loop AdamW).
All rows are report-only: nothing is fitted to them (the context is its own measured row).

Run: python validation/extract_memory.py [path/to/published.csv [path/to/output.csv]]
(standard library only)
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_INPUT = REPO_ROOT / "validation" / "published.csv"
OUTPUT = REPO_ROOT / "python" / "accel_sim" / "data" / "validation" / "training_memory.csv"
# The study's `optim` -> the builder's optimizer (builder.h Optimizer): HF Trainer's default AdamW,
# optim="adafactor" (transformers' Adafactor without a first moment) and bitsandbytes' Adam8bit.
OPTIMIZERS = {"adamw": "adamw", "adafactor": "adafactor", "bnb Adam8bit": "adam8bit", "8-bit Adam": "adam8bit"}
COLUMNS = ["id", "stack", "device", "model", "task", "batch", "seq", "grad_accum", "gradient_checkpointing",
           "precision", "optimizer", "zero_grad", "attention", "runtime_mib", "measured_mib", "metric",
           "split", "source", "notes", "measured_samples_per_s", "throughput_source", "throughput_notes"]
# The stack the study ran (HF Trainer of transformers 4.1x-4.2x, PyTorch ~1.10).
STACK = "hf-trainer-2021"


def main(argv: list[str]) -> int:
    src = Path(argv[1]) if len(argv) > 1 else DEFAULT_INPUT
    out = Path(argv[2]) if len(argv) > 2 else OUTPUT
    with open(src, newline="", encoding="utf-8") as f:
        published = list(csv.DictReader(f))
    rows = [r for r in published if r["category"] == "memory" and "V100" in r["hardware"]]
    # The same runs' throughput rows: the training rows with the same parameters.
    throughput = {r["params_json"]: r for r in published
                  if r["category"] == "training" and "V100" in r["hardware"] and r["unit"] == "samples/s"}
    context = [r for r in rows if "torch CUDA init" in r["params_json"]]
    if len(context) != 1:
        raise SystemExit(f"{src}: expected one CUDA-context row for the V100 study, found {len(context)}")
    runtime_mib = float(context[0]["value"])
    kept, later, skipped = [], [], []
    for r in rows:
        p = json.loads(r["params_json"])
        if "task" not in p:
            continue  # the context row and the weights-only row
        optimizer = OPTIMIZERS.get(p.get("optim", "adamw"))
        if optimizer is None:
            skipped.append(f"{r['workload']}: optimizer {p['optim']!r} is not modelled")
            continue
        speed = throughput.get(r["params_json"])
        (kept if optimizer == "adamw" else later).append({
            "id": "", "stack": STACK, "device": "v100_sxm2_16gb", "model": p["model"], "task": p["task"],
            "batch": p["per_device_bs"], "seq": p["seq_len"], "grad_accum": p.get("grad_accum", 1),
            "gradient_checkpointing": str(bool(p.get("gradient_checkpointing", False))).lower(),
            "precision": "amp-fp16" if p.get("fp16") else "fp32", "optimizer": optimizer,
            # PyTorch ~1.10's optimizer.zero_grad() zeroed gradients in place (set_to_none=False).
            "zero_grad": "in_place",
            # transformers' BERT of that time computed attention with matmul, softmax, dropout.
            "attention": "eager",
            "runtime_mib": runtime_mib, "measured_mib": float(r["value"]), "metric": r["metric"],
            "split": "report", "source": r["source"], "notes": r["notes"],
            "measured_samples_per_s": float(speed["value"]) if speed else "",
            "throughput_source": speed["source"] if speed else "", "throughput_notes": speed["notes"] if speed else "",
        })
    kept += later  # the Adafactor and 8-bit Adam runs after the AdamW ones (whose ids stay)
    for i, row in enumerate(kept, 1):
        row["id"] = f"m{i:03d}"
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(kept)
    print(f"wrote {len(kept)} rows to {out} (CUDA context {runtime_mib:.0f} MiB from its own row)")
    for line in skipped:
        print(f"  skipped: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
