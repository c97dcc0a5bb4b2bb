"""Gathers the whole-model steps measured by `accel-sim calibrate` on GPUs
(validation/measured/<session>/end_to_end.csv) and the training steps of
validation/gpu/measure_train_paths.py (<session>/amp_steps.csv) into the package's
python/accel_sim/data/validation/end_to_end.csv, ids prefixed with the session's folder.

    python validation/extract_measured.py
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
MEASURED = REPO_ROOT / "validation" / "measured"
OUTPUT = REPO_ROOT / "python" / "accel_sim" / "data" / "validation" / "end_to_end.csv"
sys.path.insert(0, str(REPO_ROOT / "python"))


def main() -> int:
    from accel_sim.calibration import E2E_COLUMNS, write_rows

    rows = []
    for path in sorted([*MEASURED.glob("*/end_to_end.csv"), *MEASURED.glob("*/amp_steps.csv")]):
        with open(path, newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                rows.append({**{c: row.get(c, "") for c in E2E_COLUMNS}, "id": f"{path.parent.name}/{row['id']}"})
    write_rows(rows, OUTPUT, E2E_COLUMNS)
    print(f"wrote {len(rows)} whole-model rows to {OUTPUT.relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
