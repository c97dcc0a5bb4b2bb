"""The Python API of the commands below `simulate` and `compare` (api.py): `train`, `plan`, `serve`,
`serve_plan`, `fit`, `kernel`, `sweep` and `validate`, each as its command runs it, returning a result that renders itself as the
command prints it.

    import accel_sim
    run = accel_sim.train(model="llama-3-8b", system="dgx_h100", gpus=16, tp=2, dp=8, sp=True,
                          global_batch=64, microbatch=2, seq=4096)
    run.estimate.step_s, run.estimate.mfu     # the core's TrainingEstimate
    run.to_dict()                              # what `accel-sim train --json` prints
    print(run.text())                          # what `accel-sim train` prints

Options are the command's flags by their names in Python (`--global-batch` is global_batch,
`--device-file` device_file); a value of a list option may be one value or a list (plan's
gpus=[64, 128]); an option left out, or None, takes the command's default. A value the run
would not use is refused with the reason, as the flag is (a UsageError). The command line's
output flags (json, html, trace, plot) are not options here: the result renders itself, and
accel_sim.report writes HTML and traces.
"""

from __future__ import annotations

from typing import Any

# Options of the command line that choose its output, not the run.
_OUTPUT = {"json", "html", "trace", "plot", "chakra", "debug", "command"}


def _options(command: str, options: dict[str, Any]) -> Any:  # command: "train", or "kernel matmul"
    from accel_sim.commands.parser import command_options, command_parser

    output = sorted(set(options) & _OUTPUT)
    if output:
        raise TypeError(f"{command}(): {', '.join(output)} choose what the command line prints; the result renders "
                        "itself (to_dict(), text())")
    quiet = {"quiet": True} if any(a.dest == "quiet" for a in command_parser(command)._actions) else {}
    return command_options(command, quiet | options, hidden=_OUTPUT)


def train(**options: Any) -> Any:
    """One parallel training configuration on a cluster, as `accel-sim train` estimates it
    (accel_sim.commands.train.TrainRun: .estimate is the core's TrainingEstimate).

        accel_sim.train(model="llama-3-70b", system="dgx_h100", gpus=64, tp=8, pp=2, dp=4, sp=True,
                        global_batch=256, seq=8192, recompute="selective", stack="megatron-core")

    A configuration that does not fit or cannot run is a UsageError saying why."""
    from accel_sim.commands.train import train as run

    return run(_options("train", options))


def plan(**options: Any) -> Any:
    """The fastest parallel training configurations of a model on a cluster, as `accel-sim plan`
    searches them (accel_sim.commands.plan.PlanRun: .best is the best feasible candidate, .runs one
    search per system and GPU count).

        accel_sim.plan(model="llama-3-8b", system="dgx_h100", gpus=64, seq=4096, global_batch=256)

    Progress goes to stderr only with quiet=False."""
    from accel_sim.commands.plan import plan as run

    return run(_options("plan", options))


def serve(**options: Any) -> Any:
    """An LLM serving deployment under a request workload, as `accel-sim serve` simulates it
    (accel_sim.commands.serve.ServeRun: .result is the first device's ServeResult, .rows one per
    device).

        accel_sim.serve(model="llama-3-8b", device="h100", qps=4, requests=500, input_len=1024,
                        output_len=256, stack="vllm")

    Progress goes to stderr only with quiet=False."""
    from accel_sim.commands.serve import serve as run

    return run(_options("serve", options))


def serve_plan(**options: Any) -> Any:
    """The serving deployments of a model that meet a request rate's SLOs, ranked by GPUs (or cost,
    or tokens/s per GPU), as `accel-sim serve-plan` searches them
    (accel_sim.commands.serve_plan.ServePlanRun: .best is the best layout, .result the core's
    ServePlanResult with every layout and the Pareto front).

        accel_sim.serve_plan(model="llama-3-70b", devices="h100,h200", qps=40, input_len=2000,
                             output_len=300, slo_ttft_p99="500ms", slo_tpot_p99="40ms")

    Progress goes to stderr only with quiet=False."""
    from accel_sim.commands.serve_plan import serve_plan as run

    return run(_options("serve-plan", options))


def fit(**options: Any) -> Any:
    """The largest batch or sequence length that fits each device, as `accel-sim fit` finds it
    (accel_sim.commands.fit.FitRun: .report.rows one per device, each with its `largest`).

        accel_sim.fit(model="llama-3-8b", devices="a100,h100", axis="batch", seq=2048)

    A script is `target="model.py"` (captured once per value probed)."""
    from accel_sim.commands.fit import fit as run

    return run(_options("fit", options))


def kernel(kind: str, **options: Any) -> Any:
    """One kernel's time on a device (kind matmul, attention or memory; a KernelRun with the core's
    KernelEstimate as .estimate), or one collective's on a system (kind allreduce, allgather,
    reducescatter, alltoall, broadcast, sendrecv; a CollectiveRun), as `accel-sim kernel KIND`
    estimates it.

        accel_sim.kernel("matmul", m=4096, n=4096, k=4096, device="h100").estimate.time_s
        accel_sim.kernel("allreduce", system="dgx_h100", gpus=8, bytes=1e9).estimate.busbw_bytes_per_s"""
    from accel_sim.commands.kernels import kernel as run

    return run(_options(f"kernel {kind}", options))


def validate(**options: Any) -> Any:
    """The model against every measured number of the calibration set it can express, as
    `accel-sim validate` reports it (accel_sim.commands.validate.ValidationRun: .lines the kernel
    model's error per device and class, .runs the training runs, .serving, .encoder, ...).

        accel_sim.validate(split="report").run_stats.median_abs_error

    It runs every row (about 15 s on two cores)."""
    from accel_sim.commands.validate import validate as run

    return run(_options("validate", options))


def sweep(**options: Any) -> Any:
    """One workload at each value of a parameter, as `accel-sim sweep --vary` runs it
    (accel_sim.commands.sweep.SweepRun: .rows one per device and value), or every point of a grid
    file, as `sweep --grid FILE --out FILE` runs it (a GridSweepRun; the table is the file).

        accel_sim.sweep(model="llama-3-8b", batch=4, seq=1024, devices="h100",
                        vary=["memory_bandwidth_gbs=2000:4000:3"]).rows"""
    from accel_sim.commands.grid_sweep import grid_sweep
    from accel_sim.commands.sweep import sweep as run

    args = _options("sweep", options)
    return grid_sweep(args) if args.grid else run(args)
