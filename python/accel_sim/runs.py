"""The Python API of the commands that run on a cluster: `train`, `plan` and `serve`, each as its
command runs it, returning a result that renders itself as the command prints it.

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
_OUTPUT = {"json", "html", "trace", "plot", "debug", "command"}


def _options(command: str, options: dict[str, Any]) -> Any:
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
