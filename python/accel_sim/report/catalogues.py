"""What the catalogue commands print: `devices`, `models`, `systems` and `stacks`, as tables and
JSON (docs/formats/report.md), from the entries the io readers return."""

from __future__ import annotations

from typing import Any

from accel_sim.report.json_report import SCHEMA_VERSION
from accel_sim.report.tables import table


def systems_json(entries: list) -> list:
    """`systems --json`: one object per system entry (io/system_file.py)."""
    return [{"id": e.spec.id, "name": e.spec.name, "device": e.spec.device,
            "device_variant_of": e.device_variant.variant_of.spec.id if e.device_variant else None,
            "gpus_per_node": e.spec.gpus_per_node, "scaleup_domain": e.spec.scaleup_domain,
            "scaleup_gbs": e.spec.scaleup.bandwidth_bytes_per_s / 1e9, "scaleup_topology": e.topology,
            "in_network_reduction": e.spec.in_network_reduction, "nics_per_gpu": e.spec.nics_per_gpu,
            "nic_gbs": e.spec.scaleout.bandwidth_bytes_per_s / 1e9, "path": e.path,
            "collective_library": e.spec.library.name,
            "collective_launch_us": e.spec.launch_s * 1e6,
            "host": {"memory_gb": e.spec.host.memory_bytes / 1e9,
                     "memory_bandwidth_gbs": e.spec.host.memory_bandwidth_bytes_per_s / 1e9,
                     "link_gbs": e.spec.host.link_bytes_per_s / 1e9} if e.spec.host.given() else None,
            "estimated_fields": list(e.estimated),
            "measured": list(e.measured)} for e in entries]


def systems_text(entries: list) -> str:
    """`systems`'s table, with the device variants and the estimated fields named."""
    rows = [(e.spec.id, e.spec.name, e.spec.device, e.spec.gpus_per_node, e.spec.scaleup_domain,
             f"{e.spec.scaleup.bandwidth_bytes_per_s / 1e9:g}", e.topology,
             "yes" if e.spec.in_network_reduction else "no", f"{e.spec.nics_per_gpu:g}",
             f"{e.spec.scaleout.bandwidth_bytes_per_s / 1e9:g}",
             f"{e.spec.library.name} +{e.spec.launch_s * 1e6:g} µs" if e.spec.library.name != "none" else "alpha-beta",
             f"{e.spec.host.memory_bytes / 1e9:,.0f} GB, {e.spec.host.link_bytes_per_s / 1e9:g} GB/s"
             if e.spec.host.given() else "-")
            for e in entries]
    lines = [table(["id", "name", "device", "GPUs/node", "scale-up domain", "GB/s per GPU", "topology", "NVLS",
                    "NICs/GPU", "GB/s per NIC", "library", "host (offload)"], rows,
                   [False, False, False, True, True, True, False, False, True, True, False, False])]
    lines += [f"  {e.spec.id}: {e.spec.device} is {e.device_variant.variant_of.spec.id} with its own "
              f"{', '.join(e.device_overrides)} (device_overrides)" for e in entries if e.device_variant is not None]
    lines += [f"  {e.spec.id}: {', '.join(e.estimated)} estimated, not published (see its sources)"
              for e in entries if e.estimated]
    return "\n".join(lines)


def _by_architecture(a: dict) -> str:
    return ", ".join(f"{k}: {v}" for k, v in sorted(a.items(), key=lambda kv: kv[0] == "default"))


def _host_us(e: Any) -> float | None:
    return e.host_overhead_per_kernel_s * 1e6 or None


def stacks_json(entries: list, engines: list, default: str) -> dict:
    """`stacks --json`: the training stacks (`default` marked) and the serving engines."""
    return {"schema": "accel-sim/stacks", "schema_version": SCHEMA_VERSION, "stacks": [
                      {"id": e.id, "name": e.name, "version": e.version, "default": e.id == default,
                       "attention": dict(e.training.attention),
                       "gated_activation": "fused" if e.training.fused_gated_activation else "unfused",
                       "fp8": e.training.fp8, "optimizer": e.training.optimizer_impl, "lora": e.training.lora, "zero": e.training.zero, "zero_stages": list(e.training.zero_stages),
                       "tensor_parallel": e.training.tensor_parallel,
                       "pipeline_parallel": e.training.pipeline_parallel,
                       "context_parallel": e.training.context_parallel,
                       "host_overhead_per_kernel_us": _host_us(e),
                       "path": e.path} for e in entries],
                      "serving_stacks": [
                      {"id": e.id, "name": e.name, "version": e.version,
                       "prefill_attention": dict(e.serving.prefill_attention),
                       "decode_attention": dict(e.serving.decode_attention),
                       "cuda_graphs": e.serving.cuda_graphs, "scheduler": e.serving.scheduler,
                       "max_seqs": e.serving.max_seqs, "max_batched_tokens": e.serving.max_batched_tokens,
                       "chunk": e.serving.chunk, "block_size": e.serving.block_size,
                       "gpu_memory_utilization": e.serving.gpu_memory_utilization,
                       "custom_allreduce": dict(e.serving.custom_allreduce),
                       "host_overhead_per_kernel_us": _host_us(e), "path": e.path} for e in engines]}


def stacks_text(entries: list, engines: list, default: str) -> str:
    """`stacks`'s tables: the training stacks, then the serving engines."""
    rows = [(e.id + (" (default)" if e.id == default else ""), e.version, _by_architecture(e.training.attention),
             "fused" if e.training.fused_gated_activation else "unfused", e.training.fp8,
             e.training.optimizer_impl, e.training.lora,
             f"{e.training.zero} of {'/'.join(map(str, e.training.zero_stages))}",
             "/".join("yes" if f else "no" for f in (e.training.tensor_parallel, e.training.pipeline_parallel,
                                                      e.training.context_parallel)),
             f"{e.host_overhead_per_kernel_s * 1e6:g}" if e.host_overhead_per_kernel_s else "device's")
            for e in entries]
    lines = [table(["id", "version", "attention", "SwiGLU", "fp8", "AdamW", "LoRA", "ZeRO", "TP/PP/CP",
                    "host µs/kernel"], rows, [False] * 9 + [True])]
    if engines:
        rows = [(e.id, e.version, _by_architecture(e.serving.prefill_attention),
                 _by_architecture(e.serving.decode_attention).replace("per_query_head", "per query head"),
                 "yes" if e.serving.cuda_graphs else "no", e.serving.scheduler,
                 f"{e.serving.max_seqs:,}" if e.serving.max_seqs else "serve's",
                 f"{(e.serving.max_batched_tokens or e.serving.chunk):,}"
                 if (e.serving.max_batched_tokens or e.serving.chunk) else "serve's",
                 _by_architecture({k: "yes" if v else "no" for k, v in e.serving.custom_allreduce.items()}))
                for e in engines]
        lines += ["\n  serving engines (serve --stack)",
                  table(["id", "version", "prefill attention", "decode KV reads", "CUDA graphs", "scheduler",
                         "max seqs", "tokens/step", "own all-reduce"], rows,
                        [False, False, False, False, False, False, True, True, False])]
    lines.append("\n  each choice's source: the stack file's `sources` (python/accel_sim/data/stacks/, docs/formats/stack.md)")
    return "\n".join(lines)


def devices_json(devices: list) -> list:
    """`devices --json`: one object per device (accel_sim.device.Device)."""
    return [{"id": d.spec.id, "name": d.spec.name, "vendor": d.spec.vendor, "aliases": list(d.entry.aliases),
             "memory_bytes": d.spec.memory_bytes, "memory_bandwidth_bytes_per_s": d.spec.memory_bandwidth_bytes_per_s,
             "peak_tflops": d.entry.peak_tflops, "kernel_launch_overhead_s": d.spec.kernel_launch_overhead_s,
             "price_usd_per_hour": d.spec.price_usd_per_hour or None, "file": d.entry.path} for d in devices]


def devices_catalogue_text(devices: list) -> str:
    """`devices`'s table and its footnote."""
    from accel_sim.report.tables import devices_text

    return devices_text(devices) + f"\n\n  {len(devices)} devices · peaks are dense TFLOP/s · sources in each device file"


def models_text(rows: list[dict]) -> str:
    """`models`'s table of the shipped model configs (`models --json` prints the rows themselves)."""
    return (table(["id", "family", "params", "--model", "aliases"],
                  [(r["id"], r["family"], f"{r['parameters'] / 1e9:,.2f} B" if r["parameters"] else "-",
                    "yes" if r["builder"] else "capture", ", ".join(r["aliases"])) for r in rows],
                  [False, False, True, False, False])
            + f"\n\n  {len(rows)} models · '--model' = the C++ builder supports the family; others need a script (capture)")
