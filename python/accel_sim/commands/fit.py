"""The options of `accel-sim fit`: the largest batch or sequence length that fits each device."""

from __future__ import annotations

from typing import Any

from accel_sim.api import OPTIMIZERS
from accel_sim.commands.flags import COUNT, counts_up_to
from accel_sim.fit import MAX_LIMIT
from accel_sim.io.stack_file import ATTENTION_KERNELS, RECOMPUTE_POLICIES
from accel_sim.script_watch import add_timeout_argument


def add_parser(sub: Any, dtypes: tuple[str, ...]) -> None:
    p = sub.add_parser("fit", help="the largest batch or sequence length that fits each device")
    p.add_argument("target", nargs="?", help="a Python script with get_model() -> (model, example_inputs)")
    p.add_argument("--model", metavar="NAME|CONFIG", help="a shipped model or an HF config.json, built by the model builder")
    p.add_argument("--devices", required=True, help="comma-separated device names, e.g. v100,a100,h100")
    p.add_argument("--axis", choices=("batch", "seq"), required=True, help="the dimension to grow: batch size or sequence length")
    p.add_argument("--phase", choices=("prefill", "decode", "train"), default="prefill", help="with --model: prefill, one decode step (seq: the cached context) or a training step (default: prefill)")
    p.add_argument("--train", action="store_true", help="the same as --phase train")
    p.add_argument("--batch", **COUNT, default=1, help="with --axis seq: the batch (--model, default: 1; a script: its example inputs resized along dim 0)")
    p.add_argument("--seq", **COUNT, default=2048, help="with --axis batch: the sequence length, or decode's context (--model, default: 2048; a script: its example inputs resized along dim 1)")
    p.add_argument("--max", **counts_up_to(MAX_LIMIT, "2^50: no device holds as many bytes, and each sequence or token takes at least one"),
                   help="largest value to try (default: 65536 for batch; the model's position limit, or 131072, for seq)")
    p.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw", help="with --phase train (default: adamw)")
    p.add_argument("--no-master-weights", action="store_true", help="with --phase train: gradients and states in the weight dtype")
    p.add_argument("--recompute", choices=RECOMPUTE_POLICIES, default="none", help="with --phase train: activation recomputation; selective is the --stack's (default: none)")
    p.add_argument("--recompute-interval", **COUNT, default=1, metavar="N", help="with --recompute: checkpoint every N-th layer only (default: 1)")
    p.add_argument("--keep-grads", action="store_true", help="with --phase train: gradients kept between steps (zero_grad(set_to_none=False))")
    p.add_argument("--kernels", choices=("fused", "hf-eager"), default="fused", help="with --model: kernel style (default: fused)")
    p.add_argument("--attention-impl", choices=ATTENTION_KERNELS, default="flash2", help="with --model: eager builds the unfused attention core, whose scores take memory (default: a fused kernel)")
    p.add_argument("--stack", metavar="NAME|FILE", help="with --model: build as the framework runs it (docs/formats/stack.md): its fused or unfused SwiGLU and, in a training step, its cross-entropy (default: none)")
    p.add_argument("--tp", **COUNT, default=1, help="with --model: tensor-parallel degree (one rank's memory)")
    p.add_argument("--sp", action="store_true", help="with --model and --tp > 1: sequence parallelism")
    p.add_argument("--dtype", choices=dtypes, help="the model's dtype (a script: cast before capture)")
    p.add_argument("--free-at-last-use", action="store_true", help="free activations right after their last use, as torch.compile plans memory")
    p.add_argument("--device-file", action="append", default=[], metavar="FILE", help="a device file (docs/formats/device.md); repeatable")
    p.add_argument("--plot", metavar="FILE", help="write peak memory vs the axis, with each device's memory, as an SVG")
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument("--quiet", action="store_true", help="no status line on stderr while a script runs")
    add_timeout_argument(p)
