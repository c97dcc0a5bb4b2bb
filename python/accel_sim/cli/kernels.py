"""`accel-sim kernel`, `validate` and `calibrate`: prints one kernel's time and the measured error of
the cost models (accel_sim.commands.kernels and .validate run them, accel_sim.report renders them),
and fits a device's kernel constants."""

from __future__ import annotations

import argparse
import json
from typing import Any



_KERNEL_KEYS = ("matmul_efficiency", "fp8_matmul_efficiency", "unaligned_matmul_efficiency", "attention_efficiency", "attention_backward_efficiency",
                "flash3_efficiency", "cudnn_efficiency", "cudnn_backward_efficiency", "fp8_attention_efficiency", "memory_efficiency",
                "gemm_memory_efficiency", "sustained_clock_fraction", "sustained_clock_power_w", "softmax_bandwidth_share",
                "norm_bandwidth_share",
                "widening_cast_bandwidth_share")


def _write_device_file(args: argparse.Namespace, k: Any, rows: int, data: str) -> str:
    """The device's file with the fitted `kernel:` section and its source, in --out-dir."""
    from pathlib import Path

    import yaml

    from accel_sim.device import resolve_device
    from accel_sim.io import fields

    entry = resolve_device(args.device, args.device_file).entry
    doc = fields.read_yaml(entry.path, "device")
    section: dict[str, Any] = {"calibrated": True}
    section.update({key: round(getattr(k, key), 4) for key in _KERNEL_KEYS if getattr(k, key) > 0})
    section["gemm_tile_overhead_us"] = round(k.gemm_tile_overhead_s * 1e6, 3)
    section["kernel_floor_us"] = round(k.kernel_floor_s * 1e6, 3)
    section["stream_floor_us"] = round(k.stream_floor_s * 1e6, 3)
    section["alone_kernel_overhead_us"] = round(k.alone_kernel_overhead_s * 1e6, 3)
    section["alone_stream_overhead_us"] = round(k.alone_stream_overhead_s * 1e6, 3)
    doc["kernel"] = section
    doc.setdefault("sources", {})["kernel"] = f"fitted by accel-sim calibrate on the fit split ({rows} rows) of {data}"
    out = Path(args.out_dir) / f"{entry.spec.id}.yaml"
    out.write_text(yaml.safe_dump(doc, sort_keys=False, width=100), encoding="utf-8")
    return str(out)


def cmd_kernel(args: argparse.Namespace) -> int:
    from accel_sim.commands.kernels import kernel

    run = kernel(args)
    print(json.dumps(run.to_dict(), indent=1) if args.json else run.text())
    return 0


def cmd_validate(args: argparse.Namespace) -> int:
    from accel_sim.commands.validate import validate
    from accel_sim.progress import Progress

    progress = Progress("validate", args.quiet or args.json)
    try:
        run = validate(args, progress)
    finally:
        progress.close()
    print(json.dumps(run.to_dict(), indent=1) if args.json else run.text())
    return 0


def cmd_calibrate(args: argparse.Namespace) -> int:
    from accel_sim import kernel_rows, validation
    from accel_sim.errors import UsageError

    from accel_sim.device import resolve_device

    spec = resolve_device(args.device, args.device_file).spec
    if args.data is not None:
        from accel_sim.commands.flags import refuse

        refuse(args, ("out_dir",), "is where the micro-benchmarks write their measurements and the fitted device "
               "file; --data fits from measured kernels and prints the constants")
    data = args.data or None
    if args.data is None:
        try:
            import torch
        except ImportError:
            torch = None
        if torch is None or not torch.cuda.is_available():
            raise UsageError("calibrate runs micro-benchmarks through PyTorch on a local GPU, and this machine has "
                             "none; use --data [FILE] to fit from measured kernels instead")
        from pathlib import Path

        from accel_sim.calibration import (E2E_COLUMNS, HOST_COLUMNS, measure, measure_host, measure_models,
                                           write_rows)

        print(f"# measuring on {torch.cuda.get_device_name(0)} as '{spec.id}' ...", flush=True)
        rows_out = measure(spec.id, "cuda")
        data = str(Path(args.out_dir) / "measurements.csv")
        write_rows(rows_out, Path(data))
        print(f"# wrote {len(rows_out)} kernel measurements to {data}", flush=True)
        host_out = measure_host(spec.id, "cuda")
        write_rows(host_out, Path(args.out_dir) / "host_overhead.csv", HOST_COLUMNS)
        print(f"# wrote {len(host_out)} host-overhead measurements to {Path(args.out_dir) / 'host_overhead.csv'}",
              flush=True)
        models_out = measure_models(spec.id, "cuda")
        write_rows(models_out, Path(args.out_dir) / "end_to_end.csv", E2E_COLUMNS)
        print(f"# wrote {len(models_out)} whole-model measurements to {Path(args.out_dir) / 'end_to_end.csv'} "
              "(compare with `accel-sim validate --e2e-data`)")
    rows, _ = kernel_rows.load_rows(data)
    before = validation.validate({spec.id: spec}, rows, "fit")
    constants, n = kernel_rows.fit_device(spec, rows, tuple(args.keep))
    if n == 0:
        raise UsageError(f"no fit-split measurements for device '{spec.id}' in {args.data or kernel_rows.data_path()}")
    spec.kernel = constants
    after = validation.validate({spec.id: spec}, rows, "fit")
    for b, a in zip(before, after):
        print(f"# {b.kind}: {a.kernel.rows} fit rows, median |error| {b.kernel.median_abs_error * 100:.1f}% -> "
              f"{a.kernel.median_abs_error * 100:.1f}%")
    k = constants  # fitted by the core
    if args.data is None:
        path = _write_device_file(args, constants, n, data)
        print(f"# wrote the fitted device file {path} (use it with --device-file)")
    print("kernel:")
    print("  calibrated: true")
    for field in _KERNEL_KEYS:
        value = getattr(k, field)
        if value > 0:
            print(f"  {field}: {value:.3f}")
    print(f"  gemm_tile_overhead_us: {k.gemm_tile_overhead_s * 1e6:.2f}")
    print(f"  kernel_floor_us: {k.kernel_floor_s * 1e6:.2f}")
    print(f"  stream_floor_us: {k.stream_floor_s * 1e6:.2f}")
    print(f"  alone_kernel_overhead_us: {k.alone_kernel_overhead_s * 1e6:.2f}")
    print(f"  alone_stream_overhead_us: {k.alone_stream_overhead_s * 1e6:.2f}")
    return 0
