"""Sentences for the core's hints (`_core.advise`). The rules and thresholds live in the core."""

from __future__ import annotations

from typing import Any

from accel_sim.report.units import si


def hint_message(hint: Any, report: Any) -> str:
    kind = hint.kind.name
    pct = f"{hint.fraction * 100:.0f}%"
    if kind == "out_of_memory":
        return (
            f"out of memory: the peak is {hint.fraction:.2f}x the device's capacity; use a smaller "
            "batch or sequence, lower precision (--dtype bf16), or a device with more memory"
        )
    if kind == "fuse_memory_bound":
        return (
            f"memory-bound elementwise/softmax/norm ops take {pct} of the time: fusing them "
            "(torch.compile) or lower precision / quantization would cut that traffic"
        )
    if kind == "use_flash_attention":
        where = f" (e.g. in {hint.subject})" if hint.subject else ""
        return (
            f"{int(hint.value)} attention(s) materialize the score matrix{where}, {pct} of the time "
            "in their softmax alone: use F.scaled_dot_product_attention / FlashAttention"
        )
    if kind == "matmul_dominated":
        return (
            f"matmuls and attention fill {pct} of the time: larger or better-aligned shapes, a "
            "lower-precision dtype, or a device with a higher matrix peak would help most"
        )
    if kind == "low_precision_available":
        return (
            f"fp32 matmuls take {pct} of the time; this device's {hint.subject} matrix peak is "
            f"{hint.value:.0f}x faster: try --dtype {hint.subject} (or --tf32)"
        )
    if kind == "launch_bound":
        return (
            f"kernel launch overhead is {pct} of the time over {int(hint.value)} kernels: "
            "CUDA graphs, fusion or a bigger batch would amortize it"
        )
    if kind == "peak_fallback":
        return (
            f"the device has no peak for {hint.subject}; those ops used the nearest rate it has "
            "(add the peak to the device file for a better estimate)"
        )
    if kind == "uncovered_ops":
        return (
            f"{int(hint.value)} op type(s) are not in the catalogue and were costed as memory-bound "
            f"on their bytes ({pct} of the time); see 'uncovered ops'"
        )
    if kind == "communication_not_timed":
        return (
            f"this rank's step holds {hint.subject} collectives moving {hint.value / 1e9:,.2f} GB "
            "(tensor/sequence/expert/context parallelism); a single-device simulation does not time them"
        )
    if kind == "masked_attention_pairs":
        where = f" (e.g. {hint.subject})" if hint.subject else ""
        forward = " in each forward pass" if report.result.backward_time_s > 0 else ""
        return (
            f"eager attention{where} computes {si(hint.value, 'FLOP')}{forward} ({pct} of its attention) "
            "on pairs the causal mask discards; a fused kernel (SDPA/FlashAttention) skips them"
        )
    return kind
