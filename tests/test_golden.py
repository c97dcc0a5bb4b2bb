"""Every figure the CLI prints stays the same across a change that should not move any: a fixed set
of command lines (tests/golden/commands.txt), run in this process, against what they printed when
the outputs were written (tests/golden/outputs/). The outputs were first written at the commit
before the CLI's run logic moved into accel_sim.commands, so this holds the move to printing the
same figures.

A change that is meant to move figures (a model, a device file, a stack) writes the outputs again,
on purpose and in the same commit, with

    python tests/test_golden.py --write

and the diff shows what moved. Wall-clock figures (plan's search time) are masked."""

from __future__ import annotations

import contextlib
import io
import re
import shlex
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent / "golden"
# plan's own wall-clock time: "search_s": 0.52 in JSON, "in 2.3 s:" in its text.
_CLOCKS = (re.compile(r'("search_s": )[0-9.e+-]+'), re.compile(r"(configurations in )[0-9.,]+ s:"))
# Where the package is installed: validate names the data files it read.
_INSTALLED = re.compile(r"/\S*/accel_sim/data/")


def commands() -> list[tuple[str, list[str]]]:
    out = []
    for line in (HERE / "commands.txt").read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, args = (part.strip() for part in line.split("|", 1))
            out.append((name, shlex.split(args)))
    return out


def masked(text: str) -> str:
    for pattern in _CLOCKS:
        text = pattern.sub(lambda m: m.group(1) + "<clock>" + (" s:" if m.group(0).endswith(" s:") else ""), text)
    return _INSTALLED.sub("<package>/accel_sim/data/", text)


def run(argv: list[str]) -> str:
    from accel_sim.cli.main import main

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        code = main(argv)
    assert code == 0, f"accel-sim {' '.join(argv)} exited {code}"
    return buffer.getvalue()


@pytest.mark.parametrize("name,argv", commands(), ids=[name for name, _ in commands()])
def test_the_command_prints_what_it_printed(name, argv):
    expected = (HERE / "outputs" / f"{name}.txt").read_text(encoding="utf-8")
    got = run(argv)
    assert masked(got) == masked(expected), f"{name}: accel-sim {' '.join(argv)} prints other figures than " \
                                            f"tests/golden/outputs/{name}.txt (python tests/test_golden.py --write " \
                                            "if the change is meant to move them)"


if __name__ == "__main__":
    if sys.argv[1:] != ["--write"]:
        sys.exit("usage: python tests/test_golden.py --write")
    for name, argv in commands():
        (HERE / "outputs" / f"{name}.txt").write_text(run(argv), encoding="utf-8")
        print(f"wrote tests/golden/outputs/{name}.txt")
