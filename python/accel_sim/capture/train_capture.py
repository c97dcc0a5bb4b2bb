"""capture_training_step: one training step of a PyTorch model as an "accel-sim-graph" document.

The step is traced like a forward capture (fake tensors, `make_fx`, no weights), in one
function: the forward in training mode, the loss, `torch.autograd.grad` of the loss with
respect to every trainable parameter (the autograd engine runs under the tracer, so the
backward ops, their order and the tensors autograd saves are those of an eager run; a
`torch.utils.checkpoint` region is recomputed where autograd recomputes it), and the
optimizer's fused step (torch.optim's `_fused_adamw_`, `_fused_adam_`, `_fused_sgd_` with
momentum) over optimizer states that are graph inputs, as in any step after the first. Nodes
are tagged forward / backward / optimizer by where the tracer stood when each phase began;
gradients are stored as "gradient" storages, the states as "optimizer_state".

The loss: the model's own when its output has one (`.loss`; an HF model given `labels`; a
causal or masked LM whose forward takes `labels` gets labels = input_ids, as HF's Trainer feeds
them), the output itself when it is a scalar, otherwise the mean of the first floating output
(stated in the graph's metadata). A model that returns `UpstreamGradients(outputs, grads)`
is backpropagated from those outputs with those upstream gradients, as `y.backward(dy)` runs in a
module benchmark: no loss op is traced. Precision: the model's own dtype (or `dtype`); the
optimizer states take the parameters' dtype.
"""

from __future__ import annotations

import contextlib
import inspect
from typing import Any, NamedTuple

import torch
import torch.fx.traceback as fx_traceback
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.proxy_tensor import get_innermost_proxy_mode

from accel_sim import script_run
from accel_sim.capture.attention import SdpaRouting
from accel_sim.capture.fx_capture import (
    CAST_DTYPES,
    FakeInputs,
    _dominant_float_dtype,
    _FakeState,
    _library_versions,
    _output_tensors,
    _split_inputs,
    report_tracing,
    trace,
)
from accel_sim.capture.graph_export import export_graph
from accel_sim.capture.lifetime import PythonLifetimes
from accel_sim.errors import UsageError

OPTIMIZERS = ("adamw", "adam", "sgd", "none")


class UpstreamGradients(NamedTuple):
    """What a model returns to be backpropagated from `outputs` with the upstream gradients
    `grads` (one per output, of its shape), as `torch.autograd.backward(outputs, grads)`."""

    outputs: tuple[torch.Tensor, ...]
    grads: tuple[torch.Tensor, ...]
AUTOCAST = {"bf16-mixed": torch.bfloat16, "fp16-mixed": torch.float16}


def _with_labels(model: torch.nn.Module, kwargs: dict[str, Any]) -> tuple[dict[str, Any], str]:
    try:
        accepts = "labels" in inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        accepts = False
    if accepts and "labels" not in kwargs and isinstance(kwargs.get("input_ids"), torch.Tensor):
        return {**kwargs, "labels": kwargs["input_ids"]}, "the model's loss with labels = input_ids"
    return kwargs, ""


def _loss_of(result: Any) -> tuple[torch.Tensor, str]:
    loss = getattr(result, "loss", None)
    if loss is None and isinstance(result, dict):
        loss = result.get("loss")
    if isinstance(loss, torch.Tensor):
        return loss, "the model's loss"
    if isinstance(result, torch.Tensor) and result.dim() == 0:
        return result, "the model's scalar output"
    for tensor in _output_tensors(result):
        if tensor.is_floating_point():
            return tensor.float().mean(), "the mean of the model's first floating output (it returns no loss)"
    raise UsageError("the model's output has no floating tensor to take a loss of")


def _traced_so_far() -> frozenset[str]:
    """Names of the FX nodes traced so far (make_fx may drop dead nodes later, so positions
    would shift; names do not)."""
    mode = get_innermost_proxy_mode()
    return frozenset(n.name for n in mode.tracer.graph.nodes) if mode is not None else frozenset()


try:  # AOTAutograd's hooks that tag each backward op with its forward op's autograd seq_nr
    from torch._functorch._aot_autograd.logging_utils import (
        setup_stacktrace_preservation_hooks as _backward_hooks,
    )
except ImportError:  # pragma: no cover - a torch without them: backward ops stay unattributed
    _backward_hooks = None


def _attribute_backward(graph_module: torch.fx.GraphModule, forward: frozenset[str],
                        backward: frozenset[str]) -> None:
    """Gives each backward op the module of the forward op it differentiates (matched by the
    autograd sequence number both carry), as AOTAutograd does for compiled graphs."""
    by_seq: dict[int, Any] = {}
    for node in graph_module.graph.nodes:
        if node.name in forward and node.meta.get("nn_module_stack") and "seq_nr" in node.meta:
            by_seq.setdefault(node.meta["seq_nr"], node.meta["nn_module_stack"])
    for node in graph_module.graph.nodes:
        if node.name in backward and node.name not in forward and not node.meta.get("nn_module_stack"):
            stack = by_seq.get(node.meta.get("seq_nr"))
            if stack:
                node.meta["nn_module_stack"] = stack


def capture_training_step(
    model: torch.nn.Module,
    example_inputs: Any,
    *,
    optimizer: str = "adamw",
    dtype: str | None = None,
    autocast: str | None = None,
    accumulate: bool = False,
    name: str | None = None,
) -> dict[str, Any]:
    """Trace one training step of `model` on `example_inputs` into an "accel-sim-graph" dict.

    `autocast` ("bf16-mixed", "fp16-mixed") runs the forward under torch.autocast: the weights,
    gradients and optimizer states stay in their (fp32) dtype, the autocast ops compute in 16
    bits (and their casts of the weights are in the graph), as torch.amp trains. `accumulate`
    (gradient accumulation) adds gradient buffers that live through the whole micro-step: zeroed
    once per step, each micro-batch's gradients added into them, the optimizer reading them
    (simulate with micro_batches = N to run the forward and backward N times)."""
    if not isinstance(model, torch.nn.Module):
        raise UsageError(f"capture needs a torch.nn.Module, got {type(model).__name__}")
    if optimizer not in OPTIMIZERS:
        raise UsageError(f"unknown optimizer {optimizer!r} for a captured step (known: {', '.join(OPTIMIZERS)})")
    if dtype is not None and dtype not in CAST_DTYPES:
        raise UsageError(f"unknown dtype {dtype!r}; choose one of {', '.join(CAST_DTYPES)}")
    if autocast is not None and autocast not in AUTOCAST:
        raise UsageError(f"unknown autocast precision {autocast!r} (known: {', '.join(AUTOCAST)})")
    mode = FakeTensorMode(allow_non_fake_inputs=True)
    state = _FakeState(mode, CAST_DTYPES.get(dtype) if dtype else None)

    args, kwargs = _split_inputs(example_inputs)
    kwargs, loss_note = _with_labels(model, kwargs)
    inputs = FakeInputs(model, state, args, kwargs)
    parameters, graph_inputs = inputs.parameters, inputs.graph_inputs
    originals = dict(model.named_parameters())
    trainable = [n for n in parameters if originals[n].requires_grad and parameters[n].is_floating_point()]
    with mode:
        for n in trainable:
            parameters[n].requires_grad_(True)

    # Optimizer states of a step after the first: Adam's two moments and step count, SGD's
    # momentum buffer, per trainable parameter.
    state_kinds = {"sgd": ("momentum_buffer",), "none": ()}.get(optimizer, ("exp_avg", "exp_avg_sq", "step"))
    with mode:
        states = {
            kind: [torch.zeros((), dtype=torch.float32) if kind == "step" else torch.zeros_like(parameters[n])
                   for n in trainable]
            for kind in state_kinds
        }
    for kind in state_kinds:
        graph_inputs += [("optimizer_state", f"{n}.{kind}") for n in trainable]
    if accumulate:
        with mode:
            buffers_in = [torch.zeros_like(parameters[n]) for n in trainable]
        graph_inputs += [("gradient", f"{n}.grad") for n in trainable]
    else:
        buffers_in = []

    marks: list[frozenset[str]] = []
    gradient_keys: set[int] = set()
    notes: dict[str, str] = {}
    lifetimes = PythonLifetimes()

    def step(*flat: torch.Tensor) -> list[torch.Tensor]:
        report_tracing()
        tensors, call_args, call_kwargs, extra = inputs.unpack(flat)
        flat_states = list(extra)
        per_kind = {kind: flat_states[i * len(trainable):(i + 1) * len(trainable)]
                    for i, kind in enumerate(state_kinds)}
        accumulators = flat_states[len(state_kinds) * len(trainable):]
        if accumulators:
            torch._foreach_zero_(accumulators)  # optimizer.zero_grad() at the step's start
        marks.append(_traced_so_far())
        amp = (torch.autocast("cpu", dtype=AUTOCAST[autocast]) if autocast
               else contextlib.nullcontext())
        with SdpaRouting(), lifetimes:
            with amp:
                result = torch.func.functional_call(model, tensors, call_args, call_kwargs, tie_weights=True,
                                                    strict=False)
                if isinstance(result, UpstreamGradients):
                    if len(result.outputs) != len(result.grads) or not result.outputs:
                        raise UsageError("UpstreamGradients needs one upstream gradient per output")
                    outputs, upstream = list(result.outputs), list(result.grads)
                    how = "the outputs, backpropagated with the model's upstream gradients"
                else:
                    loss, how = _loss_of(result)
                    outputs, upstream = [loss], None
            notes["loss"] = loss_note or how
            del result, call_args, call_kwargs
            marks.append(_traced_so_far())
            script_run.enter_phase("tracing the training step: backward")
            roots = [o.grad_fn for o in outputs if o.grad_fn is not None]
            if _backward_hooks is not None and roots:
                _backward_hooks(roots)  # backward ops get their forward op's seq_nr
            params = [tensors[n] for n in trainable]
            grads = torch.autograd.grad(outputs, params, grad_outputs=upstream, allow_unused=True)
            used = [i for i, g in enumerate(grads) if g is not None]
            gradient_keys.update(grads[i].untyped_storage()._cdata for i in used)
            if accumulators:
                with torch.no_grad():
                    torch._foreach_add_([accumulators[i] for i in used], [grads[i] for i in used])
                grads = tuple(accumulators[i] if grads[i] is not None else None for i in range(len(grads)))
            marks.append(_traced_so_far())
            script_run.enter_phase("tracing the training step: optimizer")
            with torch.no_grad():
                weights = [params[i].detach() for i in used]
                grad_list = [grads[i] for i in used]
                if optimizer == "none":
                    pass
                elif optimizer == "sgd":
                    torch.optim._functional.sgd(
                        weights, grad_list, [per_kind["momentum_buffer"][i] for i in used], fused=True,
                        weight_decay=0.0, momentum=0.9, lr=1e-3, dampening=0.0, nesterov=False, maximize=False)
                else:
                    fn = torch.optim._functional.adamw if optimizer == "adamw" else torch.optim._functional.adam
                    fn(weights, grad_list, [per_kind["exp_avg"][i] for i in used],
                       [per_kind["exp_avg_sq"][i] for i in used], [], [per_kind["step"][i] for i in used],
                       foreach=False, fused=True, amsgrad=False, beta1=0.9, beta2=0.999, lr=1e-3,
                       weight_decay=0.01, eps=1e-8, maximize=False, capturable=False, differentiable=False,
                       grad_scale=None, found_inf=None, has_complex=False)
            del grads, grad_list, weights, params
        return [o.detach() for o in outputs]

    flat_inputs = [*inputs.flat(), *(t for kind in state_kinds for t in states[kind]), *buffers_in]
    was_training = model.training
    model.train()
    script_run.enter_phase("tracing the training step: forward")
    try:
        graph_module = trace(step, model, mode, lifetimes, flat_inputs, fx_traceback.preserve_node_meta(), state)
    finally:
        model.train(was_training)
    script_run.enter_phase("exporting the graph")

    _attribute_backward(graph_module, marks[1], marks[2])
    metadata: dict[str, Any] = _library_versions()
    metadata["dtype"] = dtype or _dominant_float_dtype([*parameters.values(), *inputs.buffers.values()]) or "fp32"
    metadata["training_step"] = {"gradient_accumulation": accumulate,
                                 "optimizer": f"{optimizer} (fused)" if optimizer != "none" else "none",
                                 "loss": notes.get("loss", ""), "trainable_parameters": len(trainable),
                                 "precision": autocast or metadata["dtype"]}
    return export_graph(graph_module, graph_inputs, name=name or type(model).__name__, metadata=metadata,
                        released_at=lifetimes.released_at, pass_starts=(marks[0], marks[1], marks[2]),
                        gradient_storages=gradient_keys)
