"""`accel-sim kernel`: one kernel's time on a device (core: estimate_kernel), or one collective's on a
system (commands/systems.py); and the options of `validate` and `calibrate`."""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from accel_sim.commands.flags import CLOCK_MHZ, COUNT, ELEMENTS
from accel_sim.commands.systems import COLLECTIVES, add_collective_parsers, collective
from accel_sim.io.stack_file import ATTENTION_KERNELS
from accel_sim.kernel_rows import DTYPES as _CORE_DTYPES


_DTYPES = tuple(_CORE_DTYPES)


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("kernel", help="time one kernel (matmul, attention, memory-bound) on a device, or one collective on a system")
    kinds = p.add_subparsers(dest="kernel_kind", required=True, metavar="KIND")
    for name, text in (("matmul", "a [batch x] M x K by K x N product"),
                       ("attention", "fused attention (SDPA)"),
                       ("memory", "a memory-bound op over N elements")):
        k = kinds.add_parser(name, help=text)
        k.add_argument("--device", default="h100", help="device name or alias (default: h100)")
        k.add_argument("--dtype", choices=_DTYPES, default="bf16", help="element type (default: bf16; tf32: fp32 on TF32 tensor cores)")
        k.add_argument("--cost-model", default="kernel", help="cost model (default: kernel)")
        k.add_argument("--clock-mhz", **CLOCK_MHZ, help="core clock override (power-capped or down-clocked parts)")
        k.add_argument("--device-file", action="append", default=[], metavar="FILE", help="a device file; repeatable")
        k.add_argument("--json", action="store_true", help="print JSON")
        k.add_argument("--timed-alone", action="store_true",
                       help="what a benchmark timing one launch between CUDA events after an L2 flush measures "
                            "(triton.testing.do_bench): adds the device's alone overhead; default: the kernel in a "
                            "step's stream")
        if name == "matmul":
            for dim in ("m", "n", "k"):
                k.add_argument(f"--{dim}", **COUNT, required=True)
            k.add_argument("--batch", **COUNT, default=1, help="independent products (default: 1)")
        elif name == "attention":
            k.add_argument("--batch", **COUNT, default=1)
            k.add_argument("--heads", **COUNT, required=True)
            k.add_argument("--kv-heads", **COUNT, help="KV heads (GQA/MQA; default: --heads)")
            k.add_argument("--seq-q", **COUNT, required=True)
            k.add_argument("--seq-k", **COUNT, help="key length (default: --seq-q)")
            k.add_argument("--head-dim", **COUNT, required=True)
            k.add_argument("--causal", action="store_true")
            k.add_argument("--backward", action="store_true", help="time the backward kernel (with --forward too: both)")
            k.add_argument("--forward", action="store_true", help="with --backward: time forward and backward")
            k.add_argument("--impl", choices=ATTENTION_KERNELS, default="flash2",
                           help="implementation (default: flash2, what PyTorch's SDPA flash backend runs)")
        else:
            k.add_argument("--op", required=True, help="unary (relu, gelu, silu, exp, cast, copy), binary (add, mul, sub, div), rms_norm, layer_norm, softmax, rope")
            k.add_argument("--elements", **ELEMENTS, required=True, help="elements of the op's main input")
    add_collective_parsers(kinds)

    p = sub.add_parser("validate", help="measured error of the kernel model and the roofline, per device and class")
    p.add_argument("--split", choices=("report", "fit", "all"), default="report", help="rows to report on (default: report, never used for fitting)")
    p.add_argument("--data", metavar="FILE", help="kernel measurements (default: the shipped validation data)")
    p.add_argument("--e2e-data", metavar="FILE", help="whole-model measurements from `calibrate` (default: the shipped ones, if any)")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument("--quiet", action="store_true", help="no progress bar")

    p = sub.add_parser("calibrate", help="fit a device's kernel constants (micro-benchmarks on a local GPU, or --data)")
    p.add_argument("--device", required=True, help="device name or alias")
    p.add_argument("--data", metavar="FILE", nargs="?", const="", help="fit from measured kernels instead of benchmarking (default file: the shipped validation data, its fit split)")
    p.add_argument("--device-file", action="append", default=[], metavar="FILE", help="a device file; repeatable")
    p.add_argument("--keep", action="append", default=[], metavar="CONSTANT",
                   help="hold this kernel constant at the device's value instead of fitting it (repeatable; "
                   "e.g. kernel_floor_s where the rows cannot pin it)")
    p.add_argument("--out-dir", default="calibration", metavar="DIR", help="where the GPU sweep writes measurements.csv and the fitted device file (default: calibration/)")


@dataclass
class KernelRun:
    """One kernel as `accel-sim kernel` estimates it: its options (`args`), what it is in words, the
    device spec and the core's KernelEstimate. to_dict() is `kernel --json`, text() its text."""

    args: Any
    what: str
    device: Any
    estimate: Any

    def to_dict(self) -> dict:
        from accel_sim.report.kernels import kernel_json

        return kernel_json(self)

    def text(self) -> str:
        from accel_sim.report.kernels import kernel_text

        return kernel_text(self)


def kernel(args: argparse.Namespace) -> Any:
    """`kernel`'s run: a KernelRun, or for a collective kind a CollectiveRun (commands/systems.py)."""
    from accel_sim import _core
    from accel_sim.commands.flags import check_clock, refuse
    from accel_sim.device import resolve_device
    from accel_sim.errors import UsageError

    if args.kernel_kind in COLLECTIVES:
        return collective(args)
    if args.kernel_kind == "attention" and not args.backward:
        refuse(args, ("forward",), "adds the forward pass to --backward; without --backward the forward is what is timed")
    spec = resolve_device(args.device, args.device_file).spec
    check_clock(args, [spec])
    q = _core.KernelQuery()
    q.dtype = _core.parse_dtype(_CORE_DTYPES[args.dtype])
    if args.kernel_kind == "matmul":
        q.kind = _core.KernelKind.matmul
        q.m, q.n, q.k, q.batch = args.m, args.n, args.k, args.batch
        what = f"matmul {args.batch} x {args.m}x{args.k} @ {args.k}x{args.n}" if args.batch > 1 else f"matmul {args.m}x{args.k} @ {args.k}x{args.n}"
    elif args.kernel_kind == "attention":
        q.kind = _core.KernelKind.attention
        q.batch, q.heads = args.batch, args.heads
        q.kv_heads = args.kv_heads or args.heads
        q.seq_q, q.seq_k, q.head_dim = args.seq_q, args.seq_k or args.seq_q, args.head_dim
        q.causal = args.causal
        q.backward = args.backward
        q.forward = args.forward or not args.backward
        q.impl = getattr(_core.AttentionImpl, args.impl)
        passes = "forward + backward" if q.forward and q.backward else "backward" if q.backward else "forward"
        what = (f"attention {args.impl} {passes}: batch {q.batch}, heads {q.heads}/{q.kv_heads}, "
                f"seq {q.seq_q}x{q.seq_k}, head dim {q.head_dim}" + (", causal" if q.causal else ""))
    else:
        q.kind = _core.KernelKind.memory
        q.op = args.op
        q.elements = args.elements
        what = f"{args.op} over {args.elements:,.0f} elements"
    q.timed_alone = args.timed_alone
    options = _core.CostOptions()
    options.include_launch_overhead = False
    options.allow_tf32 = args.dtype == "tf32"
    if args.clock_mhz is not None:
        options.clock_hz = args.clock_mhz * 1e6
    try:
        e = _core.estimate_kernel(q, spec, args.cost_model, options)
    except ValueError as err:
        raise UsageError(str(err)) from None
    return KernelRun(args, what, spec, e)
