#!/usr/bin/env python3
"""Turn published kernel measurements into a normalized kernel data set.

Usage (from the repository root)::

    python validation/extract_published.py [path/to/published.csv [path/to/output.csv]]

The input defaults to ``validation/published.csv`` in the repository (the
calibration set of numbers measured by others, one row per measurement with
its source, hardware, dtype, ``params_json``, metric, value and unit; see
validation/README.md).  The output is ``python/accel_sim/data/validation/kernels.csv`` (package data,
so ``accel-sim validate`` works from an installed copy), with the columns
listed in ``COLUMNS``.  Only the standard library is
used and the output is deterministic: rows are sorted by a stable key and ids
(``k0001`` ...) are assigned in that order.

What is kept
------------
Only the kernel categories: ``gemm`` -> kind ``gemm``, ``attention`` -> kind
``attention``, ``memory_bound`` -> kind ``memory``.  Training, inference and
peak-memory rows are skipped (counted under "category ... not a kernel").

Device mapping (exact hardware strings of published.csv; see HARDWARE_MAP):

* "NVIDIA H100 80GB SXM5", "NVIDIA H100 80GB HBM3"              -> h100_sxm
* "NVIDIA H800 SXM5 (Hopper, H100-class compute; NVCC 12.8)"      -> h100_sxm
  (H800 SXM5 has H100 SXM compute and memory; it differs only in NVLink
  bandwidth; every such row says so in ``notes``)
* "NVIDIA H100 PCIe"                                              -> h100_pcie
* "NVIDIA H100 NVL"                                               -> h100_nvl
* "NVIDIA A100-SXM4-80GB"                                         -> a100_80gb
* "NVIDIA A100 80GB PCIe"                                         -> a100_pcie_80gb
* "NVIDIA B200", "NVIDIA Blackwell SM100 GPU (B200-class; ...)"   -> b200
  (SM100 rows are noted as "B200-class, SKU not stated")

Skipped hardware: "NVIDIA A100 (variant not stated)" (both Triton issue
threads; the sources do not state the variant), "NVIDIA H100 (variant not
stated)", and "NVIDIA H100, 500W power limit ..." (power-capped part).  Any
other string not in HARDWARE_MAP is skipped as "hardware not mapped".

dtype: first dtype token of the dtype column (``fp8``/``e4m3``/``e5m2`` ->
fp8, ``bf16``/``bfloat16`` -> bf16, ``fp16``/``float16``/``half`` -> fp16,
``tf32``, ``fp32``/``float32``), so "fp8 e4m3 -> bf16 out" is fp8 and
"fp16 (fp32 accumulate)" is fp16.  When the column says "not stated", the
``config.dtype`` of params_json (e.g. "torch.bfloat16") is used if present,
otherwise the row is skipped.  "bf16/fp16" (FlashAttention-3 paper figures,
captioned FP16/BF16; both have the same tensor-core rate) is recorded as fp16
with a note.  A PyTorch baseline whose dtype the source says is not stated is
skipped.

GEMM rows
---------
``op`` = ``matmul`` with ``m,n,k`` from params (``batch`` = 1), or
``grouped_matmul`` for MoE grouped GEMMs: ``m`` = rows per group
(``M_per_group``), ``n``, ``k`` per group and ``batch`` = number of groups;
rows without both are skipped.  FLOPs = 2*m*n*k*batch; for throughput rows
``measured_s`` = FLOPs / throughput.  ``impl``: ``deepgemm``, ``cublas``
(torch.matmul / torch-bf16), ``cutlass`` (vLLM CUTLASS fp8 scaled_mm with
pre-quantized inputs, "noquant"), ``cutlass_actquant`` (same, timing includes
the dynamic activation quantization), ``triton``, ``other``.  ``direction`` is
empty for GEMMs.

Attention rows
--------------
``op`` = ``attention``; ``batch``, ``heads`` (or total_hidden / head_dim),
``kv_heads`` (= heads if not given), ``seq_q`` = ``seq_k`` = seq_len
(self-attention), ``head_dim``, ``causal`` (true/false; "(inferred)" kept and
said in notes; "unknown"/"not stated" -> skipped), ``direction`` (forward,
backward, forward+backward; FA4 "backward 1CTA/2CTA/deterministic" variants
are backward with the variant in notes), ``impl`` normalized to flash2,
flash3, flash4, cudnn, eager (standard / PyTorch math attention), triton,
other (original string in notes).  Rows without heads or total_hidden are
skipped.

FLOP convention (FlashAttention benchmark scripts), used to turn TFLOP/s into
time:  forward FLOPs = 4 * batch * heads * seq_q * seq_k * head_dim, halved
when causal; backward = 2.5 x forward; forward+backward = 3.5 x forward.
Converted rows say "time from TFLOP/s with FA FLOP convention" in notes.  (The
FA4 PR rows give time directly and their reported TFLOP/s match this
convention.)

Memory-bound rows (Liger-Kernel benchmark data)
-----------------------------------------------
``op`` = the kernel name, ``direction`` = the benchmark mode (forward,
backward, full = forward then backward in one timed call), ``impl`` = the
provider (liger, huggingface, torch, torch_compile; for fused_add_rms_norm:
liger_fused_add_rms_norm -> liger, liger_rms_norm -> liger_unfused_add),
``measured_s`` = the median time.  ``elements`` and ``bytes`` are per kernel
below; ``bytes`` is the minimal traffic: every input read once and every
output written once at the row's dtype size s (saved statistics such as
rstd/mean, partial dW buffers and dtype promotions of a given implementation
are not counted; in the Liger benchmarks the norm weights are fp32 even for
bf16 inputs -- counted at the row dtype as specified, a <0.1% difference).
``full`` = forward bytes + backward bytes (separate passes; activations saved
by forward are re-read by backward).  E = elements.

* rms_norm (x: M x H, weight H): m=M, n=H, E = M*H.
  forward  = (2E + H) s        [read x, w; write y]
  backward = (3E + 2H) s       [read dy, x, w; write dx, dw]
* layer_norm (x: M x N, weight and bias N): m=M, n=N, E = M*N.
  forward  = (2E + 2N) s       [read x, w, b; write y]
  backward = (3E + 3N) s       [read dy, x, w; write dx, dw, db]
* fused_add_rms_norm (x, residual: M x H -> y, s = x + residual): m=M, n=H,
  E = M*H (one input tensor).
  forward  = (4E + H) s        [read x, r, w; write y, s]
  backward = (4E + 2H) s       [read dy, ds, s, w; write dx, dw; the grads of
                                x and residual are the same tensor]
* group_norm (x: M x C x L, groups of 4 channels, weight and bias C):
  batch=M, m=C, n=L, E = M*C*L.
  forward  = (2E + 2C) s,  backward = (3E + 3C) s   (as layer_norm)
* rope (Liger benchmark: q 1 x T x Hq x D, k 1 x T x Hkv x D, cos/sin T x D,
  D = hidden_size / Hq): batch=1, seq_q=seq_k=T, heads=Hq, kv_heads=Hkv,
  head_dim=D, E = T*(Hq+Hkv)*D (q plus k).
  forward  = (2E + 2TD) s      [read q, k, cos, sin; write q', k']
  backward = (2E + 2TD) s      [read dq', dk', cos, sin; write dq, dk]

Whole modules (bytes left empty; ``accel-sim validate`` costs them by capturing
the module the benchmark timed, python/accel_sim/module_rows.py):
* geglu, swiglu: the Liger benchmark times the whole LlamaMLP / Liger MLP
  (gate, up and down projections, three GEMMs, around the activation):
  batch=B, seq_q=T, n=hidden_size, k=intermediate_size, E = B*T*intermediate.
* cross_entropy: the loss over logits [B*T, V], whose providers run different
  kernels (Liger writes the logits' gradient in its forward; torch's
  log-softmax and NLL keep the log-probabilities): m=B*T, n=V, E = B*T*V.

Dtypes the Liger data leaves unstated ("not stated in config") are the ones the
benchmark scripts give their tensors (LIGER_SCRIPT_DTYPES): megatron_rms_norm
and megatron_swiglu build bf16 inputs (benchmark/scripts/benchmark_megatron_rms_norm.py,
benchmark_megatron_swiglu.py in linkedin/Liger-Kernel); cross_entropy, kl_div,
jsd and tvd make torch.randn inputs without a dtype, torch's default fp32.

* megatron_rms_norm (x: S x B x H, weight H): as rms_norm with M = S*B.
* megatron_swiglu (x: S x B x 2F -> y: S x B x F, F = ffn_local, Megatron-LM's
  bias-free SwiGLU on the concatenated gate and up projections): m=S*B, n=F,
  E = S*B*F.
  forward  = 3E s              [read x (2E); write y]
  backward = 5E s              [read dy, x; write dx (2E)]

Timing
------
``timing`` says how the source timed the kernel, which decides whether its
prediction adds the device's alone overhead (docs/formats/device.md):

* ``events``: one launch between CUDA events right after an L2-flushing write,
  as ``triton.testing.do_bench`` does (the Liger-Kernel benchmark harness and
  every row whose source notes name do_bench), and ``accel-sim calibrate``
  (``validation/measured/*/measurements.csv``, ``alone_s`` of
  ``gemm_stream.csv``).
* ``graph``: replays of a CUDA graph of many launches:
  ``triton.testing.do_bench_cudagraph`` (vLLM's
  ``benchmarks/kernels/bench_fp8_gemm.py``, the vLLM PR rows) and
  ``validation/gpu/measure_gemm_stream.py`` (``stream_s_per_gemm`` of
  ``gemm_stream.csv``, ``stream_s_per_op`` of ``stream_ops.csv``).
* ``profiler``: kernel durations read from torch.profiler (DeepGEMM's
  ``bench_kineto``).
* ``loop``: the mean of back-to-back launches (torch.utils.benchmark, which
  the FlashAttention benchmark scripts use; the FlashAttention paper, issue
  and PR rows).

Split
-----
``split`` is ``fit`` when the first byte of
sha256("device|kind|op|dtype|m|n|k|batch|heads|kv_heads|seq_q|seq_k|head_dim|causal|impl|direction")
(the output row's own field values, empty where blank; then "|elements" where
the row has elements, i.e. memory-bound rows) is < 102 (about 40%),
else ``report``.  The source, the timing and the measured value are not in the
key, so the same shape on the same device with the same impl/direction always
lands in the same split, however it was timed.  (``elements`` joined the key on
2026-11-24: without it every size of a memory-bound op fell in one split, and
the H100's fit split held no element-wise kernel.)

At the end the script prints counts per kind x device x split and the number
of rows skipped per reason.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
import sys
from collections import Counter
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_INPUT = REPO_ROOT / "validation" / "published.csv"
OUTPUT = REPO_ROOT / "python" / "accel_sim" / "data" / "validation" / "kernels.csv"

COLUMNS = [
    "id", "kind", "device", "dtype", "op", "m", "n", "k", "batch", "heads",
    "kv_heads", "seq_q", "seq_k", "head_dim", "causal", "direction", "impl",
    "elements", "bytes", "measured_s", "timing", "split", "source", "notes",
]
SHAPE_FIELDS = ["m", "n", "k", "batch", "heads", "kv_heads", "seq_q", "seq_k",
                "head_dim", "causal"]
SPLIT_KEY_FIELDS = ["device", "kind", "op", "dtype"] + SHAPE_FIELDS + ["impl", "direction"]
FIT_THRESHOLD = 102  # first sha256 byte < 102 -> fit (102/256 ~ 40%)

KIND_OF_CATEGORY = {"gemm": "gemm", "attention": "attention", "memory_bound": "memory"}

# Exact hardware strings -> (device id, note or "").
HARDWARE_MAP = {
    "NVIDIA H100 80GB SXM5": ("h100_sxm", ""),
    "NVIDIA H100 80GB HBM3": ("h100_sxm", ""),
    "NVIDIA H800 SXM5 (Hopper, H100-class compute; NVCC 12.8)": (
        "h100_sxm", "H800 SXM5 mapped to h100_sxm: same compute/HBM as H100 SXM, differs only in NVLink"),
    "NVIDIA H100 PCIe": ("h100_pcie", ""),
    "NVIDIA H100 NVL": ("h100_nvl", ""),
    "NVIDIA A100-SXM4-80GB": ("a100_80gb", ""),
    "NVIDIA A100 80GB PCIe": ("a100_pcie_80gb", ""),
    "NVIDIA B200": ("b200", ""),
    "NVIDIA Blackwell SM100 GPU (B200-class; PR targets SM100, SKU not stated in excerpt)": (
        "b200", "SM100 B200-class part, exact SKU not stated by source"),
    "NVIDIA Blackwell SM100 GPU (B200-class; exact SKU not stated in PR excerpt)": (
        "b200", "SM100 B200-class part, exact SKU not stated by source"),
}
# Hardware strings skipped on purpose (for the skip report; anything else
# unmapped is "hardware not mapped").
SKIP_HARDWARE = {
    "NVIDIA A100 (variant not stated)": "hardware: A100 variant not stated",
    "NVIDIA A100 (variant not stated; different machine than #3551)": "hardware: A100 variant not stated",
    "NVIDIA H100 (variant not stated)": "hardware: H100 variant not stated",
    "NVIDIA H100, 500W power limit (variant/memory not stated)": "hardware: power-capped H100 (500W)",
}

DTYPE_TOKENS = [
    ("fp8", "fp8"), ("e4m3", "fp8"), ("e5m2", "fp8"),
    ("bfloat16", "bf16"), ("bf16", "bf16"),
    ("float16", "fp16"), ("fp16", "fp16"), ("half", "fp16"),
    ("tf32", "tf32"),
    ("float32", "fp32"), ("fp32", "fp32"),
]
DTYPE_SIZE = {"bf16": 2, "fp16": 2, "fp32": 4, "fp8": 1, "tf32": 4}

MEMORY_PROVIDERS = {
    "liger": "liger", "huggingface": "huggingface", "torch": "torch",
    "torchcompile": "torch_compile", "torch_compile": "torch_compile",
    "megatron": "megatron", "liger_in_place": "liger_in_place",
    "liger_fused_add_rms_norm": "liger", "liger_rms_norm": "liger_unfused_add",
}
# The dtype of the inputs of Liger benchmark scripts whose data rows do not record one (see
# "Dtypes the Liger data leaves unstated" above).
LIGER_SCRIPT_DTYPES = {"megatron_rms_norm": "bf16", "megatron_swiglu": "bf16", "cross_entropy": "fp32",
                       "kl_div": "fp32", "jsd": "fp32", "tvd": "fp32"}


class Skip(Exception):
    """Raised with the reason a source row is not converted."""


def fmt_num(x: float) -> str:
    return f"{x:.6g}"


def first_dtype(text: str) -> str | None:
    low = text.lower()
    best = None
    for token, dt in DTYPE_TOKENS:
        i = low.find(token)
        if i >= 0 and (best is None or i < best[0]):
            best = (i, dt)
    return best[1] if best else None


def parse_dtype(row: dict, params: dict) -> tuple[str, str]:
    """Return (dtype, note)."""
    text = row["dtype"].strip()
    low = text.lower()
    if low == "bf16/fp16":
        return "fp16", "source dtype bf16/fp16 (same tensor-core rate), recorded fp16"
    if "baseline dtype not stated" in low and re.search(r"pytorch|standard", params.get("impl", ""), re.I):
        raise Skip("dtype not stated (PyTorch baseline)")
    dt = first_dtype(text)
    if dt is None:
        cfg = params.get("config") or {}
        cdt = cfg.get("dtype") if isinstance(cfg, dict) else None
        if cdt and first_dtype(str(cdt)):
            return first_dtype(str(cdt)), ""
        kernel = params.get("kernel")
        if "not stated" in low and "Liger-Kernel" in row["source"] and kernel in LIGER_SCRIPT_DTYPES:
            return LIGER_SCRIPT_DTYPES[kernel], f"dtype from benchmark/scripts/benchmark_{kernel}.py"
        raise Skip("dtype not stated" if "not stated" in low else "dtype not recognized")
    note = "" if text.lower() in ("bf16", "fp16", "fp32", "bfloat16", "float32", "float16", "fp8") else f"dtype '{text}'"
    return dt, note


def time_from(row: dict, flops: float | None) -> tuple[float, str]:
    """Return (seconds, note on the original value)."""
    metric, unit = row["metric"].strip(), row["unit"].strip()
    value = float(row["value"])
    orig = f"orig {metric} {row['value']} {unit}"
    if unit == "ms":
        return value * 1e-3, orig
    if unit in ("us", "µs"):
        return value * 1e-6, orig
    if unit == "s":
        return value, orig
    if unit == "TFLOP/s":
        if not flops:
            raise Skip("throughput without FLOP count")
        return flops / (value * 1e12), orig
    raise Skip(f"unit {unit} not convertible")


# --------------------------------------------------------------------------- GEMM
def gemm_impl(params: dict, source: str) -> tuple[str, str]:
    s = f"{params.get('impl', '')} {params.get('library', '')}".lower()
    if "deepgemm" in s:
        return "deepgemm", ""
    if "cublas" in s or "torch-bf16" in s:
        return "cublas", ""
    if "triton" in s:
        return "triton", ""
    if "vllm" in source.lower() and "fp8" in s:
        if "noquant" in s:
            return "cutlass", f"vLLM CUTLASS fp8 '{params.get('impl')}' (inputs pre-quantized)"
        return "cutlass_actquant", f"vLLM CUTLASS fp8 '{params.get('impl')}' (timing incl. activation quant)"
    return "other", f"impl '{params.get('impl', params.get('library', ''))}'"


def convert_gemm(row: dict, params: dict, out: dict, notes: list[str]) -> None:
    if "groups" in params or "grouped" in row["workload"].lower():
        g, mg, n, k = (params.get(x) for x in ("groups", "M_per_group", "N", "K"))
        if not all(isinstance(v, int) and v > 0 for v in (g, mg, n, k)):
            raise Skip("grouped GEMM shape unclear")
        out.update(op="grouped_matmul", m=mg, n=n, k=k, batch=g)
        notes.append(f"grouped GEMM ({params.get('layout', 'layout n/a')}): {g} groups x "
                     f"(m={mg}, n={n}, k={k}); FLOPs=2*m*n*k*groups")
    else:
        m, n, k = (params.get(x) for x in ("M", "N", "K"))
        if not all(isinstance(v, int) and v > 0 for v in (m, n, k)):
            raise Skip("GEMM shape missing")
        out.update(op="matmul", m=m, n=n, k=k, batch=1)
    impl, inote = gemm_impl(params, row["source"])
    out["impl"] = impl
    if inote:
        notes.append(inote)
    if "scaling" in params:
        notes.append(f"scaling: {params['scaling']}")
    flops = 2 * out["m"] * out["n"] * out["k"] * out["batch"]
    secs, orig = time_from(row, flops)
    notes.insert(0, orig)
    out["measured_s"] = secs


# ---------------------------------------------------------------------- attention
def attention_impl(name: str) -> str:
    s = name.lower()
    if re.search(r"flashattention-4|\bfa4\b", s):
        return "flash4"
    if re.search(r"flashattention-3|\bfa3\b", s):
        return "flash3"
    if re.search(r"flashattention-2|\bfa2\b|flash_attn 2\.", s):
        return "flash2"
    if "cudnn" in s:
        return "cudnn"
    if "triton" in s:
        return "triton"
    if re.search(r"standard attention|pytorch|eager|math", s):
        return "eager"
    return "other"


def convert_attention(row: dict, params: dict, out: dict, notes: list[str]) -> None:
    raw_dir = str(params.get("direction", "")).strip().lower()
    if raw_dir == "forward":
        direction, mult = "forward", 1.0
    elif raw_dir in ("forward+backward", "fwd+bwd", "forward_backward"):
        direction, mult = "forward+backward", 3.5
    elif raw_dir.startswith("backward"):
        direction, mult = "backward", 2.5
        if raw_dir != "backward":
            notes.append(f"variant '{params['direction']}'")
    else:
        raise Skip("attention direction unclear")

    causal = params.get("causal")
    if isinstance(causal, bool):
        causal_b = causal
    else:
        cs = str(causal).strip().lower()
        if cs.startswith("true"):
            causal_b = True
        elif cs.startswith("false"):
            causal_b = False
        else:
            raise Skip("attention causal not stated")
        if "inferred" in cs:
            notes.append("causal inferred by source (panel pairing)")

    batch, hd = params.get("batch"), params.get("head_dim")
    seq = params.get("seq_len")
    seq_q, seq_k = params.get("seq_q", seq), params.get("seq_k", seq)
    heads = params.get("heads")
    if heads is None and params.get("total_hidden") and hd:
        if params["total_hidden"] % hd:
            raise Skip("attention heads not derivable")
        heads = params["total_hidden"] // hd
        notes.append(f"heads = total_hidden {params['total_hidden']} / head_dim {hd}")
    if heads is None:
        raise Skip("attention heads/total_hidden not given")
    if not all(isinstance(v, int) and v > 0 for v in (batch, hd, seq_q, seq_k, heads)):
        raise Skip("attention shape incomplete")
    kv_heads = params.get("kv_heads", heads)

    impl = attention_impl(str(params.get("impl", "")))
    notes.append(f"impl '{params.get('impl', '')}'")
    out.update(op="attention", batch=batch, heads=heads, kv_heads=kv_heads, seq_q=seq_q,
               seq_k=seq_k, head_dim=hd, causal="true" if causal_b else "false",
               direction=direction, impl=impl)
    fwd = 4 * batch * heads * seq_q * seq_k * hd / (2 if causal_b else 1)
    secs, orig = time_from(row, fwd * mult)
    if row["unit"].strip() == "TFLOP/s":
        notes.insert(0, "time from TFLOP/s with FA FLOP convention")
    elif row["notes"]:
        notes.append(row["notes"])
    notes.insert(0, orig)
    out["measured_s"] = secs


# ------------------------------------------------------------------ memory-bound
def _memory_shape(kernel: str, p: dict, cfg: dict, direction: str):
    """Return (shape dict, elements, (fwd_units, bwd_units)) with units in elements; None for
    the units of a whole module."""
    if kernel == "rms_norm":
        M, H = cfg["M"], p["H"]
        E = M * H
        return dict(m=M, n=H), E, (2 * E + H, 3 * E + 2 * H)
    if kernel == "megatron_rms_norm":
        M, H = cfg["S"] * cfg["B"], p["H"]
        E = M * H
        return dict(m=M, n=H), E, (2 * E + H, 3 * E + 2 * H)
    if kernel == "megatron_swiglu":
        M, F = cfg["S"] * cfg["B"], p["ffn_local"]
        E = M * F
        return dict(m=M, n=F), E, (3 * E, 5 * E)
    if kernel == "layer_norm":
        M, N = cfg["M"], p["N"]
        E = M * N
        return dict(m=M, n=N), E, (2 * E + 2 * N, 3 * E + 3 * N)
    if kernel == "fused_add_rms_norm":
        M, H = cfg["M"], p["H"]
        E = M * H
        return dict(m=M, n=H), E, (4 * E + H, 4 * E + 2 * H)
    if kernel == "group_norm":
        M, C, L = cfg["M"], p["C"], cfg["H"]
        E = M * C * L
        return dict(batch=M, m=C, n=L), E, (2 * E + 2 * C, 3 * E + 3 * C)
    if kernel == "rope":
        T = cfg.get("seq_len", p.get("T"))
        hidden = cfg.get("hidden_size", p.get("H"))
        hq, hkv = cfg["num_q_heads"], cfg["num_kv_heads"]
        if hidden % hq:
            raise Skip("memory: rope head_dim not integral")
        D = hidden // hq
        E = T * (hq + hkv) * D
        return (dict(batch=1, heads=hq, kv_heads=hkv, seq_q=T, seq_k=T, head_dim=D), E,
                (2 * E + 2 * T * D, 2 * E + 2 * T * D))
    if kernel in ("swiglu", "geglu"):
        # A whole LlamaMLP (three GEMMs around the gated activation): a module row, costed by
        # capturing the module (python/accel_sim/module_rows.py), so no byte count of its own.
        B, T = cfg.get("B", cfg.get("bsz")), p["T"]
        H, I = cfg["hidden_size"], cfg["intermediate_size"]
        return dict(batch=B, seq_q=T, n=H, k=I), B * T * I, None
    if kernel == "cross_entropy":
        # The loss over logits [B*T, V]: a module row too (each provider runs different kernels).
        M, V = cfg["B"] * cfg["T"], p["V"]
        return dict(m=M, n=V), M * V, None
    raise Skip(f"memory: kernel {kernel} bytes not defined")


def convert_memory(row: dict, params: dict, out: dict, notes: list[str]) -> None:
    kernel = params.get("kernel", row["workload"].split()[0])
    mode = params.get("mode")
    if mode not in ("forward", "backward", "full"):
        raise Skip("memory: mode unclear")
    provider = params.get("provider", "")
    impl = MEMORY_PROVIDERS.get(provider)
    if impl is None:
        raise Skip("memory: provider unknown")
    cfg = params.get("config") or {}
    try:
        shape, E, per_pass = _memory_shape(kernel, params, cfg, mode)
    except KeyError:
        raise Skip(f"memory: {kernel} shape params missing") from None
    if per_pass is None:  # a module row: no bytes of one kernel
        nbytes = ""
    else:
        fwd_u, bwd_u = per_pass
        nbytes = {"forward": fwd_u, "backward": bwd_u, "full": fwd_u + bwd_u}[mode] * DTYPE_SIZE[out["dtype"]]
    out.update(op=kernel, direction=mode, impl=impl, elements=E, bytes=nbytes, **shape)
    secs, orig = time_from(row, None)
    notes.insert(0, orig)
    m = re.search(r"p20 [\d.]+, p80 [\d.]+ ms", row["notes"])
    if m:
        notes.append(m.group(0))
    if impl != provider:
        notes.append(f"provider '{provider}'")
    if kernel == "group_norm":
        notes.append(f"groups={shape['m'] // cfg['channels_per_group']}")
    if params.get("liger_version"):
        notes.append(f"liger {params['liger_version']}")
    out["measured_s"] = secs


CONVERTERS = {"gemm": convert_gemm, "attention": convert_attention, "memory": convert_memory}


def extra_source_caveat(row: dict) -> str:
    """Short caveat for rows from transcribed charts (kept from the source notes)."""
    n = row["notes"]
    if "VLM transcription" not in n:
        return ""
    parts = ["paper figure via third-party transcription"]
    m = re.search(r"verify against paper; (.+)$", n)
    if m:
        parts.append(m.group(1))
    return "; ".join(parts)


def timing_of(row: dict) -> str:
    """How the source timed the kernel (see "Timing" above)."""
    source, notes = row["source"], row["notes"]
    if "do_bench_cudagraph" in notes or "vllm-project/vllm/pull/20071" in source:
        return "graph"
    if "do_bench" in notes or "Liger-Kernel" in source:
        return "events"
    if "DeepGEMM" in source:
        return "profiler"
    if "flash-attention" in source or "FlashAttention" in source:
        return "loop"
    raise Skip("timing method not stated")


def convert(row: dict) -> dict:
    kind = KIND_OF_CATEGORY.get(row["category"])
    if kind is None:
        raise Skip(f"category {row['category']} not a kernel")
    hw = row["hardware"].strip()
    if hw in SKIP_HARDWARE:
        raise Skip(SKIP_HARDWARE[hw])
    if hw not in HARDWARE_MAP:
        raise Skip("hardware not mapped")
    device, hw_note = HARDWARE_MAP[hw]
    try:
        params = json.loads(row["params_json"]) if row["params_json"].strip() else {}
    except json.JSONDecodeError:
        raise Skip("params_json unparsable") from None
    dtype, dt_note = parse_dtype(row, params)
    out = {c: "" for c in COLUMNS}
    out.update(kind=kind, device=device, dtype=dtype, source=row["source"], timing=timing_of(row))
    notes: list[str] = []
    CONVERTERS[kind](row, params, out, notes)
    for extra in (dt_note, hw_note, extra_source_caveat(row)):
        if extra:
            notes.append(extra)
    if not out["measured_s"] or out["measured_s"] <= 0:
        raise Skip("no positive time")
    out["measured_s"] = fmt_num(out["measured_s"])
    out["notes"] = "; ".join(notes)
    for c in COLUMNS:
        out[c] = "" if out[c] is None else str(out[c])
    out["split"] = split_of(out)
    return out


def sort_key(r: dict):
    def num(v: str) -> float:
        return float(v) if v else -1.0
    return (r["kind"], r["device"], r["op"], r["dtype"], r["impl"], r["direction"], r["causal"],
            tuple(num(r[f]) for f in SHAPE_FIELDS if f != "causal"),
            num(r["elements"]), r["source"], float(r["measured_s"]), r["notes"])


MEASURED = REPO_ROOT / "validation" / "measured"


def split_of(row: dict) -> str:
    key = "|".join(row[f] for f in SPLIT_KEY_FIELDS) + (f"|{row['elements']}" if row["elements"] else "")
    return "fit" if hashlib.sha256(key.encode()).digest()[0] < FIT_THRESHOLD else "report"


def _read(path: Path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def measured_rows() -> list[dict]:
    """The kernels timed on a GPU with accel-sim's own scripts (validation/measured/<session>/),
    with their own provenance, ids prefixed with the session's folder: `accel-sim calibrate`'s
    measurements.csv and measure_train_paths.py's attention_sweep.csv (timed alone), and measure_gemm_stream.py's decode GEMMs in a
    stream and alone (gemm_stream.csv) and streaming ops in a stream (stream_ops.csv), split by the
    rule above, so a kernel timed both ways lands in one split."""
    rows = []
    for session in sorted(p for p in MEASURED.iterdir() if p.is_dir()):
        device = session.name.rsplit("-", 3)[0]
        sweeps = [session / name for name in ("measurements.csv", "attention_sweep.csv")]
        for row in (row for path in sweeps if path.is_file() for row in _read(path)):
            r = {c: row.get(c, "") for c in COLUMNS} | {"timing": row.get("timing") or "events",
                                                        "id": f"{session.name}/{row['id']}"}
            rows.append(r | {"split": split_of(r)})
        if (session / "gemm_stream.csv").is_file():
            for i, row in enumerate(_read(session / "gemm_stream.csv"), 1):
                base = {c: "" for c in COLUMNS} | {
                    "kind": "gemm", "device": device, "dtype": row["dtype"], "op": "matmul", "m": row["m"],
                    "n": row["n"], "k": row["k"], "batch": "1", "impl": "torch", "source": row["source"]}
                base["split"] = split_of(base)
                rows.append(base | {"id": f"{session.name}/gs{i:03d}", "measured_s": row["stream_s_per_gemm"],
                                    "timing": "graph",
                                    "notes": f"mean of {row['weights']} weight matrices back to back in one CUDA graph"})
                rows.append(base | {"id": f"{session.name}/ga{i:03d}", "measured_s": row["alone_s"],
                                    "timing": "events", "notes": "alone between CUDA events, L2 flushed"})
        if (session / "stream_ops.csv").is_file():
            for i, row in enumerate(_read(session / "stream_ops.csv"), 1):
                r = {c: "" for c in COLUMNS} | {
                    "kind": "memory", "device": device, "dtype": row["dtype"], "op": row["op"],
                    "direction": "forward", "impl": "torch", "elements": row["elements"], "bytes": row["bytes"],
                    "measured_s": row["stream_s_per_op"], "timing": "graph", "source": row["source"],
                    "notes": "mean of 16 buffers back to back in one CUDA graph", "id": f"{session.name}/so{i:03d}"}
                rows.append(r | {"split": split_of(r)})
    return rows


def main(argv: list[str]) -> int:
    src = Path(argv[1]) if len(argv) > 1 else DEFAULT_INPUT
    out = Path(argv[2]) if len(argv) > 2 else OUTPUT
    with open(src, newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))

    kept, skipped = [], Counter()
    for row in rows:
        try:
            kept.append(convert(row))
        except Skip as e:
            skipped[str(e)] += 1

    kept.sort(key=sort_key)
    for i, r in enumerate(kept, 1):
        r["id"] = f"k{i:04d}"
    measured = measured_rows()
    kept += measured

    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")
        w.writeheader()
        w.writerows(kept)

    # Summary.
    print(f"read {len(rows)} rows from {src} and {len(measured)} from {MEASURED.relative_to(REPO_ROOT)}; "
          f"wrote {len(kept)} rows to {out}")
    counts = Counter((r["kind"], r["device"], r["split"]) for r in kept)
    print(f"\n{'kind':<10} {'device':<15} {'fit':>5} {'report':>7} {'total':>6}")
    for kind, device in sorted({(k, d) for k, d, _ in counts}):
        fit, rep = counts[(kind, device, "fit")], counts[(kind, device, "report")]
        print(f"{kind:<10} {device:<15} {fit:>5} {rep:>7} {fit + rep:>6}")
    tf = sum(v for (_, _, s), v in counts.items() if s == "fit")
    print(f"{'total':<26} {tf:>5} {len(kept) - tf:>7} {len(kept):>6}")
    print(f"\nskipped {sum(skipped.values())} rows:")
    for reason, n in sorted(skipped.items(), key=lambda kv: (-kv[1], kv[0])):
        print(f"  {n:5d}  {reason}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
