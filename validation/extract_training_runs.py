"""Extracts the large training runs of validation/published.csv that `accel-sim train`
can reproduce into python/accel_sim/data/validation/training_runs.csv.

Kept: Megatron-LM / NeMo (Megatron-Bridge) pre-training rows with a full parallel configuration
(gpus, TP, PP, CP, virtual stages, global and micro batch, sequence length) of a dense model
whose config accel-sim ships, on a system it has a file for. Left out, with the reason printed:
fine-tuning (SFT, LoRA), FSDP, MoE and hybrid models, models without a shipped config. The
precision is the row's: its dtype column or its params' precision naming FP8 (NeMo 24.07's
tables are all "DGX-H100, FP8"; the Megatron-Bridge tables without a precision column footnote
their parenthesized values as "alternative FP8 quantization granularity", i.e. both figures are FP8
recipes) -> fp8-mixed, BF16 -> bf16-mixed; "unstated" where nothing says. All rows are report-only: nothing is fitted to them.

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
COLUMNS = ["id", "system", "model", "gpus", "tp", "pp", "cp", "dp", "virtual_stages", "global_batch", "micro_batch",
           "seq", "precision", "measured_tokens_per_s_per_gpu", "split", "source", "notes"]
MODELS = {"LLAMA3_8B": "llama-3-8b", "LLAMA3-8B": "llama-3-8b", "LLAMA3_70B": "llama-3-70b", "LLAMA3-70B": "llama-3-70b",
          "LLAMA3.1_405B": "llama-3.1-405b", "LLAMA2-7B": "llama-2-7b", "LLAMA2-13B": "llama-2-13b",
          "LLAMA2-70B": "llama-2-70b", "GPT3-175B": "gpt3-175b"}
SYSTEMS = {"DGX-H100": "dgx_h100", "DGX-B200": "dgx_b200"}


def _int(value) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def main(argv: list[str]) -> int:
    src = Path(argv[1]) if len(argv) > 1 else DEFAULT_INPUT
    out = Path(argv[2]) if len(argv) > 2 else OUTPUT
    with open(src, newline="", encoding="utf-8") as f:
        rows = [r for r in csv.DictReader(f) if r["category"] == "training" and
                ("Megatron" in r["source"] or "NeMo" in r["workload"] or "NeMo" in r["params_json"])]
    kept, skipped = [], {}

    def skip(reason: str) -> None:
        skipped[reason] = skipped.get(reason, 0) + 1

    for r in rows:
        if "tokens/s/GPU" not in r["unit"]:
            skip(f"metric {r['metric']!r}")
            continue
        p = json.loads(r["params_json"])
        if p.get("task") or "SFT" in r["workload"] or "LoRA" in r["workload"]:
            skip("fine-tuning")
            continue
        if _int(p.get("FSDP", 0)) not in (0, None):
            skip("FSDP")
            continue
        model = MODELS.get(str(p.get("model", "")))
        if model is None:
            skip(f"no shipped config for {p.get('model')}")
            continue
        system = next((v for k, v in SYSTEMS.items() if k in r["hardware"]), None)
        if system is None:
            skip(f"no system file for {r['hardware']}")
            continue
        gpus, tp, pp, cp = (_int(p.get(k, 1)) for k in ("gpus", "TP", "PP", "CP"))
        vp = _int(p.get("VP", 1)) or 1
        gbs, mbs, seq = _int(p.get("gbs")), _int(p.get("mbs")), _int(p.get("seq_len"))
        if None in (gpus, tp, pp, cp, gbs, mbs, seq) or gpus % (tp * pp * cp):
            skip("incomplete parallel configuration")
            continue
        text = str(p.get("precision", ""))
        precision = ("fp8-mixed" if "FP8" in text or r["dtype"].lower().startswith("fp8")
                     else "bf16-mixed" if text == "BF16" else "unstated")
        kept.append({"id": f"t{len(kept) + 1:03d}", "system": system, "model": model, "gpus": gpus, "tp": tp, "pp": pp,
                     "cp": cp, "dp": gpus // (tp * pp * cp), "virtual_stages": vp, "global_batch": gbs,
                     "micro_batch": mbs, "seq": seq, "precision": precision,
                     "measured_tokens_per_s_per_gpu": float(r["value"]), "split": "report", "source": r["source"],
                     "notes": p.get("software", "")})
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
