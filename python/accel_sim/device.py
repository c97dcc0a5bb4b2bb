"""`Device`: an accelerator to simulate on, by name from the database or from numbers.

    accel_sim.Device("h100")                                  # from the shipped database
    accel_sim.Device(name="future_chip", bf16_tflops=1000,
                     memory_bandwidth_gbs=5000, memory_gb=128)  # a chip on paper
    accel_sim.Device.from_file("acme_x1.yaml")                 # a user's device file
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Sequence

from accel_sim import _core
from accel_sim.errors import UsageError
from accel_sim.io.device_file import DeviceCatalog, DeviceEntry, contents_key, load_device_file

_GIB = 1024.0**3

_catalog: DeviceCatalog | None = None


def catalog() -> DeviceCatalog:
    """The shipped devices (read once per process)."""
    global _catalog
    if _catalog is None:
        _catalog = DeviceCatalog.builtin()
    return _catalog


# Catalogs with device files, by the files' contents (io.device_file.contents_key): a grid sweep
# resolves the same --device-file at every point, and parsing it was most of a point's time.
_FILE_CATALOGS: dict[tuple, DeviceCatalog] = {}
_MAX_FILE_CATALOGS = 32


def catalog_with(device_files: Sequence[str | Path] = ()) -> DeviceCatalog:
    """The shipped devices and those of `device_files` (a name reaching two devices is an error),
    read once while the files stay the same."""
    if not device_files:
        return catalog()
    key = contents_key(device_files)
    found = _FILE_CATALOGS.get(key) if key is not None else None
    if found is None:
        found = DeviceCatalog(catalog().entries + [load_device_file(p) for p in device_files])
        if key is not None:
            if len(_FILE_CATALOGS) >= _MAX_FILE_CATALOGS:
                _FILE_CATALOGS.clear()
            _FILE_CATALOGS[key] = found
    return found


class Device:
    """An accelerator: its `_core.DeviceSpec` plus the file facts reports show.

    Given only a name, the device comes from the database (short names such as `h100` resolve
    to a default variant). Given numbers, it is a custom device: `memory_gb` is the capacity in
    GiB (as HBM capacities are quoted), bandwidth in GB/s, peaks in dense TFLOP/s. A peak you do
    not give is unknown; ops that need it fall back to the nearest given peak, and the report
    says so.
    """

    def __init__(
        self,
        name: str,
        *,
        memory_bandwidth_gbs: float | None = None,
        memory_gb: float | None = None,
        bf16_tflops: float | None = None,
        fp16_tflops: float | None = None,
        fp32_tflops: float | None = None,
        tf32_tflops: float | None = None,
        fp8_tflops: float | None = None,
        int8_tops: float | None = None,
        fp64_tflops: float | None = None,
        kernel_launch_overhead_us: float = 0.0,
        price_usd_per_hour: float | None = None,
    ):
        peaks = {
            "bf16_matrix_flops_per_s": bf16_tflops,
            "fp16_matrix_flops_per_s": fp16_tflops,
            "fp32_flops_per_s": fp32_tflops,
            "tf32_matrix_flops_per_s": tf32_tflops,
            "fp8_matrix_flops_per_s": fp8_tflops,
            "int8_matrix_ops_per_s": int8_tops,
            "fp64_flops_per_s": fp64_tflops,
        }
        custom = memory_bandwidth_gbs is not None or memory_gb is not None or any(
            v is not None for v in peaks.values()
        )
        if not custom:
            self._entry = catalog().resolve(name)
            return
        if memory_bandwidth_gbs is None or memory_gb is None:
            raise UsageError(f"device '{name}': give both memory_bandwidth_gbs and memory_gb")
        spec = _core.DeviceSpec()
        spec.id = name
        spec.name = name
        spec.vendor = "custom"
        spec.memory_bytes = float(memory_gb) * _GIB
        spec.memory_bandwidth_bytes_per_s = float(memory_bandwidth_gbs) * 1e9
        for field, tflops in peaks.items():
            if tflops is not None:
                setattr(spec, field, float(tflops) * 1e12)
        spec.kernel_launch_overhead_s = float(kernel_launch_overhead_us) * 1e-6
        spec.price_usd_per_hour = float(price_usd_per_hour or 0.0)
        try:
            spec.validate()
        except ValueError as e:
            raise UsageError(str(e)) from None
        self._entry = DeviceEntry(spec=spec, path="(Python)")

    @classmethod
    def from_entry(cls, entry: DeviceEntry) -> Device:
        device = cls.__new__(cls)
        device._entry = entry
        return device

    @classmethod
    def from_file(cls, path: str | Path) -> Device:
        return cls.from_entry(load_device_file(path))

    @property
    def spec(self) -> Any:
        return self._entry.spec

    @property
    def entry(self) -> DeviceEntry:
        return self._entry

    @property
    def id(self) -> str:
        return self.spec.id

    @property
    def name(self) -> str:
        return self.spec.name

    def __repr__(self) -> str:
        s = self.spec
        return (
            f"Device({s.id!r}, memory={s.memory_bytes / _GIB:.0f} GiB, "
            f"bandwidth={s.memory_bandwidth_bytes_per_s / 1e9:.0f} GB/s, "
            f"bf16={s.bf16_matrix_flops_per_s / 1e12:.1f} TFLOP/s)"
        )


def device_label(spec: Any, clock_mhz: float | None = None) -> str:
    """A device's name as a report prints it, saying when the kernel model's clock was overridden
    (`clock_mhz`, the run's --clock-mhz, or None)."""
    if clock_mhz is None:
        return spec.name
    return f"{spec.name} at {clock_mhz:g} MHz (clock overridden; its file: {spec.clock_hz / 1e6:g} MHz)"


def resolve_device(device: Any, device_files: list[str] = ()) -> Device:
    """A Device from a Device, a legacy DeviceProfile, a core DeviceSpec or a name."""
    if isinstance(device, Device):
        return device
    to_device = getattr(device, "to_device", None)
    if callable(to_device):
        return to_device()
    if isinstance(device, _core.DeviceSpec):
        return Device.from_entry(DeviceEntry(spec=device, path="(Python)"))
    if isinstance(device, str):
        if device_files:
            return Device.from_entry(catalog_with(device_files).resolve(device))
        return Device(device)
    raise UsageError(f"cannot use {type(device).__name__} as a device (give a name or a Device)")
