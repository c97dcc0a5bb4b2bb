"""`plan`'s options and search: the fastest parallel training configurations of a model on a
cluster (core: plan_training), for each system and GPU count asked. Printing is the CLI's
(accel_sim.cli.plan)."""

from __future__ import annotations

import argparse
import re
import time
from dataclasses import dataclass
from typing import Any

from accel_sim.commands.flags import COUNT, count_list, whole_up_to
from accel_sim.progress import Progress
from accel_sim.commands.train import (RECOMPUTE, add_run_args, offload_bits, offload_kinds, recompute_policy,
                                      refuse_device_files_no_run_uses, refuse_layout_the_stack_cannot_run, refuse_offload,
                                      run_inputs)
from accel_sim.io.fields import INT64_MAX  # the core's counts are int64

_BINARY = {"": 1, "K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
# The most search threads: the core's kMaxPlanThreads (core/include/accelsim/training.h).
MAX_THREADS = 1024
_DECIMAL = {"": 1, "K": 1e3, "M": 1e6, "B": 1e9, "G": 1e9, "T": 1e12}


def _count(text: str, units: dict, what: str) -> float:
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([KMGBT]?)\s*", text.upper())
    if not m or m.group(2) not in units:
        raise argparse.ArgumentTypeError(f"expected a {what} such as 16M (got {text!r})")
    value = float(m.group(1)) * units[m.group(2)]
    if not 1 <= value <= INT64_MAX:
        raise argparse.ArgumentTypeError(f"expected a {what} from 1 to 2^63 - 1 (got {text!r})")
    return value


def _ints(text: str) -> list[int]:
    return count_list(text)


def add_parser(sub: Any) -> None:
    p = sub.add_parser("plan", help="search parallel training configurations for the fastest step")
    p.add_argument("--system", required=True, help="the cluster, or several separated by commas for a sweep (see `accel-sim systems`)")
    p.add_argument("--gpus", type=_ints, required=True, help="GPUs in the run, or several separated by commas for a sweep")
    batch = p.add_mutually_exclusive_group(required=True)
    batch.add_argument("--global-batch", **COUNT, help="sequences per step")
    batch.add_argument("--global-batch-tokens", type=lambda t: _count(t, _BINARY, "token count"),
                       help="tokens per step; K/M suffixes are binary (16M = 16 x 2^20 = 2,048 sequences of 8,192, the Llama 3 405B batch)")
    for flag, text in (("tp", "tensor"), ("pp", "pipeline"), ("cp", "context"), ("ep", "expert"),
                       ("microbatch", "micro-batch size"), ("virtual-stages", "virtual stages")):
        p.add_argument(f"--{flag}", type=_ints, help=f"only these {text} values (comma-separated; default: the search's)")
    p.add_argument("--zero", type=_ints, help="only these ZeRO stages (0-3)")
    p.add_argument("--recompute", help="only these recompute policies (none,selective,full)")
    p.add_argument("--sp", choices=("on", "off"), help="only with / without sequence parallelism")
    p.add_argument("--summa", choices=("on", "off"),
                   help="only with / without 2D SUMMA tensor parallelism on the tp x cp grid (default: both, under a "
                        "--stack that runs it: megatron-core-summa)")
    p.add_argument("--order", help="only these rank orders (comma-separated, e.g. tp-cp-ep-dp-pp)")
    p.add_argument("--offload", metavar="SETS",
                   help="only these offloads to host memory, comma-separated sets of optimizer, parameters and "
                        "activations joined by + (e.g. none,optimizer,optimizer+parameters; default: none and every "
                        "set the --stack runs, where the system gives its host)")
    p.add_argument("--top", **COUNT, default=10, help="configurations to print (default: 10)")
    p.add_argument("--threads", **whole_up_to(MAX_THREADS, "0: all cores; the core's kMaxPlanThreads"), default=0,
                   help=f"search threads, 0 to {MAX_THREADS:,} (default 0: all cores); threads the system cannot "
                   "start are done without")
    p.add_argument("--train-tokens", type=lambda t: _count(t, _DECIMAL, "token count"), default=1e12,
                   help="tokens of the whole run, for time-to-train (decimal suffixes: 15T = 15e12; default: 1T)")
    p.add_argument("--plot", metavar="FILE.svg|FILE.html", help="with several GPU counts or systems: time-to-train and MFU vs GPUs")
    p.add_argument("--html", metavar="FILE", help="write a self-contained HTML report: the best configurations, what was pruned, and the sweep's plot")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    add_run_args(p)


def _offload_sets(args: argparse.Namespace, stack: Any, system: Any) -> list[int]:
    """The offload sets searched (core kOffload* bits): the flag's, each refused where the system or
    the stack cannot run it, or by default nothing and every set the stack runs where the system
    gives its host."""
    from accel_sim.errors import UsageError

    if args.offload is None:
        sets = stack.training.offload_sets() if system.spec.host.given() else [frozenset()]
    else:
        sets = [offload_kinds(part, "--offload") for part in args.offload.split(",") if part.strip()]
        if not sets:
            raise UsageError("--offload names no set (e.g. none,optimizer)")
        if len(set(sets)) != len(sets):
            raise UsageError(f"--offload {args.offload}: names one set twice")
        for kinds in sets:
            refuse_offload(kinds, stack, system)
    return [offload_bits(k) for k in sets]


def _space(args: argparse.Namespace, spec: Any, gpus: int, global_batch: int, stack: Any, system: Any) -> Any:
    """The search space: the core's default for the model and GPUs, narrowed to what the stack
    runs (io/stack_file.py) and to the values the flags name."""
    from accel_sim import _core
    from accel_sim.errors import UsageError

    refuse_layout_the_stack_cannot_run(stack, {f: getattr(args, f) for f in ("tp", "pp", "cp", "virtual_stages")},
                                       args.zero)
    space = _core.default_plan_space(spec, gpus, global_batch, args.seq)
    t = stack.training
    for field, runs in (("tp", t.tensor_parallel), ("pp", t.pipeline_parallel),
                        ("virtual_stages", t.pipeline_parallel), ("cp", t.context_parallel)):
        if not runs:
            setattr(space, field, [1])
    space.zero = [z for z in space.zero if z in t.zero_stages]
    if not space.zero:
        raise UsageError(f"{stack.id} runs none of the ZeRO stages the search takes for this run")
    for flag, field in (("tp", "tp"), ("pp", "pp"), ("cp", "cp"), ("ep", "ep"), ("microbatch", "micro_batch"),
                        ("virtual_stages", "virtual_stages"), ("zero", "zero")):
        if getattr(args, flag) is not None:
            setattr(space, field, getattr(args, flag))
    if args.zero is not None and max(args.zero) > 3:
        raise UsageError(f"--zero takes stages 0 to 3 (got {args.zero})")
    # The flags' policies as the stack runs them: `selective` is the stack's own (left out of the
    # default space under a stack that has none, refused when named).
    if args.recompute:
        names = [r.strip() for r in args.recompute.split(",")]
        bad = [r for r in names if r not in RECOMPUTE]
        if bad:
            raise UsageError(f"--recompute: unknown policy {bad[0]!r} (known: {', '.join(RECOMPUTE)})")
        space.recompute = [recompute_policy(stack, r) for r in names]
    else:
        policies = [t.recompute_for(r.name) for r in space.recompute]
        space.recompute = [r for r in policies if r is not None]
    if args.recompute_interval != 1 and all(r == _core.Recompute.none for r in space.recompute):
        raise UsageError("--recompute-interval applies to a recompute policy (--recompute is none)")
    if args.sp:
        space.sequence_parallel = [1 if args.sp == "on" else 0]
    if args.summa == "on" and not t.summa:
        raise UsageError(f"--summa on: {stack.id} runs 1D tensor parallelism "
                         f"({stack.sources.get('training.summa', stack.path)}); --stack megatron-core-summa models 2D SUMMA")
    space.summa = [0, 1] if t.summa and args.summa is None else [1 if args.summa == "on" else 0]
    if args.order:
        space.orders = [o.strip() for o in args.order.split(",")]
    space.offload = _offload_sets(args, stack, system)
    return space


def global_batch_of(args: argparse.Namespace) -> int:
    from accel_sim.errors import UsageError

    if args.global_batch_tokens is not None:
        if args.global_batch_tokens % args.seq:
            raise UsageError(f"--global-batch-tokens {args.global_batch_tokens:,.0f} is not a multiple of --seq {args.seq}")
        global_batch = int(args.global_batch_tokens // args.seq)
    else:
        global_batch = args.global_batch
    if global_batch < 1:
        raise UsageError("the global batch must hold at least one sequence")
    if global_batch > INT64_MAX:
        raise UsageError(f"the global batch of {global_batch:,} sequences is more than the {INT64_MAX:,} the search takes")
    return global_batch


def plan_runs(args: argparse.Namespace) -> list[tuple[Any, Any, int, Any, float]]:
    """(system entry, run inputs, GPUs, the core's PlanResult, search seconds) for each system and
    GPU count of `args`, in that order."""
    from accel_sim import _core
    from accel_sim.errors import UsageError
    from accel_sim.io.system_file import resolve_system, with_scaleup_domain

    systems = [with_scaleup_domain(resolve_system(s.strip(), device_files=args.device_file), args.scaleup_domain,
                                   args.device_file) for s in args.system.split(",") if s.strip()]
    if not systems:
        raise UsageError("--system names no system (see `accel-sim systems`)")
    global_batch = global_batch_of(args)
    inputs = [(entry, run_inputs(args, entry)) for entry in systems]
    refuse_device_files_no_run_uses(args, [run for _, run in inputs])
    runs = []
    for entry, run in inputs:
        for gpus in args.gpus:
            space = _space(args, run.spec, gpus, global_batch, run.stack, entry)
            progress = Progress(f"plan {run.spec.name} on {gpus} x {entry.spec.id}", args.quiet or args.json)
            start = time.perf_counter()
            try:
                result = _core.plan_training(run.spec, run.base, space, run.device, entry.spec, run.options,
                                             args.top, args.threads, progress)
            except ValueError as err:
                raise UsageError(str(err)) from None
            except MemoryError:
                raise UsageError(f"the plan search of {run.spec.name} on {gpus} GPUs ran out of memory: give it fewer "
                                 "--threads, or narrow the space (--tp, --pp, --microbatch, ...)") from None
            finally:
                progress.close()
            runs.append((entry, run, gpus, result, time.perf_counter() - start))
    return runs




@dataclass
class PlanRun:
    """`accel-sim plan`'s search as it runs it: its options (`args`), the global batch in sequences
    and one (system entry, run inputs, GPUs, the core's PlanResult, search seconds) per system and
    GPU count. to_dict() is `plan --json` (one run: its object; several: their list), text() the
    text report (several runs: the best configuration of each)."""

    args: Any
    global_batch: int
    runs: list

    @property
    def best(self) -> Any:
        """The best feasible candidate of the first run (None when nothing fits)."""
        r = self.runs[0][3]
        return r.best[0] if r.best else None

    def to_dict(self) -> Any:
        from accel_sim.report.training import plan_json

        return plan_json(self)

    def text(self) -> str:
        from accel_sim.report.training import plan_text

        return plan_text(self)


def plan(args: argparse.Namespace) -> PlanRun:
    """`plan`'s search over the systems and GPU counts of `args`."""
    return PlanRun(args, global_batch_of(args), plan_runs(args))
