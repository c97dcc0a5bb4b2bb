"""Device files (docs/formats/device.md) -> `_core.DeviceSpec`, and device-name resolution.

Units are converted here, at the edge: GiB, GB/s, TFLOP/s, MHz, MiB and microseconds in the file
become bytes, bytes/s, FLOP/s, Hz and seconds in the core.
"""

from __future__ import annotations

import importlib.resources
import re
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Sequence


from accel_sim import _core
from accel_sim.errors import UsageError
from accel_sim.io import fields

_GIB = 1024.0**3
_MIB = 1024.0**2

# peak_tflops key -> DeviceSpec field
_PEAK_FIELDS = {
    "fp64": "fp64_flops_per_s",
    "fp64_matrix": "fp64_matrix_flops_per_s",
    "fp32": "fp32_flops_per_s",
    "fp32_matrix": "fp32_matrix_flops_per_s",
    "tf32": "tf32_matrix_flops_per_s",
    "fp16": "fp16_matrix_flops_per_s",
    "bf16": "bf16_matrix_flops_per_s",
    "fp8": "fp8_matrix_flops_per_s",
    "int8": "int8_matrix_ops_per_s",
    "fp4": "fp4_matrix_flops_per_s",  # NVFP4 / MXFP4 GEMMs (serve --weight-dtype fp4, serve-plan's fp4)
}
_REQUIRED = ("id", "name", "vendor", "memory_gib", "memory_bandwidth_gbs", "peak_tflops", "sources")
# Each number's range in the file's units: (minimum, exclusive lower bound, maximum). The bounds are
# far beyond any part (a kibibyte to a pebibyte of memory, a kilobyte per second to a petabyte per
# second, up to an exaFLOP/s): they catch a value that is not a device's (a unit slip, a fuzzed
# file, a denormal) before it overflows the core's arithmetic, not a design. `sweep --vary` and grid
# files hold a device parameter to the same bounds (accel_sim/design_sweep.py).
BOUNDS = {
    "memory_gib": (2.0**-20, None, 1e6),
    "memory_bandwidth_gbs": (1e-6, None, 1e6),
    "compute_units": (0.0, None, 1e7),
    "clock_mhz": (0.0, None, 1e5),
    "l2_cache_mib": (0.0, None, 1e6),
    "special_function_ops_per_clock": (0.0, None, 1e6),
    "tdp_w": (0.0, None, 1e6),
    "kernel_launch_overhead_us": (0.0, None, 1e6),
    "runtime_reserved_mib": (0.0, None, 1e9),
    "price_usd_per_hour": (0.0, None, 1e6),
    "scaleup_bandwidth_gbs": (0.0, None, 1e6),
}
_NUMBERS = set(BOUNDS)
PEAK_MAX_TFLOPS = 1e6
PEAK_MIN_TFLOPS = 1e-9
# A clock the run is set to (--clock-mhz, sweep's clock_mhz), in MHz: a kilohertz to the file's
# largest clock. A file's clock_mhz may be 0 (not given); a clock set by hand may not, and one of
# 1e-300 MHz would scale a kernel's time past the largest double.
CLOCK_MHZ_RANGE = (1e-3, BOUNDS["clock_mhz"][2])
_TEXT = {"id", "name", "vendor", "architecture", "compute_unit_kind", "notes"}
_KNOWN = set(_REQUIRED) | _NUMBERS | _TEXT | {"aliases", "sources", "peak_tflops", "kernel"}


@dataclass(frozen=True)
class DeviceEntry:
    """A device as read from its file: the core spec plus what only reports need."""

    spec: Any  # _core.DeviceSpec
    aliases: tuple[str, ...] = ()
    architecture: str = ""
    path: str = ""
    sources: dict[str, str] = field(default_factory=dict)
    peak_tflops: dict[str, float] = field(default_factory=dict)
    variant_of: Any = None  # the DeviceEntry this one is a variant of (parse_variant), or None


def normalize_name(name: str) -> str:
    """The lookup key of a device id or alias: lowercase, '-' -> '_', no surrounding spaces."""
    return name.strip().lower().replace("-", "_")


def _number(data: dict, key: str, where: str) -> float:
    minimum, above, maximum = BOUNDS[key]
    if key == "compute_units":
        return float(fields.integer(data[key], where, key, maximum=int(maximum)))
    return fields.number(data[key], where, key, minimum=minimum, above=above, maximum=maximum)


def parse_device(data: Any, where: str, expected_id: str | None = None) -> DeviceEntry:
    """Validates one parsed device file and converts it to a DeviceEntry.

    `where` names the file in error messages; `expected_id` is the file stem, which must equal
    the `id` key.
    """
    if not isinstance(data, dict):
        raise UsageError(f"{where}: a device file must be a YAML mapping of keys to values")
    for key in data:
        if key not in _KNOWN:
            raise UsageError(f"{where}: unknown key '{key}' (see docs/formats/device.md)")
    for key in _REQUIRED:
        if key not in data:
            raise UsageError(f"{where}: missing required key '{key}'")
    for key in _TEXT & data.keys():
        fields.text(data[key], where, key)
    if expected_id is not None and data["id"] != expected_id:
        raise UsageError(f"{where}: id '{data['id']}' must equal the file name '{expected_id}'")
    peaks = data["peak_tflops"]
    if not isinstance(peaks, dict) or not peaks:
        raise UsageError(f"{where}: 'peak_tflops' must map dtypes (bf16, fp32, ...) to TFLOP/s")
    if not isinstance(data["sources"], dict):
        raise UsageError(f"{where}: 'sources' must map field names to where each number comes from")
    aliases = data.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, (str, int)) for a in aliases):
        raise UsageError(f"{where}: 'aliases' must be a list of names")

    spec = _core.DeviceSpec()
    spec.id = data["id"]
    spec.name = data["name"]
    spec.vendor = data["vendor"]
    spec.memory_bytes = _number(data, "memory_gib", where) * _GIB
    spec.memory_bandwidth_bytes_per_s = _number(data, "memory_bandwidth_gbs", where) * 1e9
    for key in peaks:
        if key not in _PEAK_FIELDS:
            known = ", ".join(_PEAK_FIELDS)
            raise UsageError(f"{where}: unknown dtype 'peak_tflops.{key}' (known: {known})")
        value = fields.number(peaks[key], f"{where}: peak_tflops", key, minimum=0.0, maximum=PEAK_MAX_TFLOPS)
        if 0 < value < PEAK_MIN_TFLOPS:
            raise UsageError(f"{where}: peak_tflops: '{key}' must be 0 (no such unit) or at least "
                             f"{PEAK_MIN_TFLOPS:g} TFLOP/s (a kiloFLOP/s), got {value}")
        if _PEAK_FIELDS[key] is not None:
            setattr(spec, _PEAK_FIELDS[key], value * 1e12)
    number = {key: _number(data, key, where) for key in _NUMBERS & data.keys()}
    spec.kernel_launch_overhead_s = number.get("kernel_launch_overhead_us", 0.0) * 1e-6
    if "runtime_reserved_mib" in data:
        if "runtime_reserved_mib" not in data["sources"]:
            raise UsageError(f"{where}: 'runtime_reserved_mib' needs a 'sources.runtime_reserved_mib' entry")
        spec.runtime_reserved_bytes = number["runtime_reserved_mib"] * _MIB
    if 0 < number.get("clock_mhz", 0.0) < CLOCK_MHZ_RANGE[0]:
        raise UsageError(f"{where}: 'clock_mhz' must be 0 (not known) or at least {CLOCK_MHZ_RANGE[0]:g} MHz (a kilohertz), "
                         f"got {number['clock_mhz']}")
    spec.num_compute_units = int(number.get("compute_units", 0))
    spec.clock_hz = number.get("clock_mhz", 0.0) * 1e6
    spec.l2_cache_bytes = number.get("l2_cache_mib", 0.0) * _MIB
    spec.special_function_ops_per_clock = number.get("special_function_ops_per_clock", 0.0)
    spec.tdp_w = number.get("tdp_w", 0.0)
    spec.price_usd_per_hour = number.get("price_usd_per_hour", 0.0)
    _read_kernel_constants(spec, data, where)
    try:
        spec.validate()
    except ValueError as e:
        raise UsageError(f"{where}: {e}") from None
    return DeviceEntry(
        spec=spec,
        aliases=tuple(str(a) for a in aliases),
        architecture=data.get("architecture", ""),
        path=where,
        sources={str(k): str(v) for k, v in data["sources"].items()},
        peak_tflops={str(k): float(v) for k, v in peaks.items()},
    )


_KERNEL_FIELDS = ("calibrated", "matmul_efficiency", "fp8_matmul_efficiency", "unaligned_matmul_efficiency", "attention_efficiency", "attention_backward_efficiency",
                  "flash3_efficiency", "cudnn_efficiency", "cudnn_backward_efficiency", "fp8_attention_efficiency", "memory_efficiency",
                  "gemm_memory_efficiency", "gemm_tile_overhead_us", "kernel_floor_us", "stream_floor_us",
                  "alone_kernel_overhead_us", "alone_stream_overhead_us", "sustained_clock_fraction", "sustained_clock_power_w",
                  "softmax_bandwidth_share", "norm_bandwidth_share", "widening_cast_bandwidth_share")


# What a variant of a device (a system file's `device_overrides`, docs/formats/system.md) may
# change: its id and name, and any number, peak or kernel constant of a device file.
VARIANT_KEYS = ("id", "name", *sorted(_NUMBERS), "peak_tflops", "kernel")
_ID = re.compile(r"[a-z0-9_]+")


def parse_variant(base: DeviceEntry, overrides: dict, sources: dict[str, str], where: str) -> DeviceEntry:
    """A variant of the device `base`: the keys of its file with `overrides` in their place (a
    `peak_tflops` or `kernel` mapping replaces only the entries it names; a null value leaves the
    key out, unknown for the variant, as device files leave out what is not known), checked as a
    device file is (`parse_device`). `sources` says where each overridden key's value comes from,
    or why it is unknown; `where` names the overrides in error messages. The variant has no
    aliases."""
    for key in overrides:
        if key not in VARIANT_KEYS:
            raise UsageError(f"{where}: unknown key '{key}' (a variant may set {', '.join(VARIANT_KEYS)})")
    for key in ("id", "name"):
        if key not in overrides:
            raise UsageError(f"{where}: missing '{key}': a variant of {base.spec.id} needs an {key} of its own, "
                             "which reports name")
        fields.text(overrides[key], where, key)
    if not _ID.fullmatch(overrides["id"]):
        raise UsageError(f"{where}: 'id' must be lowercase letters, digits and '_', got {overrides['id']!r}")
    changed = [key for key in overrides if key not in ("id", "name")]
    if not changed:
        raise UsageError(f"{where}: changes none of {base.spec.id}'s figures (give the fields that differ, or "
                         f"name the device itself)")
    for key in changed:
        if key not in sources:
            raise UsageError(f"{where}: '{key}' needs a sources entry saying where its value comes from")
    if not Path(base.path).is_file():
        raise UsageError(f"{where}: {base.spec.id} has no device file to vary ({base.path})")
    data = dict(fields.read_yaml(base.path, "device"))
    merged_sources = dict(data.get("sources") or {})
    for key in changed:
        value = overrides[key]
        if value is None:
            data.pop(key, None)  # a required key left out is reported missing by parse_device
            merged_sources.pop(key, None)
        elif key in ("peak_tflops", "kernel"):
            fields.mapping(value, where, key)
            merged = dict(data.get(key) or {}) | value
            data[key] = {k: v for k, v in merged.items() if v is not None}
            merged_sources.setdefault(key, sources[key])
            merged_sources.update({f"{key}.{sub}": sources[key] for sub in value})
        else:
            data[key] = value
            merged_sources[key] = sources[key]
    data.update(id=overrides["id"], name=overrides["name"], aliases=[], sources=merged_sources)
    data.pop("notes", None)  # the base's notes describe the base
    return replace(parse_device(data, where), variant_of=base)


def _read_kernel_constants(spec: Any, data: dict, where: str) -> None:
    """The optional `kernel:` section: the kernel cost model's sustained fractions and floor."""
    section = data.get("kernel")
    if section is None:
        return
    if not isinstance(section, dict):
        raise UsageError(f"{where}: 'kernel' must be a mapping of {', '.join(_KERNEL_FIELDS)}")
    if "kernel" not in data["sources"]:
        raise UsageError(f"{where}: 'kernel' constants need a 'sources.kernel' entry saying where they come from")
    k = spec.kernel
    for key, value in section.items():
        if key not in _KERNEL_FIELDS:
            raise UsageError(f"{where}: unknown field 'kernel.{key}' (known: {', '.join(_KERNEL_FIELDS)})")
        if key == "calibrated":
            if not isinstance(value, bool):
                raise UsageError(f"{where}: 'kernel.calibrated' must be true or false")
            k.calibrated = value
            continue
        if key.endswith("_us"):
            number = fields.number(value, f"{where}: kernel", key, minimum=0.0, maximum=1e6)
            setattr(k, key.replace("_us", "_s"), number * 1e-6)
            continue
        if key.endswith("_w"):  # a power limit, watts
            setattr(k, key, fields.number(value, f"{where}: kernel", key, minimum=1.0, maximum=1e5))
            continue
        number = fields.number(value, f"{where}: kernel", key)
        if not 1e-6 <= number <= 1:
            raise UsageError(f"{where}: 'kernel.{key}' must be a fraction in [1e-06, 1], got {number}")
        setattr(k, key, number)
    spec.kernel = k


def contents_key(paths: Sequence[str | Path]) -> tuple | None:
    """A key that stays the same while the files at `paths` do (each path as given, the file it
    reaches and its bytes): what was read from them may be kept under it. None where one cannot
    be read (its reader then says why)."""
    key = []
    for path in paths:
        p = Path(path)
        try:
            key.append((str(p), str(p.resolve()), p.read_bytes()))
        except (OSError, RuntimeError):   # missing, unreadable, a symlink loop
            return None
    return tuple(key)


def load_device_file(path: str | Path) -> DeviceEntry:
    """Reads and validates one device file. Errors name the file (and key) in one line."""
    p = Path(path)
    return parse_device(fields.read_yaml(p, "device"), str(p), expected_id=p.stem)


def builtin_device_files() -> list[Path]:
    """The device files shipped with the package, sorted by id."""
    root = importlib.resources.files("accel_sim") / "data" / "devices"
    return sorted(Path(str(p)) for p in root.iterdir() if p.name.endswith(".yaml"))


class DeviceCatalog:
    """The known devices by id and alias; names resolve as in docs/formats/device.md."""

    def __init__(self, entries: list[DeviceEntry]):
        self.entries = list(entries)
        self._by_name: dict[str, DeviceEntry] = {}
        for entry in self.entries:
            names = {normalize_name(entry.spec.id)} | {normalize_name(a) for a in entry.aliases}
            for name in names:
                other = self._by_name.get(name)
                if other is not None and other.spec.id != entry.spec.id:
                    raise UsageError(
                        f"{entry.path}: name '{name}' also names device '{other.spec.id}' ({other.path})"
                    )
                self._by_name[name] = entry

    @classmethod
    def builtin(cls, extra_files: list[str | Path] = ()) -> DeviceCatalog:
        return cls([load_device_file(p) for p in builtin_device_files()] +
                   [load_device_file(p) for p in extra_files])

    def find(self, name: str) -> DeviceEntry | None:
        """The device `name` reaches, or None."""
        return self._by_name.get(normalize_name(name))

    def resolve(self, name: str) -> DeviceEntry:
        entry = self.find(name)
        if entry is None:
            known = ", ".join(sorted(e.spec.id for e in self.entries))
            raise UsageError(f"unknown device '{name}' (known: {known}; or pass --device-file FILE)")
        return entry
