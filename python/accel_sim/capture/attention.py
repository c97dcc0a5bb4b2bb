"""The `accel_sim::attention` op: scaled dot-product attention recorded as one graph node.

A capture must not record attention as whatever kernel the capturing host would pick (on a fake
CPU that is `_scaled_dot_product_flash_attention_for_cpu`, on meta the math decomposition with a
materialized [B, H, Sq, Sk] score matrix). The target's kernel is the C++ cost model's choice, so
the graph carries one device-independent op with everything that choice needs: q/k/v shapes
(the GQA ratio is q heads / kv heads), the mask if any, the causal flag, dropout and scale.

`SdpaRouting` is a TorchFunctionMode that, while active, sends every call of
`torch.nn.functional.scaled_dot_product_attention` to this op. HF models reach the op through the
attention interface registered in `hf.py` instead.
"""

from __future__ import annotations

import inspect
from typing import Any

import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

OP_NAME = "accel_sim::attention"


@torch.library.custom_op(OP_NAME, mutates_args=())
def attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    """q [.., Hq, Sq, D] attends over k [.., Hkv, Sk, D], v [.., Hkv, Sk, Dv] -> [.., Hq, Sq, Dv].

    Same semantics as `torch.nn.functional.scaled_dot_product_attention`; `enable_gqa` says
    that k/v carry fewer heads than q (each kv head serves Hq / Hkv query heads).
    """
    return F.scaled_dot_product_attention(
        q,
        k,
        v,
        attn_mask=attn_mask,
        dropout_p=dropout_p,
        is_causal=is_causal,
        scale=scale,
        enable_gqa=enable_gqa,
    )


@attention.register_fake
def _attention_fake(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> torch.Tensor:
    # The SDPA kernels (CPU flash, CUDA flash/efficient) return the output in the query's memory
    # layout, so the usual transpose(1, 2).reshape afterwards is a view, not a copy.
    shape = (*q.shape[:-1], v.shape[-1])
    order = sorted(range(q.dim()), key=lambda d: q.stride(d), reverse=True)
    strides = [0] * q.dim()
    step = 1
    for d in reversed(order):
        strides[d] = step
        step *= shape[d]
    return q.new_empty_strided(shape, strides)


@torch.library.custom_op("accel_sim::attention_backward", mutates_args=())
def attention_backward(
    grad_out: torch.Tensor,
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    out: torch.Tensor,
    attn_mask: torch.Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """dq, dk, dv of `accel_sim::attention` (one FlashAttention-style backward kernel, which
    recomputes the scores from q and k and reads the saved output)."""
    with torch.enable_grad():
        q2, k2, v2 = (t.detach().requires_grad_(True) for t in (q, k, v))
        o = F.scaled_dot_product_attention(q2, k2, v2, attn_mask=attn_mask, dropout_p=dropout_p,
                                           is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)
        dq, dk, dv = torch.autograd.grad(o, (q2, k2, v2), grad_out)
    return dq, dk, dv


@attention_backward.register_fake
def _attention_backward_fake(grad_out, q, k, v, out, attn_mask=None, dropout_p=0.0, is_causal=False,  # noqa: ANN001
                             scale=None, enable_gqa=False):
    return torch.empty_like(q), torch.empty_like(k), torch.empty_like(v)


def _attention_setup(ctx: Any, inputs: tuple, output: torch.Tensor) -> None:
    q, k, v, attn_mask, dropout_p, is_causal, scale, enable_gqa = inputs
    ctx.save_for_backward(q, k, v, output, attn_mask)
    ctx.options = (dropout_p, is_causal, scale, enable_gqa)


def _attention_grad(ctx: Any, grad_out: torch.Tensor) -> tuple:
    q, k, v, out, attn_mask = ctx.saved_tensors
    dq, dk, dv = torch.ops.accel_sim.attention_backward(grad_out, q, k, v, out, attn_mask, *ctx.options)
    return dq, dk, dv, None, None, None, None, None


# A training-step capture differentiates through the op: its backward is one node too.
attention.register_autograd(_attention_grad, setup_context=_attention_setup)


_SDPA_PARAMETERS = (
    "query",
    "key",
    "value",
    "attn_mask",
    "dropout_p",
    "is_causal",
    "scale",
    "enable_gqa",
)
_SDPA_DEFAULTS: dict[str, Any] = {
    "attn_mask": None,
    "dropout_p": 0.0,
    "is_causal": False,
    "scale": None,
    "enable_gqa": False,
}


def _bind_sdpa_arguments(args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    bound = dict(_SDPA_DEFAULTS)
    bound.update(zip(_SDPA_PARAMETERS, args, strict=False))
    bound.update(kwargs)
    return bound


class SdpaRouting(TorchFunctionMode):
    """While active, `F.scaled_dot_product_attention(...)` calls `accel_sim::attention` instead,
    and `F.rms_norm(...)` `accel_sim::fused_rms_norm` (the fused kernel a GPU runs, norms.py)."""

    def __torch_function__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        if func is F.rms_norm:  # CUDA's one fused kernel, not the CPU's decomposition (norms.py)
            from accel_sim.capture.norms import rms_norm

            return rms_norm(*args, **kwargs)
        if func is F.scaled_dot_product_attention:
            a = _bind_sdpa_arguments(args, kwargs)
            if a["query"].dim() == a["key"].dim() and a["query"].shape[-3] != a["key"].shape[-3]:
                a["enable_gqa"] = True
            return torch.ops.accel_sim.attention(
                a["query"],
                a["key"],
                a["value"],
                a["attn_mask"],
                float(a["dropout_p"]),
                bool(a["is_causal"]),
                None if a["scale"] is None else float(a["scale"]),
                bool(a["enable_gqa"]),
            )
        if inspect.isfunction(func) and func.__module__ == F.__name__:
            # The mode is off while its handler runs. Python-level functionals such as
            # F.multi_head_attention_forward call SDPA inside, so run their body with it back on.
            with self:
                return torch.overrides.redispatch_function(func, types, args, kwargs)
        return func(*args, **kwargs)
