"""What `check` and `capture` print: the CI gate's verdict per metric (the schema accel-sim/check)
and the summary of a captured graph (accel-sim/capture); docs/formats/report.md."""

from __future__ import annotations

from accel_sim.report.json_report import SCHEMA_VERSION
from accel_sim.report.tables import table


def check_json(checks: list) -> dict:
    """`check --json`: each metric's baseline, current value, change and limit (the core's CheckResult)."""
    return {"schema": "accel-sim/check", "schema_version": SCHEMA_VERSION, "passed": not any(c.exceeded for c in checks),
            "checks": [{"metric": c.metric, "baseline": c.baseline, "current": c.current,
                        "change_fraction": c.change_fraction, "max_increase_fraction": c.max_increase_fraction,
                        "exceeded": c.exceeded} for c in checks]}


def check_text(checks: list) -> str:
    """`check`'s table: each metric's baseline, current value, change, limit and verdict."""
    fmt = {"latency_s": lambda v: f"{v * 1e3:,.3f} ms", "peak_memory_bytes": lambda v: f"{v / 1024**3:,.3f} GiB"}
    rows = [(c.metric, fmt[c.metric](c.baseline), fmt[c.metric](c.current), f"{c.change_fraction * 100:+.1f}%",
             f"{c.max_increase_fraction * 100:.1f}%", "FAIL" if c.exceeded else "ok") for c in checks]
    return table(["metric", "baseline", "current", "change", "limit", "result"], rows,
                 [False, True, True, True, True, False])


def capture_json(graph: dict, output: str) -> dict:
    """`capture --json`: where the graph went and what it holds."""
    return {"schema": "accel-sim/capture", "schema_version": SCHEMA_VERSION, "output": output, "name": graph["name"],
            "metadata": graph["metadata"], "num_nodes": len(graph["nodes"]), "num_tensors": len(graph["tensors"]),
            "num_storages": len(graph["storages"])}


def capture_text(graph: dict, output: str) -> str:
    return f"wrote {output}: {len(graph['nodes'])} ops, {len(graph['tensors'])} tensors"
