"""The NERSC study's headline sweep with accel-sim's plan search: GPT-3 1T and the ERA5 ViT on
A100, H200 and B200 systems with NVLink domains of 4, 8 and 64 GPUs, days to train against the GPU
count, for 1D tensor parallelism, 2D context parallelism (TP x CP) and 2D SUMMA.

The study: Subramanian et al. 2024, "Comprehensive Performance Modeling and System Design Insights
for Foundation Models" (arXiv 2410.00273), and its code, github.com/ShashankSubramanian/
transformer-perf-estimates: run_configs.py sweeps 2^2 to 2^14 GPUs at a global batch of 4,096;
GPT-3 1T (l 2048, e 25600, 160 heads, 128 layers) trains on 1e12 tokens, the ViT (l 259,200, e
4096, 64 heads, 32 layers; no CLS token) on 350,000 samples x 80 epochs. Its printed 1D result for
GPT-3 1T at 4,096 GPUs (plots/plots_overall_perf.ipynb) is the one figure compared number for
number below; its README's finding is that the 2D versions are fastest for GPT-3 1T (not by much
on newer GPUs) and necessary for the ViT.

accel-sim runs each point as `plan` does, on its own systems (dgx_a100, hgx_h200, dgx_b200, whose
NVLink and NIC figures are their datasheets', not the study's configs) with the domain size
overridden, under megatron-core-summa (Megatron-Core's kernels; SUMMA the what-if), ZeRO-1, no
offload, every rank order (the placement search), micro-batches, virtual stages and recompute
policies of the default space. 1D: cp 1; 2D context: cp 2-32; 2D SUMMA: the SUMMA layouts.

Run: python bench/nersc_bench.py [--gpus 512,4096] [--svg docs/nersc] [--csv bench/nersc_results.csv]
     [--from-csv]   (prints its figures; nothing is asserted; --from-csv redraws the charts, one SVG
     per model, docs/nersc-<model>.svg, from the CSV of a run)
"""

from __future__ import annotations

import argparse
import csv
import time

from accel_sim import _core
from accel_sim.commands.plan import _space
from accel_sim.commands.train import run_inputs
from accel_sim.io.system_file import resolve_system, with_scaleup_domain
from accel_sim.runs import _options

MODELS = {  # accel-sim model, sequence, tokens trained on
    "gpt3-1t": (2048, 1e12),
    "vit-era5": (259200, 350000 * 80 * 259200),
}
SYSTEMS = {"A100": "dgx_a100", "H200": "hgx_h200", "B200": "dgx_b200"}
DOMAINS = (4, 8, 64)
STRATEGIES = {"1D": {"cp": [1], "summa": "off"},
              "2D context": {"cp": [2, 4, 8, 16, 32], "summa": "off"},
              "2D SUMMA": {"summa": "on"}}
GLOBAL_BATCH = 4096
# The study's printed days for GPT-3 1T, 1D TP, 4,096 GPUs (plots/plots_overall_perf.ipynb).
NERSC_1D_4096 = {("A100", 4): 97.96, ("A100", 8): 86.88, ("A100", 64): 85.22,
                 ("H200", 4): 30.95, ("H200", 8): 30.15, ("H200", 64): 28.79,
                 ("B200", 4): 12.88, ("B200", 8): 12.47, ("B200", 64): 12.08}


def best(model: str, system: str, domain: int, gpus: int, strategy: dict) -> tuple[float, str] | None:
    """(days to train, the layout) of the fastest configuration, or None when nothing fits."""
    from accel_sim.report.training import short_layout

    seq, tokens = MODELS[model]
    args = _options("plan", {"model": model, "system": system, "gpus": [gpus], "seq": seq,
                             "global_batch": GLOBAL_BATCH, "stack": "megatron-core-summa", "scaleup_domain": domain,
                             "offload": "none", "zero": [1], **strategy})
    entry = with_scaleup_domain(resolve_system(system), domain)
    run = run_inputs(args, entry)
    if model == "vit-era5":
        run.spec.cls_token = False  # the study's ViT has none: 259,200 tokens
    space = _space(args, run.spec, gpus, GLOBAL_BATCH, run.stack, entry)
    r = _core.plan_training(run.spec, run.base, space, run.device, entry.spec, run.options, 1, 0, None)
    if not r.best:
        return None
    c = r.best[0]
    return tokens / c.estimate.tokens_per_s / 86400, short_layout(c)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpus", default="512,1024,2048,4096,8192,16384")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--csv", default="bench/nersc_results.csv")
    ap.add_argument("--svg", default="docs/nersc", help="prefix of the charts: PREFIX-<model>.svg")
    ap.add_argument("--from-csv", action="store_true", help="redraw the charts from --csv without searching")
    args = ap.parse_args()
    if args.from_csv:
        with open(args.csv) as f:
            rows = [dict(r, gpus=int(r["gpus"]), nvlink_domain=int(r["nvlink_domain"])) for r in csv.DictReader(f)]
        print("wrote", ", ".join(write_svg(rows, args.svg)))
        return
    counts = [int(g) for g in args.gpus.split(",")]
    rows = []
    start = time.perf_counter()
    for model in args.models.split(","):
        for label, system in SYSTEMS.items():
            for domain in DOMAINS:
                for strategy, narrowing in STRATEGIES.items():
                    for gpus in counts:
                        found = best(model, system, domain, gpus, narrowing)
                        rows.append({"model": model, "system": label, "nvlink_domain": domain, "strategy": strategy,
                                     "gpus": gpus, "days": f"{found[0]:.3f}" if found else "",
                                     "layout": found[1] if found else "nothing fits"})
                        print(f"{model:9} {label} NVS{domain:<3} {strategy:11} {gpus:>6} GPUs: "
                              + (f"{found[0]:9.2f} days  {found[1]}" if found else "nothing fits"), flush=True)
    print(f"{len(rows)} searches in {time.perf_counter() - start:.0f} s")
    with open(args.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    print("\nGPT-3 1T, 1D TP, 4,096 GPUs, days to train: accel-sim vs the study")
    for (label, domain), theirs in NERSC_1D_4096.items():
        ours = next((r["days"] for r in rows if r["model"] == "gpt3-1t" and r["system"] == label
                     and r["nvlink_domain"] == domain and r["strategy"] == "1D" and r["gpus"] == 4096), "")
        if ours:
            print(f"  {label} NVS{domain:<3} {float(ours):7.2f} vs {theirs:6.2f}  ({float(ours) / theirs - 1:+.1%})")
    print(f"wrote {args.csv} and", ", ".join(write_svg(rows, args.svg)))


def write_svg(rows: list[dict], prefix: str) -> list[str]:
    """One SVG per model, PREFIX-<model>.svg: a chart per system, days to train against GPUs, a
    line per strategy and NVLink domain. Returns the paths."""
    from accel_sim.report.html_report import standalone_svg
    from accel_sim.report.svg import PALETTE, Series, line_chart

    paths = []
    for model in dict.fromkeys(r["model"] for r in rows):
        charts = []
        for label in SYSTEMS:
            mine = [r for r in rows if r["model"] == model and r["system"] == label and r["days"]]
            if not mine:
                continue
            series = []
            for i, (strategy, domain) in enumerate((s, d) for s in STRATEGIES for d in DOMAINS):
                pts = sorted((r["gpus"], float(r["days"])) for r in mine
                             if r["strategy"] == strategy and r["nvlink_domain"] == domain)
                if pts:
                    series.append(Series(f"{strategy} NVS{domain}", pts, PALETTE[i % len(PALETTE)],
                                         tips=[f"{strategy}, NVLink {domain}, {g:,} GPUs: {v:,.3g} days" for g, v in pts]))
            gpus = sorted({r["gpus"] for r in mine})
            charts.append(line_chart(series, cls="nersc", title=f"{model} on {label}", x_label="GPUs",
                                     y_label="days to train", log_x=True, log_y=True, x_ticks=gpus,
                                     x_fmt=lambda g: f"{g:,.0f}", width=470, height=330,
                                     attrs={"data-series": len(series)}))
        path = f"{prefix}-{model}.svg"
        with open(path, "w") as f:
            f.write(standalone_svg(f"{model}: the NERSC study's sweep (arXiv 2410.00273) as accel-sim plans it",
                                   charts, "nersc-sweep"))
        paths.append(path)
    return paths

if __name__ == "__main__":
    main()
