"""What a capture changes on a Hugging Face transformers model, and how it reads its outputs.

During a capture (`hf_capture_settings`) a `PreTrainedModel`:

* runs its attention through the "accel_sim" entry of `transformers.AttentionInterface`
  (`attention_forward` below), which records `accel_sim::attention` with un-repeated k/v
  (`enable_gqa` when k/v carry fewer heads than q) instead of SDPA's host-specific kernel;
* builds its masks with the "accel_sim" entry of `AttentionMaskInterface`, which is transformers'
  own SDPA mask builder: with no padding mask it returns None, so causal decoders record
  `is_causal=True` and encoders record no mask at all;
* assumes its sequences are not packed: with fake tensors transformers cannot look at
  `position_ids` and would otherwise materialize a [B, 1, S, S] mask "in case" rows hold several
  sequences (huggingface/transformers issue #48925); `find_packed_sequence_indices` answers
  "not packed";
* runs mixture-of-experts layers with the "grouped_mm" experts implementation (argsort + histc +
  grouped GEMM, static shapes) instead of the eager per-expert loop that needs `nonzero()`.

This applies to the model when it is a transformers model, else to the outermost transformers
models inside it. Everything is restored on exit; other models pass through untouched.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

import torch

from accel_sim.errors import UsageError

IMPLEMENTATION_NAME = "accel_sim"
EXPERTS_IMPLEMENTATION = "grouped_mm"

# Attention features that `accel_sim::attention` cannot express.
_UNSUPPORTED_ATTENTION_KWARGS = {
    "softcap": "attention logit soft-capping",
    "s_aux": "attention sinks",
    "sinks": "attention sinks",
}


def _outermost_transformers_models(model: torch.nn.Module) -> list[torch.nn.Module]:
    """`model` itself if it is a transformers model, else the outermost ones inside it."""
    transformers = sys.modules.get("transformers")
    if transformers is None:
        return []

    def inside(name: str, outer: str) -> bool:
        return outer == "" or name == outer or name.startswith(outer + ".")

    found: list[tuple[str, torch.nn.Module]] = []
    for name, module in model.named_modules():
        if isinstance(module, transformers.PreTrainedModel) and not any(
            inside(name, outer) for outer, _ in found
        ):
            found.append((name, module))
    return [module for _, module in found]


def attention_forward(
    module: torch.nn.Module,
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    attention_mask: torch.Tensor | None,
    dropout: float = 0.0,
    scaling: float | None = None,
    is_causal: bool | None = None,
    position_bias: torch.Tensor | None = None,
    **kwargs: Any,
) -> tuple[torch.Tensor, None]:
    """Attention function: q [B, Hq, Sq, D], k/v [B, Hkv, Sk, D] -> ([B, Sq, Hq, D], None).

    Mirrors transformers' `sdpa_attention_forward` decisions (causal flag, static-cache slicing,
    position bias) but never repeats k/v heads.
    """
    for name, feature in _UNSUPPORTED_ATTENTION_KWARGS.items():
        if kwargs.get(name) is not None:
            raise UsageError(
                f"{type(module).__name__} uses {feature}, which accel-sim's attention op cannot "
                "represent; this model family is not supported by capture yet"
            )
    q_length = query.shape[2]
    is_causal = is_causal if is_causal is not None else getattr(module, "is_causal", True)
    is_causal = bool(q_length > 1 and attention_mask is None and is_causal)
    if is_causal and key.shape[2] > q_length:
        # Prefill into an empty static cache: SDPA's upper-left causal mask only needs the first
        # q_length keys (transformers' sdpa path slices the same way).
        key = key[:, :, :q_length, :]
        value = value[:, :, :q_length, :]
        if position_bias is not None:
            position_bias = position_bias[:, :, :, :q_length]
    if position_bias is not None:
        from transformers.integrations.sdpa_attention import create_position_bias_mask

        attention_mask = create_position_bias_mask(
            position_bias, attention_mask, is_causal, query, key
        )
        is_causal = False
    output = torch.ops.accel_sim.attention(
        query,
        key,
        value,
        attention_mask,
        float(dropout),
        is_causal,
        None if scaling is None else float(scaling),
        bool(query.shape[1] != key.shape[1]),
    )
    return output.transpose(1, 2).contiguous(), None


def _register_implementation() -> None:
    from transformers import AttentionInterface
    from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

    AttentionInterface.register(IMPLEMENTATION_NAME, attention_forward)
    AttentionMaskInterface.register(IMPLEMENTATION_NAME, sdpa_mask)


def _not_packed(position_ids: torch.Tensor) -> None:
    """Stands in for `transformers.masking_utils.find_packed_sequence_indices` during capture."""
    return None


@contextlib.contextmanager
def _attention_implementation(model: Any) -> Iterator[None]:
    if not model._can_set_attn_implementation():
        yield  # Its own attention code; SDPA calls in it are still routed by `SdpaRouting`.
        return
    _register_implementation()
    previous = model.config._attn_implementation
    model.set_attn_implementation(IMPLEMENTATION_NAME)
    try:
        yield
    finally:
        model.set_attn_implementation(previous)


@contextlib.contextmanager
def _experts_implementation(model: Any) -> Iterator[None]:
    can_set = getattr(model, "_can_set_experts_implementation", None)
    if can_set is None or not can_set() or not hasattr(model, "get_experts_implementation"):
        yield
        return
    previous = model.get_experts_implementation()
    model.set_experts_implementation(EXPERTS_IMPLEMENTATION)
    try:
        yield
    finally:
        model.set_experts_implementation(previous)


@contextlib.contextmanager
def _unpacked_sequences() -> Iterator[None]:
    import transformers.masking_utils as masking_utils

    original = getattr(masking_utils, "find_packed_sequence_indices", None)
    if original is None:
        yield
        return
    masking_utils.find_packed_sequence_indices = _not_packed
    try:
        yield
    finally:
        masking_utils.find_packed_sequence_indices = original


@contextlib.contextmanager
def hf_capture_settings(model: torch.nn.Module) -> Iterator[None]:
    """Switch a transformers model to capture-friendly implementations; restore them on exit."""
    models = _outermost_transformers_models(model)
    if not models:
        yield
        return
    with contextlib.ExitStack() as stack:
        for hf_model in models:
            stack.enter_context(_attention_implementation(hf_model))
            stack.enter_context(_experts_implementation(hf_model))
        stack.enter_context(_unpacked_sequences())
        yield


def cache_tensors(value: Any) -> Iterator[torch.Tensor] | None:
    """The key/value tensors of a transformers `Cache`, or None when `value` is not one."""
    transformers = sys.modules.get("transformers")
    if transformers is None or not isinstance(value, transformers.Cache):
        return None

    def tensors() -> Iterator[torch.Tensor]:
        for layer in getattr(value, "layers", None) or ():
            for name in ("keys", "values"):
                tensor = getattr(layer, name, None)
                if isinstance(tensor, torch.Tensor):
                    yield tensor
        for name in ("self_attention_cache", "cross_attention_cache"):
            inner = cache_tensors(getattr(value, name, None))
            if inner is not None:
                yield from inner

    return tensors()
