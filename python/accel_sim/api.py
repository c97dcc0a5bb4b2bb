"""The Python API: simulate a model, a captured graph or a graph file on one or more devices.

    import accel_sim
    r = accel_sim.simulate(model, example_inputs, device="h100")
    r.latency_s, r.peak_memory_bytes, r.fits, r.ops
    c = accel_sim.compare(model, example_inputs, devices=["v100", "a100", "h100"])

Every figure comes from the C++ core (`accel_sim._core`); this module wires capture, files and
devices to it and keeps the results in report objects.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

from accel_sim import _core
from accel_sim.device import Device, resolve_device
from accel_sim.errors import UsageError
from accel_sim.io.stack_file import ATTENTION_KERNELS
from accel_sim.io.graph_file import load_graph, to_core
from accel_sim.simulation_report import CompareReport, SimulationReport


def capture(model: Any, example_inputs: Any = (), *, dtype: str | None = None, name: str | None = None) -> dict:
    """Captures one forward call of `model` as a graph dict (needs PyTorch)."""
    try:
        from accel_sim.capture import capture_model
    except ImportError as e:
        raise UsageError(
            f"capturing a PyTorch model needs torch ({e}); install it with: pip install torch==2.13.0"
        ) from None
    return capture_model(model, example_inputs, dtype=dtype, name=name)


def load_target(target: str | Path, *, dtype: str | None = None, train: bool = False,
                optimizer: str = "adamw", autocast: str | None = None, accumulate: bool = False,
                resize: dict[str, int] | None = None, timeout_s: float | None = None) -> dict:
    """A graph dict from a script with get_model() (captured: its forward, or with `train` one
    training step) or from a graph .json file. `resize` ({"batch": 64, "seq": 512}) resizes the
    script's example inputs along those axes first (batch: dim 0, seq: dim 1), as `fit` does.

    `timeout_s`: a script whose import, get_model() and capture take longer is stopped with a
    UsageError naming the phase it was in. The exception is raised in the running thread: a
    loop in Python stops at once, a C call only once it returns (`accel-sim --timeout` ends the
    process instead, which works in any case)."""
    path = Path(target)
    if path.suffix == ".json":
        if dtype is not None or train or autocast or resize:
            raise UsageError(f"--dtype, --train, --precision, --batch and --seq apply when capturing a script, "
                             f"not to the saved graph {path} (its shapes and dtypes were fixed at capture)")
        return load_graph(path)
    if path.suffix != ".py":
        raise UsageError(f"{path}: expected a Python script with get_model() or a graph .json file")
    try:
        from accel_sim.capture import load_script
    except ImportError as e:
        raise UsageError(
            f"running {path} needs torch ({e}); install it with: pip install torch==2.13.0"
        ) from None
    if timeout_s is not None:
        from accel_sim.script_run import ScriptRun

        with ScriptRun(str(path), timeout_s=timeout_s):
            return load_target(path, dtype=dtype, train=train, optimizer=optimizer, autocast=autocast,
                               accumulate=accumulate, resize=resize)
    model, example_inputs = load_script(str(path))
    resized = {}
    if resize:
        from accel_sim.capture.script import axis_size, resize_inputs

        for axis, value in resize.items():
            resized[axis] = [axis_size(example_inputs, axis, str(path)), value]
            example_inputs = resize_inputs(model, example_inputs, axis, value, str(path))
    graph = _capture_script(path, model, example_inputs, dtype, train, optimizer, autocast, accumulate)
    if resized:
        graph["metadata"]["inputs_resized"] = resized  # axis -> [the script's size, the size run]
    return graph


def _capture_script(path: Path, model: Any, example_inputs: Any, dtype: str | None, train: bool, optimizer: str,
                    autocast: str | None, accumulate: bool) -> dict:
    if train:
        from accel_sim.capture import capture_training_step

        return capture_training_step(model, example_inputs, optimizer=optimizer, dtype=dtype, autocast=autocast,
                                     accumulate=accumulate, name=path.stem)
    if autocast:
        raise UsageError("--precision with a mixed mode applies to a training step (--train)")
    return capture(model, example_inputs, dtype=dtype, name=path.stem)


def _as_graph(model_or_graph: Any, example_inputs: Any, dtype: str | None) -> tuple[Any, dict]:
    """(core graph, metadata) from a module, a graph dict, a core Graph, a BuiltModel or a file
    path. Builder graphs carry their model facts under metadata["model_info"]."""
    if isinstance(model_or_graph, _core.Graph):
        return model_or_graph, {}
    if isinstance(model_or_graph, BuiltModel):
        return model_or_graph.graph, {"model_info": model_or_graph.info}
    if isinstance(model_or_graph, (str, Path)):
        graph = load_target(model_or_graph, dtype=dtype)
        return to_core(graph, str(model_or_graph)), graph.get("metadata", {})
    if isinstance(model_or_graph, dict):
        return to_core(model_or_graph), model_or_graph.get("metadata", {})
    graph = capture(model_or_graph, example_inputs if example_inputs is not None else (), dtype=dtype)
    return to_core(graph), graph.get("metadata", {})


_PHASES = {"prefill": _core.Phase.prefill, "decode": _core.Phase.decode, "train": _core.Phase.train}
# The optimizers of a built training step, as the core names them (builder.h Optimizer); `none`
# stops after the backward.
OPTIMIZERS = tuple(m.name for m in _core.Optimizer)
# How torch.optim's AdamW, Adam and SGD run (builder.h OptimizerImpl): fused, foreach, for_loop.
OPTIMIZER_IMPLS = tuple(m.name for m in _core.OptimizerImpl)
# The recompute policies of a built training step, as the core names them (builder.h Recompute):
# the flags' `selective` is mapped to one of them by the run's stack (TrainingStack.recompute_for).
RECOMPUTE = tuple(m.name for m in _core.Recompute)
# A training step's fp8 recipes under fp8 GEMMs (builder.h Fp8Recipe).
FP8_RECIPES = tuple(m.name for m in _core.Fp8Recipe)
# How a training step takes its LM cross-entropy (builder.h CrossEntropy; a stack's
# training.cross_entropy).
CROSS_ENTROPY = tuple(m.name for m in _core.CrossEntropy)
_KERNELS = {"fused": _core.KernelStyle.fused, "hf-eager": _core.KernelStyle.hf_eager, "hf_eager": _core.KernelStyle.hf_eager}


@dataclass(frozen=True)
class BuiltModel:
    """A graph from the C++ model builder and the facts reports show about it."""

    graph: Any  # _core.Graph
    info: dict


def _spec_and_options(model: Any, phase: str, batch: int, seq: int, context: int, kernels: str, tensor_parallel: int,
                      sequence_parallel: bool, expert_parallel: int, context_parallel: int, moe_impl: str,
                      dtype: str | None, optimizer: str, master_weights: bool, recompute: str,
                      recompute_interval: int, eager_attention: bool,
                      persistent_gradients: bool, fp8_gemms: bool, weight_dtype: str | None,
                      kv_dtype: str | None, fused_gated_activation: bool = False,
                      cross_entropy: str = "upcast", optimizer_impl: str = "fused",
                      eager_norm: bool = False, fp8_recipe: str = "transformer_engine") -> tuple[Any, Any]:
    """(the model's _core.ModelSpec, the _core.BuildOptions) that build_model_graph builds from,
    checked (build_model_graph's keywords, every one given)."""
    from accel_sim.io.model_config import load_model_spec

    spec = (model if isinstance(model, _core.ModelSpec)
            else load_model_spec(str(model), dtype=dtype, weight_dtype=weight_dtype, kv_dtype=kv_dtype))
    if phase not in _PHASES:
        raise UsageError(f"unknown phase '{phase}' (known: {', '.join(_PHASES)})")
    if kernels not in _KERNELS:
        raise UsageError(f"unknown kernel style '{kernels}' (known: fused, hf-eager)")
    options = _core.BuildOptions()
    options.phase = _PHASES[phase]
    options.batch = batch
    options.seq = seq
    options.context = context
    options.kernels = _KERNELS[kernels]
    options.tensor_parallel = tensor_parallel
    options.sequence_parallel = sequence_parallel
    options.expert_parallel = expert_parallel
    options.context_parallel = context_parallel
    if moe_impl not in ("grouped", "sequential"):
        raise UsageError(f"unknown MoE implementation '{moe_impl}' (known: grouped, sequential)")
    options.moe_impl = getattr(_core.MoeImpl, moe_impl)
    if optimizer not in OPTIMIZERS:
        raise UsageError(f"unknown optimizer '{optimizer}' (known: {', '.join(OPTIMIZERS)})")
    options.optimizer = getattr(_core.Optimizer, optimizer)
    if optimizer_impl not in OPTIMIZER_IMPLS:
        raise UsageError(f"unknown optimizer implementation '{optimizer_impl}' (known: {', '.join(OPTIMIZER_IMPLS)})")
    options.optimizer_impl = getattr(_core.OptimizerImpl, optimizer_impl)
    options.master_weights = master_weights
    if recompute not in RECOMPUTE:
        raise UsageError(f"unknown recompute policy '{recompute}' (known: {', '.join(RECOMPUTE)})")
    if recompute != "none" and phase != "train":
        raise UsageError("--recompute applies to a training step (--phase train)")
    if recompute_interval < 1:
        raise UsageError(f"--recompute-interval must be at least 1 (got {recompute_interval})")
    if recompute_interval != 1 and recompute == "none":
        raise UsageError("--recompute-interval applies to a recompute policy (--recompute is none)")
    options.recompute = getattr(_core.Recompute, recompute)
    options.recompute_interval = recompute_interval
    options.eager_attention = eager_attention
    if persistent_gradients and phase != "train":
        raise UsageError("--keep-grads applies to a training step (--phase train)")
    options.persistent_gradients = persistent_gradients
    # fp8 GEMMs: Transformer Engine's recipe in a training step; in prefill and decode an fp8
    # inference engine's block linears with their weights stored in fp8 (BuildOptions::fp8_gemms).
    options.fp8_gemms = fp8_gemms
    options.fused_gated_activation = fused_gated_activation
    if cross_entropy not in CROSS_ENTROPY:
        raise UsageError(f"unknown cross-entropy implementation '{cross_entropy}' (known: {', '.join(CROSS_ENTROPY)})")
    if cross_entropy != "upcast" and phase != "train":
        raise UsageError(f"a cross-entropy implementation ({cross_entropy}) applies to a training step (--phase train)")
    options.cross_entropy = getattr(_core.CrossEntropy, cross_entropy)
    options.eager_norm = eager_norm
    if fp8_recipe not in FP8_RECIPES:
        raise UsageError(f"unknown fp8 recipe '{fp8_recipe}' (known: {', '.join(FP8_RECIPES)})")
    options.fp8_recipe = getattr(_core.Fp8Recipe, fp8_recipe)
    return spec, options


def model_build_options(model: Any, **keywords: Any) -> tuple[Any, Any]:
    """(the model's _core.ModelSpec, the _core.BuildOptions) that build_model_graph(model,
    **keywords) builds from, checked; a sweep builds many shapes from one."""
    import inspect

    bound = inspect.signature(build_model_graph).bind(model, **keywords)
    bound.apply_defaults()
    return _spec_and_options(**bound.arguments)


def build_model_graph(
    model: Any,
    *,
    phase: str = "prefill",
    batch: int = 1,
    seq: int = 2048,
    context: int = 0,
    kernels: str = "fused",
    tensor_parallel: int = 1,
    sequence_parallel: bool = False,
    expert_parallel: int = 1,
    context_parallel: int = 1,
    moe_impl: str = "grouped",
    dtype: str | None = None,
    optimizer: str = "adamw",
    master_weights: bool = True,
    recompute: str = "none",
    recompute_interval: int = 1,
    eager_attention: bool = False,
    persistent_gradients: bool = False,
    fp8_gemms: bool = False,
    weight_dtype: str | None = None,
    kv_dtype: str | None = None,
    fused_gated_activation: bool = False,
    cross_entropy: str = "upcast",
    optimizer_impl: str = "fused",
    eager_norm: bool = False,
    fp8_recipe: str = "transformer_engine",
) -> BuiltModel:
    """The C++ builder's graph of a shipped model (id or alias), a config.json path or a
    `_core.ModelSpec`, for one phase and shape; simulate() and compare() accept the result."""
    spec, options = _spec_and_options(**locals())  # first: locals() are the arguments
    try:
        graph = _core.build_graph(spec, options)
    except ValueError as e:
        raise UsageError(str(e)) from None
    info = {
        "model": spec.name,
        "phase": phase,
        "batch": batch,
        "seq": spec.image_tokens() if spec.patch_size > 0 else seq if phase != "decode" else 1,
        "context": context if phase == "decode" else 0,
        "kernels": kernels.replace("_", "-"),
        "tensor_parallel": tensor_parallel,
        "sequence_parallel": sequence_parallel,
        "expert_parallel": expert_parallel,
        "context_parallel": context_parallel,
        "dtype": _core.dtype_name(spec.activation_dtype),
        "weight_dtype": "int4" if spec.int4_group_size else _core.dtype_name(spec.weight_dtype),
        "kv_cache_dtype": _core.dtype_name(spec.kv_cache_dtype),
        "parameters": _core.parameter_count(spec),
        "active_parameters": _core.active_parameter_count(spec),
        "kv_cache_bytes": _core.step_kv_cache_bytes(spec, options),
        "fp8_gemms": fp8_gemms,
    }
    if spec.patch_size > 0:
        info["image_tokens"] = spec.image_tokens()
    if phase == "train":
        info["optimizer"] = optimizer
        info["master_weights"] = master_weights and _core.dtype_name(spec.weight_dtype) != "fp32"
        info["recompute"] = recompute
        info["recompute_interval"] = recompute_interval
        info["attention"] = "unfused core (scores materialized)" if eager_attention else "fused kernel"
        info["gradients_kept_between_steps"] = persistent_gradients
        info["dropout"] = {"hidden": spec.hidden_dropout, "embedding": spec.embedding_dropout,
                           "attention": spec.attention_dropout}
        info["loss"] = "cross-entropy over every position" if spec.lm_head else "mean squared error of the last hidden state"
    if spec.moe.num_experts > 0:
        tokens = batch * (seq if phase != "decode" else 1)
        info["moe"] = {
            "num_experts": spec.moe.num_experts,
            "top_k": spec.moe.top_k,
            "implementation": moe_impl,
            "routing_assumption": "each token's top-k experts uniformly at random",
            "expected_experts_touched_per_layer": _core.expected_experts_touched(
                spec.moe.num_experts, spec.moe.top_k, tokens),
        }
    return BuiltModel(graph, info)


def _options(cost_model: str, tf32: bool, launch_overhead: bool, free_at_last_use: bool = False,
             cuda_graphs: bool = False, clock_mhz: float | None = None, fuse: bool = False,
             attention_impl: str = "flash2", micro_batches: int = 1, system: Any = None,
             groups: Sequence[tuple[str, int, int]] = ()) -> Any:
    options = _core.SimulateOptions()
    options.release_policy = _core.ReleasePolicy.last_use if free_at_last_use else _core.ReleasePolicy.recorded
    if cost_model not in _core.cost_model_names():
        known = ", ".join(_core.cost_model_names())
        raise UsageError(f"unknown cost model '{cost_model}' (known: {known})")
    options.cost_model = cost_model
    options.cost.allow_tf32 = tf32
    options.cost.include_launch_overhead = launch_overhead
    options.cost.cuda_graphs = cuda_graphs
    options.fuse_elementwise = fuse
    if micro_batches < 1:
        raise UsageError("--grad-accum must be at least 1")
    options.micro_batches = micro_batches
    if system is not None:
        options.system = system
        made = []
        for group in groups:
            if isinstance(group, tuple):  # (name, size, ranks per domain)
                g = _core.CommGroup()
                g.name, g.size, g.ranks_per_domain = group
                group = g
            made.append(group)
        options.groups = made
    if attention_impl not in ATTENTION_KERNELS:
        raise UsageError(f"unknown attention implementation '{attention_impl}' (known: {', '.join(ATTENTION_KERNELS)})")
    options.cost.attention_impl = getattr(_core.AttentionImpl, attention_impl)
    if clock_mhz is not None:
        if clock_mhz <= 0:
            raise UsageError("the clock override must be positive (MHz)")
        options.cost.clock_hz = clock_mhz * 1e6
    return options


def _stack_options(options: Any, device: Device, stack: Any, attention_impl: str | None) -> Any:
    """`options` for one device under a software stack (io/stack_file.py): the attention kernel
    the stack runs on that device's architecture (unless `attention_impl` names one) and the host's
    cost per kernel of its runtime (the device's bare launch cost when it has none)."""
    out = copy.copy(options)
    kernel = attention_impl or stack.training.attention_for(device.entry.architecture)
    out.cost.attention_impl = getattr(_core.AttentionImpl, kernel)
    out.cost.host_overhead_per_kernel_s = stack.host_overhead_per_kernel_s
    return out


def _resolve_stack(stack: Any) -> Any:
    from accel_sim.io.stack_file import StackEntry, resolve_stack

    if stack is None or isinstance(stack, StackEntry):
        return stack

    return resolve_stack(stack)


def simulate(
    model_or_graph: Any,
    example_inputs: Any = None,
    *,
    device: Any = "h100",
    dtype: str | None = None,
    tf32: bool = False,
    cost_model: str = "kernel",
    launch_overhead: bool = True,
    free_at_last_use: bool = False,
    device_files: Sequence[str] = (),
    cuda_graphs: bool = False,
    clock_mhz: float | None = None,
    fuse: bool = False,
    attention_impl: str | None = None,
    micro_batches: int = 1,
    system: Any = None,
    groups: Sequence[tuple[str, int, int]] = (),
    stack: Any = None,
) -> SimulationReport:
    """Simulates `model_or_graph` (an nn.Module with example inputs, a graph dict, a graph file
    or a script path) on `device` (a name, a Device, or a DeviceProfile). With a `system`
    (a _core.SystemSpec) and the parallel `groups` ((name, size, ranks per scale-up domain)), the
    graph's collectives are timed on that cluster.

    Memory follows the captured program's own lifetimes (a tensor held by a local variable stays
    live until its function returns, as in eager PyTorch); `free_at_last_use=True` frees every
    activation after its last use instead, as a memory-planning compiler would.

    `stack` (a shipped stack's name, a stack file's path, or a StackEntry) costs the graph as that
    framework runs it: its attention kernel on this device and its host cost per kernel;
    `attention_impl` overrides its kernel (without a stack: flash2, PyTorch SDPA's flash backend).
    """
    dev = resolve_device(device, list(device_files))
    st = _resolve_stack(stack)
    options = _options(cost_model, tf32, launch_overhead, free_at_last_use, cuda_graphs, clock_mhz, fuse,
                       attention_impl or "flash2", micro_batches, system, groups)
    if st is not None:
        options = _stack_options(options, dev, st, attention_impl)
    graph, metadata = _as_graph(model_or_graph, example_inputs, dtype)
    result = _core.simulate(graph, dev.spec, options)
    return SimulationReport(graph, dev, result, options, metadata, st)


def compare(
    model_or_graph: Any,
    example_inputs: Any = None,
    *,
    devices: Sequence[Any],
    dtype: str | None = None,
    tf32: bool = False,
    cost_model: str = "kernel",
    launch_overhead: bool = True,
    free_at_last_use: bool = False,
    device_files: Sequence[str] = (),
    cuda_graphs: bool = False,
    clock_mhz: float | None = None,
    fuse: bool = False,
    attention_impl: str | None = None,
    micro_batches: int = 1,
    system: Any = None,
    groups: Sequence[tuple[str, int, int]] = (),
    stack: Any = None,
) -> CompareReport:
    """Captures once, simulates on every device and returns the core's comparison; under a
    `stack` each device runs the attention kernel the stack runs on it (see simulate())."""
    if not devices:
        raise UsageError("compare needs at least one device")
    devs = [resolve_device(d, list(device_files)) for d in devices]
    st = _resolve_stack(stack)
    options = _options(cost_model, tf32, launch_overhead, free_at_last_use, cuda_graphs, clock_mhz, fuse,
                       attention_impl or "flash2", micro_batches, system, groups)
    graph, metadata = _as_graph(model_or_graph, example_inputs, dtype)
    reports = []
    for d in devs:
        o = _stack_options(options, d, st, attention_impl) if st is not None else options
        reports.append(SimulationReport(graph, d, _core.simulate(graph, d.spec, o), o, metadata, st))
    comparison = _core.compare_devices([r.result for r in reports], [d.spec for d in devs])
    return CompareReport(reports, comparison)


def list_devices() -> list[Device]:
    """Every shipped device, sorted by id."""
    from accel_sim.device import catalog

    return [Device.from_entry(e) for e in catalog().entries]
