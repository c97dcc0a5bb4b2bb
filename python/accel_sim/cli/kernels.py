"""`accel-sim kernel`, `validate` and `calibrate`: prints one kernel's time and the measured error of
the cost models (accel_sim.commands.kernels and .validate run them, accel_sim.report renders them),
and fits a device's kernel constants."""

from __future__ import annotations

import argparse
import json


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
    from accel_sim.report.calibration import constants_text, fit_lines, write_device_file

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
    print(fit_lines(before, after))
    if args.data is None:
        path = write_device_file(resolve_device(args.device, args.device_file).entry, constants, n, data, args.out_dir)
        print(f"# wrote the fitted device file {path} (use it with --device-file)")
    print(constants_text(constants))
    return 0
