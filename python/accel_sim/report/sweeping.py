"""What `sweep` reports: a one-parameter sweep's table and JSON (the schema accel-sim/sweep), the
points of its plot, and a grid sweep's summary (accel-sim/sweep-grid); docs/formats/report.md
(accel_sim.commands.sweep.SweepRun, GridSweepRun)."""

from __future__ import annotations

import dataclasses
from typing import Any

from accel_sim.report.json_report import SCHEMA_VERSION
from accel_sim.report.sweep_plot import value_label, wants_log
from accel_sim.report.tables import gib, ms, table


def workload_label(info: dict | None, graph_name: str, varied: str) -> str:
    """'llama-3-8b decode (batch 1, context 2048)', leaving out the varied parameter."""
    if not info:
        return graph_name or "graph"
    fields = [("batch", "batch", info["batch"])]
    fields.append(("context", "context", info["context"]) if info["phase"] == "decode" else ("seq", "seq", info["seq"]))
    fields += [(k, k.upper(), info[f]) for k, f in (("tp", "tensor_parallel"), ("ep", "expert_parallel"),
                                                    ("cp", "context_parallel")) if info.get(f, 1) > 1 or k == varied]
    shape = ", ".join(f"{label} {value}" for key, label, value in fields if key != varied)
    return f"{info['model']} {info['phase']}" + (f" ({shape})" if shape else "")


def table_rows(rows: list[dict], name: str) -> tuple[list[str], list[tuple], list[bool]]:
    """Headers, cells and right-alignment of the table (a communication column when collectives
    were timed). A number's cell is (text, value): the HTML table sorts by the value."""
    comm = any(r["communication_time_s"] > 0 for r in rows)
    headers = ["device", name, "latency", "tokens/s", "memory needed", "fits", "bound", "compute-bound",
               "memory-bound"] + (["communication"] if comm else []) + ["MFU"]

    def seconds(v: float) -> tuple[str, float]:
        return ms(v), v

    out = [(r["device"], (value_label(r[name]), r[name]), seconds(r["latency_s"]),
            (f"{r['tokens_per_s']:,.0f}", r["tokens_per_s"]) if r["tokens_per_s"] is not None else "-",
            (gib(r["required_bytes"]), r["required_bytes"]), "yes" if r["fits"] else "OOM", r["bound"],
            seconds(r["compute_bound_time_s"]), seconds(r["memory_bound_time_s"]))
           + ((seconds(r["communication_time_s"]),) if comm else ()) + ((f"{r['mfu'] * 100:.1f}%", r["mfu"]),)
           for r in rows]
    right = [False, True, True, True, True, False, False, True, True] + ([True] if comm else []) + [True]
    return headers, out, right


def log_x(vary: str, values: list[float]) -> bool:
    """A log x axis for a geometric range, or a list spanning a factor of ten or more."""
    spec = vary.partition("=")[2]
    return spec.endswith(":log") or (":" not in spec and wants_log(values))


def sweep_json(s: Any) -> dict:
    """`sweep --vary --json` of a SweepRun."""
    p, args = s.parameter, s.args
    return {"schema": "accel-sim/sweep", "schema_version": SCHEMA_VERSION,
            "workload": s.info if s.info else {"graph": s.graph_name},
            "parameter": {"name": s.name, "kind": p.kind, "label": p.label,
                          "values": [int(v) if p.integer else v for v in s.values]},
            "devices": list(dict.fromkeys(r["device"] for r in s.rows)),
            "system": args.system, "cost_model": args.cost_model,
            "stack": s.stack.as_dict() if s.stack is not None else None,
            "metric": s.metric[0], "points": s.rows}


def sweep_text(s: Any) -> str:
    """`sweep --vary`'s text report of a SweepRun."""
    args = s.args
    headers, cells, right = table_rows(s.rows, s.name)
    notes = [f"{len(s.rows)} points"]
    if s.name == "peak_tflops":
        notes.append("the peak is the run's matmul dtype's; every other compute rate scales with it")
    if any(not r["fits"] for r in s.rows):
        notes.append("OOM: the point needs more memory than the device has")
    return "\n".join([f"accel-sim sweep · {s.workload} · {s.parameter.label} · {args.cost_model} model"
                      + (f" · stack {args.stack}" if args.stack else ""), "",
                      table(headers, [[c[0] if isinstance(c, tuple) else c for c in row] for row in cells], right),
                      "\n  " + " · ".join(notes)])


def grid_json(g: Any) -> dict:
    """`sweep --grid --json` of a GridSweepRun."""
    return {"schema": "accel-sim/sweep-grid", "schema_version": SCHEMA_VERSION, "grid": g.args.grid,
            "command": g.grid.command, "out": g.args.out} | {k: v for k, v in dataclasses.asdict(g.summary).items()
                                                             if k != "out_path"}


def grid_text(g: Any) -> str:
    """`sweep --grid`'s text report of a GridSweepRun."""
    s = g.summary
    return "\n".join([f"accel-sim sweep · {g.args.grid} · {g.grid.command} · {len(g.grid):,} points · {g.where}",
                      f"  computed {s.computed:,} · resumed {s.resumed:,} · failed {s.failed:,} in {s.seconds:,.1f} s",
                      f"  wrote {g.args.out}"])
