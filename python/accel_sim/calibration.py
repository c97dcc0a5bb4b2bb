"""Micro-benchmarks through PyTorch on a local GPU, for `accel-sim calibrate --device NAME`.

The sweep times GEMMs (square, tall, and skinny decode shapes, M = 1 ... 256), fused attention
(SDPA, causal and not, head dims 64 and 128, forward and backward), streaming kernels (add,
copy, mul over sizes from 64 KB to 1 GB) and a near-empty kernel. Each kernel is launched back
to back and timed with CUDA events (median of repeats after warm-up), the way the published
benchmarks in the validation data were taken. Rows use the columns of
`data/validation/kernels.csv`, carry the GPU, driver, torch and CUDA versions and the date, and
get the same fit/report split rule, so `validate --data` and `calibrate --data` read them.

`measure_models()` times whole HF models built from shipped configs (GPT-2 and BERT-base training
steps with AdamW, a Llama-3-8B prefill), with torch.cuda's peak allocated and reserved memory,
as end-to-end rows (`E2E_COLUMNS`) that `validate` compares with the model builder.

`measure()` and `measure_models()` also run on "cpu" with `quick=True` (tiny shapes): the tests
exercise the sweep and its bookkeeping there; CPU timings calibrate nothing and the command
refuses them.
"""

from __future__ import annotations

import csv
import datetime
import hashlib
import statistics
import time
from pathlib import Path
from typing import Any, Callable

COLUMNS = ["id", "kind", "device", "dtype", "op", "m", "n", "k", "batch", "heads", "kv_heads", "seq_q",
           "seq_k", "head_dim", "causal", "direction", "impl", "elements", "bytes", "measured_s", "split",
           "source", "notes"]
# The split rule of validation/extract_published.py: sha256 of these fields, first byte < 102 -> fit.
_SPLIT_KEY = ["device", "kind", "op", "dtype", "m", "n", "k", "batch", "heads", "kv_heads", "seq_q", "seq_k",
              "head_dim", "causal", "impl", "direction"]
_FIT_THRESHOLD = 102


def split_of(row: dict) -> str:
    key = "|".join(str(row.get(f, "")) for f in _SPLIT_KEY)
    return "fit" if hashlib.sha256(key.encode()).digest()[0] < _FIT_THRESHOLD else "report"


def provenance(torch: Any, torch_device: str) -> str:
    """GPU, driver, torch and CUDA versions and the date, for every measured row."""
    today = datetime.date.today().isoformat()
    if torch_device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch_device)
        driver = ""
        try:
            import subprocess

            driver = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                                    capture_output=True, text=True, timeout=30).stdout.strip().splitlines()[0]
        except Exception:  # noqa: BLE001 - the driver version is informative, not required
            driver = "unknown"
        return (f"accel-sim calibrate on {props.name} ({props.multi_processor_count} SMs), driver {driver}, "
                f"torch {torch.__version__}, CUDA {torch.version.cuda}, {today}")
    return f"accel-sim calibrate on CPU (test run, not a calibration), torch {torch.__version__}, {today}"


def _timer(torch: Any, torch_device: str, repeats: int) -> Callable[[Callable[[], Any]], float]:
    def run(fn: Callable[[], Any]) -> float:
        for _ in range(3):
            fn()
        times = []
        if torch_device.startswith("cuda"):
            torch.cuda.synchronize()
            for _ in range(repeats):
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                end.synchronize()
                times.append(start.elapsed_time(end) * 1e-3)
        else:
            for _ in range(repeats):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
        return statistics.median(times)

    return run


def measure(device_id: str, torch_device: str = "cuda", quick: bool = False) -> list[dict]:
    """Runs the sweep and returns its rows (kernels.csv columns)."""
    import torch
    import torch.nn.functional as F

    dtype = torch.bfloat16 if torch_device.startswith("cuda") else torch.float32
    dtype_name = "bf16" if dtype == torch.bfloat16 else "fp32"
    timed = _timer(torch, torch_device, repeats=3 if quick else 20)
    source = provenance(torch, torch_device)
    rows: list[dict] = []

    def add(**fields: Any) -> None:
        row = {c: "" for c in COLUMNS}
        row.update({k: ("true" if v is True else "false" if v is False else v) for k, v in fields.items()})
        row.update(device=device_id, dtype=dtype_name, source=source)
        row["split"] = split_of(row)
        rows.append(row)

    # GEMMs: square, tall, and the skinny decode shapes of a 4096/14336-wide model.
    shapes = [(64, 64, 64), (1, 128, 128)] if quick else (
        [(s, s, s) for s in (512, 1024, 2048, 4096, 8192)]
        + [(m, 4096, 4096) for m in (1, 8, 32, 64, 128, 256, 1024)]
        + [(m, 14336, 4096) for m in (1, 16, 128, 2048)] + [(m, 4096, 14336) for m in (1, 16, 128, 2048)]
        + [(8192, 1024, 8192), (1024, 8192, 8192)])
    for m, n, k in shapes:
        a = torch.randn(m, k, device=torch_device, dtype=dtype)
        b = torch.randn(k, n, device=torch_device, dtype=dtype)
        add(kind="gemm", op="matmul", m=m, n=n, k=k, batch=1, impl="torch", measured_s=timed(lambda: a @ b),
            notes="torch.matmul")

    # Attention through SDPA (what PyTorch runs by default on the device).
    cases = [(1, 2, 64, 32, False)] if quick else [
        (b, h, s, d, c) for (b, h, s) in ((8, 32, 1024), (4, 32, 2048), (2, 32, 4096), (1, 32, 8192))
        for d in (64, 128) for c in (False, True)]
    for batch, heads, seq, dim, causal in cases:
        q = torch.randn(batch, heads, seq, dim, device=torch_device, dtype=dtype, requires_grad=True)
        k = torch.randn_like(q, requires_grad=True)
        v = torch.randn_like(q, requires_grad=True)
        fields = dict(kind="attention", op="attention", batch=batch, heads=heads, kv_heads=heads, seq_q=seq,
                      seq_k=seq, head_dim=dim, causal=causal, impl="flash2", notes="F.scaled_dot_product_attention")
        add(direction="forward", measured_s=timed(lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal)),
            **fields)
        out = F.scaled_dot_product_attention(q, k, v, is_causal=causal)
        grad = torch.randn_like(out)
        add(direction="backward", measured_s=timed(lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)),
            **fields)

    # Streaming kernels over sizes from 64 KB to 1 GB (bf16), and a near-empty kernel.
    sizes = [1 << 12] if quick else [1 << e for e in range(15, 30, 2)]
    for elements in sizes:
        x = torch.randn(elements, device=torch_device, dtype=dtype)
        y = torch.randn_like(x)
        size = x.element_size()
        for op, fn, passes in (("add", lambda: x + y, 3), ("mul", lambda: x * y, 3), ("copy", lambda: x.clone(), 2)):
            add(kind="memory", op=op, direction="forward", impl="torch", elements=elements,
                bytes=passes * elements * size, measured_s=timed(fn), notes="eager aten op")
    tiny = torch.zeros(1, device=torch_device, dtype=dtype)
    add(kind="memory", op="add", direction="forward", impl="torch", elements=1, bytes=3 * tiny.element_size(),
        measured_s=timed(lambda: tiny + tiny), notes="near-empty kernel: the floor")

    for i, row in enumerate(rows, 1):
        row["id"] = f"c{i:04d}"
        row["measured_s"] = f"{float(row['measured_s']):.6g}"
    return rows


E2E_COLUMNS = ["id", "device", "model", "phase", "batch", "seq", "dtype", "kernels", "optimizer", "measured_s",
               "peak_allocated_bytes", "peak_reserved_bytes", "split", "source", "notes"]


def measure_models(device_id: str, torch_device: str = "cuda", quick: bool = False) -> list[dict]:
    """End-to-end rows: HF models from shipped configs, timed step by step (median of repeats)."""
    import json

    import torch
    import transformers

    from accel_sim.io.model_config import load_model_config

    cuda = torch_device.startswith("cuda")
    dtype = torch.bfloat16 if cuda else torch.float32
    dtype_name = "bf16" if cuda else "fp32"
    timed = _timer(torch, torch_device, repeats=2 if quick else 10)
    source = provenance(torch, torch_device)
    # (shipped model, phase, batch, seq): training steps of models that fit with AdamW states,
    # and a prefill of an 8B model.
    cases = [("gpt2", "train", 1, 32)] if quick else [
        ("gpt2", "train", b, 1024) for b in (4, 8, 16)] + [("bert-base", "train", b, 512) for b in (8, 32)] + [
        ("llama-3-8b", "prefill", b, s) for b, s in ((1, 2048), (4, 2048), (1, 8192))]
    rows = []
    for model_id, phase, batch, seq in cases:
        config, _ = load_model_config(model_id)
        if quick:
            config = {**config, "n_layer": 2, "n_embd": 64, "n_head": 2, "vocab_size": 128, "n_positions": 64}
        hf_config = transformers.AutoConfig.for_model(**{k: v for k, v in config.items() if k != "architectures"})
        hf_config._attn_implementation = "sdpa"
        architecture = getattr(transformers, (config.get("architectures") or ["AutoModelForCausalLM"])[0])
        model = architecture(hf_config).to(device=torch_device, dtype=dtype)
        ids = torch.randint(0, hf_config.vocab_size, (batch, seq), device=torch_device)
        if cuda:
            torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats()
        if phase == "train":
            model.train()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)

            def step() -> None:
                model(input_ids=ids, labels=ids).loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)

            seconds = timed(step)
        else:
            model.eval()

            def step() -> None:
                with torch.no_grad():
                    model(input_ids=ids)

            seconds = timed(step)
        peak = torch.cuda.max_memory_allocated() if cuda else 0
        reserved = torch.cuda.max_memory_reserved() if cuda else 0
        row = {"device": device_id, "model": model_id, "phase": phase, "batch": batch, "seq": seq,
               "dtype": dtype_name, "kernels": "hf-eager", "optimizer": "adamw" if phase == "train" else "",
               "measured_s": f"{seconds:.6g}", "peak_allocated_bytes": peak, "peak_reserved_bytes": reserved,
               "split": "report", "source": source,
               "notes": "HF transformers, SDPA attention, weights and AdamW states in " + dtype_name
               + ("; tiny config (test run)" if quick else "") + "; config " + json.dumps({"model": model_id})}
        rows.append(row)
        del model
    for i, row in enumerate(rows, 1):
        row["id"] = f"e{i:04d}"
    return rows


def write_rows(rows: list[dict], path: Path, columns: list[str] | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns or COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
