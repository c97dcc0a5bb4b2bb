"""Llama-3-8B decode as gpt-fast runs it: HF transformers' static KV cache and the forward
compiled with torch.compile(mode="reduce-overhead", fullgraph=True) (Inductor's fused kernels
replayed as CUDA graphs), timed per step after compilation.

    python validation/gpu/measure_compiled_decode.py --out DIR [--batches 1 8]

writes DIR/compiled_decode.csv, each row with the GPU, driver, torch, CUDA and transformers
versions and the date. Random weights from the shipped config.
"""

from __future__ import annotations

import argparse
import csv
import statistics
import sys
import time
from pathlib import Path

try:  # the installed package, or else this checkout's python/ (a build that put _core there)
    import accel_sim  # noqa: F401
except ImportError:
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "python"))

from accel_sim.calibration import provenance  # noqa: E402
from accel_sim.io.model_config import load_model_config  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--batches", type=int, nargs="+", default=[1, 8])
    ap.add_argument("--context", type=int, default=1024)
    args = ap.parse_args()
    import torch
    import transformers
    from transformers import StaticCache

    source = provenance(torch, "cuda") + f", transformers {transformers.__version__}"
    config, _ = load_model_config("llama-3-8b")
    hf = transformers.AutoConfig.for_model(**{k: v for k, v in config.items() if k != "architectures"})
    hf._attn_implementation = "sdpa"
    torch.set_default_dtype(torch.bfloat16)
    with torch.device("cuda"):
        model = transformers.LlamaForCausalLM(hf)
    model.eval()
    forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
    rows = []
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for batch in args.batches:
        context = args.context
        cache = StaticCache(config=hf, max_cache_len=context + 64)
        prompt = torch.randint(0, hf.vocab_size, (batch, context), device="cuda")
        with torch.no_grad():
            model(input_ids=prompt, past_key_values=cache, use_cache=True, logits_to_keep=1,
                  cache_position=torch.arange(context, device="cuda"))
        ids = torch.randint(0, hf.vocab_size, (batch, 1), device="cuda")
        position = torch.tensor([context], device="cuda")

        def step():
            with torch.no_grad():
                return forward(input_ids=ids, past_key_values=cache, use_cache=True, cache_position=position,
                               position_ids=position.expand(batch, 1))

        t0 = time.perf_counter()
        for _ in range(3):
            step()
        torch.cuda.synchronize()
        compile_s = time.perf_counter() - t0
        times = []
        for _ in range(30):
            torch.cuda.synchronize()
            t = time.perf_counter()
            step()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t)
        rows.append(dict(model="llama-3-8b", phase="decode", batch=batch, context=context,
                         mode="torch.compile reduce-overhead, static cache", measured_s=f"{statistics.median(times):.6g}",
                         compile_s=f"{compile_s:.1f}", source=source,
                         notes=f"StaticCache of {context + 64} tokens (attention reads the whole buffer under a mask)"))
        print(rows[-1], flush=True)
        with open(out / "compiled_decode.csv", "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
