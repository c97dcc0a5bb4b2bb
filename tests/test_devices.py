"""Device files and name resolution."""

from __future__ import annotations

from pathlib import Path

import pytest

import accel_sim
from accel_sim.devices.profiles import DeviceProfile
from accel_sim.io.device_file import DeviceCatalog, builtin_device_files, load_device_file

REQUIRED = ["v100", "t4", "a10g", "l4", "l40s", "a100-40gb", "a100-80gb", "h100-sxm", "h100-pcie", "h200",
            "b200", "mi250x", "mi300x", "mi325x", "tpu-v4", "tpu-v5e", "tpu-v5p"]


def test_database_has_the_required_devices():
    ids = {accel_sim.Device(name).id for name in REQUIRED}
    assert len(ids) == 17
    assert len(builtin_device_files()) >= 17


def test_short_names_resolve_to_default_variants():
    assert accel_sim.Device("a100").id == "a100_80gb"
    assert accel_sim.Device("H100").id == "h100_sxm"
    assert accel_sim.Device("v100").id == "v100_sxm2_16gb"
    assert accel_sim.Device("tpu-v4").id == "tpu_v4"


def test_units_are_converted_to_si():
    # h100_sxm.yaml: 80 GiB, 3350 GB/s, bf16 989.4 TFLOP/s, launch 4 us.
    spec = accel_sim.Device("h100").spec
    assert spec.memory_bytes == 80 * 1024**3
    assert spec.memory_bandwidth_bytes_per_s == 3350e9
    assert spec.bf16_matrix_flops_per_s == pytest.approx(989.4e12)
    assert spec.kernel_launch_overhead_s == pytest.approx(4e-6)


def test_every_shipped_number_has_a_source():
    numeric = {"memory_gib", "memory_bandwidth_gbs", "peak_tflops", "compute_units", "clock_mhz",
               "l2_cache_mib", "special_function_ops_per_clock", "tdp_w", "kernel_launch_overhead_us", "price_usd_per_hour", "scaleup_bandwidth_gbs"}
    import yaml

    for path in builtin_device_files():
        data = yaml.safe_load(path.read_text())
        for key in numeric & data.keys():
            assert key in data["sources"], f"{path.name}: {key} has no source"


def test_unknown_device_is_a_usage_error():
    with pytest.raises(accel_sim.UsageError, match="unknown device 'h1000'"):
        accel_sim.Device("h1000")


@pytest.mark.parametrize(
    "text, message",
    [
        ("id: x\n", "missing required key"),
        ("[1, 2", "not valid YAML"),
        ("id: x\nname: X\nvendor: V\nmemory_gib: 1\nmemory_bandwidth_gbs: 1\npeak_tflops: {bf16: 1}\nsources: {}\nmemory_gb: 3\n", "unknown key 'memory_gb'"),
        ("id: x\nname: X\nvendor: V\nmemory_gib: -1\nmemory_bandwidth_gbs: 1\npeak_tflops: {bf16: 1}\nsources: {}\n", "'memory_gib' must be at least 9.53674e-07, got -1"),
        ("id: x\nname: X\nvendor: V\nmemory_gib: 1\nmemory_bandwidth_gbs: fast\npeak_tflops: {bf16: 1}\nsources: {}\n", "must be a number"),
        ("id: y\nname: X\nvendor: V\nmemory_gib: 1\nmemory_bandwidth_gbs: 1\npeak_tflops: {bf16: 1}\nsources: {}\n", "must equal the file name"),
        ("id: x\nname: X\nvendor: V\nmemory_gib: 1\nmemory_bandwidth_gbs: 1\npeak_tflops: {bf17: 1}\nsources: {}\n", "unknown dtype"),
    ],
)
def test_malformed_device_files_name_the_problem(tmp_path: Path, text: str, message: str):
    path = tmp_path / "x.yaml"
    path.write_text(text)
    with pytest.raises(accel_sim.UsageError, match=message):
        load_device_file(path)


def test_a_user_device_file_works_like_a_shipped_one(tmp_path: Path):
    path = tmp_path / "acme_x1.yaml"
    path.write_text(
        "id: acme_x1\nname: ACME X1\nvendor: ACME\naliases: [x1]\nmemory_gib: 64\n"
        "memory_bandwidth_gbs: 2000\npeak_tflops: {bf16: 500, fp32: 40}\nsources: {peak_tflops: hypothetical}\n"
    )
    catalog = DeviceCatalog.builtin([path])
    assert catalog.resolve("x1").spec.memory_bandwidth_bytes_per_s == 2000e9


def test_conflicting_alias_is_rejected(tmp_path: Path):
    path = tmp_path / "fake.yaml"
    path.write_text(
        "id: fake\nname: F\nvendor: V\naliases: [h100]\nmemory_gib: 1\nmemory_bandwidth_gbs: 1\n"
        "peak_tflops: {bf16: 1}\nsources: {}\n"
    )
    with pytest.raises(accel_sim.UsageError, match="also names device 'h100_sxm'"):
        DeviceCatalog.builtin([path])


def test_python_device_and_legacy_profile():
    chip = accel_sim.Device(name="future_chip", bf16_tflops=1000, memory_bandwidth_gbs=5000, memory_gb=128)
    assert chip.spec.bf16_matrix_flops_per_s == 1000e12
    assert chip.spec.memory_bytes == 128 * 1024**3
    legacy = DeviceProfile(name="future_chip", compute_tflops=1000.0, memory_bandwidth=5000.0, memory_limit_gb=128.0)
    d = legacy.to_device()
    assert d.spec.fp32_flops_per_s == 1000e12 and d.spec.bf16_matrix_flops_per_s == 1000e12
    with pytest.raises(accel_sim.UsageError):
        accel_sim.Device(name="half", bf16_tflops=1)
