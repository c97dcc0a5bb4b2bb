"""train, plan and serve on a device other than the stock part of the system: a --device-file, a
--device, a system file's device_overrides, a --clock-mhz. Each differs from the stock run by what
a hand calculation says the changed figure changes, and the reports name the device used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from accel_sim.cli.main import main
from accel_sim.commands.parser import build_parser as _parser
from accel_sim.io.device_file import builtin_device_files

GIB = 2**30
STOCK = next(p for p in builtin_device_files() if p.stem == "h100_sxm")
# Llama-3-8B on 8 GPUs, data-parallel with the distributed optimizer, 8k tokens: about 86 GiB per
# GPU, over the H100's 80 GiB (the core's figure: "needs 91 GB per GPU, more than the device's 85 GB").
TRAIN = ["train", "--model", "llama-3-8b", "--system", "dgx_h100", "--gpus", "8", "--dp", "8",
         "--global-batch", "8", "--seq", "8192"]
PLAN = ["plan", "--model", "llama-3-8b", "--system", "dgx_h100", "--gpus", "8", "--global-batch", "8",
        "--seq", "8192", "--tp", "1", "--pp", "1", "--microbatch", "1", "--zero", "1", "--recompute", "none",
        "--order", "tp-cp-ep-dp-pp", "--sp", "off", "--cp", "1", "--ep", "1", "--virtual-stages", "1",
        "--offload", "none", "--quiet"]
SERVE = ["serve", "--model", "llama-3-8b", "--qps", "4", "--requests", "20", "--input-len", "500",
         "--output-len", "50", "--quiet"]


def _device_file(tmp_path: Path, device_id: str, **changes) -> str:
    """The shipped H100 SXM's file as `device_id`, with `changes` (keys of the file; a
    `peak_tflops` or `kernel` mapping replaces the entries it names)."""
    data = yaml.safe_load(STOCK.read_text())
    data.update(id=device_id, name=f"{data['name']} ({device_id})", aliases=[])
    for key, value in changes.items():
        data[key] = data[key] | value if isinstance(value, dict) else value
    path = tmp_path / f"{device_id}.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def _json(argv: list[str], capsys) -> dict:
    assert main([*argv, "--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


def _estimate(argv: list[str]):
    """train's estimate, feasible or not (the CLI refuses an infeasible one)."""
    from accel_sim.commands.train import train_estimate

    return train_estimate(_parser().parse_args(argv))[3]


def test_train_on_a_larger_memory_fits_what_the_stock_part_does_not(tmp_path, capsys):
    big = _device_file(tmp_path, "h100_96gib", memory_gib=96)
    stock = _estimate(TRAIN)
    variant = _estimate(TRAIN + ["--device", "h100_96gib", "--device-file", big])
    # Capacity enters no figure but `fits` (memory per GPU <= capacity): the same bytes and step,
    # 80 GiB < them <= 96 GiB.
    assert variant.memory_per_gpu_bytes == stock.memory_per_gpu_bytes
    assert 80 * GIB < stock.memory_per_gpu_bytes <= 96 * GIB
    assert variant.step_s == stock.step_s
    assert (stock.fits, variant.fits) == (False, True)
    assert main(TRAIN) == 2 and "more than the device's 85 GB" in capsys.readouterr().err
    d = _json(TRAIN + ["--device", "h100_96gib", "--device-file", big], capsys)
    assert (d["device"], d["device_name"], d["fits"]) == ("h100_96gib", "NVIDIA H100 SXM5 80GB (h100_96gib)", True)
    assert d["clock_override_mhz"] is None and d["device_variant_of"] is None
    assert main(TRAIN + ["--device", "h100_96gib", "--device-file", big]) == 0
    assert "on 8 x NVIDIA H100 SXM5 80GB (h100_96gib) (NVIDIA DGX H100)" in capsys.readouterr().out


def test_a_halved_clock_is_the_part_with_half_its_peaks(tmp_path, capsys):
    # The kernel model scales every compute rate by the new clock over the file's (1830 MHz) and
    # the GEMM tiles' fixed cycles by its inverse (core/src/cost/kernel.cc): --clock-mhz 915 is
    # the same part with every peak halved and gemm_tile_overhead_us (2.4) doubled. A clock given
    # is the clock the step runs at, so the halved part keeps its whole clock under training load
    # too (sustained_clock_fraction 1 in place of the H100's 0.922).
    peaks = yaml.safe_load(STOCK.read_text())["peak_tflops"]
    half = _device_file(tmp_path, "h100_half", peak_tflops={k: v / 2 for k, v in peaks.items()},
                        kernel={"gemm_tile_overhead_us": 4.8, "sustained_clock_fraction": 1.0})
    run = TRAIN[:5] + ["--gpus", "8", "--tp", "8", "--global-batch", "8", "--seq", "4096"]
    clocked = _json(run + ["--clock-mhz", "915"], capsys)
    halved = _json(run + ["--device", "h100_half", "--device-file", half], capsys)
    stock = _json(run, capsys)
    assert clocked["step_s"] == pytest.approx(halved["step_s"], rel=1e-12)
    assert clocked["breakdown_s"]["compute"] == pytest.approx(halved["breakdown_s"]["compute"], rel=1e-12)
    # Compute-bound GEMMs take twice as long; memory-bound kernels and collectives do not change.
    assert stock["step_s"] < clocked["step_s"] < 2 * stock["step_s"]
    assert clocked["memory_per_gpu_bytes"] == stock["memory_per_gpu_bytes"]
    assert (clocked["device"], clocked["clock_override_mhz"], stock["clock_override_mhz"]) == ("h100_sxm", 915, None)
    # Without an override the stock part trains at its sustained clock, 0.922 x 1830 MHz.
    assert (clocked["clock_mhz"], halved["clock_mhz"]) == (915, 1830)
    assert stock["clock_mhz"] == pytest.approx(0.922 * 1830)
    assert main(run + ["--clock-mhz", "915"]) == 0
    assert "NVIDIA H100 SXM5 80GB at 915 MHz (clock overridden; its file: 1830 MHz)" in capsys.readouterr().out
    served = [_json(SERVE + extra, capsys)["results"][0] for extra in ([], ["--clock-mhz", "915"])]
    halved_served = _json(SERVE + ["--device", "h100_half", "--device-file", half], capsys)["results"][0]
    assert served[1]["e2e_s"]["mean"] == pytest.approx(halved_served["e2e_s"]["mean"], rel=1e-9)
    assert served[1]["e2e_s"]["mean"] > served[0]["e2e_s"]["mean"]
    assert (served[0]["clock_override_mhz"], served[1]["clock_override_mhz"]) == (None, 915)


def test_plan_finds_the_configuration_the_larger_memory_holds(tmp_path, capsys):
    big = _device_file(tmp_path, "h100_96gib", memory_gib=96)
    # The space is one configuration: TP 1 PP 1 DP 8, which needs 80-96 GiB per GPU.
    stock = _json(PLAN, capsys)
    variant = _json(PLAN + ["--device", "h100_96gib", "--device-file", big], capsys)
    assert (stock["feasible"], variant["feasible"]) == (0, 1)
    over = stock["best_infeasible"][0]
    assert variant["best"][0]["memory_per_gpu_bytes"] == over["memory_per_gpu_bytes"]
    assert 80 * GIB < over["memory_per_gpu_bytes"] <= 96 * GIB
    assert (variant["device"], variant["device_name"]) == ("h100_96gib", "NVIDIA H100 SXM5 80GB (h100_96gib)")


def test_serve_kv_cache_grows_by_the_usable_share_of_the_added_memory(tmp_path, capsys):
    big = _device_file(tmp_path, "h100_96gib", memory_gib=96)
    stock = _json(SERVE, capsys)["results"][0]["memory_per_gpu"]
    variant = _json(SERVE + ["--device", "h100_96gib", "--device-file", big], capsys)["results"][0]
    # KV cache = 0.9 (--gpu-memory-utilization) x capacity - runtime - weights - activations:
    # 16 GiB more capacity is 0.9 x 16 GiB more cache, the rest unchanged.
    assert variant["memory_per_gpu"]["kv_cache_bytes"] - stock["kv_cache_bytes"] == pytest.approx(0.9 * 16 * GIB, rel=1e-12)
    assert variant["memory_per_gpu"]["weights_bytes"] == stock["weights_bytes"]
    assert (variant["device"], variant["device_name"]) == ("h100_96gib", "NVIDIA H100 SXM5 80GB (h100_96gib)")


def _variant_system(tmp_path: Path, overrides: dict, sources: dict | None = None, device: str = "h100_sxm") -> str:
    text = (Path(__file__).resolve().parents[1] / "python/accel_sim/data/systems/dgx_h100.yaml").read_text()
    data = yaml.safe_load(text)
    data.update(id="dgx_h100_variant", name="DGX H100 with a variant", device=device, device_overrides=overrides)
    data["sources"].update(sources if sources is not None else
                           {f"device_overrides.{k}": "test value" for k in overrides if k not in ("id", "name")})
    path = tmp_path / "dgx_h100_variant.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def test_a_system_file_names_a_device_variant(tmp_path, capsys):
    big = _device_file(tmp_path, "h100_96gib", memory_gib=96, tdp_w=500)
    system = _variant_system(tmp_path, {"id": "h100_sxm_96gib", "name": "NVIDIA H100 SXM5 96GB at 500 W",
                                        "memory_gib": 96, "tdp_w": 500})
    run = TRAIN[:4] + [system] + TRAIN[5:]
    d = _json(run, capsys)
    # The same part as the device file: the same figures, on the system's own fabric.
    by_file = _json(TRAIN + ["--device", "h100_96gib", "--device-file", big], capsys)
    assert (d["step_s"], d["memory_per_gpu_bytes"], d["fits"]) == (by_file["step_s"], by_file["memory_per_gpu_bytes"], True)
    assert (d["system"], d["device"], d["device_name"], d["device_variant_of"]) == (
        "dgx_h100_variant", "h100_sxm_96gib", "NVIDIA H100 SXM5 96GB at 500 W", "h100_sxm")
    assert main(run) == 0
    out = capsys.readouterr().out
    assert "on 8 x NVIDIA H100 SXM5 96GB at 500 W (DGX H100 with a variant)" in out
    assert "h100_sxm_96gib: dgx_h100_variant's variant of h100_sxm (memory_gib, tdp_w from" in out
    # --device replaces the system's device, variant and all: the stock 80 GiB part does not fit.
    assert main(run + ["--device", "h100"]) == 2
    assert "more than the device's 85 GB" in capsys.readouterr().err


def test_a_variant_of_a_device_of_a_device_file(tmp_path, capsys):
    own = _device_file(tmp_path, "acme_h1", memory_gib=64)
    system = _variant_system(tmp_path, {"id": "acme_h1_96", "name": "ACME H1 96", "memory_gib": 96}, device="acme_h1")
    run = TRAIN[:4] + [system] + TRAIN[5:]
    d = _json(run + ["--device-file", own], capsys)
    assert (d["device"], d["device_variant_of"], d["fits"]) == ("acme_h1_96", "acme_h1", True)
    assert main(run) == 2
    assert "device: unknown device 'acme_h1'" in capsys.readouterr().err


def test_the_html_reports_say_the_clock_was_overridden(tmp_path, capsys):
    run = TRAIN[:5] + ["--gpus", "8", "--tp", "8", "--global-batch", "8", "--seq", "4096", "--clock-mhz", "915"]
    pages = {name: tmp_path / f"{name}.html" for name in ("train", "plan", "serve")}
    assert main(run + ["--html", str(pages["train"])]) == 0
    assert main(PLAN[:5] + ["--gpus", "8", "--global-batch", "8", "--seq", "4096", "--tp", "8", "--quiet",
                            "--clock-mhz", "915", "--html", str(pages["plan"])]) == 0
    assert main(SERVE + ["--clock-mhz", "915", "--html", str(pages["serve"])]) == 0
    capsys.readouterr()
    label = "NVIDIA H100 SXM5 80GB at 915 MHz (clock overridden; its file: 1830 MHz)"
    assert label in pages["train"].read_text() and label in pages["plan"].read_text()
    assert "clock overridden: 915 MHz" in pages["serve"].read_text()


def test_plan_over_systems_takes_the_device_file_one_of_them_uses(tmp_path, capsys):
    own = _device_file(tmp_path, "acme_h1", memory_gib=64)
    data = yaml.safe_load((Path(__file__).resolve().parents[1] / "python/accel_sim/data/systems/dgx_h100.yaml").read_text())
    data.update(id="acme_sys", name="ACME cluster", device="acme_h1")
    system = tmp_path / "acme_sys.yaml"
    system.write_text(yaml.safe_dump(data, sort_keys=False))
    run = PLAN[:4] + [f"dgx_h100,{system}"] + PLAN[5:]
    d = _json(run + ["--device-file", own], capsys)
    assert [(r["system"], r["device"]) for r in d] == [("dgx_h100", "h100_sxm"), ("acme_sys", "acme_h1")]
    # A device file that neither system uses is still refused, naming the devices they use.
    other = _device_file(tmp_path, "acme_h2")
    assert main(run + ["--device-file", own, "--device-file", other]) == 2
    assert capsys.readouterr().err.strip().splitlines() == [
        f"accel-sim: error: --device-file {other} gives acme_h2, which this run does not use: its GPUs are h100_sxm "
        "(the device of dgx_h100), acme_h1 (the device of acme_sys); --device picks another"]
