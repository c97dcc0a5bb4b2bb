"""Micro-benchmarks through PyTorch on a local GPU, for `accel-sim calibrate --device NAME`.

`measure()` times, with CUDA events around each launch and the L2 cache flushed before it (the
method of `triton.testing.do_bench`, which the published Liger and FlashAttention figures use):

- GEMMs (bf16; fp16 squares; fp8 e4m3 through `torch._scaled_mm` with per-tensor scales): squares
  256 ... 16384; the projections of 8B and 70B Llama models at M = 1 ... 16384 tokens; shapes just
  off the 64/128 tile alignments (K = 10,922 beside 10,880 and 10,944; M = 4,095 and 4,097); and
  batched GEMMs with the expert shapes of Mixtral and Qwen3-MoE at small M;
- attention through SDPA with its backend pinned (PyTorch's FlashAttention-2 -> "flash2", cuDNN ->
  "cudnn"): 16k tokens from 128 x 512 to 1 x 16384 per sequence, head dims 64 and 128, causal and
  not, forward and backward; grouped-query attention; decode shapes (one query over 1k-16k keys);
- streaming kernels (add, mul, copy, silu, gelu, cast, softmax, rms_norm, layer_norm) over sizes
  from 64 KB to 1 GB, and a near-empty kernel (the floor).

`measure_host()` times the host side: a chain of small kernels launched eagerly and replayed as a
CUDA graph (seconds per kernel).

`measure_models()` times whole HF models built from shipped configs (optionally with fewer layers,
recorded in the row): training steps with AdamW in pure bf16, with full recompute, and with fp32
weights under bf16 autocast (what HF Trainer runs); prefill and decode steps of Llama-3-8B; with
torch.cuda's peak allocated and reserved memory.

A case that fails on the device (a shape a kernel refuses, an old torch) is reported on stderr
and left out; the command prints how many were.

Every row carries the GPU, its power limit and clocks, driver, torch and CUDA versions and the
date, and gets the fit/report split rule of the published data. `measure()`, `measure_host()` and
`measure_models()` also run on "cpu" with `quick=True` (tiny shapes): the tests exercise the sweep
and its bookkeeping there; CPU timings calibrate nothing and the command refuses them.
"""

from __future__ import annotations

import csv
import datetime
import hashlib
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Callable

COLUMNS = ["id", "kind", "device", "dtype", "op", "m", "n", "k", "batch", "heads", "kv_heads", "seq_q",
           "seq_k", "head_dim", "causal", "direction", "impl", "elements", "bytes", "measured_s", "timing",
           "split", "source", "notes"]
E2E_COLUMNS = ["id", "device", "model", "phase", "batch", "seq", "dtype", "kernels", "optimizer", "measured_s",
               "peak_allocated_bytes", "peak_reserved_bytes", "split", "source", "notes", "overrides", "precision",
               "recompute", "context"]
HOST_COLUMNS = ["id", "device", "mode", "op", "kernels", "seconds_per_kernel", "source", "notes"]
# The split rule of validation/extract_published.py: sha256 of these fields (and a memory-bound row's
# elements), first byte < 102 -> fit.
_SPLIT_KEY = ["device", "kind", "op", "dtype", "m", "n", "k", "batch", "heads", "kv_heads", "seq_q", "seq_k",
              "head_dim", "causal", "impl", "direction"]
_FIT_THRESHOLD = 102
_L2_FLUSH_BYTES = 256 << 20  # triton.testing.do_bench's cache-clearing buffer


def split_of(row: dict) -> str:
    key = "|".join(str(row.get(f, "")) for f in _SPLIT_KEY) + (f"|{row['elements']}" if row.get("elements") else "")
    return "fit" if hashlib.sha256(key.encode()).digest()[0] < _FIT_THRESHOLD else "report"


def _nvidia_smi(fields: str) -> str:
    import subprocess

    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={fields}", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.strip().splitlines()
        return out[0] if out else "unknown"
    except Exception:  # noqa: BLE001 - the driver's figures are informative, not required
        return "unknown"


def script_arguments(doc: str, quick_what: str, extra: Callable[[Any], None] | None = None) -> Any:
    """The command line every validation/gpu/ script shares: --out, --device (a torch device,
    cuda by default; cpu runs a script as its own test) and --quick (tiny `quick_what`: a test of
    the script, not a measurement); `extra` adds a script's own options to the parser."""
    import argparse

    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--quick", action="store_true", help=f"tiny {quick_what} (a test of the script, not a measurement)")
    if extra is not None:
        extra(ap)
    return ap.parse_args()


def compute_dtype(torch: Any, torch_device: str) -> tuple[bool, Any]:
    """Whether `torch_device` is a GPU, and the dtype the scripts time there: bf16 on a GPU, fp32
    on the CPU (whose test runs need no 16-bit kernels)."""
    cuda = torch_device.startswith("cuda")
    return cuda, torch.bfloat16 if cuda else torch.float32


def provenance(torch: Any, torch_device: str) -> str:
    """GPU, its power limit and clocks, driver, torch and CUDA versions and the date."""
    today = datetime.date.today().isoformat()
    if torch_device.startswith("cuda"):
        props = torch.cuda.get_device_properties(torch_device)
        driver, power, sm, mem = (s.strip() for s in
                                  (_nvidia_smi("driver_version,power.limit,clocks.max.sm,clocks.max.mem")
                                   + ",,,").split(",")[:4])
        return (f"accel-sim calibrate on {props.name} ({props.multi_processor_count} SMs, power limit {power}, "
                f"max clocks SM {sm} memory {mem}), driver {driver}, torch {torch.__version__}, "
                f"CUDA {torch.version.cuda}, {today}")
    return f"accel-sim calibrate on CPU (test run, not a calibration), torch {torch.__version__}, {today}"


def _timer(torch: Any, torch_device: str, repeats: int, flush_l2: bool) -> Callable[[Callable[[], Any]], float]:
    """Median seconds of one launch of fn. On CUDA each launch sits between two events, after a
    write of a 256 MB buffer that evicts L2 and keeps the GPU busy while the host enqueues fn."""
    cuda = torch_device.startswith("cuda")
    flush = torch.empty(_L2_FLUSH_BYTES // 4, dtype=torch.int32, device=torch_device) if cuda and flush_l2 else None

    def run(fn: Callable[[], Any]) -> float:
        for _ in range(3):
            fn()
        times = []
        if cuda:
            torch.cuda.synchronize()
            pairs = []
            for _ in range(repeats):
                if flush is not None:
                    flush.zero_()
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                fn()
                end.record()
                pairs.append((start, end))
            torch.cuda.synchronize()
            times = [s.elapsed_time(e) * 1e-3 for s, e in pairs]
        else:
            for _ in range(repeats):
                t0 = time.perf_counter()
                fn()
                times.append(time.perf_counter() - t0)
        return statistics.median(times)

    return run


def wall_seconds(torch: Any, fn: Callable[[], Any], repeats: int, cuda: bool, warmup: int = 3) -> float:
    """Median wall-clock seconds of fn() to a synchronized device, after `warmup` calls: what a
    host-bound step costs (CUDA events would hide where the host stalls)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeats):
        if cuda:
            torch.cuda.synchronize()
        t0 = time.perf_counter()
        fn()
        if cuda:
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def capture_graph(torch: Any, fn: Callable[[], Any], warmup: int = 3) -> Any:
    """fn captured once as a torch.cuda.CUDAGraph, after `warmup` calls on a side stream (as
    torch.cuda.graphs documents); replay() then reruns its kernels without the host."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    return graph


def build_hf_model(model_id: str, overrides: dict, torch_device: str, dtype: Any) -> tuple[Any, Any]:
    """(an HF transformers model with random weights, its config) from a shipped config with
    `overrides`, SDPA attention, built directly on `torch_device` in `dtype`."""
    import torch
    import transformers

    from accel_sim.io.model_config import load_model_config

    config, _ = load_model_config(model_id)
    config = {**config, **overrides}
    hf_config = transformers.AutoConfig.for_model(**{k: v for k, v in config.items() if k != "architectures"})
    hf_config._attn_implementation = "sdpa"
    architecture = getattr(transformers, (config.get("architectures") or ["AutoModelForCausalLM"])[0])
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(torch_device):
            model = architecture(hf_config)
    finally:
        torch.set_default_dtype(previous)
    return model, hf_config


class _Cases:
    """Runs each case; one that raises is reported on stderr and counted, not recorded."""

    def __init__(self) -> None:
        self.failed = 0

    def run(self, label: str, fn: Callable[[], None]) -> None:
        try:
            fn()
        except Exception as e:  # noqa: BLE001 - reported, counted and left out
            self.failed += 1
            print(f"# left out {label}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                  file=sys.stderr, flush=True)


def _gemm_shapes(quick: bool) -> list[tuple[int, int, int, int]]:
    """(batch, m, n, k) of the bf16 sweep."""
    if quick:
        return [(1, 64, 64, 64), (1, 1, 128, 128), (2, 8, 32, 64)]
    shapes = [(1, s, s, s) for s in (256, 512, 1024, 2048, 4096, 8192, 16384)]
    # Projections of Llama-3-8B (hidden 4096, qkv 6144, MLP 14336, vocab 128256) and Llama-3-70B
    # (hidden 8192, qkv 10240, MLP 28672) at decode and prefill token counts.
    for n, k in ((4096, 4096), (6144, 4096), (28672, 4096), (4096, 14336), (128256, 4096),
                 (8192, 8192), (10240, 8192), (57344, 8192), (8192, 28672)):
        shapes += [(1, m, n, k) for m in (1, 4, 16, 64, 256, 1024, 4096, 16384)]
    # Just off the tile alignments: K = 10,922 (2/3 x 16,384) beside 10,880 and 10,944; odd M and N.
    shapes += [(1, 4096, 4096, k) for k in (10880, 10922, 10944, 11008)]
    shapes += [(1, 4096, n, 4096) for n in (10880, 10922, 10944)]
    shapes += [(1, m, 4096, 4096) for m in (4095, 4097, 4000)]
    # Expert GEMMs as one batched GEMM per layer: Mixtral-8x7B (8 experts, 4096 -> 14336) and
    # Qwen3-30B-A3B (128 experts, 2048 -> 768) at the tokens per expert of small batches.
    shapes += [(8, m, 14336, 4096) for m in (1, 8, 64, 512, 2048)]
    shapes += [(8, m, 4096, 14336) for m in (1, 8, 64, 512)]
    shapes += [(128, m, 1536, 2048) for m in (1, 8, 32, 128, 512)]
    shapes += [(128, m, 2048, 768) for m in (1, 8, 32, 128)]
    return shapes


def measure(device_id: str, torch_device: str = "cuda", quick: bool = False) -> list[dict]:
    """Runs the kernel sweep and returns its rows (kernels.csv columns)."""
    import torch
    import torch.nn.functional as F

    cuda = torch_device.startswith("cuda")
    dtype = torch.bfloat16 if cuda else torch.float32
    dtype_name = "bf16" if cuda else "fp32"
    timed = _timer(torch, torch_device, repeats=3 if quick else 20, flush_l2=True)
    source = provenance(torch, torch_device)
    rows: list[dict] = []
    cases = _Cases()

    def add(dtype_label: str = dtype_name, **fields: Any) -> None:
        row = {c: "" for c in COLUMNS}
        row.update({k: ("true" if v is True else "false" if v is False else v) for k, v in fields.items()})
        row.update(device=device_id, dtype=dtype_label, source=source, timing="events")  # alone (see _timer)
        row["split"] = split_of(row)
        rows.append(row)

    def gemm(batch: int, m: int, n: int, k: int, dt: Any, label: str) -> None:
        shape_a = (batch, m, k) if batch > 1 else (m, k)
        shape_b = (batch, k, n) if batch > 1 else (k, n)
        a = torch.randn(shape_a, device=torch_device, dtype=dt)
        b = torch.randn(shape_b, device=torch_device, dtype=dt)
        seconds = timed(lambda: torch.matmul(a, b))
        add(label, kind="gemm", op="matmul", m=m, n=n, k=k, batch=batch, impl="torch", measured_s=seconds,
            notes="torch.matmul (cuBLAS)" + (", batched" if batch > 1 else ""))

    for batch, m, n, k in _gemm_shapes(quick):
        cases.run(f"gemm {batch}x{m}x{n}x{k}", lambda: gemm(batch, m, n, k, dtype, dtype_name))
    if cuda:
        for s in (1024, 2048, 4096, 8192):
            cases.run(f"fp16 gemm {s}", lambda: gemm(1, s, s, s, torch.float16, "fp16"))

    def fp8_gemm(m: int, n: int, k: int) -> None:
        a = torch.randn(m, k, device=torch_device).to(torch.float8_e4m3fn)
        b = torch.randn(n, k, device=torch_device).to(torch.float8_e4m3fn).t()  # column-major, as cuBLASLt wants
        one = torch.ones((), device=torch_device, dtype=torch.float32)
        seconds = timed(lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16))
        add("fp8", kind="gemm", op="matmul", m=m, n=n, k=k, batch=1, impl="torch", measured_s=seconds,
            notes="torch._scaled_mm e4m3 x e4m3 -> bf16, per-tensor scales (cuBLASLt)")

    if cuda:
        fp8_shapes = [(s, s, s) for s in (1024, 2048, 4096, 8192, 16384)] + [
            (m, n, k) for n, k in ((6144, 4096), (28672, 4096), (4096, 14336), (57344, 8192), (8192, 28672))
            for m in (16, 256, 4096, 16384)]
        for m, n, k in fp8_shapes:
            cases.run(f"fp8 gemm {m}x{n}x{k}", lambda: fp8_gemm(m, n, k))

    # Attention through SDPA with the backend pinned, so each row names the kernel that ran.
    from torch.nn.attention import SDPBackend, sdpa_kernel

    backends = [("flash2", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)] if cuda else [
        ("flash2", SDPBackend.MATH)]

    def attention(impl: str, backend: Any, batch: int, heads: int, kv_heads: int, seq_q: int, seq_k: int,
                  dim: int, causal: bool, backward: bool) -> None:
        q = torch.randn(batch, heads, seq_q, dim, device=torch_device, dtype=dtype, requires_grad=backward)
        k = torch.randn(batch, kv_heads, seq_k, dim, device=torch_device, dtype=dtype, requires_grad=backward)
        v = torch.randn_like(k, requires_grad=backward)
        gqa = {"enable_gqa": True} if kv_heads != heads else {}
        fields = dict(kind="attention", op="attention", batch=batch, heads=heads, kv_heads=kv_heads, seq_q=seq_q,
                      seq_k=seq_k, head_dim=dim, causal=causal, impl=impl,
                      notes=f"F.scaled_dot_product_attention, backend {backend.name}")
        with sdpa_kernel([backend]):
            add(direction="forward", measured_s=timed(
                lambda: F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa)), **fields)
            if backward:
                out = F.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa)
                grad = torch.randn_like(out)
                add(direction="backward", measured_s=timed(
                    lambda: torch.autograd.grad(out, (q, k, v), grad, retain_graph=True)), **fields)

    shapes = [(1, 2, 2, 64, 64, 32, False), (1, 4, 2, 64, 64, 32, True)] if quick else (
        [(b, 32, 32, s, s, d, c) for (b, s) in ((128, 128), (32, 512), (16, 1024), (8, 2048), (4, 4096), (2, 8192),
                                                 (1, 16384)) for d in (64, 128) for c in (False, True)]
        + [(b, 32, 8, s, s, 128, True) for (b, s) in ((8, 2048), (2, 8192))])
    for impl, backend in backends:
        for batch, heads, kv, sq, sk, d, c in shapes:
            cases.run(f"{impl} attention b{batch} h{heads}/{kv} s{sq} d{d} causal={c}",
                      lambda: attention(impl, backend, batch, heads, kv, sq, sk, d, c, True))
    # Decode: one query per sequence over its cache (GQA 32/8, head dim 128), forward only.
    if cuda:
        for batch in (1, 16, 64):
            for context in (1024, 4096, 16384):
                cases.run(f"decode attention b{batch} s{context}",
                          lambda: attention("flash2", SDPBackend.FLASH_ATTENTION, batch, 32, 8, 1, context, 128,
                                            False, False))

    # Streaming kernels: bytes are what the kernel must read and write.
    sizes = [1 << 12] if quick else [1 << e for e in range(15, 30, 2)]

    def streaming(elements: int) -> None:
        x = torch.randn(elements, device=torch_device, dtype=dtype)
        y = torch.randn_like(x)
        rows2d = x.view(-1, 4096) if elements >= 4096 else x.view(1, -1)
        width = rows2d.shape[-1]
        w = torch.ones(width, device=torch_device, dtype=dtype)
        size = x.element_size()
        wide = torch.float32
        ops = (("add", lambda: x + y, 3 * size), ("mul", lambda: x * y, 3 * size), ("copy", lambda: x.clone(), 2 * size),
               ("silu", lambda: F.silu(x), 2 * size), ("gelu", lambda: F.gelu(x), 2 * size),
               ("cast", lambda: x.to(wide), size + 4),
               ("softmax", lambda: torch.softmax(rows2d, dim=-1), 2 * size),
               ("rms_norm", lambda: F.rms_norm(rows2d, (width,), w), 2 * size),
               ("layer_norm", lambda: F.layer_norm(rows2d, (width,), w, w), 2 * size))
        for op, fn, bytes_per_element in ops:
            add(kind="memory", op=op, direction="forward", impl="torch", elements=elements,
                bytes=bytes_per_element * elements, measured_s=timed(fn),
                notes="eager aten op" + (f", rows of {width}" if op in ("softmax", "rms_norm", "layer_norm") else ""))

    for elements in sizes:
        cases.run(f"streaming {elements}", lambda: streaming(elements))
    tiny = torch.zeros(1, device=torch_device, dtype=dtype)
    add(kind="memory", op="add", direction="forward", impl="torch", elements=1, bytes=3 * tiny.element_size(),
        measured_s=timed(lambda: tiny + tiny), notes="near-empty kernel: the floor")

    for i, row in enumerate(rows, 1):
        row["id"] = f"c{i:04d}"
        row["measured_s"] = f"{float(row['measured_s']):.6g}"
    if cases.failed:
        print(f"# {cases.failed} kernel cases left out (see above)", file=sys.stderr)
    return rows


def measure_host(device_id: str, torch_device: str = "cuda", quick: bool = False) -> list[dict]:
    """Seconds per kernel of a chain of small kernels: launched eagerly from Python, and replayed
    as one CUDA graph (what CUDA-graph decode engines pay)."""
    import torch

    cuda = torch_device.startswith("cuda")
    source = provenance(torch, torch_device)
    kernels = 50 if quick else 2000
    x = torch.zeros(256, device=torch_device)
    rows = []

    def chain() -> None:
        for _ in range(kernels):
            x.add_(1.0)

    def wall(fn: Callable[[], None]) -> float:
        return wall_seconds(torch, fn, 3 if quick else 7, cuda, warmup=1) / kernels

    rows.append(dict(mode="eager", seconds_per_kernel=wall(chain),
                     notes="in-place add on 256 floats, launched from a Python loop, wall clock to synchronize"))
    if cuda:
        graph = capture_graph(torch, chain, warmup=1)
        rows.append(dict(mode="cuda_graph", seconds_per_kernel=wall(graph.replay),
                         notes="the same chain captured once and replayed as a CUDA graph"))
    for i, row in enumerate(rows, 1):
        row.update(id=f"h{i:04d}", device=device_id, op="add", kernels=kernels, source=source,
                   seconds_per_kernel=f"{row['seconds_per_kernel']:.6g}")
    return rows


def _model_cases(quick: bool) -> list[dict]:
    if quick:
        return [dict(model="gpt2", phase="train", batch=1, seq=32,
                     overrides={"n_layer": 2, "n_embd": 64, "n_head": 2, "vocab_size": 128, "n_positions": 64})]
    cases = [dict(model="gpt2", phase="train", batch=b, seq=1024) for b in (4, 8, 16)]
    cases += [dict(model="bert-base", phase="train", batch=b, seq=512) for b in (8, 32)]
    cases += [dict(model="llama-3-8b", phase="prefill", batch=b, seq=s) for b, s in ((1, 2048), (4, 2048), (1, 8192))]
    cases += [dict(model="llama-3-8b", phase="decode", batch=b, seq=1, context=c) for b in (1, 8, 32)
              for c in (1024, 4096)]
    four = {"num_hidden_layers": 4}
    cases += [dict(model="llama-3-8b", phase="train", batch=1, seq=4096, overrides=four),
              dict(model="llama-3-8b", phase="train", batch=4, seq=1024, overrides=four),
              dict(model="llama-3-8b", phase="train", batch=1, seq=4096, overrides=four, recompute="full"),
              dict(model="llama-3-8b", phase="train", batch=1, seq=4096, overrides=four, precision="amp-bf16"),
              dict(model="qwen3-8b", phase="train", batch=1, seq=4096, overrides=four),
              dict(model="mixtral-8x7b", phase="train", batch=1, seq=2048, overrides={"num_hidden_layers": 2}),
              dict(model="qwen3-30b-a3b", phase="train", batch=1, seq=2048, overrides={"num_hidden_layers": 2})]
    return cases


def measure_models(device_id: str, torch_device: str = "cuda", quick: bool = False) -> list[dict]:
    """End-to-end rows: HF models from shipped configs, timed step by step (median of repeats).

    precision "bf16": weights, gradients and AdamW states in bf16; "amp-bf16": fp32 weights and
    states, the forward and backward under torch.autocast(bfloat16), as HF Trainer's --bf16 runs.
    recompute "full": HF's gradient checkpointing of every decoder layer."""
    import torch
    import transformers

    cuda = torch_device.startswith("cuda")
    low = torch.bfloat16 if cuda else torch.float32
    low_name = "bf16" if cuda else "fp32"
    timed = _timer(torch, torch_device, repeats=2 if quick else 10, flush_l2=False)
    source = provenance(torch, torch_device)
    rows = []
    cases = _Cases()

    def one(case: dict) -> None:
        model_id, phase, batch, seq = case["model"], case["phase"], case["batch"], case["seq"]
        precision, recompute = case.get("precision", low_name), case.get("recompute", "none")
        overrides, context = case.get("overrides", {}), case.get("context", 0)
        if cuda:
            torch.cuda.empty_cache()
        model, hf_config = build_hf_model(model_id, overrides, torch_device,
                                          torch.float32 if precision == "amp-bf16" else low)
        ids = torch.randint(0, hf_config.vocab_size, (batch, seq), device=torch_device)
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.reset_peak_memory_stats()
        autocast = (torch.autocast("cuda" if cuda else "cpu", dtype=low) if precision == "amp-bf16"
                    else torch.autocast("cpu", enabled=False))
        if phase == "train":
            model.train()
            if recompute == "full":
                enable = getattr(model, "activation_checkpointing_enable", None) or model.gradient_checkpointing_enable
                enable()
            opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=cuda)

            def step() -> None:
                with autocast:
                    loss = model(input_ids=ids, labels=ids).loss
                loss.backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
        elif phase == "prefill":
            model.eval()

            def step() -> None:
                with torch.no_grad():
                    model(input_ids=ids)
        else:  # decode: one token per sequence over a cache of `context` tokens
            model.eval()
            prompt = torch.randint(0, hf_config.vocab_size, (batch, context), device=torch_device)
            with torch.no_grad():
                cache = model(input_ids=prompt, use_cache=True, logits_to_keep=1).past_key_values
            del prompt
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()

            def step() -> None:
                with torch.no_grad():
                    model(input_ids=ids, past_key_values=cache, use_cache=True)
                cache.crop(-1)  # drop the token just appended: every step sees `context`

        seconds = timed(step)
        peak = torch.cuda.max_memory_allocated() if cuda else 0
        reserved = torch.cuda.max_memory_reserved() if cuda else 0
        rows.append({"device": device_id, "model": model_id, "phase": phase, "batch": batch, "seq": seq,
                     "context": context, "dtype": low_name, "kernels": "hf-eager",
                     "optimizer": "adamw" if phase == "train" else "", "measured_s": f"{seconds:.6g}",
                     "peak_allocated_bytes": peak, "peak_reserved_bytes": reserved, "split": "report",
                     "source": source, "overrides": json.dumps(overrides, sort_keys=True) if overrides else "",
                     "precision": precision, "recompute": recompute,
                     "notes": f"HF transformers {transformers.__version__}, SDPA attention"
                     + ("; tiny config (test run)" if quick else "")})
        del model

    for case in _model_cases(quick):
        cases.run(f"model {case}", lambda: one(case))
    for i, row in enumerate(rows, 1):
        row["id"] = f"e{i:04d}"
    if cases.failed:
        print(f"# {cases.failed} model cases left out (see above)", file=sys.stderr)
    return rows


def write_rows(rows: list[dict], path: Path, columns: list[str] | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=columns or COLUMNS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)
