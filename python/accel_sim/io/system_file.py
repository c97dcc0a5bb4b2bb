"""System files (`data/systems/*.yaml`): clusters as data, read into the core's SystemSpec.

A system names its accelerator (a device id; `device_overrides` make it a variant of that device,
its overridden fields checked as a device file's), its nodes, its scale-up domain (bandwidth per
GPU and direction, per-step latency, in-network reduction, switched / mesh / torus / pcie) and its
scale-out NICs, every number with a `sources` entry (docs/formats/system.md); `estimated` lists the fields that are
estimates rather than published figures (reports name them); `measured` lists published
nccl-tests (or rccl-tests) bus bandwidths, which `accel-sim validate` compares with the
collective model.

The fraction of a fabric's bandwidth collectives reach is a calibration constant. A file may set
`collective_efficiency: {scaleup, scaleout, nvls}` (with a `sources.collective_efficiency`
entry); otherwise the defaults below apply, each from one published measurement.
"""

from __future__ import annotations

import functools
import importlib.resources
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Sequence

from accel_sim import _core
from accel_sim.errors import UsageError
from accel_sim.io import fields
from accel_sim.io.device_file import contents_key

# Defaults of the collective efficiencies (nccl-tests measurements, github.com/NVIDIA/nccl-tests/issues):
# - scale-up: ring collectives on H100 NVLink4 reach ~370 of 450 GB/s (nccl-tests#212), 0.82;
# - NVLS all-reduce on DGX H100: 476 GB/s busbw for 8 GPUs (nccl-tests#290) is an algbw of
#   476 x 8/14 = 272 GB/s, 0.60 of the 450 GB/s links;
# - scale-out: a ConnectX-7 400 Gb/s NIC delivers 46-48 of 50 GB/s (nccl-tests#290, #267), 0.94.
DEFAULT_EFFICIENCY = {"scaleup": 0.82, "scaleout": 0.94, "nvls": 0.60}
_EFFICIENCY_SOURCE = ("defaults of accel_sim/io/system_file.py: ring 370/450 GB/s on H100 (nccl-tests#212), "
                      "NVLS 476 GB/s busbw on DGX H100 (nccl-tests#290), ConnectX-7 47/50 GB/s (nccl-tests#290)")
_TOPOLOGIES = ("switched", "mesh", "torus", "pcie")
_KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv")
# The collective libraries whose tuners time collectives inside a scale-up domain (core
# collective.h: CollectiveLibrary); absent: the plain alpha-beta forms.
LIBRARIES = tuple(m.name for m in _core.CollectiveLibrary if m.name != "none")
# The keys a system file and each of its `measured` entries may have (docs/formats/system.md): a
# misspelt one is refused, not ignored.
_TOP = ("id", "name", "device", "device_overrides", "gpus_per_node", "scaleup", "scaleout", "host", "collective_efficiency",
        "collective_library", "collective_launch_us", "measured", "estimated", "sources", "notes")
# The `host` block (core SystemSpec::host): what a training step's offload needs, all three.
_HOST_KEYS = ("memory_gb", "memory_bandwidth_gbs", "link_gbs")
_MEASURED_KEYS = ("collective", "gpus", "algorithm", "busbw_gbs", "bytes", "split", "source")


@dataclass(frozen=True)
class SystemEntry:
    spec: Any  # _core.SystemSpec
    path: str
    topology: str
    scaleout_topology: str
    measured: tuple[dict, ...] = ()
    sources: dict[str, str] = field(default_factory=dict)
    efficiency_source: str = _EFFICIENCY_SOURCE
    estimated: tuple[str, ...] = ()  # fields that are estimates, not published figures
    # The device its `device_overrides` make (a DeviceEntry), or None: the device named by `device`.
    device_variant: Any = None
    device_overrides: tuple[str, ...] = ()  # the fields of the device it overrides


# Ranges of a system file's numbers, in its units. The upper bounds are far beyond any cluster
# (a petabyte per second per link, a second of latency, ten million GPUs in one domain): they catch
# values that are not a system's before they overflow the core's arithmetic. `sweep --vary` and grid
# files hold link_bandwidth_gbs to the bandwidth bounds (accel_sim/design_sweep.py).
MIN_GBS = 1e-6   # a kilobyte per second
MAX_GBS = 1e6
_MAX_LATENCY_US = 1e6
_MAX_GPUS = 10_000_000


def _section(data: dict, key: str, where: str) -> dict:
    if key not in data:
        raise UsageError(f"{where}: missing '{key}'")
    return fields.mapping(data[key], where, key)


def _rate(section: dict, key: str, where: str) -> float:
    """A bandwidth in GB/s: a kilobyte per second (1e-6) to a petabyte per second."""
    if key not in section:
        raise UsageError(f"{where}: missing '{key}'")
    return fields.number(section[key], where, key, minimum=MIN_GBS, maximum=MAX_GBS)


def _latency(section: dict, key: str, where: str) -> float:
    if key not in section:
        raise UsageError(f"{where}: missing '{key}'")
    return fields.number(section[key], where, key, minimum=0.0, maximum=_MAX_LATENCY_US)


def _count(section: dict, key: str, where: str) -> int:
    if key not in section:
        raise UsageError(f"{where}: missing '{key}'")
    return fields.integer(section[key], where, key, minimum=1, maximum=_MAX_GPUS)


def _measured(entries: Any, where: str) -> list[dict]:
    """The `measured:` list: nccl-tests bus bandwidths, each a mapping with its collective, GPUs
    and busbw_gbs (algorithm and source optional; `bytes`, nccl-tests' size, when the figure is
    of one message size rather than the large-message plateau; `split` fit when the system file
    fitted a constant on it, report otherwise)."""
    out = []
    for i, m in enumerate(fields.sequence(entries, where, "measured")):
        at = f"{where}: measured[{i}]"
        fields.mapping(m, where, f"measured[{i}]")
        unknown = sorted(set(map(str, m)) - set(_MEASURED_KEYS))
        if unknown:
            raise UsageError(f"{at}: unknown field '{unknown[0]}' (known: {', '.join(_MEASURED_KEYS)})")
        if m.get("collective") not in _KINDS:
            raise UsageError(f"{at}: unknown collective {m.get('collective')!r} (known: {', '.join(_KINDS)})")
        size = fields.number(m["bytes"], at, "bytes", minimum=1.0, maximum=1e15) if "bytes" in m else None
        out.append({"collective": m["collective"], "gpus": _count(m, "gpus", at),
                    "algorithm": fields.text(m.get("algorithm", "any"), at, "algorithm"),
                    "busbw_gbs": _rate(m, "busbw_gbs", at), "bytes": size,
                    "split": fields.text(m.get("split", "report"), at, "split"),
                    "source": fields.text(m.get("source", ""), at, "source")})
        if out[-1]["split"] not in ("fit", "report"):
            raise UsageError(f"{at}: 'split' must be fit or report, got {out[-1]['split']!r}")
    return out


def _host(section: dict, sources: dict, where: str) -> Any:
    """The `host` block: one node's CPU memory (GB), its CPUs' peak DRAM bandwidth (GB/s) and each
    GPU's host link per direction with every GPU of the node transferring (GB/s), each with its
    `sources.host.<key>` entry."""
    unknown = sorted(set(map(str, section)) - set(_HOST_KEYS))
    if unknown:
        raise UsageError(f"{where}: unknown field '{unknown[0]}' (known: {', '.join(_HOST_KEYS)})")
    h = _core.HostSpec()
    for key in _HOST_KEYS:
        if key not in section:
            raise UsageError(f"{where}: missing '{key}' (offload needs all of {', '.join(_HOST_KEYS)})")
        if f"host.{key}" not in sources:
            raise UsageError(f"{where}: '{key}' needs a 'sources.host.{key}' entry saying where its value comes from")
    h.memory_bytes = fields.number(section["memory_gb"], where, "memory_gb", minimum=1e-3, maximum=1e9) * 1e9
    h.memory_bandwidth_bytes_per_s = _rate(section, "memory_bandwidth_gbs", where) * 1e9
    h.link_bytes_per_s = _rate(section, "link_gbs", where) * 1e9
    return h


_OVERRIDES = "device_overrides"


def _device_variant(data: dict, sources: dict, where: str, device_files: Sequence[str]) -> Any:
    """The DeviceEntry of `device` with the file's `device_overrides` in place of its figures
    (docs/formats/system.md), checked as a device file is."""
    from accel_sim.device import catalog_with
    from accel_sim.io.device_file import VARIANT_KEYS, parse_variant

    overrides = fields.mapping(data[_OVERRIDES], where, _OVERRIDES)
    catalog = catalog_with(device_files)
    try:
        base = catalog.resolve(data["device"])
    except UsageError as e:
        raise UsageError(f"{where}: device: {e}") from None
    prefix = _OVERRIDES + "."
    given = {str(k)[len(prefix):]: str(v) for k, v in sources.items() if str(k).startswith(prefix)}
    for key in overrides:
        if key in VARIANT_KEYS and key not in ("id", "name") and key not in given:
            raise UsageError(f"{where}: '{prefix}{key}' needs a 'sources.{prefix}{key}' entry saying where its "
                             "value comes from")
    variant = parse_variant(base, overrides, given, f"{where}: {_OVERRIDES}")
    taken = catalog.find(variant.spec.id)
    if taken is not None:
        raise UsageError(f"{where}: {_OVERRIDES}: id '{variant.spec.id}' names the device {taken.spec.id} already "
                         "(a variant needs an id of its own)")
    return variant


# System entries by the contents of their file and device files (contents_key): a grid sweep
# resolves the same system at every point, and parsing it and the device file its
# device_overrides vary was nine tenths of a train point's time.
_LOADED: dict[tuple, SystemEntry] = {}
_DOMAINS: dict[tuple, SystemEntry] = {}
_MAX_LOADED = 32


def _kept(cache: dict, key: tuple | None, read: Callable[[], SystemEntry]) -> SystemEntry:
    """cache[key], read first when absent (and not kept when the files cannot be read: key None)."""
    entry = cache.get(key) if key is not None else None
    if entry is None:
        entry = read()
        if key is not None:
            if len(cache) >= _MAX_LOADED:
                cache.clear()
            cache[key] = entry
    return entry


def load_system_file(path: str | Path, device_files: Sequence[str] = ()) -> SystemEntry:
    """Reads and checks one system file; errors name the file and the field in one line.
    `device_files` add to the devices a `device_overrides` section may vary. The entry is read
    once while the files stay the same, and shared: its spec is not to be changed
    (with_scaleup_domain changes a copy)."""
    return _kept(_LOADED, contents_key([path, *device_files]), lambda: _read_system_file(path, device_files))


def _read_system_file(path: str | Path, device_files: Sequence[str]) -> SystemEntry:
    p = Path(path)
    where = str(p)
    data = fields.read_yaml(p, "system")
    if not isinstance(data, dict):
        raise UsageError(f"{p}: a system file is a mapping")
    for key in ("id", "name", "device", "gpus_per_node", "scaleup", "scaleout", "sources"):
        if key not in data:
            raise UsageError(f"{p}: missing '{key}'")
    unknown = sorted(set(map(str, data)) - set(_TOP))
    if unknown:
        raise UsageError(f"{p}: unknown field '{unknown[0]}' (known: {', '.join(_TOP)})")
    up, out, sources = (_section(data, k, where) for k in ("scaleup", "scaleout", "sources"))
    for key in ("id", "name", "device"):
        fields.text(data[key], where, key)
    topology = fields.text(up.get("topology", "switched"), f"{where}: scaleup", "topology")
    if topology not in _TOPOLOGIES:
        raise UsageError(f"{p}: scaleup.topology {topology!r} is not one of {', '.join(_TOPOLOGIES)}")
    s = _core.SystemSpec()
    s.id, s.name, s.device = data["id"], data["name"], data["device"]
    s.gpus_per_node = _count(data, "gpus_per_node", where)
    s.scaleup_domain = _count(up, "domain_size", f"{where}: scaleup")
    efficiency = dict(DEFAULT_EFFICIENCY)
    source = _EFFICIENCY_SOURCE
    if "collective_efficiency" in data:
        if "collective_efficiency" not in sources:
            raise UsageError(f"{p}: 'collective_efficiency' needs a 'sources.collective_efficiency' entry")
        given = fields.mapping(data["collective_efficiency"], where, "collective_efficiency")
        for key, value in given.items():
            if key not in DEFAULT_EFFICIENCY:
                raise UsageError(f"{p}: unknown 'collective_efficiency.{key}' (known: {', '.join(DEFAULT_EFFICIENCY)})")
            efficiency[key] = fields.number(value, f"{where}: collective_efficiency", key, minimum=1e-6, maximum=1.0)
        source = str(sources["collective_efficiency"])
    fabric = _core.Fabric()
    fabric.bandwidth_bytes_per_s = _rate(up, "bandwidth_gbs", f"{where}: scaleup") * 1e9
    fabric.latency_s = _latency(up, "latency_us", f"{where}: scaleup") * 1e-6
    fabric.efficiency = efficiency["scaleup"]
    s.scaleup = fabric
    s.in_network_reduction = fields.boolean(up.get("in_network_reduction", False), f"{where}: scaleup",
                                            "in_network_reduction")
    s.nvls_efficiency = efficiency["nvls"]
    s.mesh = topology == "mesh"
    nic = _core.Fabric()
    nic.bandwidth_bytes_per_s = _rate(out, "nic_bandwidth_gbs", f"{where}: scaleout") * 1e9
    nic.latency_s = _latency(out, "latency_us", f"{where}: scaleout") * 1e-6
    nic.efficiency = efficiency["scaleout"]
    s.scaleout = nic
    if "nics_per_gpu" not in out:
        raise UsageError(f"{where}: scaleout: missing 'nics_per_gpu'")
    s.nics_per_gpu = fields.number(out["nics_per_gpu"], f"{where}: scaleout", "nics_per_gpu", minimum=1e-6, maximum=1e3)
    if "collective_library" in data:
        library = fields.text(data["collective_library"], where, "collective_library")
        if library not in LIBRARIES:
            raise UsageError(f"{p}: 'collective_library' must be one of {', '.join(LIBRARIES)}, got {library!r}")
        s.library = getattr(_core.CollectiveLibrary, library)
    if "collective_launch_us" in data:
        s.launch_s = fields.number(data["collective_launch_us"], where, "collective_launch_us",
                                   minimum=0.0, maximum=1e4) * 1e-6
    for key in ("collective_library", "collective_launch_us"):
        if key in data and key not in sources:
            raise UsageError(f"{p}: '{key}' needs a 'sources.{key}' entry")
    if "host" in data:
        s.host = _host(_section(data, "host", where), sources, f"{where}: host")
    try:
        s.validate()
    except ValueError as e:
        raise UsageError(f"{p}: {e}") from None
    measured = _measured(data.get("measured") or [], where)
    estimated = fields.sequence(data.get("estimated") or [], where, "estimated")
    if any(not isinstance(f, str) or f not in sources for f in estimated):
        raise UsageError(f"{p}: 'estimated' must list fields that have a 'sources' entry saying how they were estimated")
    scaleout_topology = fields.text(out.get("topology", ""), f"{where}: scaleout", "topology")
    variant, overridden = None, ()
    if _OVERRIDES in data:
        variant = _device_variant(data, sources, where, device_files)
        overridden = tuple(k for k in data[_OVERRIDES] if k not in ("id", "name"))
        s.device = variant.spec.id
    return SystemEntry(s, where, topology, scaleout_topology, tuple(measured),
                       {str(k): str(v) for k, v in sources.items()}, source, tuple(estimated), variant, overridden)


@functools.lru_cache(maxsize=1)
def _builtin_systems() -> tuple[SystemEntry, ...]:
    root = Path(str(importlib.resources.files("accel_sim") / "data" / "systems"))
    return tuple(load_system_file(f) for f in sorted(root.glob("*.yaml")))


def builtin_systems() -> list[SystemEntry]:
    """The shipped systems (read once per process)."""
    return list(_builtin_systems())


def resolve_system(name: str, files: Sequence[str] = (), device_files: Sequence[str] = ()) -> SystemEntry:
    """A system by id (dashes or underscores) or a system file path; `device_files` add to the
    devices a system file may vary."""
    if name.endswith((".yaml", ".yml")):
        return load_system_file(name, device_files)
    key = name.strip().lower().replace("-", "_")
    entries = [load_system_file(f, device_files) for f in files] + builtin_systems()
    for e in entries:
        if e.spec.id == key:
            return e
    raise UsageError(f"unknown system '{name}' (known: {', '.join(e.spec.id for e in entries)}); see `accel-sim systems`")


def with_scaleup_domain(entry: SystemEntry, domain: int | None, device_files: Sequence[str] = ()) -> SystemEntry:
    """`entry` with its scale-up domain set to `domain` GPUs (the NERSC study's design question:
    NVLink domains of 4, 8, 64, 72); a fresh copy, the shipped entry is left alone. Each
    domain's NICs then carry its scale-out traffic together (nics_per_gpu x domain)."""
    if domain is None:
        return entry
    if domain < 1:
        raise UsageError(f"--scaleup-domain must be at least 1 (got {domain})")

    def read() -> SystemEntry:
        fresh = _read_system_file(entry.path, device_files)   # a spec of its own: load_system_file's is shared
        fresh.spec.scaleup_domain = domain
        fresh.spec.validate()
        return fresh

    key = contents_key([entry.path, *device_files])
    return _kept(_DOMAINS, (key, domain) if key is not None else None, read)
