"""docs/architecture.md is the map of the code: every source file is named in the row of its folder,
and every command has its walk from input to report."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / "docs" / "architecture.md"
SOURCES = ("core/include/accelsim", "core/src", "bindings", "python/accel_sim")


def folder_rows(page: str) -> dict[str, str]:
    """The table's rows by folder (`| \\`core/src/model/\\` | ... |`)."""
    rows: dict[str, str] = {}
    for line in page.splitlines():
        m = re.match(r"\| `([^`]+/)` \| (.*)\|\s*$", line)
        if m:
            rows[m.group(1)] = rows.get(m.group(1), "") + m.group(2)
    return rows


def named(text: str) -> set[str]:
    """The file names a row names in backticks; `backward.{h,cc}` names both."""
    out = set()
    for token in re.findall(r"`([^`]+)`", text):
        m = re.fullmatch(r"(.*)\.\{([^}]+)\}", token)
        out |= {f"{m.group(1)}.{ext}" for ext in m.group(2).split(",")} if m else {token}
    return out


def unnamed(page: str, repo: Path) -> list[str]:
    rows = folder_rows(page)
    missing = []
    for root in SOURCES:
        for path in sorted((repo / root).rglob("*")):
            if path.suffix not in (".py", ".cc", ".h") or path.name == "__init__.py" or "__pycache__" in path.parts:
                continue
            folder = str(path.parent.relative_to(repo)) + "/"
            if path.name not in named(rows.get(folder, "")):
                missing.append(folder + path.name)
    return missing


def test_every_source_file_is_named_in_its_folders_row():
    assert unnamed(PAGE.read_text(encoding="utf-8"), REPO) == []


def test_every_command_has_its_walk():
    from accel_sim.commands.parser import build_parser
    import argparse

    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    walks = " ".join(re.findall(r"^- \*\*([^*]+)\*\*", PAGE.read_text(encoding="utf-8"), re.M))
    commands = re.findall(r"[a-z]+(?:-[a-z]+)*", walks)
    assert sorted(set(sub.choices) - set(commands)) == []


def test_the_check_finds_a_file_the_page_leaves_out(tmp_path):
    (tmp_path / "python" / "accel_sim").mkdir(parents=True)
    (tmp_path / "python" / "accel_sim" / "named.py").write_text("")
    (tmp_path / "python" / "accel_sim" / "forgotten.py").write_text("")
    page = "| `python/accel_sim/` | `named.py` (this one) |\n"
    assert unnamed(page, tmp_path) == ["python/accel_sim/forgotten.py"]
