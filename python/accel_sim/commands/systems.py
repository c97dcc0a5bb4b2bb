"""The options of `accel-sim systems`, `stacks` and the collective forms of `accel-sim kernel`
(allreduce, allgather, ...): the collectives' names as the core knows them, and message sizes as
nccl-tests prints them."""

from __future__ import annotations

import argparse
import math
import re
from dataclasses import dataclass
from typing import Any

from accel_sim.commands.flags import COUNT, WHOLE

COLLECTIVES = {"allreduce": "all_reduce", "allgather": "all_gather", "reducescatter": "reduce_scatter",
               "alltoall": "all_to_all", "broadcast": "broadcast", "sendrecv": "send_recv"}


ALGORITHMS = ("automatic", "ring", "tree", "halving_doubling", "nvls", "hierarchical", "pxn")


_UNITS = {"": 1, "b": 1, "k": 1e3, "kb": 1e3, "m": 1e6, "mb": 1e6, "g": 1e9, "gb": 1e9, "t": 1e12, "tb": 1e12,
          "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def parse_bytes(text: str) -> float:
    """'1G', '512MiB', '1e9' -> bytes (decimal K/M/G/T as nccl-tests prints them, KiB/MiB/GiB binary)."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][+-]?[0-9]+)?)\s*([a-zA-Z]*)\s*", text)
    if not m or m.group(2).lower() not in _UNITS:
        raise argparse.ArgumentTypeError(f"not a size: {text!r} (e.g. 1G, 256MiB, 1e9)")
    value = float(m.group(1)) * _UNITS[m.group(2).lower()]
    if not (math.isfinite(value) and value >= 1):
        raise argparse.ArgumentTypeError(f"expected a finite size of at least 1 byte, got {text!r}")
    return value


def add_collective_parsers(kinds: Any) -> None:
    for name, kind in COLLECTIVES.items():
        k = kinds.add_parser(name, help=f"a {kind.replace('_', '-')} over a system's GPUs")
        k.add_argument("--bytes", type=parse_bytes, required=True, help="nccl-tests' size: the whole array (e.g. 1G)")
        k.add_argument("--gpus", **COUNT, required=True, help="ranks taking part")
        k.add_argument("--system", default="dgx_h100", help="system id (default: dgx_h100); see `accel-sim systems`")
        k.add_argument("--ranks-per-domain", **WHOLE, default=0, help="ranks per scale-up domain (default: as many as fit)")
        k.add_argument("--algorithm", choices=ALGORITHMS, default="automatic", help="default: the fastest the system runs")
        k.add_argument("--system-file", action="append", default=[], metavar="FILE", help="a system file; repeatable")
        k.add_argument("--json", action="store_true", help="print JSON")


def add_systems_parser(sub: Any) -> None:
    p = sub.add_parser("systems", help="list the known clusters (scale-up domains, NICs)")
    p.add_argument("--system-file", action="append", default=[], metavar="FILE", help="also list this system file")
    p.add_argument("--json", action="store_true", help="print as JSON")


def add_stacks_parser(sub: Any) -> None:
    p = sub.add_parser("stacks", help="list the software stacks train, plan and serve take with --stack")
    p.add_argument("--stack-file", action="append", default=[], metavar="FILE", help="also list this stack file")
    p.add_argument("--json", action="store_true", help="print as JSON")


@dataclass
class CollectiveRun:
    """One collective as `accel-sim kernel allreduce|allgather|...` estimates it: its options
    (`args`), the system entry and the core's CollectiveEstimate."""

    args: Any
    entry: Any
    estimate: Any
    collective: str  # the core's name of it: all_reduce, all_gather, ...

    def to_dict(self) -> dict:
        from accel_sim.report.kernels import collective_json

        return collective_json(self)

    def text(self) -> str:
        from accel_sim.report.kernels import collective_text

        return collective_text(self)


def collective(args: argparse.Namespace) -> CollectiveRun:
    """A collective's time on a system (core: estimate_collective)."""
    from accel_sim import _core
    from accel_sim.errors import UsageError
    from accel_sim.io.system_file import resolve_system

    entry = resolve_system(args.system, args.system_file)
    q = _core.CollectiveQuery()
    q.kind = getattr(_core.CollectiveKind, COLLECTIVES[args.kernel_kind])
    q.bytes, q.ranks, q.ranks_per_domain = args.bytes, args.gpus, args.ranks_per_domain
    q.algorithm = getattr(_core.CollectiveAlgorithm, args.algorithm)
    try:
        e = _core.estimate_collective(q, entry.spec)
    except ValueError as err:
        raise UsageError(str(err)) from None
    return CollectiveRun(args, entry, e, COLLECTIVES[args.kernel_kind])
