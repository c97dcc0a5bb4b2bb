"""Whole eager modules of the calibration set, costed the way a user's capture is.

Liger-Kernel's benchmarks time, beside each fused Triton kernel, the PyTorch module it replaces:
HF transformers' LlamaRMSNorm (seven ATen kernels forward), torch.nn.LayerNorm and GroupNorm, HF's
apply_rotary_pos_emb, the residual add before an RMSNorm, Megatron-LM's eager baselines, and the
same modules under torch.compile. None of these is one kernel, so the kernel model's table cannot
hold them; what predicts them is what `accel-sim simulate` does with any script: capture the
module with fake tensors, cost every ATen op, walk the graph.

Each row is rebuilt as its benchmark ran it (the harness facts are named per op in its builder):
the timed inputs are trainable leaves, so the backward computes their gradients, and the outputs
are backpropagated with upstream-gradient buffers as `y.backward(dy)` does (`UpstreamGradients`:
no loss op is traced). `forward` times the module's forward ops, `backward` its backward ops,
`full` both; torch.compile rows are simulated with the fusion of elementwise chains
(`SimulateOptions.fuse_elementwise`) that stands for Inductor.

Measured times are CUDA-event spans of one call after an L2-flushing write
(triton.testing.do_bench): the prediction is the simulated span of the timed ops (each kernel's
device time, and the waits for a host that issues PyTorch's eager kernels one by one) plus the
device's overhead of a call timed alone (KernelConstants::alone_stream_overhead_s), once.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from typing import Any, Callable

from accel_sim import _core
from accel_sim.errors import UsageError

DIRECTIONS = ("forward", "backward", "full")
DTYPES = ("bf16", "fp16", "fp32")  # capture/fx_capture.py CAST_DTYPES, named without importing torch


@dataclass(frozen=True)
class ModuleRow:
    id: str
    device: str
    split: str
    op: str
    impl: str
    direction: str
    dtype: str
    shape: tuple[tuple[str, int], ...]  # the row's size columns, as (name, value)
    measured_s: float
    source: str
    label: str


def _torch() -> Any:
    try:
        import torch
    except ImportError as e:  # pragma: no cover - the test extra installs torch
        raise UsageError(f"costing eager-module rows needs torch ({e}); install it with: "
                         "pip install torch==2.13.0") from None
    return torch


def _dtype(name: str) -> Any:
    from accel_sim.capture.fx_capture import CAST_DTYPES

    return CAST_DTYPES[name]


def _harness(inner: Any, leaves: dict[str, tuple[tuple[int, ...], str]],
             grads: list[tuple[tuple[int, ...], str]] | None, call: Callable[..., Any]) -> Any:
    """An nn.Module that runs `call(inner, **leaves)` on trainable leaves of the given shapes and
    dtypes; its outputs are backpropagated with upstream gradients of the shapes and dtypes in
    `grads` (buffers, as the benchmark's `dy`), or, with `grads` None, the output is the loss the
    benchmark backpropagates without a dy."""
    torch = _torch()
    from accel_sim.capture import UpstreamGradients

    class Harness(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = inner
            for name, (shape, dtype) in leaves.items():
                self.register_parameter(name, torch.nn.Parameter(
                    torch.empty(shape, dtype=_dtype(dtype), device="meta")))
            for i, (shape, dtype) in enumerate(grads or ()):
                self.register_buffer(f"dy{i}", torch.empty(shape, dtype=_dtype(dtype), device="meta"))

        def forward(self) -> Any:
            result = call(self.inner, **{n: getattr(self, n) for n in leaves})
            if grads is None:
                return result
            ys = result if isinstance(result, tuple) else (result,)
            return UpstreamGradients(tuple(ys), tuple(getattr(self, f"dy{i}") for i in range(len(ys))))

    return Harness()


Built = tuple[Any, dict[str, tuple[tuple[int, ...], str]], "list[tuple[tuple[int, ...], str]] | None", Callable[..., Any]]


def _rms_norm(row: dict, dtype: str) -> Built:
    # benchmark_rms_norm.py: the script's copy of transformers' LlamaRMSNorm(N, eps=1e-6), moved
    # to the GPU but never cast, so its weight is fp32 and the output of w * x.to(bf16) is fp32;
    # x [M, N] in the row's dtype; y.backward(dy) with dy like x, which autograd casts to y's fp32.
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    m, n = _dim(row, "m"), _dim(row, "n")
    inner = LlamaRMSNorm(n, eps=1e-6).to(device="meta", dtype=_dtype("fp32"))
    return inner, {"x": ((m, n), dtype)}, [((m, n), "fp32")], lambda f, x: f(x)


def _layer_norm(row: dict, dtype: str) -> Built:
    # benchmark_layer_norm.py: torch.nn.LayerNorm(N, eps=1e-6) with its bias, in the row's dtype,
    # on x [M, N].
    m, n = _dim(row, "m"), _dim(row, "n")
    inner = _torch().nn.LayerNorm(n, eps=1e-6).to(device="meta", dtype=_dtype(dtype))
    return inner, {"x": ((m, n), dtype)}, [((m, n), dtype)], lambda f, x: f(x)


def _group_norm(row: dict, dtype: str) -> Built:
    # benchmark_group_norm.py: torch.nn.GroupNorm(C // 4, C, eps=1e-6) on x [M, C, L]
    # (the row's batch, m and n).
    b, c, length = _dim(row, "batch"), _dim(row, "m"), _dim(row, "n")
    inner = _torch().nn.GroupNorm(c // 4, c, eps=1e-6).to(device="meta", dtype=_dtype(dtype))
    return inner, {"x": ((b, c, length), dtype)}, [((b, c, length), dtype)], lambda f, x: f(x)


def _fused_add_rms_norm(row: dict, dtype: str) -> Built:
    # benchmark_fused_add_rms_norm.py's NaiveAddRMSNorm: h = x.float() + r.float(), returned
    # with w * rmsnorm(h) (an fp32 weight); both outputs backpropagated with their own dy.
    torch = _torch()
    m, n = _dim(row, "m"), _dim(row, "n")

    class NaiveAddRMSNorm(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.empty(n, dtype=torch.float32, device="meta"))

        def forward(self, x: Any, r: Any) -> Any:
            h = x.to(torch.float32) + r.to(torch.float32)
            variance = h.pow(2).mean(-1, keepdim=True)
            return self.weight * (h * torch.rsqrt(variance + 1e-6)), h

    out = [((m, n), "fp32"), ((m, n), "fp32")]
    return NaiveAddRMSNorm(), {"x": ((m, n), dtype), "r": ((m, n), dtype)}, out, lambda f, x, r: f(x, r)


def _megatron_rms_norm(row: dict, dtype: str) -> Built:
    # benchmark_megatron_rms_norm.py: torch.nn.RMSNorm(H, eps=1e-6) in bf16 (the "torch"
    # provider, and Megatron's WrappedTorchNorm, which returns the same module) on x [S, B, H];
    # its "backward" and "full" time the forward, out.sum() and the backward together.
    m, n = _dim(row, "m"), _dim(row, "n")
    inner = _torch().nn.RMSNorm(n, eps=1e-6).to(device="meta", dtype=_dtype(dtype))
    return inner, {"x": ((m, n), dtype)}, None, lambda f, x: f(x).sum()


def _megatron_swiglu(row: dict, dtype: str) -> Built:
    # benchmark_megatron_swiglu.py's "torch" provider: y1, y2 = y.chunk(2, -1); silu(y1) * y2 on
    # y [S * B, 2F]; "backward" and "full" time the forward, out.sum() and the backward.
    torch = _torch()
    m, n = _dim(row, "m"), _dim(row, "n")

    class SwiGLU(torch.nn.Module):
        def forward(self, y: Any) -> Any:
            y1, y2 = torch.chunk(y, 2, -1)
            return (torch.nn.functional.silu(y1) * y2).sum()

    return SwiGLU(), {"y": ((m, 2 * n), dtype)}, None, lambda f, y: f(y)


def _rope(row: dict, dtype: str) -> Built:
    # benchmark_rope.py: transformers' apply_rotary_pos_emb(q, k, cos, sin) on q and k made as
    # [batch, seq, heads, head_dim] and transposed to [batch, heads, seq, head_dim] (views), with
    # cos and sin [batch, seq, head_dim] from LlamaRotaryEmbedding computed outside the timed call.
    from transformers.models.llama.modeling_llama import apply_rotary_pos_emb

    torch = _torch()
    b, heads, kv_heads = _dim(row, "batch"), _dim(row, "heads"), _dim(row, "kv_heads")
    s, d = _dim(row, "seq_q"), _dim(row, "head_dim")
    dt = _dtype(dtype)

    class Rope(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("cos", torch.empty((b, s, d), dtype=dt, device="meta"))
            self.register_buffer("sin", torch.empty((b, s, d), dtype=dt, device="meta"))

        def forward(self, q: Any, k: Any) -> Any:
            return apply_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), self.cos, self.sin)

    leaves = {"q": ((b, s, heads, d), dtype), "k": ((b, s, kv_heads, d), dtype)}
    grads = [((b, heads, s, d), dtype), ((b, kv_heads, s, d), dtype)]
    return Rope(), leaves, grads, lambda f, q, k: f(q, k)


def _dim(row: dict, key: str) -> int:
    value = row.get(key) or ""
    if not value:
        raise UsageError(f"a {row.get('op', '?')} module row needs the column '{key}'")
    return int(float(value))


# (op, impl) -> the module the benchmark timed and whether it ran compiled; torch_compile rows
# take the eager module of the same op under Inductor-style fusion. Megatron's SwiGLU provider
# (bias_swiglu_impl: an autograd Function whose forward and backward go through jit_fuser,
# torch.compile from torch 2.2 and TorchScript before, megatron/core/jit.py) is left out: its
# rows measure as slow as the eager chain or slower, so which of the two ran is not known.
_BUILDERS: dict[tuple[str, str], tuple[Callable[[dict, str], Built], bool]] = {
    ("rms_norm", "huggingface"): (_rms_norm, False),
    ("rms_norm", "torch_compile"): (_rms_norm, True),
    ("layer_norm", "huggingface"): (_layer_norm, False),
    ("layer_norm", "torch_compile"): (_layer_norm, True),
    ("group_norm", "huggingface"): (_group_norm, False),
    ("rope", "huggingface"): (_rope, False),
    ("rope", "torch_compile"): (_rope, True),
    ("fused_add_rms_norm", "huggingface"): (_fused_add_rms_norm, False),
    ("megatron_rms_norm", "torch"): (_megatron_rms_norm, False),
    ("megatron_rms_norm", "megatron"): (_megatron_rms_norm, False),
    ("megatron_swiglu", "torch"): (_megatron_swiglu, False),
}
# Benchmarks whose "backward" call runs the forward, a sum and the backward (out.sum().backward()).
_WHOLE_STEP_BACKWARD = ("megatron_rms_norm", "megatron_swiglu")


def _builder(op: str, impl: str) -> Callable[[dict, str], Built] | None:
    made = _BUILDERS.get((op, impl))
    return made[0] if made else None


def describes(row: dict) -> bool:
    """Whether `row` (a kernels.csv row) times an eager module this file rebuilds. A
    torch.compile forward is one Inductor kernel (the norm's reduction fused with its
    elementwise ops), which the kernel table times as such; its backward and full calls are
    module rows."""
    if row.get("impl") == "torch_compile" and row.get("direction") == "forward":
        return False
    return (row.get("kind") == "memory" and row.get("direction") in DIRECTIONS and row.get("dtype") in DTYPES
            and _builder(row.get("op", ""), row.get("impl", "")) is not None)


_SHAPE_KEYS = ("m", "n", "batch", "heads", "kv_heads", "seq_q", "head_dim")


def module_row(row: dict) -> ModuleRow:
    shape = tuple((k, int(float(row[k]))) for k in _SHAPE_KEYS if row.get(k))
    dims = " ".join(f"{k}{v}" for k, v in shape)
    return ModuleRow(row["id"], row["device"], row["split"], row["op"], row["impl"], row["direction"], row["dtype"],
                     shape, float(row["measured_s"]), row["source"],
                     f"{row['op']} {row['impl']} {row['direction']} {dims}")


@functools.lru_cache(maxsize=256)
def _graph(build: Callable[[dict, str], Built], dtype: str, shape: tuple[tuple[str, int], ...]) -> Any:
    """The core graph of one training step (forward and backward, no optimizer) of the module
    `build` makes, captured once per shape (the rows of several devices and of the eager and
    compiled providers share it)."""
    from accel_sim.capture import capture_training_step
    from accel_sim.io.graph_file import to_core

    inner, leaves, grads, call = build(dict(shape), dtype)
    graph = capture_training_step(_harness(inner, leaves, grads, call), (), optimizer="none",
                                  name=build.__name__.strip("_"))
    return to_core(graph)


def predict(row: ModuleRow, spec: Any, cost_model: str) -> float:
    """Predicted time of the row's timed call on the device `spec` (a DeviceSpec)."""
    build, compiled = _BUILDERS[(row.op, row.impl)]
    options = _core.SimulateOptions()
    options.cost_model = cost_model
    options.fuse_elementwise = compiled
    result = _core.simulate(_graph(build, row.dtype, row.shape), spec, options)
    whole = row.direction == "full" or (row.direction == "backward" and row.op in _WHOLE_STEP_BACKWARD)
    if whole:
        span = result.forward_time_s + result.backward_time_s
    else:
        span = result.forward_time_s if row.direction == "forward" else result.backward_time_s
    return span + spec.kernel.alone_stream_overhead_s
