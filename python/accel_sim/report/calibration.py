"""What `calibrate` reports: the fitted kernel constants as the `kernel:` section of a device file
(docs/formats/device.md), the fit's error before and after, and the fitted device file itself."""

from __future__ import annotations

from typing import Any

KERNEL_KEYS = ("matmul_efficiency", "fp8_matmul_efficiency", "unaligned_matmul_efficiency", "attention_efficiency", "attention_backward_efficiency",
                "flash3_efficiency", "cudnn_efficiency", "cudnn_backward_efficiency", "fp8_attention_efficiency", "memory_efficiency",
                "gemm_memory_efficiency", "sustained_clock_fraction", "sustained_clock_power_w", "softmax_bandwidth_share",
                "norm_bandwidth_share",
                "widening_cast_bandwidth_share")



def kernel_section(k: Any) -> dict:
    """The `kernel:` section of a device file for the core's KernelConstants `k`."""
    section: dict[str, Any] = {"calibrated": True}
    section.update({key: round(getattr(k, key), 4) for key in KERNEL_KEYS if getattr(k, key) > 0})
    section["gemm_tile_overhead_us"] = round(k.gemm_tile_overhead_s * 1e6, 3)
    section["kernel_floor_us"] = round(k.kernel_floor_s * 1e6, 3)
    section["stream_floor_us"] = round(k.stream_floor_s * 1e6, 3)
    section["alone_kernel_overhead_us"] = round(k.alone_kernel_overhead_s * 1e6, 3)
    section["alone_stream_overhead_us"] = round(k.alone_stream_overhead_s * 1e6, 3)
    return section


def constants_text(k: Any) -> str:
    """The fitted constants as `calibrate` prints them: a `kernel:` section to paste."""
    lines = ["kernel:", "  calibrated: true"]
    for field in KERNEL_KEYS:
        value = getattr(k, field)
        if value > 0:
            lines.append(f"  {field}: {value:.3f}")
    lines += [f"  gemm_tile_overhead_us: {k.gemm_tile_overhead_s * 1e6:.2f}",
              f"  kernel_floor_us: {k.kernel_floor_s * 1e6:.2f}",
              f"  stream_floor_us: {k.stream_floor_s * 1e6:.2f}",
              f"  alone_kernel_overhead_us: {k.alone_kernel_overhead_s * 1e6:.2f}",
              f"  alone_stream_overhead_us: {k.alone_stream_overhead_s * 1e6:.2f}"]
    return "\n".join(lines)


def fit_lines(before: list, after: list) -> str:
    """The fit split's median |error| per class before and after the fit (validation.validate lines)."""
    return "\n".join(f"# {b.kind}: {a.kernel.rows} fit rows, median |error| {b.kernel.median_abs_error * 100:.1f}% -> "
                     f"{a.kernel.median_abs_error * 100:.1f}%" for b, a in zip(before, after))


def write_device_file(entry: Any, k: Any, rows: int, data: str, out_dir: str) -> str:
    """The device file of `entry` with the fitted `kernel:` section and its source, in `out_dir`."""
    from pathlib import Path

    import yaml

    from accel_sim.io import fields

    doc = fields.read_yaml(entry.path, "device")
    doc["kernel"] = kernel_section(k)
    doc.setdefault("sources", {})["kernel"] = f"fitted by accel-sim calibrate on the fit split ({rows} rows) of {data}"
    out = Path(out_dir) / f"{entry.spec.id}.yaml"
    out.write_text(yaml.safe_dump(doc, sort_keys=False, width=100), encoding="utf-8")
    return str(out)


