"""Fused kernels of training libraries as capture ops: the same ops the model builder emits.

Libraries such as Liger-Kernel and Megatron-Core replace chains of PyTorch kernels with one
Triton or CUDA kernel: the gated activation of a SwiGLU/GeGLU MLP and the language-model
cross-entropy. A module that calls these ops (torch.ops.accel_sim.*) is captured with one node
per kernel, named as the builder names them (core/src/model/builder.cc with
BuildOptions::fused_gated_activation and cross_entropy), so one op catalogue entry costs
both a built model and a captured one:

- `accel_sim::gated_activation(gate, up, activation)`: activation(gate) * up in one pass (reads
  gate and up, writes the product); its backward `accel_sim::gated_activation_backward(dy, gate,
  up, activation)` reads dy, gate and up, recomputes the activation and writes both gradients
  (Liger's swiglu.py and geglu.py kernels; Megatron-Core's fused SwiGLU).
- `accel_sim::cross_entropy(logits, target, ignore_index)`: one pass over the logits per row
  (online max and sum of exponentials), returning the mean loss and each row's log-sum-exp; its
  backward `accel_sim::cross_entropy_backward(dy, logits, lse, target, ignore_index)` reads the
  logits and writes their gradient, softmax - one_hot(target), scaled by dy / rows.

The ops compute real values on real tensors (so a capture on a CPU with real inputs agrees with
eager PyTorch), and shapes only on fake ones.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

ACTIVATIONS = {"silu": F.silu, "gelu": F.gelu, "gelu_tanh": lambda t: F.gelu(t, approximate="tanh"),
               "relu": F.relu}


def _activation(name: str) -> Any:
    fn = ACTIVATIONS.get(name)
    if fn is None:
        raise ValueError(f"unknown gated activation {name!r} (known: {', '.join(ACTIVATIONS)})")
    return fn


@torch.library.custom_op("accel_sim::gated_activation", mutates_args=())
def gated_activation(gate: torch.Tensor, up: torch.Tensor, activation: str) -> torch.Tensor:
    """activation(gate) * up, one kernel."""
    return _activation(activation)(gate) * up


@gated_activation.register_fake
def _gated_activation_fake(gate, up, activation):  # noqa: ANN001
    _activation(activation)
    return torch.empty_like(gate)


@torch.library.custom_op("accel_sim::gated_activation_backward", mutates_args=())
def gated_activation_backward(dy: torch.Tensor, gate: torch.Tensor, up: torch.Tensor,
                              activation: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(d gate, d up) of gated_activation: activation(gate) recomputed, not saved."""
    dact = dy * up
    if activation == "silu":
        dgate = torch.ops.aten.silu_backward(dact, gate)
    elif activation in ("gelu", "gelu_tanh"):
        dgate = torch.ops.aten.gelu_backward(dact, gate, approximate="tanh" if activation == "gelu_tanh" else "none")
    else:
        dgate = torch.ops.aten.threshold_backward(dact, _activation(activation)(gate), 0)
    return dgate, dy * _activation(activation)(gate)


@gated_activation_backward.register_fake
def _gated_activation_backward_fake(dy, gate, up, activation):  # noqa: ANN001
    return torch.empty_like(gate), torch.empty_like(up)


def _gated_setup(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    gate, up, activation = inputs
    ctx.save_for_backward(gate, up)
    ctx.activation = activation


def _gated_grad(ctx: Any, dy: torch.Tensor) -> tuple:
    gate, up = ctx.saved_tensors
    dgate, dup = torch.ops.accel_sim.gated_activation_backward(dy, gate, up, ctx.activation)
    return dgate, dup, None


gated_activation.register_autograd(_gated_grad, setup_context=_gated_setup)


@torch.library.custom_op("accel_sim::cross_entropy", mutates_args=())
def cross_entropy(logits: torch.Tensor, target: torch.Tensor, ignore_index: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(mean loss over the rows whose target is not ignore_index, fp32 log-sum-exp per row)."""
    lse = torch.logsumexp(logits.float(), dim=-1)
    loss = F.cross_entropy(logits.float(), target, ignore_index=ignore_index)
    return loss, lse


@cross_entropy.register_fake
def _cross_entropy_fake(logits, target, ignore_index):  # noqa: ANN001
    return logits.new_empty((), dtype=torch.float32), logits.new_empty(logits.shape[:-1], dtype=torch.float32)


@torch.library.custom_op("accel_sim::cross_entropy_backward", mutates_args=())
def cross_entropy_backward(dy: torch.Tensor, logits: torch.Tensor, lse: torch.Tensor, target: torch.Tensor,
                           ignore_index: int) -> torch.Tensor:
    """d logits of cross_entropy's mean loss: (softmax - one_hot(target)) * dy / valid rows."""
    valid = target != ignore_index
    grad = torch.exp(logits.float() - lse.unsqueeze(-1))
    rows = torch.arange(logits.shape[0], device=logits.device)
    grad[rows[valid], target[valid]] -= 1.0
    grad = grad * valid.unsqueeze(-1) * (dy / valid.sum().clamp(min=1))
    return grad.to(logits.dtype)


@cross_entropy_backward.register_fake
def _cross_entropy_backward_fake(dy, logits, lse, target, ignore_index):  # noqa: ANN001
    return torch.empty_like(logits)


def _ce_setup(ctx: Any, inputs: tuple, output: tuple) -> None:
    logits, target, ignore_index = inputs
    ctx.set_materialize_grads(False)
    ctx.save_for_backward(logits, output[1], target)
    ctx.ignore_index = ignore_index


def _ce_grad(ctx: Any, dloss: torch.Tensor, _dlse: torch.Tensor) -> tuple:
    logits, lse, target = ctx.saved_tensors
    return torch.ops.accel_sim.cross_entropy_backward(dloss, logits, lse, target, ctx.ignore_index), None, None


cross_entropy.register_autograd(_ce_grad, setup_context=_ce_setup)


@torch.library.custom_op("accel_sim::rotary_embedding", mutates_args=())
def rotary_embedding(q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor,
                     backward: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """q and k [batch, seq, heads, head_dim] rotated by the half-split rotation with cos and sin
    [batch, seq, head_dim], in one kernel (Liger's rope.py; the builder's op rotates one tensor
    per launch); `backward` rotates by -sin, which is the forward's gradient."""
    c, s = cos.unsqueeze(2), (-sin if backward else sin).unsqueeze(2)

    def rotate(x: torch.Tensor) -> torch.Tensor:
        x1, x2 = x.chunk(2, dim=-1)
        return x * c + torch.cat((-x2, x1), dim=-1) * s

    return rotate(q), rotate(k)


@rotary_embedding.register_fake
def _rotary_embedding_fake(q, k, cos, sin, backward):  # noqa: ANN001
    return torch.empty_like(q), torch.empty_like(k)


class LigerCrossEntropy(torch.autograd.Function):
    """Liger-Kernel's cross-entropy (ops/cross_entropy.py): the loss pass and the gradient pass
    both run in the forward (the gradient written into the logits' storage); the backward hands
    that gradient back without a kernel when the upstream gradient is 1, as a loss's is."""

    @staticmethod
    def forward(ctx: Any, logits: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        loss, lse = torch.ops.accel_sim.cross_entropy(logits, target, -100)
        ctx.grad = torch.ops.accel_sim.cross_entropy_backward(loss.new_ones(()), logits, lse, target, -100)
        return loss

    @staticmethod
    def backward(ctx: Any, dloss: torch.Tensor) -> tuple:
        return ctx.grad, None


class LigerRope(torch.autograd.Function):
    """Liger-Kernel's RoPE (ops/rope.py) on q and k [batch, heads, seq, head_dim]: both rotated in
    one kernel on their [batch, seq, heads, head_dim] layout, and the backward the same kernel
    (by -sin) on dq and dk."""

    @staticmethod
    def forward(ctx: Any, q: torch.Tensor, k: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> tuple:
        ctx.save_for_backward(cos, sin)
        q2, k2 = torch.ops.accel_sim.rotary_embedding(q.transpose(1, 2), k.transpose(1, 2), cos, sin, False)
        return q2.transpose(1, 2), k2.transpose(1, 2)

    @staticmethod
    def backward(ctx: Any, dq: torch.Tensor, dk: torch.Tensor) -> tuple:
        cos, sin = ctx.saved_tensors
        dq2, dk2 = torch.ops.accel_sim.rotary_embedding(dq.transpose(1, 2), dk.transpose(1, 2), cos, sin, True)
        return dq2.transpose(1, 2), dk2.transpose(1, 2), None, None
