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
from typing import Any, Callable, NamedTuple

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


class Built(NamedTuple):
    """A benchmark's timed module, as a builder rebuilds it."""

    inner: Any  # the nn.Module the benchmark calls
    leaves: dict[str, tuple[tuple[int, ...], str]]  # trainable inputs: name -> (shape, dtype)
    # Upstream gradients (shape, dtype) for each output, as `y.backward(dy)`; None: the output is
    # the loss the benchmark backpropagates without a dy.
    grads: list[tuple[tuple[int, ...], str]] | None
    call: Callable[..., Any]  # call(inner, **leaves) -> the output(s)
    # Parameters whose .grad the benchmark never resets (not in do_bench's grad_to_none): each
    # backward adds its gradient into the one already there (AccumulateGrad's `grad += new`, one
    # kernel reading both and writing the sum). Names as the harness holds them: a leaf's name or
    # "inner." + the module's parameter path.
    accumulate: tuple[str, ...] = ()
    # Whether the accumulated gradient is the very storage of the new one (Liger's cross-entropy
    # writes the gradient into its input and returns it, and the .grad it accumulates into is
    # that storage too): `grad += grad` then reads it once.
    accumulate_in_place: bool = False
    # The views of the dy buffers the benchmark passes (e.g. transposed, as torch.randn_like keeps
    # the strides of a transposed output); None: the buffers themselves.
    upstream: Callable[..., tuple[Any, ...]] | None = None


def _harness(built: Built) -> Any:
    """An nn.Module that runs `built.call(inner, **leaves)` on trainable leaves of the given
    shapes and dtypes; its outputs are backpropagated with upstream gradients of the shapes and
    dtypes in `built.grads` (buffers, as the benchmark's `dy`), or, with `grads` None, the output
    is the loss the benchmark backpropagates without a dy. The gradients of the parameters in
    `built.accumulate` are added into buffers as they are produced (a hook on the parameter)."""
    torch = _torch()
    from accel_sim.capture import UpstreamGradients

    inner, leaves, grads, call = built.inner, built.leaves, built.grads, built.call

    class Harness(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.inner = inner
            for name, (shape, dtype) in leaves.items():
                self.register_parameter(name, torch.nn.Parameter(
                    torch.empty(shape, dtype=_dtype(dtype), device="meta")))
            for i, (shape, dtype) in enumerate(grads or ()):
                self.register_buffer(f"dy{i}", torch.empty(shape, dtype=_dtype(dtype), device="meta"))
            for i, name in enumerate(() if built.accumulate_in_place else built.accumulate):
                self.register_buffer(f"grad{i}", torch.empty_like(self.get_parameter(name)))

        def forward(self) -> Any:
            for i, name in enumerate(built.accumulate):
                functools.reduce(getattr, name.split("."), self).register_hook(_accumulator(
                    None if built.accumulate_in_place else self.get_buffer(f"grad{i}")))
            result = call(self.inner, **{n: getattr(self, n) for n in leaves})
            if grads is None:
                return result
            ys = result if isinstance(result, tuple) else (result,)
            dys = tuple(getattr(self, f"dy{i}") for i in range(len(ys)))
            return UpstreamGradients(tuple(ys), built.upstream(*dys) if built.upstream else dys)

    return Harness()


def _accumulator(into: Any) -> Callable[[Any], None]:
    def hook(new: Any) -> None:
        if into is None:
            new.add_(new)  # .grad and the new gradient share one storage
        else:
            into.add_(new)

    return hook


def _rms_norm(row: dict, dtype: str) -> Built:
    # benchmark_rms_norm.py: the script's copy of transformers' LlamaRMSNorm(N, eps=1e-6), moved
    # to the GPU but never cast, so its weight is fp32 and the output of w * x.to(bf16) is fp32;
    # x [M, N] in the row's dtype; y.backward(dy) with dy like x, which autograd casts to y's fp32.
    from transformers.models.llama.modeling_llama import LlamaRMSNorm

    m, n = _dim(row, "m"), _dim(row, "n")
    inner = LlamaRMSNorm(n, eps=1e-6).to(device="meta", dtype=_dtype("fp32"))
    return Built(inner, {"x": ((m, n), dtype)}, [((m, n), "fp32")], lambda f, x: f(x))


def _layer_norm(row: dict, dtype: str) -> Built:
    # benchmark_layer_norm.py: torch.nn.LayerNorm(N, eps=1e-6) with its bias, in the row's dtype,
    # on x [M, N].
    m, n = _dim(row, "m"), _dim(row, "n")
    inner = _torch().nn.LayerNorm(n, eps=1e-6).to(device="meta", dtype=_dtype(dtype))
    return Built(inner, {"x": ((m, n), dtype)}, [((m, n), dtype)], lambda f, x: f(x))


def _group_norm(row: dict, dtype: str) -> Built:
    # benchmark_group_norm.py: torch.nn.GroupNorm(C // 4, C, eps=1e-6) on x [M, C, L]
    # (the row's batch, m and n).
    b, c, length = _dim(row, "batch"), _dim(row, "m"), _dim(row, "n")
    inner = _torch().nn.GroupNorm(c // 4, c, eps=1e-6).to(device="meta", dtype=_dtype(dtype))
    return Built(inner, {"x": ((b, c, length), dtype)}, [((b, c, length), dtype)], lambda f, x: f(x))


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
    return Built(NaiveAddRMSNorm(), {"x": ((m, n), dtype), "r": ((m, n), dtype)}, out, lambda f, x, r: f(x, r))


def _add_liger_rms_norm(row: dict, dtype: str) -> Built:
    # benchmark_fused_add_rms_norm.py's AddLigerRMSNorm (the 'liger_rms_norm' provider, impl
    # liger_unfused_add here): h = x.float() + r.float() in torch, LigerRMSNorm(h), one Triton
    # kernel reading h and its weight and writing the output and the inverse RMS, as the capture
    # records F.rms_norm (_fused_rms_norm), then the module's own fp32 weight times the result;
    # h is returned beside it (https://github.com/linkedin/Liger-Kernel/blob/161d452cafba10d8d45071d0ee1ae640ab078233/benchmark/scripts/benchmark_fused_add_rms_norm.py).
    torch = _torch()
    m, n = _dim(row, "m"), _dim(row, "n")

    class AddLigerRMSNorm(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.weight = torch.nn.Parameter(torch.empty(n, dtype=torch.float32, device="meta"))
            self.norm_weight = torch.nn.Parameter(torch.empty(n, dtype=torch.float32, device="meta"))

        def forward(self, x: Any, r: Any) -> Any:
            h = x.to(torch.float32) + r.to(torch.float32)
            y = torch.nn.functional.rms_norm(h, (n,), self.norm_weight, 1e-6)
            return self.weight * y, h

    out = [((m, n), "fp32"), ((m, n), "fp32")]
    return Built(AddLigerRMSNorm(), {"x": ((m, n), dtype), "r": ((m, n), dtype)}, out, lambda f, x, r: f(x, r))


def _megatron_rms_norm(row: dict, dtype: str) -> Built:
    # benchmark_megatron_rms_norm.py: torch.nn.RMSNorm(H, eps=1e-6) in bf16 (the "torch"
    # provider, and Megatron's WrappedTorchNorm, which returns the same module) on x [S, B, H];
    # its "backward" and "full" time the forward, out.sum() and the backward together.
    m, n = _dim(row, "m"), _dim(row, "n")
    inner = _torch().nn.RMSNorm(n, eps=1e-6).to(device="meta", dtype=_dtype(dtype))
    return Built(inner, {"x": ((m, n), dtype)}, None, lambda f, x: f(x).sum())


def _megatron_swiglu(row: dict, dtype: str) -> Built:
    # benchmark_megatron_swiglu.py's "torch" provider: y1, y2 = y.chunk(2, -1); silu(y1) * y2 on
    # y [S * B, 2F]; "backward" and "full" time the forward, out.sum() and the backward.
    torch = _torch()
    m, n = _dim(row, "m"), _dim(row, "n")

    class SwiGLU(torch.nn.Module):
        def forward(self, y: Any) -> Any:
            y1, y2 = torch.chunk(y, 2, -1)
            return (torch.nn.functional.silu(y1) * y2).sum()

    return Built(SwiGLU(), {"y": ((m, 2 * n), dtype)}, None, lambda f, y: f(y))


def _rope(row: dict, dtype: str, liger: bool = False) -> Built:
    # benchmark_rope.py: q and k made as [batch, seq, heads, head_dim] leaves and transposed to
    # [batch, heads, seq, head_dim] (views), cos and sin [batch, seq, head_dim] from
    # LlamaRotaryEmbedding computed outside the timed call; dq and dk from torch.randn_like of
    # the transposed outputs, so transposed too; torch.autograd.grad with grad_to_none=[q, k] (no
    # accumulation). The "huggingface" provider (and what torch.compile compiles) is transformers'
    # apply_rotary_pos_emb; Liger's (ops/rope.py) transposes q and k back to [batch, seq, heads,
    # head_dim] (contiguous, so .contiguous() copies nothing) and rotates both in one in-place
    # kernel, forward and backward (the backward with -sin, on dq and dk alike).
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
            if liger:
                from accel_sim.capture.fused_ops import LigerRope

                return LigerRope.apply(q.transpose(1, 2), k.transpose(1, 2), self.cos, self.sin)
            return apply_rotary_pos_emb(q.transpose(1, 2), k.transpose(1, 2), self.cos, self.sin)

    leaves = {"q": ((b, s, heads, d), dtype), "k": ((b, s, kv_heads, d), dtype)}
    grads = [((b, s, heads, d), dtype), ((b, s, kv_heads, d), dtype)]
    return Built(Rope(), leaves, grads, lambda f, q, k: f(q, k),
                 upstream=lambda dq, dk: (dq.transpose(1, 2), dk.transpose(1, 2)))


def _liger_rope(row: dict, dtype: str) -> Built:
    return _rope(row, dtype, liger=True)


def _mlp(row: dict, dtype: str, fused: bool) -> Built:
    # benchmark_swiglu.py, benchmark_geglu.py: transformers' LlamaMLP(LlamaConfig(hidden_size,
    # intermediate_size, hidden_act)) cast to the row's dtype (the "huggingface" provider, and the
    # module torch.compile compiles), or Liger's LigerSwiGLUMLP / LigerGEGLUMLP: the same three
    # bias-free projections around Liger's fused activation(gate) * up kernel (`fused`). x
    # [B, T, hidden] with requires_grad; y.backward(dy) with dy like y. do_bench resets only x's
    # gradient (grad_to_none=[x]), so every backward adds into the three weights' .grad.
    from transformers import LlamaConfig
    from transformers.models.llama.modeling_llama import LlamaMLP

    torch = _torch()
    b, t, hidden, inter = _dim(row, "batch"), _dim(row, "seq_q"), _dim(row, "n"), _dim(row, "k")
    act = _MLP_ACTIVATIONS[row["op"]]
    with torch.device("meta"):  # no weights: a CPU init of 3 x hidden x intermediate takes seconds
        inner = LlamaMLP(LlamaConfig(hidden_size=hidden, intermediate_size=inter, hidden_act=act))
    if fused:
        from accel_sim.capture.fused_ops import gated_activation

        name = {"silu": "silu", "gelu_pytorch_tanh": "gelu_tanh"}[act]

        class LigerMLP(torch.nn.Module):
            def __init__(self) -> None:
                super().__init__()
                self.gate_proj, self.up_proj, self.down_proj = inner.gate_proj, inner.up_proj, inner.down_proj

            def forward(self, x: Any) -> Any:
                return self.down_proj(gated_activation(self.gate_proj(x), self.up_proj(x), name))

        inner = LigerMLP()
    inner = inner.to(device="meta", dtype=_dtype(dtype))
    weights = tuple(f"inner.{p}.weight" for p in ("gate_proj", "up_proj", "down_proj"))
    return Built(inner, {"x": ((b, t, hidden), dtype)}, [((b, t, hidden), dtype)], lambda f, x: f(x),
                 accumulate=weights)


# benchmark_swiglu.py's and benchmark_geglu.py's hidden_act
_MLP_ACTIVATIONS = {"swiglu": "silu", "geglu": "gelu_pytorch_tanh"}


def _llama_mlp(row: dict, dtype: str) -> Built:
    return _mlp(row, dtype, fused=False)


def _liger_mlp(row: dict, dtype: str) -> Built:
    return _mlp(row, dtype, fused=True)


def _cross_entropy(row: dict, dtype: str, liger: bool) -> Built:
    # benchmark_cross_entropy.py: logits [B*T, V] from torch.randn(..., requires_grad=True) (fp32,
    # the default dtype), a random int64 target per row, and torch.nn.CrossEntropyLoss() (mean;
    # the "huggingface" provider, and what torch.compile compiles) or Liger's
    # LigerCrossEntropyLoss. "full" backpropagates the loss with no grad_to_none, so each backward
    # adds into the .grad of the logits. Liger's forward runs, per row, the pass of the loss (online
    # max and sum of exponentials) and then the gradient pass, written into the logits' own storage
    # (ops/cross_entropy.py); its backward hands that storage back as the gradient without a kernel
    # when the upstream gradient is 1, so the .grad it accumulates into is the same storage.
    torch = _torch()
    rows, vocab = _dim(row, "m"), _dim(row, "n")

    class Loss(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("target", torch.empty((rows,), dtype=torch.int64, device="meta"))
            self.loss = torch.nn.CrossEntropyLoss()

        def forward(self, logits: Any) -> Any:
            if liger:
                from accel_sim.capture.fused_ops import LigerCrossEntropy

                return LigerCrossEntropy.apply(logits, self.target)
            return self.loss(logits, self.target)

    return Built(Loss(), {"logits": ((rows, vocab), dtype)}, None, lambda f, logits: f(logits),
                 accumulate=("logits",), accumulate_in_place=liger)


def _torch_cross_entropy(row: dict, dtype: str) -> Built:
    return _cross_entropy(row, dtype, liger=False)


def _liger_cross_entropy(row: dict, dtype: str) -> Built:
    return _cross_entropy(row, dtype, liger=True)




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
    ("rope", "liger"): (_liger_rope, False),
    ("fused_add_rms_norm", "huggingface"): (_fused_add_rms_norm, False),
    ("fused_add_rms_norm", "liger_unfused_add"): (_add_liger_rms_norm, False),
    ("megatron_rms_norm", "torch"): (_megatron_rms_norm, False),
    ("megatron_rms_norm", "megatron"): (_megatron_rms_norm, False),
    ("megatron_swiglu", "torch"): (_megatron_swiglu, False),
    ("swiglu", "huggingface"): (_llama_mlp, False),
    ("swiglu", "torch_compile"): (_llama_mlp, True),
    ("swiglu", "liger"): (_liger_mlp, False),
    ("geglu", "huggingface"): (_llama_mlp, False),
    ("geglu", "torch_compile"): (_llama_mlp, True),
    ("geglu", "liger"): (_liger_mlp, False),
    ("cross_entropy", "huggingface"): (_torch_cross_entropy, False),
    ("cross_entropy", "torch_compile"): (_torch_cross_entropy, True),
    ("cross_entropy", "liger"): (_liger_cross_entropy, False),
}
# Providers whose backward runs Liger's RMSNorm backward, whose weight gradient goes through one
# partial row per program and a sum (not modelled): their forward rows alone are module rows.
_FORWARD_ONLY = ("liger_unfused_add",)
# Benchmarks whose "backward" call runs the forward, a sum and the backward (out.sum().backward()).
_WHOLE_STEP_BACKWARD = ("megatron_rms_norm", "megatron_swiglu")


def _builder(op: str, impl: str) -> Callable[[dict, str], Built] | None:
    made = _BUILDERS.get((op, impl))
    return made[0] if made else None


# Ops the kernel table has no single-kernel model of: every provider's row is a module row.
_MODULES_ONLY = ("swiglu", "geglu", "cross_entropy")


def describes(row: dict) -> bool:
    """Whether `row` (a kernels.csv row) times an eager module this file rebuilds. A
    torch.compile forward is one Inductor kernel (the norm's reduction fused with its
    elementwise ops), and Liger's forward and backward calls of an op are one kernel each, which
    the kernel table times as such; the other calls (a compiled backward, Liger's "full") are
    module rows, as is every call of an op the table has no kernel of (_MODULES_ONLY)."""
    op, impl, direction = row.get("op", ""), row.get("impl", ""), row.get("direction")
    if op not in _MODULES_ONLY and (impl == "torch_compile" and direction == "forward"
                                    or impl == "liger" and direction != "full"):
        return False
    if impl in _FORWARD_ONLY and direction != "forward":
        return False
    return (row.get("kind") == "memory" and direction in DIRECTIONS and row.get("dtype") in DTYPES
            and _builder(op, impl) is not None)


_SHAPE_KEYS = ("m", "n", "k", "batch", "heads", "kv_heads", "seq_q", "head_dim")


def module_row(row: dict) -> ModuleRow:
    shape = tuple((k, int(float(row[k]))) for k in _SHAPE_KEYS if row.get(k))
    dims = " ".join(f"{k}{v}" for k, v in shape)
    return ModuleRow(row["id"], row["device"], row["split"], row["op"], row["impl"], row["direction"], row["dtype"],
                     shape, float(row["measured_s"]), row["source"],
                     f"{row['op']} {row['impl']} {row['direction']} {dims}")


@functools.lru_cache(maxsize=256)
def _graph(build: Callable[[dict, str], Built], op: str, dtype: str, shape: tuple[tuple[str, int], ...]) -> Any:
    """The core graph of one training step (forward and backward, no optimizer) of the module
    `build` makes, captured once per shape (the rows of several devices and of the eager and
    compiled providers share it)."""
    from accel_sim.capture import capture_training_step
    from accel_sim.io.graph_file import to_core

    graph = capture_training_step(_harness(build({"op": op, **dict(shape)}, dtype)), (), optimizer="none",
                                  name=build.__name__.strip("_"))
    return to_core(graph)


def predict(row: ModuleRow, spec: Any, cost_model: str) -> float:
    """Predicted time of the row's timed call on the device `spec` (a DeviceSpec)."""
    build, compiled = _BUILDERS[(row.op, row.impl)]
    options = _core.SimulateOptions()
    options.cost_model = cost_model
    options.fuse_elementwise = compiled
    result = _core.simulate(_graph(build, row.op, row.dtype, row.shape), spec, options)
    whole = row.direction == "full" or (row.direction == "backward" and row.op in _WHOLE_STEP_BACKWARD)
    if whole:
        span = result.forward_time_s + result.backward_time_s
    else:
        span = result.forward_time_s if row.direction == "forward" else result.backward_time_s
    return span + spec.kernel.alone_stream_overhead_s
