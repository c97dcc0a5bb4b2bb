"""`accel-sim systems` and the collective forms of `accel-sim kernel` (allreduce, allgather, ...)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from accel_sim.commands.systems import ALGORITHMS
from accel_sim.report.json_report import SCHEMA_VERSION


def cmd_systems(args: argparse.Namespace) -> int:
    from accel_sim.io.system_file import builtin_systems, load_system_file
    from accel_sim.report.tables import table

    entries = [load_system_file(f) for f in args.system_file] + builtin_systems()
    if args.json:
        print(json.dumps([{"id": e.spec.id, "name": e.spec.name, "device": e.spec.device,
                           "device_variant_of": e.device_variant.variant_of.spec.id if e.device_variant else None,
                           "gpus_per_node": e.spec.gpus_per_node, "scaleup_domain": e.spec.scaleup_domain,
                           "scaleup_gbs": e.spec.scaleup.bandwidth_bytes_per_s / 1e9, "scaleup_topology": e.topology,
                           "in_network_reduction": e.spec.in_network_reduction, "nics_per_gpu": e.spec.nics_per_gpu,
                           "nic_gbs": e.spec.scaleout.bandwidth_bytes_per_s / 1e9, "path": e.path,
                           "collective_library": e.spec.library.name,
                           "collective_launch_us": e.spec.launch_s * 1e6,
                           "estimated_fields": list(e.estimated),
                           "measured": list(e.measured)} for e in entries], indent=1))
        return 0
    print(table(["id", "name", "device", "GPUs/node", "scale-up domain", "GB/s per GPU", "topology", "NVLS",
                 "NICs/GPU", "GB/s per NIC", "library"],
                [(e.spec.id, e.spec.name, e.spec.device, e.spec.gpus_per_node, e.spec.scaleup_domain,
                  f"{e.spec.scaleup.bandwidth_bytes_per_s / 1e9:g}", e.topology,
                  "yes" if e.spec.in_network_reduction else "no", f"{e.spec.nics_per_gpu:g}",
                  f"{e.spec.scaleout.bandwidth_bytes_per_s / 1e9:g}",
                  f"{e.spec.library.name} +{e.spec.launch_s * 1e6:g} µs" if e.spec.library.name != "none" else "alpha-beta")
                 for e in entries],
                [False, False, False, True, True, True, False, False, True, True, False]))
    for e in entries:
        if e.device_variant is not None:
            print(f"  {e.spec.id}: {e.spec.device} is {e.device_variant.variant_of.spec.id} with its own "
                  f"{', '.join(e.device_overrides)} (device_overrides)")
    for e in entries:
        if e.estimated:
            print(f"  {e.spec.id}: {', '.join(e.estimated)} estimated, not published (see its sources)")
    return 0


def cmd_stacks(args: argparse.Namespace) -> int:
    """The shipped stacks (and any --stack-file): what each runs, the default marked."""
    from accel_sim.io.stack_file import DEFAULT_STACK, builtin_stacks, load_stack_file
    from accel_sim.report.tables import table

    loaded = [load_stack_file(f) for f in args.stack_file] + builtin_stacks()
    entries = [e for e in loaded if e.kind == "training"]
    engines = [e for e in loaded if e.kind == "serving"]

    def by_architecture(a: dict) -> str:
        return ", ".join(f"{k}: {v}" for k, v in sorted(a.items(), key=lambda kv: kv[0] == "default"))

    def attention(e: Any) -> str:
        return by_architecture(e.training.attention)

    def host_us(e: Any) -> float | None:
        return e.host_overhead_per_kernel_s * 1e6 or None

    if args.json:
        print(json.dumps({"schema": "accel-sim/stacks", "schema_version": SCHEMA_VERSION, "stacks": [
                          {"id": e.id, "name": e.name, "version": e.version, "default": e.id == DEFAULT_STACK,
                           "attention": dict(e.training.attention),
                           "gated_activation": "fused" if e.training.fused_gated_activation else "unfused",
                           "fp8": e.training.fp8, "optimizer": e.training.optimizer_impl, "lora": e.training.lora, "zero": e.training.zero, "zero_stages": list(e.training.zero_stages),
                           "tensor_parallel": e.training.tensor_parallel,
                           "pipeline_parallel": e.training.pipeline_parallel,
                           "context_parallel": e.training.context_parallel,
                           "host_overhead_per_kernel_us": host_us(e),
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
                           "host_overhead_per_kernel_us": host_us(e), "path": e.path} for e in engines]}, indent=1))
        return 0
    print(table(["id", "version", "attention", "SwiGLU", "fp8", "AdamW", "LoRA", "ZeRO", "TP/PP/CP", "host µs/kernel"],
                [(e.id + (" (default)" if e.id == DEFAULT_STACK else ""), e.version, attention(e),
                  "fused" if e.training.fused_gated_activation else "unfused", e.training.fp8,
                  e.training.optimizer_impl, e.training.lora, f"{e.training.zero} of {'/'.join(map(str, e.training.zero_stages))}",
                  "/".join("yes" if f else "no" for f in (e.training.tensor_parallel, e.training.pipeline_parallel,
                                                           e.training.context_parallel)),
                  f"{e.host_overhead_per_kernel_s * 1e6:g}" if e.host_overhead_per_kernel_s else "device's")
                 for e in entries],
                [False, False, False, False, False, False, False, False, False, True]))
    if engines:
        print("\n  serving engines (serve --stack)")
        print(table(["id", "version", "prefill attention", "decode KV reads", "CUDA graphs", "scheduler", "max seqs",
                     "tokens/step", "own all-reduce"],
                    [(e.id, e.version, by_architecture(e.serving.prefill_attention),
                      by_architecture(e.serving.decode_attention).replace("per_query_head", "per query head"),
                      "yes" if e.serving.cuda_graphs else "no", e.serving.scheduler,
                      f"{e.serving.max_seqs:,}" if e.serving.max_seqs else "serve's",
                      f"{(e.serving.max_batched_tokens or e.serving.chunk):,}"
                      if (e.serving.max_batched_tokens or e.serving.chunk) else "serve's",
                      by_architecture({k: "yes" if v else "no" for k, v in e.serving.custom_allreduce.items()}))
                     for e in engines],
                    [False, False, False, False, False, False, True, True, False]))
    print("\n  each choice's source: the stack file's `sources` (python/accel_sim/data/stacks/, docs/formats/stack.md)")
    return 0
