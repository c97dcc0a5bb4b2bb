"""`torch.nn.functional.rms_norm` captured as the fused kernel a GPU runs, not the CPU's chain.

`aten::rms_norm` is CompositeImplicitAutograd: on a CUDA (or XPU, MPS) tensor it calls
`aten::_fused_rms_norm`, one kernel writing the output and the fp32 inverse RMS per row, and
autograd differentiates it with `aten::_fused_rms_norm_backward`, one kernel (the dispatch keys
of both in PyTorch's aten/src/ATen/native/native_functions.yaml; the derivative in
tools/autograd/derivatives.yaml). On the fake CPU tensors of a capture the same call decomposes
into pow, mean, add, rsqrt and products (eight kernels forward), which no GPU runs: a model with
torch.nn.RMSNorm (torchtitan's, Megatron-Core's WrappedTorchNorm) would be costed at several
times its traffic.

`accel_sim::fused_rms_norm` and its backward are recorded as one node each and exported under
the ATen names (`_fused_rms_norm`, `_fused_rms_norm_backward`), which the op catalogue costs.
`SdpaRouting` (attention.py) sends F.rms_norm here while a capture runs.
"""

from __future__ import annotations

from typing import Any, Sequence

import torch

# Custom op -> the ATen op CUDA runs, as the graph names it.
ATEN_NAMES = {"accel_sim::fused_rms_norm": "_fused_rms_norm",
              "accel_sim::fused_rms_norm_backward": "_fused_rms_norm_backward"}


def _rstd_shape(x: torch.Tensor, normalized_shape: Sequence[int]) -> list[int]:
    return [*x.shape[:x.dim() - len(normalized_shape)], *([1] * len(normalized_shape))]


@torch.library.custom_op("accel_sim::fused_rms_norm", mutates_args=())
def fused_rms_norm(x: torch.Tensor, normalized_shape: Sequence[int], weight: torch.Tensor | None,
                   eps: float | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(y, rstd): y = x * rsqrt(mean(x^2 over normalized_shape) + eps) * weight, rstd in fp32."""
    dims = list(range(x.dim() - len(normalized_shape), x.dim()))
    x32 = x.float()
    eps_ = torch.finfo(x.dtype).eps if eps is None else eps
    rstd = torch.rsqrt(x32.pow(2).mean(dims, keepdim=True) + eps_)
    y = (x32 * rstd).to(x.dtype)
    return (y * weight if weight is not None else y), rstd


@fused_rms_norm.register_fake
def _fused_rms_norm_fake(x, normalized_shape, weight, eps):  # noqa: ANN001
    dtype = torch.promote_types(x.dtype, weight.dtype) if weight is not None else x.dtype
    return x.new_empty(x.shape, dtype=dtype), x.new_empty(_rstd_shape(x, normalized_shape), dtype=torch.float32)


@torch.library.custom_op("accel_sim::fused_rms_norm_backward", mutates_args=())
def fused_rms_norm_backward(grad_out: torch.Tensor, x: torch.Tensor, normalized_shape: Sequence[int],
                            rstd: torch.Tensor, weight: torch.Tensor | None,
                            output_mask: Sequence[bool]) -> tuple[torch.Tensor, torch.Tensor]:
    """(dx, dweight) of fused_rms_norm; dweight is empty when the weight needs no gradient.
    With xhat = x * rstd and g = grad_out * weight: dx = rstd * (g - xhat * mean(g * xhat)) over
    the normalized dims, dweight = the sum of grad_out * xhat over the others (a custom op's
    kernel runs below autograd, so the gradient is written out, not traced)."""
    dims = list(range(x.dim() - len(normalized_shape), x.dim()))
    xhat = x.float() * rstd
    g = grad_out.float() * weight.float() if weight is not None else grad_out.float()
    dx = (rstd * (g - xhat * (g * xhat).mean(dims, keepdim=True))).to(x.dtype)
    if weight is None or not output_mask[1]:
        return dx, x.new_empty(0)
    lead = list(range(x.dim() - len(normalized_shape)))
    dw = (grad_out.float() * xhat.to(x.dtype).float()).sum(lead) if lead else grad_out.float() * xhat
    return dx, dw.to(weight.dtype)


@fused_rms_norm_backward.register_fake
def _fused_rms_norm_backward_fake(grad_out, x, normalized_shape, rstd, weight, output_mask):  # noqa: ANN001
    dw = weight.new_empty(weight.shape) if weight is not None and output_mask[1] else x.new_empty(0)
    return x.new_empty(x.shape), dw


def _setup(ctx: Any, inputs: tuple, output: tuple) -> None:
    x, normalized_shape, weight, _eps = inputs
    ctx.set_materialize_grads(False)  # rstd's gradient stays undefined, as CUDA's formula has it
    ctx.save_for_backward(x, output[1], weight)
    ctx.normalized_shape = list(normalized_shape)
    ctx.weight_grad = weight is not None and weight.requires_grad


def _grad(ctx: Any, grad_out: torch.Tensor, _grad_rstd: torch.Tensor) -> tuple:
    x, rstd, weight = ctx.saved_tensors
    dx, dw = torch.ops.accel_sim.fused_rms_norm_backward(grad_out, x, ctx.normalized_shape, rstd, weight,
                                                         [True, ctx.weight_grad])
    return dx, None, (dw if ctx.weight_grad else None), None


fused_rms_norm.register_autograd(_grad, setup_context=_setup)


def rms_norm(x: torch.Tensor, normalized_shape: Sequence[int], weight: torch.Tensor | None = None,
             eps: float | None = None) -> torch.Tensor:
    """F.rms_norm as a GPU runs it (one fused kernel)."""
    return torch.ops.accel_sim.fused_rms_norm(x, list(normalized_shape), weight, eps)[0]
