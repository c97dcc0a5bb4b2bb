"""Extracts the encoder inference rows of validation/published.csv into
python/accel_sim/data/validation/encoder_runs.csv: BERT question-answering forward passes whose
source gives the model, device, batch, sequence length and precision.

Source family: NVIDIA DeepLearningExamples, TensorFlow/LanguageModeling/BERT/README.md
("Inference performance" tables, NGC TensorFlow 1 container 20.06, finetune_inference_benchmark.sh
on SQuAD v1.1): the latency of one batch through the fine-tuned encoder, its p90 (DGX-1, DGX-2,
DGX A100 tables) or p50 (the T4 table), as the README prints it, in ms. The QA head is a
[hidden, 2] projection (under 0.01% of the FLOPs); the shipped BERT configs are built without their
masked-LM head for these rows. Precision: the table's "FP16" (TensorFlow's automatic mixed
precision), "FP32", or "TF32" (A100 tensor cores on fp32 data).

GPUs: "V100 SXM2 16GB / 32GB (DGX-1)" -> v100_sxm2_16gb / v100_sxm2_32gb; "V100 SXM3 32GB
(DGX-2)" -> v100_sxm2_32gb (the SXM3 part runs at 350 W with a 1597 MHz boost against the SXM2
part's 300 W and 1530 MHz; the row says so in its notes); "A100 SXM4 40GB (DGX A100)" ->
a100_40gb; "Tesla T4 16GB" -> t4.

Split: the DGX-1 V100 16GB table (the README's first, 17 rows) is the fit split, from which
validation/fit_encoder_host.py fits the tensorflow1-xla stack's host cost per kernel; the other
tables (other machines, each with its own host CPU) are the report split.

Run: python validation/extract_encoder.py [path/to/published.csv [path/to/output.csv]]
(standard library only)
"""

from __future__ import annotations

import csv
import json
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_INPUT = REPO_ROOT / "validation" / "published.csv"
OUTPUT = REPO_ROOT / "python" / "accel_sim" / "data" / "validation" / "encoder_runs.csv"
COLUMNS = ["id", "device", "model", "batch", "seq", "precision", "metric", "measured_ms", "split", "source", "notes"]
DEVICES = {"V100 SXM2 16GB": "v100_sxm2_16gb", "V100 SXM2 32GB": "v100_sxm2_32gb", "V100 SXM3 32GB": "v100_sxm2_32gb",
           "A100 SXM4 40GB": "a100_40gb", "Tesla T4": "t4"}
MODELS = {"BERT-base": "bert-base-uncased", "BERT-large": "bert-large-uncased"}
PRECISIONS = {"fp16": "fp16", "fp32": "fp32", "tf32": "tf32"}
# The table whose rows are the fit split (the DGX-1 with V100 SXM2 16GB).
FIT_DEVICE = "v100_sxm2_16gb"


class Skip(Exception):
    """A row left out, with the reason."""


def _row(r: dict) -> dict:
    if "DeepLearningExamples" not in r["source"] or "BERT" not in r["workload"]:
        raise Skip("not a DeepLearningExamples BERT inference row")
    p = json.loads(r["params_json"])
    device = next((v for k, v in DEVICES.items() if k in r["hardware"]), None)
    if device is None:
        raise Skip(f"no device mapping for {r['hardware']!r}")
    model = next((v for k, v in MODELS.items() if str(p.get("model", "")).startswith(k)), None)
    if model is None:
        raise Skip(f"no shipped config for {p.get('model')!r}")
    precision = PRECISIONS.get(r["dtype"])
    if precision is None or r["unit"] != "ms":
        raise Skip(f"precision {r['dtype']!r} in {r['unit']!r}")
    notes = [r["notes"]]
    if "SXM3" in r["hardware"]:
        notes.append("V100 SXM3 (DGX-2): 350 W, 1597 MHz boost, simulated as the 300 W SXM2 part")
    return {"device": device, "model": model, "batch": int(p["batch"]), "seq": int(p["seq_len"]),
            "precision": precision, "metric": r["metric"], "measured_ms": float(r["value"]),
            "split": "fit" if device == FIT_DEVICE else "report", "source": r["source"], "notes": "; ".join(notes)}


def main(argv: list[str]) -> int:
    src = Path(argv[1]) if len(argv) > 1 else DEFAULT_INPUT
    out = Path(argv[2]) if len(argv) > 2 else OUTPUT
    with open(src, newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["category"] == "inference"]
    kept, skipped = [], {}
    for r in rows:
        try:
            kept.append({"id": f"b{len(kept) + 1:03d}", **_row(r)})
        except Skip as e:
            skipped[str(e)] = skipped.get(str(e), 0) + 1
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(kept)
    print(f"wrote {len(kept)} rows to {out}")
    for reason, n in sorted(skipped.items(), key=lambda kv: -kv[1]):
        print(f"  skipped {n:3d}: {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
