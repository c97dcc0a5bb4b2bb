"""The query-key pairs an attention mask allows, read from the mask's construction in the trace.

Models that build their own mask and pass it to SDPA (`attn_mask=`, `is_causal=False`) hide the
causal pattern from the attention op: Falcon materializes transformers' causal mask (and adds
ALiBi onto it), a sliding-window model passes its banded mask once the sequence outgrows the
window. An op marked non-causal with an opaque mask would be counted over every query-key pair.

Fake tensors carry no values, but when a mask is computed from constants (aranges,
comparisons, `full`, `where`, `tril`, lifted literals) and from graph inputs that were real
tensors (a mask passed in, a buffer of a model with weights), its construction is in the graph
and can be run for real on the CPU. `recognise_attention_masks` does that for every
`accel_sim::attention` (and `_backward`) node with a mask. When the mask allows the same pairs
in every batch and head, and those pairs are all of them or a causal pattern (query i sees
keys up to `query_offset + i`, the last `window_size` of them under a sliding window: the
conventions of the catalogue's `accel_sim::attention`, core/src/ops/attention.cc), the node's
meta records that pattern for the export:

* `is_causal`, `window_size` and `query_offset` attrs describe the pairs;
* a mask that only masks (bool, or additive 0 / -inf / the dtype's lowest value) is dropped
  from the inputs, as transformers itself does when it can pass `is_causal`: the kernel
  applies the pattern without reading a mask;
* a mask with other values (a bias such as ALiBi) stays an input: the kernel reads it.

Masks that read meta or fake inputs (a padding `attention_mask` given as shapes only), masks
that differ across batch or heads, other patterns, masks built with in-place writes and masks
larger than `EVALUATION_BYTES` stay as they are: the op counts every pair, as a kernel given an
arbitrary mask computes them.

Eager attention (BLOOM, GPT-J: no SDPA call) is a chain of ATen ops: scores = Q K^T (`bmm`,
`baddbmm` adding a bias such as ALiBi, or `mm`), scaled, biased and masked (`add` of an additive
mask, `masked_fill`, `where`), `_softmax` over the keys, dropout, then context = P V. Both GEMMs
compute every query-key pair, and their FLOPs are counted so. `recognise_attention_masks` also
finds these chains, evaluates the masks on them the same way and, when together they allow a
pattern of the kinds above, records it on both GEMMs for the export: `attention_gemm` ("qk" or
"pv"), `mask_is_causal`, `mask_window_size`, `mask_query_offset` (docs/formats/graph.md). The
core counts the pairs the mask discards apart (`OpCount::masked_flops`), outside model FLOPs.
Only the forward's GEMMs are marked: model FLOPs of a training step are three times the
forward's.
"""

from __future__ import annotations

import operator
from collections.abc import Callable
from typing import Any

import torch
import torch.fx
from torch._subclasses.fake_tensor import FakeTensor, unset_fake_temporarily

from accel_sim.capture import attention as _attention  # noqa: F401  (registers the ops read here)
from accel_sim.capture.graph_export import EXPORT_OVERRIDES

# The largest tensor (storage bytes) evaluated for a mask: a bool causal mask of 16384 x 16384.
EVALUATION_BYTES = 1 << 28

_QUERY_BLOCK_ROWS = 1024  # rows compared at a time when checking a pattern


def _attention_ops() -> dict[Any, tuple[int, int, int]]:
    """The attention ops: positions of (query, key, attn_mask) among their arguments."""
    ops = torch.ops.accel_sim
    return {ops.attention.default: (0, 1, 3), ops.attention_backward.default: (1, 2, 5)}


def _argument(node: torch.fx.Node, position: int, name: str) -> Any:
    if position < len(node.args):
        return node.args[position]
    return node.kwargs.get(name)


def _mutated_storages(graph: torch.fx.Graph) -> set[int]:
    """Storages some op in the graph writes in place: their nodes' values depend on order."""
    mutated: set[int] = set()
    for node in graph.nodes:
        target = node.target
        if node.op != "call_function" or not isinstance(target, torch._ops.OpOverload):
            continue
        for position, argument in enumerate(target._schema.arguments):
            if argument.alias_info is None or not argument.alias_info.is_write:
                continue
            arg = node.args[position] if position < len(node.args) else node.kwargs.get(argument.name)
            for item in arg if isinstance(arg, (list, tuple)) else (arg,):
                if isinstance(item, torch.fx.Node) and isinstance(item.meta.get("val"), torch.Tensor):
                    mutated.add(item.meta["val"].untyped_storage()._cdata)
    return mutated


class _Unknown(Exception):
    """An argument whose value is not known."""


class _ConstantValues:
    """Real values of the FX nodes computed from constants and from inputs with known values,
    run on the CPU and memoized; None for a node that reads an input of unknown value, draws
    random numbers, reads uninitialized memory, shares storage with an in-place write, or
    exceeds the evaluation budget."""

    def __init__(self, graph_module: torch.fx.GraphModule,
                 input_value: Callable[[int], torch.Tensor | None]) -> None:
        self._module = graph_module
        self._values: dict[torch.fx.Node, Any] = {}
        self._mutated = _mutated_storages(graph_module.graph)
        placeholders = [n for n in graph_module.graph.nodes if n.op == "placeholder"]
        self._input_positions = {node: i for i, node in enumerate(placeholders)}
        self._input_value = input_value

    def value(self, node: torch.fx.Node) -> Any:
        """The node's value, its ancestors evaluated first (depth-first, without recursion)."""
        stack = [(node, False)]
        while stack:
            current, ready = stack.pop()
            if current in self._values:
                continue
            if not ready and self._may_run(current):
                stack.append((current, True))
                stack.extend((a, False) for a in current.all_input_nodes if a not in self._values)
                continue
            try:
                self._values[current] = self._compute(current) if ready else None
            except Exception:  # unknown arguments, or an op that does not run on real CPU tensors
                self._values[current] = None
        return self._values[node]

    def _may_run(self, node: torch.fx.Node) -> bool:
        """Whether the node can have a known value: a deterministic op (or getitem) on tensors
        within the budget that no op writes in place, a real constant or a known input."""
        if node.op == "call_function":
            target = node.target
            if target is not operator.getitem and not (
                isinstance(target, torch._ops.OpOverload)
                and torch.Tag.nondeterministic_seeded not in target.tags
                and not target._schema.name.startswith(("aten::empty", "aten::new_empty"))
            ):
                return False
        elif node.op not in ("get_attr", "placeholder"):
            return False
        result = node.meta.get("val")
        for tensor in result if isinstance(result, (list, tuple)) else (result,):
            if not isinstance(tensor, torch.Tensor):
                continue
            storage = tensor.untyped_storage()
            if storage.nbytes() > EVALUATION_BYTES or storage._cdata in self._mutated:
                return False
        return True

    def _compute(self, node: torch.fx.Node) -> Any:
        if node.op == "get_attr":
            tensor = getattr(self._module, node.target, None)
            if isinstance(tensor, FakeTensor) or not isinstance(tensor, torch.Tensor):
                return None
            return None if tensor.device.type == "meta" else tensor
        if node.op == "placeholder":  # a parameter, buffer or input: known if it was real
            return self._input_value(self._input_positions[node])

        def concrete(arg: Any) -> Any:
            if isinstance(arg, torch.fx.Node):
                value = self._values.get(arg)
                if value is None:
                    raise _Unknown(arg.name)
                return value
            if isinstance(arg, (list, tuple)):
                return type(arg)(concrete(item) for item in arg)
            return arg

        args = concrete(node.args)
        kwargs = {name: concrete(arg) for name, arg in node.kwargs.items()}
        if node.target is operator.getitem:
            return args[0][args[1]]
        with unset_fake_temporarily():
            return node.target(*args, **kwargs)


def _allowed(mask: torch.Tensor) -> tuple[torch.Tensor, bool]:
    """(which pairs the mask lets through, whether it does nothing but mask)."""
    if mask.dtype == torch.bool:
        return mask, True
    if not mask.is_floating_point():
        raise ValueError("attention masks are bool or floating")
    blocked = mask <= torch.finfo(mask.dtype).min  # -inf, or transformers' finfo(dtype).min
    return ~blocked, bool(torch.where(blocked, 0, mask).eq(0).all())


def _distinct(mask: torch.Tensor) -> torch.Tensor:
    """`mask` [..., Sq, Sk] with its broadcast leading dims cut to one slice."""
    for dim in range(mask.dim() - 2):
        if mask.stride(dim) == 0:
            mask = mask.narrow(dim, 0, 1)
    return mask


def _shared_slice(allowed: torch.Tensor) -> torch.Tensor | None:
    """The [Sq, Sk] pattern of every batch and head, or None when they differ."""
    first = allowed[(0,) * (allowed.dim() - 2)]
    if allowed.dim() > 2 and not bool((allowed == first).all()):
        return None
    return first


def _causal_pattern(pairs: torch.Tensor) -> tuple[int, int] | None:
    """(query_offset, window_size) when query i sees keys (o + i - w, o + i] (w = 0: all up to
    o + i, as torch SDPA's top-left causal mask shifted by o), else None."""
    sq, sk = pairs.shape
    keys = torch.arange(sk)
    first_row, last_row = pairs[0], pairs[-1]
    if not bool(first_row.any()):
        return None
    offset = int(keys[first_row].max())
    window = 0
    last_first_key = int(keys[last_row].min()) if bool(last_row.any()) else 0
    if last_first_key > 0:
        window = int(last_row.sum())
    for start in range(0, sq, _QUERY_BLOCK_ROWS):
        stop = min(start + _QUERY_BLOCK_ROWS, sq)
        last = torch.arange(start, stop)[:, None] + offset
        expected = keys[None, :] <= last
        if window > 0:
            expected &= keys[None, :] > last - window
        if not torch.equal(pairs[start:stop], expected):
            return None
    return offset, window


def _allowed_pairs(mask: torch.Tensor, scores_shape: tuple[int, ...]) -> tuple[torch.Tensor, bool] | None:
    """(the [Sq, Sk] pairs `mask` (bool, True = attend; or additive float) lets through on scores
    of `scores_shape`, whether it does nothing but mask), or None when the pairs differ across
    batch or heads or the mask is too large to read."""
    mask = _distinct(mask.expand(torch.broadcast_shapes(mask.shape, scores_shape)))
    if mask.numel() * mask.element_size() > EVALUATION_BYTES:
        return None
    allowed, masks_only = _allowed(mask)
    pairs = _shared_slice(allowed)
    return None if pairs is None else (pairs, masks_only)


def _pairs_pattern(pairs: torch.Tensor) -> dict[str, Any] | None:
    """{"is_causal", "window_size", "query_offset"} of allowed [Sq, Sk] pairs that are all of
    them or a causal pattern, else None."""
    every_pair = bool(pairs.all())
    pattern = (0, 0) if every_pair else _causal_pattern(pairs)
    if pattern is None:
        return None
    offset, window = pattern
    return {"is_causal": not every_pair, "window_size": window, "query_offset": offset}


def mask_pattern(mask: torch.Tensor, query_shape: torch.Size, key_shape: torch.Size) -> dict[str, Any] | None:
    """How attention of `query_shape` over `key_shape` under `mask` (SDPA's attn_mask: bool,
    True = attend; or additive float) is to be recorded, or None when the mask must stay as is:
    {"is_causal": bool, "window_size": int, "query_offset": int, "keeps_mask": bool}."""
    allowed = _allowed_pairs(mask, (*query_shape[:-1], key_shape[-2]))
    if allowed is None:
        return None
    pairs, masks_only = allowed
    pattern = _pairs_pattern(pairs)
    return None if pattern is None else {**pattern, "keeps_mask": not masks_only}


# Eager attention cores. Ops are named by their ATen packet ("bmm", "_softmax").
_GEMMS = {"bmm": (0, "self"), "mm": (0, "self"), "baddbmm": (1, "batch1")}  # GEMM -> its left operand
_SOFTMAXES = frozenset({"_softmax", "_safe_softmax"})
# Ops that keep each score in its (query, key) place: copies, casts and views that leave the
# last two dims as they are (checked on every step).
_LAYOUT_OPS = frozenset({"view", "_unsafe_view", "reshape", "expand", "clone", "contiguous",
                         "_to_copy", "alias", "detach"})
_SCALE_OPS = frozenset({"mul", "div"})  # a scale, or dropout's keep mask and 1 / (1 - p)
_CHAIN_DEPTH = 12  # ops walked between a GEMM and the softmax


def _aten_name(node: Any) -> str | None:
    if not isinstance(node, torch.fx.Node) or node.op != "call_function":
        return None
    target = node.target
    if not isinstance(target, torch._ops.OpOverload):
        return None
    namespace, _, name = target._schema.name.partition("::")
    return name if namespace == "aten" else None


def _last_two(node: torch.fx.Node) -> tuple[int, ...] | None:
    value = node.meta.get("val")
    if not isinstance(value, torch.Tensor) or value.dim() < 2:
        return None
    return tuple(int(d) for d in value.shape[-2:])


# A mask applied to the scores on their way to the softmax: (kind, mask, fill, applied at).
# kind "additive": the scores plus `mask`; "fill_where_true": masked_fill(scores, mask, fill);
# "keep_where_true" / "keep_where_false": where(mask, scores, fill) / where(mask, fill, scores).
_MaskUse = tuple[str, Any, Any, torch.fx.Node]


def _score_sources(node: Any, pairs: tuple[int, int], depth: int = 0) -> list[tuple[torch.fx.Node, list[_MaskUse]]]:
    """Every way the [.., Sq, Sk] scores `node` come from a GEMM through score ops: (the GEMM,
    the masks applied after it). Structural only: no value is computed."""
    name = _aten_name(node)
    if name is None or depth > _CHAIN_DEPTH or _last_two(node) != pairs:
        return []
    args = node.args
    if name in _GEMMS:
        return [(node, [])]
    if name in _LAYOUT_OPS:
        return _score_sources(args[0], pairs, depth + 1)
    if name in _SCALE_OPS:
        return [found for arg in args[:2] for found in _score_sources(arg, pairs, depth + 1)]
    sources: list[tuple[torch.fx.Node, list[_MaskUse]]] = []

    def through(arg: Any, use: _MaskUse | None) -> None:
        for gemm, masks in _score_sources(arg, pairs, depth + 1):
            sources.append((gemm, masks + ([use] if use is not None else [])))

    if name == "add" and len(args) >= 2:
        first, second = args[0], args[1]
        through(first, ("additive", second, None, node) if isinstance(second, torch.fx.Node) else None)
        if isinstance(second, torch.fx.Node):
            through(second, ("additive", first, None, node))
    elif name == "masked_fill" and len(args) >= 3:
        through(args[0], ("fill_where_true", args[1], args[2], node))
    elif name == "where" and len(args) == 3:
        condition, kept, other = args
        through(kept, ("keep_where_true", condition, other, node))
        through(other, ("keep_where_false", condition, kept, node))
    return sources


def _context_gemms(node: torch.fx.Node, pairs: tuple[int, int], depth: int = 0) -> list[torch.fx.Node]:
    """The GEMMs that take the [.., Sq, Sk] probabilities `node` (through copies, views and
    dropout) as their left operand: context = P V."""
    found: list[torch.fx.Node] = []
    for user in node.users:
        name = _aten_name(user)
        if user.op == "call_function" and user.target is operator.getitem:
            if user.args[1] == 0 and _aten_name(node) == "native_dropout":
                found += _context_gemms(user, pairs, depth + 1)
            continue
        if name is None or depth > _CHAIN_DEPTH:
            continue
        if name in _GEMMS:
            if _argument(user, *_GEMMS[name]) is node:
                found.append(user)
        elif name == "native_dropout" or (
            (name in _LAYOUT_OPS or name in _SCALE_OPS) and _last_two(user) == pairs
        ):
            found += _context_gemms(user, pairs, depth + 1)
    return found


def _mask_allowed(use: _MaskUse, values: _ConstantValues) -> torch.Tensor | None:
    """The [Sq, Sk] pairs one mask on the scores lets through, or None when its values are
    unknown, its fill does not mask or its pairs differ across batch or heads."""
    kind, mask, fill, node = use
    mask_value = values.value(mask) if isinstance(mask, torch.fx.Node) else None
    scores = node.meta["val"]
    if not isinstance(mask_value, torch.Tensor):
        return None
    if kind == "additive":
        if mask_value.dtype == torch.bool:
            return None
        allowed = _allowed_pairs(mask_value, tuple(scores.shape))
        return None if allowed is None else allowed[0]
    if mask_value.dtype != torch.bool:
        return None
    fill_value = values.value(fill) if isinstance(fill, torch.fx.Node) else fill
    if isinstance(fill_value, torch.Tensor):
        if not fill_value.is_floating_point() or fill_value.numel() == 0:
            return None
        fill_value = float(fill_value.max())
    if not isinstance(fill_value, (int, float)) or not scores.is_floating_point():
        return None
    if fill_value > torch.finfo(scores.dtype).min:  # fills a finite score: not a mask
        return None
    allowed = _allowed_pairs(~mask_value if kind in ("fill_where_true", "keep_where_false") else mask_value,
                             tuple(scores.shape))
    return None if allowed is None else allowed[0]


def _recognise_eager_attention(graph_module: torch.fx.GraphModule, values: Callable[[], _ConstantValues]) -> None:
    """Marks the two GEMMs of each eager attention core whose masks allow a known pattern."""
    patterns: dict[tuple, dict[str, Any] | None] = {}
    for node in graph_module.graph.nodes:
        if _aten_name(node) not in _SOFTMAXES:
            continue
        scores = node.args[0]
        pairs = _last_two(scores) if isinstance(scores, torch.fx.Node) else None
        dim = _argument(node, 1, "dim")
        if pairs is None or not isinstance(dim, int) or dim not in (-1, scores.meta["val"].dim() - 1):
            continue
        sources = _score_sources(scores, pairs)
        if len(sources) != 1:  # none, or ambiguous (an add of two GEMMs' outputs)
            continue
        gemm, masks = sources[0]
        key = (pairs, tuple((kind, mask, fill, tuple(use.meta["val"].shape)) for kind, mask, fill, use in masks))
        if key not in patterns:
            allowed = torch.ones(pairs, dtype=torch.bool)
            for use in masks:
                try:
                    mask_pairs = _mask_allowed(use, values())
                except Exception:  # a mask of another kind than the ones read here
                    mask_pairs = None
                if mask_pairs is None:
                    allowed = None
                    break
                allowed &= mask_pairs
            patterns[key] = None if allowed is None else _pairs_pattern(allowed)
        pattern = patterns[key]
        contexts = _context_gemms(node, pairs)
        if pattern is None or len(contexts) != 1:  # a softmax that no P V product reads: not attention
            continue
        attrs: dict[str, Any] = {"mask_is_causal": pattern["is_causal"]}
        if pattern["window_size"]:
            attrs["mask_window_size"] = pattern["window_size"]
        if pattern["query_offset"]:
            attrs["mask_query_offset"] = pattern["query_offset"]
        for marked, role in ((gemm, "qk"), (contexts[0], "pv")):
            overrides = marked.meta.setdefault(EXPORT_OVERRIDES, {})
            overrides["attrs"] = {**overrides.get("attrs", {}), "attention_gemm": role, **attrs}


def recognise_attention_masks(graph_module: torch.fx.GraphModule,
                              input_value: Callable[[int], torch.Tensor | None] = lambda position: None) -> None:
    """Records in each attention node's meta (`EXPORT_OVERRIDES`) the pattern of a mask
    computed from constants and from the graph inputs whose values `input_value` (by
    placeholder position) knows: the export writes its attrs and leaves out a mask that only
    masks. The GEMMs of eager attention cores get the pattern of the masks on their scores."""
    ops = _attention_ops()
    values: _ConstantValues | None = None

    def constant_values() -> _ConstantValues:
        nonlocal values
        values = values or _ConstantValues(graph_module, input_value)
        return values

    _recognise_eager_attention(graph_module, constant_values)
    patterns: dict[tuple[torch.fx.Node, tuple, tuple], dict[str, Any] | None] = {}
    for node in graph_module.graph.nodes:
        positions = ops.get(node.target) if node.op == "call_function" else None
        if positions is None:
            continue
        q_at, k_at, mask_at = positions
        mask = _argument(node, mask_at, "attn_mask")
        query, key = _argument(node, q_at, "q"), _argument(node, k_at, "k")
        if not isinstance(mask, torch.fx.Node) or not isinstance(query, torch.fx.Node):
            continue
        query_shape = tuple(query.meta["val"].shape)
        key_shape = tuple(key.meta["val"].shape)
        cache_key = (mask, query_shape, key_shape)
        if cache_key not in patterns:
            value = constant_values().value(mask)
            try:
                patterns[cache_key] = (
                    mask_pattern(value, torch.Size(query_shape), torch.Size(key_shape))
                    if isinstance(value, torch.Tensor) else None
                )
            except Exception:  # a mask of another shape or kind than SDPA takes: left as it is
                patterns[cache_key] = None
        pattern = patterns[cache_key]
        if pattern is None:
            continue
        attrs: dict[str, Any] = {"is_causal": pattern["is_causal"]}
        if pattern["window_size"]:
            attrs["window_size"] = pattern["window_size"]
        if pattern["query_offset"]:
            attrs["query_offset"] = pattern["query_offset"]
        node.meta[EXPORT_OVERRIDES] = {
            "attrs": attrs,
            "drop": () if pattern["keeps_mask"] else ("attn_mask",),
        }
