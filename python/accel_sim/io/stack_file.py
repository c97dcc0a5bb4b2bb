"""Stack files (`data/stacks/*.yaml`): what a training framework or a serving engine really
runs, as data.

The same model on the same GPUs runs at a different speed and in a different amount of memory
under Megatron-Core, torchtitan, llm-foundry, DeepSpeed or HF Accelerate: each picks its own
attention kernel, fuses (or not) the gated FFN's activation, overlaps (or not) its tensor-parallel
communication, shards its data-parallel states its own way and keeps its gradients in its own
dtype. A stack file names those choices, each with the source (a repository file at a tag, a
document) it is read from; `train` and `plan` take `--stack NAME|FILE` and apply it to the
options of the run, and every report names the stack and its version. Format:
docs/formats/stack.md.

The stack's choices are the run's defaults; a flag typed on the command line (--attention-impl,
--zero, --no-tp-overlap, --no-overlap) wins over them. A layout the stack cannot run (pipeline
stages under a framework without pipeline parallelism, a ZeRO stage it does not implement) is
refused, and `plan` searches only what the stack can run.

A serving stack (`kind: serving`: vLLM, SGLang, TensorRT-LLM, gpt-fast) names the prefill and
decode attention kernels an engine runs, whether its steps replay CUDA graphs, and its scheduler's
defaults (policy, running-sequence cap, token budget, KV block size, memory fraction); `serve`
takes `--stack` and a flag typed on the command line wins over the stack's value.
"""

from __future__ import annotations

import functools
import importlib.resources
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from accel_sim import _core
from accel_sim.errors import UsageError
from accel_sim.io import fields

# The stack `train` and `plan` run when --stack is not given: Megatron-Core as NeMo's performance
# recipes configure it, the stack the calibration set's training runs were measured on.
DEFAULT_STACK = "megatron-core"
# The attention kernels, as the core names them (AttentionImpl): the one list the flags, the stack
# and the validation rows take theirs from.
ATTENTION_KERNELS = tuple(m.name for m in _core.AttentionImpl)
FP8_RECIPES = ("transformer-engine", "torchao", "none")
# How the stack's AdamW/Adam/SGD step runs, as the core names it (OptimizerImpl).
OPTIMIZER_IMPLS = tuple(m.name for m in _core.OptimizerImpl)
# How the LM loss runs (builder.h CrossEntropy).
CROSS_ENTROPY = tuple(m.name for m in _core.CrossEntropy)
# How the stack lays out LoRA adapters (BuildOptions::lora_shared_input), or none when it has none.
LORA_LAYOUTS = ("fused", "per_projection", "none")
# What `--recompute selective` runs under the stack (the core's Recompute): Megatron-LM's
# checkpointed attention core, torchtitan's op-level policy, or none (the stack has no selective
# recomputation and the flag is refused).
SELECTIVE_RECOMPUTE = {"attention": "selective", "op": "selective_op", "none": None}
# The recompute policies the flags name: the stack decides what `selective` runs.
RECOMPUTE_POLICIES = ("none", "selective", "full")
_TRAINING_FIELDS = {
    "attention": "a mapping of sm_NN (or default) to an attention kernel",
    "gated_activation": "fused or unfused",
    "norm": "how its RMSNorm runs: fused (one kernel each way) or eager (the op sequence)",
    "cross_entropy": "upcast, fused or vocab_parallel",
    "tp_comm_overlap": "true or false, or a mapping of sm_NN (or default) to true or false",
    "fp8": "the fp8 recipe (transformer-engine, torchao or none)",
    "fp8_weight_cache": "true or false",
    "fp8_parameters": "true or false",
    "gradient_dtype": "fp32 or weight",
    "optimizer": "how its AdamW runs: fused, foreach or for_loop",
    "lora": "its LoRA adapters: fused (one per fused projection), per_projection or none",
    "selective_recompute": "what --recompute selective runs: attention (the core attention), op (op-level SAC) or none",
    "zero": "the default ZeRO stage",
    "zero_stages": "the ZeRO stages the stack runs",
    "tensor_parallel": "true or false",
    "pipeline_parallel": "true or false",
    "context_parallel": "true or false",
    "summa": "true or false: 2D SUMMA tensor parallelism on the TP x CP grid (core BuildOptions::summa)",
    "overlap_grad_reduce": "true or false",
    "overlap_param_gather": "true or false",
    "offload": "what it can offload to host memory: a list of optimizer, parameters, activations, or "
               "optimizer+parameters where the two go only together",
}
# What a training stack may offload (core ParallelLayout::offload_*), and a pair that goes together.
OFFLOAD_KINDS = ("optimizer", "parameters", "activations")
_OFFLOAD_ENTRIES = OFFLOAD_KINDS + ("optimizer+parameters",)
# The optional `runtime` section: how the stack issues kernels, whatever it runs.
_RUNTIME_FIELDS = {
    "host_overhead_per_kernel_us": "the host's microseconds to issue one kernel (Python, dispatcher, launch)",
}
# The `serving` section of a serving engine's stack.
_SERVING_FIELDS = {
    "prefill_attention": "a mapping of sm_NN (or default) to the prefill attention kernel",
    "decode_attention": "a mapping of sm_NN (or default) to grouped or per_query_head",
    "cuda_graphs": "true or false",
    "scheduler": "the scheduling policy (vllm, sarathi, orca or static)",
    "max_seqs": "the running-sequence cap",
    "max_batched_tokens": "the token budget of a step (vllm and orca)",
    "chunk": "the token budget of a chunked-prefill step (sarathi)",
    "block_size": "tokens per KV-cache block",
    "gpu_memory_utilization": "the fraction of device memory the engine takes",
    "custom_allreduce": "true or false, or a mapping of sm_NN / gfxNNN (or default) to true or false: TP all-reduces "
                        "up to 1 MiB on the engine's own one-shot kernel",
}
# Required; the scheduler's limits, block size and memory fraction are optional (absent: serve's
# defaults), as engines differ in which they fix.
_SERVING_REQUIRED = ("prefill_attention", "decode_attention", "cuda_graphs", "scheduler")
# How a decode kernel reads a grouped-query model's KV cache (ReplicaConfig.decode_kv_per_query_head).
DECODE_ATTENTION = ("grouped", "per_query_head")
SCHEDULERS = ("vllm", "sarathi", "orca", "static")
KINDS = ("training", "serving")
_TOP = {"id", "name", "version", "kind", "extends", "training", "serving", "runtime", "sources", "notes"}
# Sections an `extends` file merges key by key over its base's (the rest it states itself).
_MERGED = ("training", "serving", "runtime", "sources")


@dataclass(frozen=True)
class TrainingStack:
    attention: dict[str, str]
    fused_gated_activation: bool
    eager_norm: bool
    cross_entropy: str  # builder.h CrossEntropy: upcast, fused or vocab_parallel
    tp_comm_overlap: dict[str, bool]
    fp8: str
    fp8_weight_cache: bool
    fp8_parameters: bool
    gradients_in_weight_dtype: bool
    optimizer_impl: str
    lora: str  # LORA_LAYOUTS
    selective_recompute: str  # SELECTIVE_RECOMPUTE
    zero: int
    zero_stages: tuple[int, ...]
    tensor_parallel: bool
    pipeline_parallel: bool
    context_parallel: bool
    summa: bool
    overlap_grad_reduce: bool
    overlap_param_gather: bool
    # What it offloads (OFFLOAD_KINDS), each entry a set that goes together.
    offload: tuple[frozenset[str], ...] = ()

    def offload_sets(self) -> list[frozenset[str]]:
        """Every set of OFFLOAD_KINDS the stack can offload at once (unions of its entries), the empty
        set first."""
        sets = {frozenset()}
        for entry in self.offload:
            sets |= {s | entry for s in sets}
        return sorted(sets, key=lambda s: (len(s), sorted(s)))

    def attention_for(self, architecture: str) -> str:
        """The attention kernel the stack runs on a device whose `architecture` names its
        compute capability (sm_90), or its default."""
        return _for_architecture(self.attention, architecture)

    def fp8_recipe_in_core(self) -> str:
        """The stack's fp8 recipe as the core names it (builder.h Fp8Recipe); Transformer Engine's
        where it has none (fp8 GEMMs are refused there, so the choice builds nothing)."""
        return "torchao" if self.fp8 == "torchao" else "transformer_engine"

    def optimizer_impl_for(self, optimizer: str) -> str:
        """How the stack runs `optimizer` (OptimizerImpl's name): its own implementation for
        torch.optim's AdamW, Adam and SGD; Adafactor and 8-bit Adam run their own kernels (fused)."""
        return self.optimizer_impl if optimizer in ("adamw", "adam", "sgd") else "fused"

    def recompute_for(self, policy: str) -> Any:
        """The core's Recompute for the flags' `policy` (RECOMPUTE_POLICIES) under this stack:
        `selective` is what the stack's selective recomputation checkpoints; None when the stack
        has none."""
        if policy not in RECOMPUTE_POLICIES:
            raise UsageError(f"unknown recompute policy {policy!r} (known: {', '.join(RECOMPUTE_POLICIES)})")
        name = SELECTIVE_RECOMPUTE[self.selective_recompute] if policy == "selective" else policy
        return None if name is None else getattr(_core.Recompute, name)

    def tp_comm_overlap_for(self, architecture: str) -> bool:
        """Whether the stack overlaps TP collectives with their GEMMs on a device of
        `architecture`, or by its default."""
        return _for_architecture(self.tp_comm_overlap, architecture)


def _for_architecture(choices: dict, architecture: str) -> Any:
    """The entry of `choices` for the compute capability `architecture` names (sm_90), or the
    default entry."""
    m = re.search(r"\b(sm_\d+|gfx\d+[a-z]?)\b", architecture or "")
    if m and m.group(1) in choices:
        return choices[m.group(1)]
    return choices["default"]


def _per_architecture(value: Any, at: str, name: str, check) -> dict:
    """A choice given once (`default`) or per compute capability (NVIDIA sm_NN, AMD gfxNNN):
    {sm_90: x, gfx942: y, default: z}."""
    if not isinstance(value, dict):
        return {"default": check(value, name)}
    for arch in value:
        if arch != "default" and not re.fullmatch(r"sm_\d+|gfx\d+[a-z]?", str(arch)):
            raise UsageError(f"{at}: '{name}' keys are sm_NN, gfxNNN or default, got {arch!r}")
    if "default" not in value:
        raise UsageError(f"{at}: '{name}' needs a default")
    return {arch: check(v, f"{name}.{arch}") for arch, v in value.items()}


@dataclass(frozen=True)
class ServingStack:
    prefill_attention: dict[str, str]
    decode_attention: dict[str, str]
    cuda_graphs: bool
    scheduler: str
    # None where the stack leaves serve's default.
    max_seqs: int | None
    max_batched_tokens: int | None  # vllm and orca
    chunk: int | None  # sarathi
    block_size: int | None
    gpu_memory_utilization: float | None
    # Per architecture; absent: the collective library's all-reduce everywhere.
    custom_allreduce: dict[str, bool] = field(default_factory=lambda: {"default": False})

    def prefill_attention_for(self, architecture: str) -> str:
        return _for_architecture(self.prefill_attention, architecture)

    def engine_for(self, architecture: str) -> dict:
        """What the engine runs on a device of `architecture`, as serve reports it and
        configure_engine applies it."""
        return {"prefill_attention": self.prefill_attention_for(architecture),
                "decode_attention": _for_architecture(self.decode_attention, architecture),
                "cuda_graphs": self.cuda_graphs,
                "custom_allreduce": _for_architecture(self.custom_allreduce, architecture)}


def configure_engine(options: Any, replica: Any, engine: dict, host_overhead_per_kernel_s: float) -> None:
    """Sets a serving replica's cost options (`_core.SimulateOptions`) and its decode kernel
    (`_core.ReplicaConfig`) to what `engine` (ServingStack.engine_for's keys) runs."""
    options.cost.cuda_graphs = engine["cuda_graphs"]
    options.cost.attention_impl = getattr(_core.AttentionImpl, engine["prefill_attention"])
    options.cost.host_overhead_per_kernel_s = host_overhead_per_kernel_s
    replica.decode_kv_per_query_head = engine["decode_attention"] == "per_query_head"
    replica.custom_allreduce = engine.get("custom_allreduce", False)


@dataclass(frozen=True)
class StackEntry:
    id: str
    name: str
    version: str
    path: str
    training: TrainingStack | None  # kind training
    serving: ServingStack | None = None  # kind serving
    sources: dict[str, str] = field(default_factory=dict)
    notes: str = ""
    # runtime.host_overhead_per_kernel_us in seconds; 0: the device's bare launch cost.
    host_overhead_per_kernel_s: float = 0.0

    @property
    def kind(self) -> str:
        return "serving" if self.serving is not None else "training"

    def as_dict(self) -> dict:
        return {"id": self.id, "name": self.name, "version": self.version}


def _training(data: Any, where: str, sources: dict[str, str]) -> TrainingStack:
    t = fields.mapping(data, where, "training")
    unknown = sorted(set(t) - set(_TRAINING_FIELDS))
    if unknown:
        raise UsageError(f"{where}: unknown field 'training.{unknown[0]}' (known: {', '.join(_TRAINING_FIELDS)})")
    missing = [k for k in _TRAINING_FIELDS if k not in t]
    if missing:
        raise UsageError(f"{where}: 'training' lacks {', '.join(missing)}")
    unsourced = [k for k in _TRAINING_FIELDS if f"training.{k}" not in sources]
    if unsourced:
        raise UsageError(f"{where}: 'sources' names no source for training.{unsourced[0]} "
                         "(every choice of a stack names where it is read from)")
    at = f"{where}: training"
    def kernel(value: Any, name: str) -> str:
        if value not in ATTENTION_KERNELS:
            raise UsageError(f"{at}: '{name}' must be one of {', '.join(ATTENTION_KERNELS)}, got {value!r}")
        return value

    attention = _per_architecture(fields.mapping(t["attention"], at, "attention"), at, "attention", kernel)
    tp_overlap = _per_architecture(t["tp_comm_overlap"], at, "tp_comm_overlap",
                                   lambda v, name: fields.boolean(v, at, name))
    gated = fields.text(t["gated_activation"], at, "gated_activation")
    if gated not in ("fused", "unfused"):
        raise UsageError(f"{at}: 'gated_activation' must be fused or unfused, got {gated!r}")
    norm = fields.text(t["norm"], at, "norm")
    if norm not in ("fused", "eager"):
        raise UsageError(f"{at}: 'norm' must be fused or eager, got {norm!r}")
    loss = fields.text(t["cross_entropy"], at, "cross_entropy")
    if loss not in CROSS_ENTROPY:
        raise UsageError(f"{at}: 'cross_entropy' must be one of {', '.join(CROSS_ENTROPY)}, got {loss!r}")
    fp8 = fields.text(t["fp8"], at, "fp8")
    if fp8 not in FP8_RECIPES:
        raise UsageError(f"{at}: 'fp8' must be one of {', '.join(FP8_RECIPES)}, got {fp8!r}")
    grads = fields.text(t["gradient_dtype"], at, "gradient_dtype")
    if grads not in ("fp32", "weight"):
        raise UsageError(f"{at}: 'gradient_dtype' must be fp32 or weight, got {grads!r}")
    optimizer = fields.text(t["optimizer"], at, "optimizer")
    if optimizer not in OPTIMIZER_IMPLS:
        raise UsageError(f"{at}: 'optimizer' must be one of {', '.join(OPTIMIZER_IMPLS)}, got {optimizer!r}")
    lora = fields.text(t["lora"], at, "lora")
    if lora not in LORA_LAYOUTS:
        raise UsageError(f"{at}: 'lora' must be one of {', '.join(LORA_LAYOUTS)}, got {lora!r}")
    selective = fields.text(t["selective_recompute"], at, "selective_recompute")
    if selective not in SELECTIVE_RECOMPUTE:
        raise UsageError(f"{at}: 'selective_recompute' must be one of {', '.join(SELECTIVE_RECOMPUTE)}, got {selective!r}")
    stages = tuple(fields.integer(s, at, "zero_stages", minimum=0, maximum=3)
                   for s in fields.sequence(t["zero_stages"], at, "zero_stages"))
    if not stages or len(set(stages)) != len(stages):
        raise UsageError(f"{at}: 'zero_stages' lists each stage the stack runs once, at least one")
    zero = fields.integer(t["zero"], at, "zero", minimum=0, maximum=3)
    if zero not in stages:
        raise UsageError(f"{at}: 'zero' {zero} is not one of its zero_stages {list(stages)}")
    flag = {k: fields.boolean(t[k], at, k) for k in (
        "fp8_weight_cache", "fp8_parameters", "tensor_parallel", "pipeline_parallel",
        "context_parallel", "summa", "overlap_grad_reduce", "overlap_param_gather")}
    if fp8 == "none" and (flag["fp8_weight_cache"] or flag["fp8_parameters"]):
        raise UsageError(f"{at}: fp8_weight_cache and fp8_parameters need an fp8 recipe (fp8 is none)")
    if any(tp_overlap.values()) and not flag["tensor_parallel"]:
        raise UsageError(f"{at}: tp_comm_overlap needs tensor_parallel")
    if flag["summa"] and not (flag["tensor_parallel"] and flag["context_parallel"]):
        raise UsageError(f"{at}: summa needs tensor_parallel and context_parallel (its grid's two axes)")
    offload = []
    for entry in fields.sequence(t["offload"], at, "offload"):
        if entry not in _OFFLOAD_ENTRIES:
            raise UsageError(f"{at}: 'offload' entries are {', '.join(_OFFLOAD_ENTRIES)}, got {entry!r}")
        offload.append(frozenset(entry.split("+")))
    if "parameters" in set().union(*offload) and 3 not in stages:
        raise UsageError(f"{at}: parameter offload needs ZeRO-3 among its zero_stages")
    return TrainingStack(attention=attention, tp_comm_overlap=tp_overlap, fused_gated_activation=gated == "fused",
                         eager_norm=norm == "eager",
                         cross_entropy=loss, fp8=fp8,
                         gradients_in_weight_dtype=grads == "weight", optimizer_impl=optimizer, lora=lora,
                         selective_recompute=selective, zero=zero, zero_stages=stages, offload=tuple(offload), **flag)


def _serving(data: Any, where: str, sources: dict[str, str]) -> ServingStack:
    t = fields.mapping(data, where, "serving")
    unknown = sorted(set(t) - set(_SERVING_FIELDS))
    if unknown:
        raise UsageError(f"{where}: unknown field 'serving.{unknown[0]}' (known: {', '.join(_SERVING_FIELDS)})")
    at = f"{where}: serving"
    if "scheduler" not in t:
        raise UsageError(f"{at} lacks scheduler")
    scheduler = fields.text(t["scheduler"], at, "scheduler")
    if scheduler not in SCHEDULERS:
        raise UsageError(f"{at}: 'scheduler' must be one of {', '.join(SCHEDULERS)}, got {scheduler!r}")
    # The token budget the policy has: max_batched_tokens (vllm, orca), chunk (sarathi), none (static).
    budget = {"vllm": "max_batched_tokens", "orca": "max_batched_tokens", "sarathi": "chunk"}.get(scheduler)
    missing = [k for k in _SERVING_REQUIRED if k not in t]
    if missing:
        raise UsageError(f"{at} lacks {', '.join(missing)}")
    for k in ("max_batched_tokens", "chunk"):
        if k in t and k != budget:
            raise UsageError(f"{at}: '{k}' is not a token budget of the {scheduler} scheduler"
                             + (f" (it takes {budget})" if budget else " (it batches whole prompts)"))
    unsourced = [k for k in t if f"serving.{k}" not in sources]
    if unsourced:
        raise UsageError(f"{where}: 'sources' names no source for serving.{unsourced[0]} "
                         "(every choice of a stack names where it is read from)")

    def kernel(value: Any, name: str) -> str:
        if value not in ATTENTION_KERNELS or value == "eager":
            raise UsageError(f"{at}: '{name}' must be one of {', '.join(k for k in ATTENTION_KERNELS if k != 'eager')}, "
                             f"got {value!r}")
        return value

    def decode(value: Any, name: str) -> str:
        if value not in DECODE_ATTENTION:
            raise UsageError(f"{at}: '{name}' must be one of {', '.join(DECODE_ATTENTION)}, got {value!r}")
        return value

    def count(key: str) -> int | None:
        return fields.integer(t[key], at, key, minimum=1) if key in t else None

    return ServingStack(
        prefill_attention=_per_architecture(t["prefill_attention"], at, "prefill_attention", kernel),
        decode_attention=_per_architecture(t["decode_attention"], at, "decode_attention", decode),
        cuda_graphs=fields.boolean(t["cuda_graphs"], at, "cuda_graphs"), scheduler=scheduler,
        max_seqs=count("max_seqs"), max_batched_tokens=count("max_batched_tokens"), chunk=count("chunk"),
        block_size=count("block_size"),
        gpu_memory_utilization=fields.number(t["gpu_memory_utilization"], at, "gpu_memory_utilization",
                                             above=0.0, maximum=1.0) if "gpu_memory_utilization" in t else None,
        custom_allreduce=_per_architecture(t["custom_allreduce"], at, "custom_allreduce",
                                           lambda v, n: fields.boolean(v, at, n))
        if "custom_allreduce" in t else {"default": False})


def _runtime(data: Any, where: str, sources: dict[str, str]) -> float:
    """The `runtime` section's host cost per kernel in seconds (0 when absent)."""
    if data is None:
        return 0.0
    r = fields.mapping(data, where, "runtime")
    unknown = sorted(set(r) - set(_RUNTIME_FIELDS))
    if unknown:
        raise UsageError(f"{where}: unknown field 'runtime.{unknown[0]}' (known: {', '.join(_RUNTIME_FIELDS)})")
    for key in r:
        if f"runtime.{key}" not in sources:
            raise UsageError(f"{where}: 'sources' names no source for runtime.{key} "
                             "(every choice of a stack names where it is read from)")
    if "host_overhead_per_kernel_us" not in r:
        return 0.0
    return fields.number(r["host_overhead_per_kernel_us"], f"{where}: runtime", "host_overhead_per_kernel_us",
                         minimum=0.0) * 1e-6


def _read_stack_data(p: Path, chain: tuple[str, ...] = ()) -> dict:
    """A stack file's mapping, an `extends: ID` file's merged over the shipped stack it names: its
    `training`/`serving`/`runtime` choices and `sources` replace the base's key by key, and it
    states its own id, name and version (the kind and notes default to the base's)."""
    where = str(p)
    data = fields.read_yaml(p, "stack")
    if not isinstance(data, dict):
        raise UsageError(f"{where}: a stack file is a mapping")
    unknown = sorted(set(data) - _TOP)
    if unknown:
        raise UsageError(f"{where}: unknown field '{unknown[0]}' (known: {', '.join(sorted(_TOP))})")
    if "extends" not in data:
        return data
    base_id = fields.text(data["extends"], where, "extends")
    files = {f.stem: f for f in builtin_stack_files()}
    if base_id not in files:
        raise UsageError(f"{where}: 'extends' names no shipped stack {base_id!r} (known: {', '.join(sorted(files))})")
    if base_id in chain:
        raise UsageError(f"{where}: 'extends' loops back to {base_id!r}")
    base = _read_stack_data(files[base_id], chain + (base_id,))
    for key in ("id", "name", "version"):
        if key not in data:
            raise UsageError(f"{where}: missing field '{key}' (an extending stack names itself)")
    merged = {k: v for k, v in base.items() if k not in ("id", "name", "version")}
    for key, value in data.items():
        if key in _MERGED and key in merged:
            merged[key] = {**fields.mapping(merged[key], str(files[base_id]), key), **fields.mapping(value, where, key)}
        elif key != "extends":
            merged[key] = value
    return merged


def load_stack_file(path: str | Path) -> StackEntry:
    """Reads and checks one stack file (an `extends` one merged over its base); errors name the
    file and the field in one line."""
    p = Path(path)
    where = str(p)
    data = _read_stack_data(p)
    for key in ("id", "name", "version", "kind", "sources"):
        if key not in data:
            raise UsageError(f"{where}: missing field '{key}'")
    kind = data["kind"]
    if kind not in KINDS:
        raise UsageError(f"{where}: 'kind' must be training (the stacks train and plan run) or serving "
                         f"(the engines serve runs), got {kind!r}")
    other = "serving" if kind == "training" else "training"
    if kind not in data:
        raise UsageError(f"{where}: missing field '{kind}' (a {kind} stack's choices)")
    if other in data:
        raise UsageError(f"{where}: a {kind} stack has no '{other}' section")
    sources = {str(k): fields.text(v, where, f"sources.{k}")
               for k, v in fields.mapping(data["sources"], where, "sources").items()}
    return StackEntry(id=fields.text(data["id"], where, "id"), name=fields.text(data["name"], where, "name"),
                      version=fields.text(data["version"], where, "version"), path=where,
                      training=_training(data["training"], where, sources) if kind == "training" else None,
                      serving=_serving(data["serving"], where, sources) if kind == "serving" else None,
                      sources=sources, notes=fields.text(data.get("notes", ""), where, "notes"),
                      host_overhead_per_kernel_s=_runtime(data.get("runtime"), where, sources))


def builtin_stack_files() -> list[Path]:
    root = importlib.resources.files("accel_sim") / "data" / "stacks"
    return sorted(Path(str(p)) for p in root.iterdir() if p.name.endswith(".yaml"))


@functools.cache
def _builtin() -> tuple[StackEntry, ...]:
    return tuple(load_stack_file(p) for p in builtin_stack_files())


def builtin_stacks(kind: str | None = None) -> list[StackEntry]:
    """The shipped stacks, of one kind (training, serving) or all."""
    return [e for e in _builtin() if kind is None or e.kind == kind]


def resolve_stack(name: str | None, kind: str = "training") -> StackEntry:
    """A shipped stack by id, or a stack file by path, of `kind` (training: train, plan, simulate
    and the rest; serving: serve); None: the default training stack. A stack of the other kind is
    refused in one line."""
    if name is None:
        if kind != "training":
            raise UsageError(f"no default {kind} stack")
        name = DEFAULT_STACK
    entry = next((e for e in _builtin() if e.id == name), None)
    if entry is None:
        if not (name.endswith((".yaml", ".yml")) or "/" in name):
            known = ", ".join(e.id for e in builtin_stacks(kind))
            raise UsageError(f"unknown {kind} stack {name!r} (known: {known}; or a stack file's path)")
        entry = load_stack_file(name)
    if entry.kind != kind:
        takes = "serve takes" if kind == "serving" else "train, plan, simulate, compare, check, sweep and fit take"
        raise UsageError(f"stack {entry.id!r} is a {entry.kind} stack; {takes} a {kind} stack "
                         f"(`accel-sim stacks` lists them)")
    return entry
