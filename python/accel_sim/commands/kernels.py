"""The options of `accel-sim kernel` (one kernel's time, or one collective's), `validate` and
`calibrate`."""

from __future__ import annotations

from typing import Any

from accel_sim.commands.flags import CLOCK_MHZ, COUNT, ELEMENTS
from accel_sim.commands.systems import add_collective_parsers
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
