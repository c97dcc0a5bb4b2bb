"""`accel-sim systems` and `stacks`: prints the shipped systems and software stacks (and those of
--system-file and --stack-file), as accel_sim.report.catalogues renders them."""

from __future__ import annotations

import argparse
import json


def cmd_systems(args: argparse.Namespace) -> int:
    from accel_sim.io.system_file import builtin_systems, load_system_file
    from accel_sim.report.catalogues import systems_json, systems_text

    entries = [load_system_file(f) for f in args.system_file] + builtin_systems()
    print(json.dumps(systems_json(entries), indent=1) if args.json else systems_text(entries))
    return 0


def cmd_stacks(args: argparse.Namespace) -> int:
    """The shipped stacks (and any --stack-file): what each runs, the default marked."""
    from accel_sim.io.stack_file import DEFAULT_STACK, builtin_stacks, load_stack_file
    from accel_sim.report.catalogues import stacks_json, stacks_text

    loaded = [load_stack_file(f) for f in args.stack_file] + builtin_stacks()
    entries = [e for e in loaded if e.kind == "training"]
    engines = [e for e in loaded if e.kind == "serving"]
    if args.json:
        print(json.dumps(stacks_json(entries, engines, DEFAULT_STACK), indent=1))
    else:
        print(stacks_text(entries, engines, DEFAULT_STACK))
    return 0
