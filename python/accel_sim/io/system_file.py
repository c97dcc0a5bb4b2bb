"""System files (`data/systems/*.yaml`): clusters as data, read into the core's SystemSpec.

A system names its accelerator (a device id), its nodes, its scale-up domain (bandwidth per GPU
and direction, per-step latency, in-network reduction, switched / mesh / torus / pcie) and its
scale-out NICs, every number with a `sources` entry; `estimated` lists the fields that are
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
from typing import Any

from accel_sim import _core
from accel_sim.errors import UsageError
from accel_sim.io.device_file import read_yaml_file

# Defaults of the collective efficiencies (../shared/reference/costmodel.md sec. 6.5):
# - scale-up: ring collectives on H100 NVLink4 reach ~370 of 450 GB/s (nccl-tests#212), 0.82;
# - NVLS all-reduce on DGX H100: 476 GB/s busbw for 8 GPUs (nccl-tests#290) is an algbw of
#   476 x 8/14 = 272 GB/s, 0.60 of the 450 GB/s links;
# - scale-out: a ConnectX-7 400 Gb/s NIC delivers 46-48 of 50 GB/s (nccl-tests#290, #267), 0.94.
DEFAULT_EFFICIENCY = {"scaleup": 0.82, "scaleout": 0.94, "nvls": 0.60}
_EFFICIENCY_SOURCE = ("defaults of accel_sim/io/system_file.py: ring 370/450 GB/s on H100 (nccl-tests#212), "
                      "NVLS 476 GB/s busbw on DGX H100 (nccl-tests#290), ConnectX-7 47/50 GB/s (nccl-tests#290)")
_TOPOLOGIES = ("switched", "mesh", "torus", "pcie")
_KINDS = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all", "broadcast", "send_recv")


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


def _number(section: dict, key: str, where: str, minimum: float = 0.0) -> float:
    value = section.get(key)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise UsageError(f"{where}: '{key}' must be a number, got {value!r}")
    if value < minimum:
        raise UsageError(f"{where}: '{key}' must be at least {minimum}, got {value}")
    return float(value)


def load_system_file(path: str | Path) -> SystemEntry:
    """Reads and checks one system file; errors name the file and the field in one line."""
    p = Path(path)
    data = read_yaml_file(p, "system")
    if not isinstance(data, dict):
        raise UsageError(f"{p}: a system file is a mapping")
    for key in ("id", "name", "device", "gpus_per_node", "scaleup", "scaleout", "sources"):
        if key not in data:
            raise UsageError(f"{p}: missing '{key}'")
    up, out, sources = data["scaleup"], data["scaleout"], data["sources"]
    if not isinstance(up, dict) or not isinstance(out, dict) or not isinstance(sources, dict):
        raise UsageError(f"{p}: 'scaleup', 'scaleout' and 'sources' must be mappings")
    topology = str(up.get("topology", "switched"))
    if topology not in _TOPOLOGIES:
        raise UsageError(f"{p}: scaleup.topology {topology!r} is not one of {', '.join(_TOPOLOGIES)}")
    s = _core.SystemSpec()
    s.id, s.name, s.device = str(data["id"]), str(data["name"]), str(data["device"])
    s.gpus_per_node = int(_number(data, "gpus_per_node", str(p), 1))
    s.scaleup_domain = int(_number(up, "domain_size", f"{p}: scaleup", 1))
    efficiency = dict(DEFAULT_EFFICIENCY)
    source = _EFFICIENCY_SOURCE
    if "collective_efficiency" in data:
        if "collective_efficiency" not in sources:
            raise UsageError(f"{p}: 'collective_efficiency' needs a 'sources.collective_efficiency' entry")
        efficiency.update({k: float(v) for k, v in data["collective_efficiency"].items()})
        source = str(sources["collective_efficiency"])
    fabric = _core.Fabric()
    fabric.bandwidth_bytes_per_s = _number(up, "bandwidth_gbs", f"{p}: scaleup") * 1e9
    fabric.latency_s = _number(up, "latency_us", f"{p}: scaleup") * 1e-6
    fabric.efficiency = efficiency["scaleup"]
    s.scaleup = fabric
    s.in_network_reduction = bool(up.get("in_network_reduction", False))
    s.nvls_efficiency = efficiency["nvls"]
    s.mesh = topology == "mesh"
    nic = _core.Fabric()
    nic.bandwidth_bytes_per_s = _number(out, "nic_bandwidth_gbs", f"{p}: scaleout") * 1e9
    nic.latency_s = _number(out, "latency_us", f"{p}: scaleout") * 1e-6
    nic.efficiency = efficiency["scaleout"]
    s.scaleout = nic
    s.nics_per_gpu = _number(out, "nics_per_gpu", f"{p}: scaleout")
    try:
        s.validate()
    except ValueError as e:
        raise UsageError(f"{p}: {e}") from None
    measured = []
    for i, m in enumerate(data.get("measured") or []):
        if m.get("collective") not in _KINDS:
            raise UsageError(f"{p}: measured[{i}]: unknown collective {m.get('collective')!r}")
        measured.append({"collective": m["collective"], "gpus": int(m["gpus"]),
                         "algorithm": str(m.get("algorithm", "any")), "busbw_gbs": float(m["busbw_gbs"]),
                         "source": str(m.get("source", ""))})
    estimated = data.get("estimated") or []
    if not isinstance(estimated, list) or any(str(f) not in sources for f in estimated):
        raise UsageError(f"{p}: 'estimated' must list fields that have a 'sources' entry saying how they were estimated")
    return SystemEntry(s, str(p), topology, str(out.get("topology", "")), tuple(measured),
                       {str(k): str(v) for k, v in sources.items()}, source, tuple(str(f) for f in estimated))


@functools.lru_cache(maxsize=1)
def _builtin_systems() -> tuple[SystemEntry, ...]:
    root = Path(str(importlib.resources.files("accel_sim") / "data" / "systems"))
    return tuple(load_system_file(f) for f in sorted(root.glob("*.yaml")))


def builtin_systems() -> list[SystemEntry]:
    """The shipped systems (read once per process)."""
    return list(_builtin_systems())


def resolve_system(name: str, files: list[str] = ()) -> SystemEntry:
    """A system by id (dashes or underscores) or a system file path."""
    if name.endswith((".yaml", ".yml")):
        return load_system_file(name)
    key = name.strip().lower().replace("-", "_")
    entries = [load_system_file(f) for f in files] + builtin_systems()
    for e in entries:
        if e.spec.id == key:
            return e
    raise UsageError(f"unknown system '{name}' (known: {', '.join(e.spec.id for e in entries)}); see `accel-sim systems`")


def with_scaleup_domain(entry: SystemEntry, domain: int | None) -> SystemEntry:
    """`entry` with its scale-up domain set to `domain` GPUs (the NERSC study's design question:
    NVLink domains of 4, 8, 64, 72); a fresh copy, the shipped entry is left alone. Each
    domain's NICs then carry its scale-out traffic together (nics_per_gpu x domain)."""
    if domain is None:
        return entry
    if domain < 1:
        raise UsageError(f"--scaleup-domain must be at least 1 (got {domain})")
    fresh = load_system_file(entry.path)
    fresh.spec.scaleup_domain = domain
    fresh.spec.validate()
    return fresh
