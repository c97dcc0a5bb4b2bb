"""The repository stands on its own: no tracked file points at a folder outside it, and the
validation extractors read the calibration set the repository carries (validation/published.csv)
and reproduce the shipped validation files from it."""

from __future__ import annotations

import csv
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
VALIDATION_DATA = ROOT / "python" / "accel_sim" / "data" / "validation"
# extractor script -> the package file it writes
EXTRACTORS = {
    "extract_published.py": "kernels.csv",
    "extract_serving.py": "serving_runs.csv",
    "extract_training_runs.py": "training_runs.csv",
    "extract_memory.py": "training_memory.csv",
    "extract_encoder.py": "encoder_runs.csv",
}
# Files an extractor writes beside its output: the rows it leaves out, with their reasons.
BESIDE = {"extract_training_runs.py": ("training_runs_skipped.csv",)}
# A path leaving the checkout: the sibling folder some working copies sit beside. Its name is put
# together here, so that this file, read by the test like every other, names no such path itself.
_UP, _SIBLING = "../", "sha" + "red"
_PATHS = (_UP + _SIBLING, _SIBLING + "/reference", _SIBLING + "/validation", "/work/" + _SIBLING)
OUTSIDE = re.compile("|".join(re.escape(p) for p in _PATHS))
# Notes kept in that folder, cited by name; a clone has none of them.
_MD, _CSV = "." + "md", "." + "csv"
OUTSIDE_NOTES = re.compile(r"\b(costmodel|devices|capture|peers|aesthetics|DESIGN)" + re.escape(_MD) + r"\b|\bdevices"
                           + re.escape(_CSV) + r"\b")


def _tracked_files() -> list[Path]:
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    return [ROOT / name for name in listed.decode().split("\0") if name]


def _load(script: str):
    spec = importlib.util.spec_from_file_location(script[:-3], ROOT / "validation" / script)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.skipif(not (ROOT / ".git").exists(), reason="not a git checkout")
def test_no_tracked_file_names_a_path_outside_the_repository():
    offenders = []
    for path in _tracked_files():
        if not path.is_file():
            continue
        text = path.read_bytes().decode("utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line) or OUTSIDE_NOTES.search(line):
                offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not offenders, "\n".join(offenders)


def test_the_patterns_catch_what_they_are_for():
    assert OUTSIDE.search(f"see {_UP}{_SIBLING}/reference/costmodel{_MD} sec. 5")
    assert OUTSIDE.search(f"reads /work/{_SIBLING}/validation/published.csv")
    assert OUTSIDE_NOTES.search(f"costmodel{_MD} 6.3 (NCCL tuning.cc)")
    assert OUTSIDE_NOTES.search(f"devices{_MD}/devices{_CSV} row 'NVIDIA A100 SXM4 40GB'")
    assert not OUTSIDE.search("the shared expert of a MoE layer")
    assert not OUTSIDE_NOTES.search("docs/formats/device.md and ROCm/rocm-libraries shared/origami")


@pytest.mark.parametrize("script", sorted(EXTRACTORS))
def test_extractor_reads_the_calibration_set_inside_the_repository(script):
    module = _load(script)
    default = Path(module.DEFAULT_INPUT).resolve()
    assert default == (ROOT / "validation" / "published.csv").resolve()
    assert default.is_file()
    assert Path(module.OUTPUT).resolve() == (VALIDATION_DATA / EXTRACTORS[script]).resolve()


@pytest.mark.parametrize("script", sorted(EXTRACTORS))
def test_extractor_reproduces_the_shipped_file(script, tmp_path):
    out = tmp_path / EXTRACTORS[script]
    subprocess.run([sys.executable, str(ROOT / "validation" / script), str(ROOT / "validation" / "published.csv"),
                    str(out)], check=True, capture_output=True)
    assert out.read_bytes() == (VALIDATION_DATA / EXTRACTORS[script]).read_bytes()
    for name in BESIDE.get(script, ()):
        assert (tmp_path / name).read_bytes() == (VALIDATION_DATA / name).read_bytes()


def test_calibration_set_rows_each_name_a_source():
    with open(ROOT / "validation" / "published.csv", newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert rows
    # Every row has exactly the header's fields: csv puts extra ones under None and fills missing ones
    # with None, which a stray quote or comma would cause.
    assert all(None not in r and None not in r.values() for r in rows)
    assert all(r["source"].strip() and r["value"].strip() and r["unit"].strip() for r in rows)
