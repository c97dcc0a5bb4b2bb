"""Capture front end: load_script, capture_model and the "accel-sim-graph" document.

Every expected number below is worked out by hand from the model definition (shapes, parameter
counts, bytes), not copied from the program's output. HF models are tiny variants of the shipped
configs (2 layers, hidden 64) so the whole file runs in seconds.
"""

from __future__ import annotations

import json
import math
from importlib.resources import files
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import accel_sim
from accel_sim.capture import capture_model, load_script
from accel_sim.errors import UsageError

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


# ---------------------------------------------------------------------------------------------
# Reading a graph document


def _nodes(graph: dict, op: str) -> list[dict]:
    return [n for n in graph["nodes"] if n["op"] == op]


def _tensor(graph: dict, tensor_id: int) -> dict:
    return graph["tensors"][tensor_id]


def _shape(graph: dict, tensor_id: int) -> list[int]:
    return graph["tensors"][tensor_id]["shape"]


def _named(graph: dict, name: str) -> dict:
    matches = [t for t in graph["tensors"] if t.get("name") == name]
    assert len(matches) == 1, name
    return matches[0]


def _storage_bytes(graph: dict, kind: str) -> int:
    return sum(s["size_bytes"] for s in graph["storages"] if s["kind"] == kind)


def _assert_well_formed(graph: dict) -> None:
    assert graph["format"] == "accel-sim-graph"
    assert graph["version"] == 1
    assert set(graph) == {
        "format",
        "version",
        "name",
        "metadata",
        "storages",
        "tensors",
        "nodes",
        "outputs",
    }
    assert [s["id"] for s in graph["storages"]] == list(range(len(graph["storages"])))
    assert [t["id"] for t in graph["tensors"]] == list(range(len(graph["tensors"])))
    for storage in graph["storages"]:
        assert storage["kind"] in {"parameter", "buffer", "input", "activation"}
    for tensor in graph["tensors"]:
        assert 0 <= tensor["storage"] < len(graph["storages"])
        assert len(tensor["shape"]) == len(tensor["strides"])
    defined: set[int] = {t["id"] for t in graph["tensors"] if "name" in t}
    for node in graph["nodes"]:
        assert set(node) == {
            "op",
            "overload",
            "inputs",
            "outputs",
            "attrs",
            "module",
            "module_type",
            "source",
        }
        assert all(i in defined for i in node["inputs"]), node
        assert node["outputs"], node
        defined.update(node["outputs"])
    assert all(i in defined for i in graph["outputs"])
    json.dumps(graph, allow_nan=False)  # strict JSON: no NaN/Infinity literals


# ---------------------------------------------------------------------------------------------
# Tiny HF models from the shipped configs

try:
    import transformers

    transformers.logging.set_verbosity_error()
except ImportError:  # the plain-PyTorch tests still run
    transformers = None

needs_transformers = pytest.mark.skipif(
    transformers is None, reason="transformers is not installed"
)

TINY_DECODER = {
    "num_hidden_layers": 2,
    "hidden_size": 64,
    "intermediate_size": 128,
    "num_attention_heads": 4,
    "num_key_value_heads": 2,
    "vocab_size": 256,
    "bos_token_id": 1,
    "eos_token_id": 2,
}


def _tiny_hf_model(
    config_file: str, auto_class: str = "AutoModelForCausalLM", **overrides
) -> nn.Module:
    config_dict = json.loads(files("accel_sim.data.models").joinpath(config_file).read_text())
    config_dict.update(overrides)
    config = transformers.AutoConfig.for_model(**config_dict)
    with torch.device("meta"):
        model = getattr(transformers, auto_class).from_config(config)
    return model.eval()


def _input_ids(batch: int, seq_len: int) -> dict[str, torch.Tensor]:
    return {"input_ids": torch.empty(batch, seq_len, dtype=torch.int64, device="meta")}


# ---------------------------------------------------------------------------------------------
# Plain PyTorch


def test_linear_records_addmm_with_weight_as_parameter_storage():
    graph = capture_model(nn.Linear(64, 32), torch.randn(4, 64))
    _assert_well_formed(graph)
    assert [n["op"] for n in graph["nodes"]] == ["t", "addmm"]
    weight = _named(graph, "weight")
    assert weight["shape"] == [32, 64]
    weight_storage = graph["storages"][weight["storage"]]
    assert weight_storage == {
        "id": weight["storage"],
        "size_bytes": 64 * 32 * 4,
        "kind": "parameter",
    }
    assert graph["storages"][_named(graph, "bias")["storage"]]["size_bytes"] == 32 * 4
    assert graph["storages"][_named(graph, "input.0")["storage"]]["kind"] == "input"
    (addmm,) = _nodes(graph, "addmm")
    assert addmm["overload"] == "default"
    assert addmm["attrs"] == {"beta": 1, "alpha": 1}
    assert _shape(graph, addmm["outputs"][0]) == [4, 32]
    assert graph["outputs"] == addmm["outputs"]
    assert addmm["module"] == "" and addmm["module_type"] == "Linear"
    assert graph["name"] == "Linear"
    assert graph["metadata"]["dtype"] == "fp32"
    assert graph["metadata"]["torch_version"] == torch.__version__


class _ViewsAndInPlace(nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = x * 2
        return y.view(8, 2), y.t(), y.add_(1)


def test_views_and_in_place_results_share_their_base_storage():
    graph = capture_model(_ViewsAndInPlace(), torch.randn(4, 4))
    _assert_well_formed(graph)
    (mul,) = _nodes(graph, "mul")
    base_storage = _tensor(graph, mul["outputs"][0])["storage"]
    assert graph["storages"][base_storage] == {
        "id": base_storage,
        "size_bytes": 16 * 4,
        "kind": "activation",
        "released_after": 3,  # returned: held past the last of the 4 nodes (mul, view, t, add_)
    }
    for op in ("view", "t", "add_"):
        (node,) = _nodes(graph, op)
        assert node["inputs"] == mul["outputs"]
        (out,) = node["outputs"]
        assert out != mul["outputs"][0]  # a new tensor value ...
        assert _tensor(graph, out)["storage"] == base_storage  # ... on the same storage
    (t,) = _nodes(graph, "t")
    assert _tensor(graph, t["outputs"][0])["strides"] == [1, 4]
    assert len(graph["outputs"]) == 3


def test_meta_model_captures_without_allocating_weights():
    side = 32768  # a 32768 x 32768 fp32 weight is 4 GiB
    with torch.device("meta"):
        model = nn.Linear(side, side, bias=False)
    graph = capture_model(model, torch.empty(2, side, device="meta"))
    weight = _named(graph, "weight")
    assert graph["storages"][weight["storage"]]["size_bytes"] == side * side * 4
    assert model.weight.device.type == "meta"  # the user's model is left as it was
    (mm,) = _nodes(graph, "mm")
    assert _shape(graph, mm["outputs"][0]) == [2, side]


def test_dtype_bf16_casts_float_parameters_and_inputs():
    model = nn.Linear(64, 32)
    graph = capture_model(model, torch.randn(4, 64), dtype="bf16")
    weight = _named(graph, "weight")
    assert weight["dtype"] == "bf16"
    assert graph["storages"][weight["storage"]]["size_bytes"] == 64 * 32 * 2
    assert _named(graph, "input.0")["dtype"] == "bf16"
    assert graph["metadata"]["dtype"] == "bf16"
    assert model.weight.dtype == torch.float32  # the user's model is not cast


def test_integer_inputs_are_not_cast():
    graph = capture_model(nn.Embedding(10, 8), torch.zeros(2, 3, dtype=torch.int64), dtype="fp16")
    assert _named(graph, "input.0")["dtype"] == "int64"
    assert _named(graph, "weight")["dtype"] == "fp16"


def test_unknown_dtype_is_a_usage_error():
    with pytest.raises(UsageError, match="unknown dtype"):
        capture_model(nn.Linear(2, 2), torch.randn(1, 2), dtype="fp7")


class _GroupedQueryAttention(nn.Module):
    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)


def test_sdpa_is_recorded_as_one_attention_op_with_gqa():
    q = torch.empty(2, 8, 32, 16, device="meta")
    kv = torch.empty(2, 2, 32, 16, device="meta")
    graph = capture_model(_GroupedQueryAttention(), (q, kv, kv))
    _assert_well_formed(graph)
    assert [n["op"] for n in graph["nodes"]] == ["accel_sim::attention"]
    (node,) = graph["nodes"]
    assert [_shape(graph, i) for i in node["inputs"]] == [
        [2, 8, 32, 16],
        [2, 2, 32, 16],
        [2, 2, 32, 16],
    ]
    assert node["attrs"] == {"dropout_p": 0.0, "is_causal": True, "enable_gqa": True}
    assert _shape(graph, node["outputs"][0]) == [2, 8, 32, 16]


def test_sdpa_inside_multi_head_attention_is_routed_too():
    with torch.device("meta"):
        model = nn.MultiheadAttention(64, 4, batch_first=True)

    class SelfAttention(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.mha = model

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.mha(x, x, x, need_weights=False)[0]

    graph = capture_model(SelfAttention(), torch.empty(2, 16, 64, device="meta"))
    (node,) = _nodes(graph, "accel_sim::attention")
    # 64 / 4 heads = head_dim 16; [batch, heads, seq, head_dim].
    assert [_shape(graph, i) for i in node["inputs"]] == [[2, 4, 16, 16]] * 3
    assert node["attrs"]["is_causal"] is False
    assert not _nodes(graph, "_softmax")


def test_attention_op_computes_sdpa_on_real_tensors():
    torch.manual_seed(0)
    q, k, v = torch.randn(1, 4, 8, 16), torch.randn(1, 2, 8, 16), torch.randn(1, 2, 8, 16)
    got = torch.ops.accel_sim.attention(q, k, v, None, 0.0, True, None, True)
    expected = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
    torch.testing.assert_close(got, expected)


def test_dict_inputs_are_named_by_key_and_non_tensors_pass_through():
    class Scaled(nn.Module):
        def forward(self, x: torch.Tensor, factor: float = 1.0) -> torch.Tensor:
            return x * factor

    graph = capture_model(Scaled(), {"x": torch.randn(3), "factor": 0.5})
    assert _named(graph, "input.x")["shape"] == [3]
    (mul,) = _nodes(graph, "mul")
    assert mul["attrs"] == {"other": 0.5}


class _ReadsValues(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.sum() > 0:
            return x * 2
        return x


def test_data_dependent_control_flow_is_a_one_line_usage_error():
    with pytest.raises(UsageError) as caught:
        capture_model(_ReadsValues(), torch.randn(3))
    message = str(caught.value)
    assert "\n" not in message
    assert "reads tensor values" in message
    assert "test_capture.py:" in message  # points at the offending line


def test_shape_error_in_forward_is_a_usage_error():
    with pytest.raises(UsageError, match="RuntimeError") as caught:
        capture_model(nn.Linear(4, 4), torch.randn(3, 5))
    assert "\n" not in str(caught.value)


# ---------------------------------------------------------------------------------------------
# load_script and the examples


def test_transformer_block_example_has_one_causal_attention():
    model, inputs = load_script(str(EXAMPLES / "transformer_block.py"))
    graph = capture_model(model, inputs)
    _assert_well_formed(graph)
    (attention,) = _nodes(graph, "accel_sim::attention")
    assert attention["attrs"]["is_causal"] is True
    # d_model 1024 / 16 heads = head_dim 64; batch 8, seq 512.
    assert [_shape(graph, i) for i in attention["inputs"]] == [[8, 16, 512, 64]] * 3
    assert not _nodes(graph, "_softmax") and not _nodes(graph, "bmm")
    # Parameters: 2 LayerNorms (2 * 2 * 1024) + qkv (1024 * 3072 + 3072) + proj (1024^2 + 1024)
    # + fc1 (1024 * 4096 + 4096) + fc2 (4096 * 1024 + 1024), fp32.
    parameters = (
        4 * 1024
        + (1024 * 3072 + 3072)
        + (1024 * 1024 + 1024)
        + (1024 * 4096 + 4096)
        + (4096 * 1024 + 1024)
    )
    assert _storage_bytes(graph, "parameter") == parameters * 4
    assert attention["source"].startswith("transformer_block.py:")


@needs_transformers
@pytest.mark.parametrize(
    (
        "script",
        "parameters",
        "bytes_per_parameter",
        "attentions",
        "q_shape",
        "kv_shape",
        "is_causal",
    ),
    [
        # Published parameter counts of the full-size models (lm_head tied to the embedding in
        # GPT-2 and in BERT's MLM decoder, so it is counted once).
        ("gpt2.py", 124_439_808, 4, 12, [8, 12, 1024, 64], [8, 12, 1024, 64], True),
        ("bert_base.py", 109_514_298, 4, 12, [8, 12, 512, 64], [8, 12, 512, 64], False),
        ("llama3_8b.py", 8_030_261_248, 2, 32, [1, 32, 2048, 128], [1, 8, 2048, 128], True),
    ],
)
def test_hf_examples_capture_full_size_models(
    script, parameters, bytes_per_parameter, attentions, q_shape, kv_shape, is_causal
):
    graph = capture_model(*load_script(str(EXAMPLES / script)))
    assert _storage_bytes(graph, "parameter") == parameters * bytes_per_parameter
    nodes = _nodes(graph, "accel_sim::attention")
    assert len(nodes) == attentions
    assert [_shape(graph, i) for i in nodes[0]["inputs"]] == [q_shape, kv_shape, kv_shape]
    assert nodes[0]["attrs"]["is_causal"] is is_causal


def test_load_script_missing_file(tmp_path):
    with pytest.raises(UsageError, match="no such file") as caught:
        load_script(str(tmp_path / "absent.py"))
    assert "\n" not in str(caught.value)


def test_load_script_without_get_model(tmp_path):
    script = tmp_path / "empty_model.py"
    script.write_text("x = 1\n")
    with pytest.raises(UsageError) as caught:
        load_script(str(script))
    assert (
        str(caught.value)
        == f"{script} defines no get_model(); it must return (model, example_inputs)"
    )


def test_load_script_get_model_raising(tmp_path):
    script = tmp_path / "broken.py"
    script.write_text("def get_model():\n    raise ValueError('no weights here\\nsecond line')\n")
    with pytest.raises(UsageError) as caught:
        load_script(str(script))
    message = str(caught.value)
    assert "\n" not in message
    assert "get_model() raised ValueError: no weights here second line" in message


def test_load_script_import_raising(tmp_path):
    script = tmp_path / "bad_import.py"
    script.write_text("import module_that_does_not_exist_anywhere\n")
    with pytest.raises(UsageError, match="importing it raised ModuleNotFoundError"):
        load_script(str(script))


def test_load_script_wrong_return_values(tmp_path):
    script = tmp_path / "wrong.py"
    script.write_text("def get_model():\n    return 'model', 'inputs'\n")
    with pytest.raises(UsageError, match="must be a torch.nn.Module"):
        load_script(str(script))
    script.write_text("def get_model():\n    return 3\n")
    with pytest.raises(UsageError, match=r"must return \(model, example_inputs\)"):
        load_script(str(script))


def test_load_script_imports_neighbours(tmp_path):
    (tmp_path / "neighbour_layers.py").write_text("import torch\nLayer = torch.nn.Linear\n")
    script = tmp_path / "uses_neighbour.py"
    script.write_text(
        "import torch\nfrom neighbour_layers import Layer\n"
        "def get_model():\n    return Layer(3, 5), torch.randn(2, 3)\n"
    )
    model, inputs = load_script(str(script))
    assert isinstance(model, nn.Linear) and inputs.shape == (2, 3)


# ---------------------------------------------------------------------------------------------
# HF transformers models (tiny variants of the shipped configs)


@needs_transformers
def test_tiny_llama_records_causal_gqa_attention_without_mask_or_scores():
    model = _tiny_hf_model("llama-3-8b.json", **TINY_DECODER)
    graph = capture_model(model, _input_ids(1, 16))
    _assert_well_formed(graph)
    attentions = _nodes(graph, "accel_sim::attention")
    assert len(attentions) == 2
    for layer, node in enumerate(attentions):
        # hidden 64 / 4 heads = head_dim 16; 2 kv heads reach the op un-repeated.
        assert [_shape(graph, i) for i in node["inputs"]] == [
            [1, 4, 16, 16],
            [1, 2, 16, 16],
            [1, 2, 16, 16],
        ]
        assert node["attrs"]["is_causal"] is True
        assert node["attrs"]["enable_gqa"] is True
        assert math.isclose(node["attrs"]["scale"], 16**-0.5)
        assert node["module"] == f"model.layers.{layer}.self_attn"
        assert node["module_type"] == "LlamaAttention"
        assert node["source"].startswith("modeling_llama.py:")
    for op in ("_softmax", "bmm", "baddbmm", "where", "masked_fill"):
        assert not _nodes(graph, op), op
    assert not [t for t in graph["tensors"] if t["dtype"] == "bool"]  # no materialized mask
    q_proj = [n for n in _nodes(graph, "mm") if n["module"] == "model.layers.0.self_attn.q_proj"]
    assert len(q_proj) == 1 and q_proj[0]["module_type"] == "Linear"
    # Parameters (bf16, untied lm_head): embed 256*64; per layer q 64*64, k and v 64*32, o 64*64,
    # gate/up/down 3*64*128, two norms 2*64; final norm 64; lm_head 256*64.
    per_layer = 64 * 64 + 2 * 64 * 32 + 64 * 64 + 3 * 64 * 128 + 2 * 64
    assert _storage_bytes(graph, "parameter") == (256 * 64 + 2 * per_layer + 64 + 256 * 64) * 2
    assert graph["metadata"]["dtype"] == "bf16"
    assert graph["metadata"]["transformers_version"] == transformers.__version__
    assert graph["name"] == "LlamaForCausalLM"


@needs_transformers
def test_hf_capture_settings_are_restored():
    import transformers.masking_utils as masking_utils

    model = _tiny_hf_model("llama-3-8b.json", **TINY_DECODER)
    before = model.config._attn_implementation
    find_packed = masking_utils.find_packed_sequence_indices
    capture_model(model, _input_ids(1, 8))
    assert model.config._attn_implementation == before
    assert masking_utils.find_packed_sequence_indices is find_packed


@needs_transformers
def test_tiny_bert_records_non_causal_attention_without_mask():
    model = _tiny_hf_model(
        "bert-base-uncased.json",
        "AutoModelForMaskedLM",
        num_hidden_layers=2,
        hidden_size=64,
        intermediate_size=128,
        num_attention_heads=4,
        vocab_size=256,
    )
    graph = capture_model(model, _input_ids(2, 16))
    _assert_well_formed(graph)
    attentions = _nodes(graph, "accel_sim::attention")
    assert len(attentions) == 2
    for node in attentions:
        assert node["attrs"]["is_causal"] is False
        assert [_shape(graph, i) for i in node["inputs"]] == [
            [2, 4, 16, 16]
        ] * 3  # no attn_mask input
    assert not _nodes(graph, "_softmax")


@needs_transformers
def test_tiny_gpt2_ties_lm_head_to_token_embedding():
    model = _tiny_hf_model(
        "gpt2.json", n_layer=2, n_embd=64, n_head=4, vocab_size=256, n_positions=64
    )
    assert model.lm_head.weight is model.transformer.wte.weight
    graph = capture_model(model, _input_ids(2, 16))
    _assert_well_formed(graph)
    wte = _named(graph, "transformer.wte.weight")
    assert not [t for t in graph["tensors"] if t.get("name") == "lm_head.weight"]
    lm_head_inputs = [i for n in graph["nodes"] if n["module"] == "lm_head" for i in n["inputs"]]
    assert wte["storage"] in {_tensor(graph, i)["storage"] for i in lm_head_inputs}
    # fp32 parameters, lm_head counted once: wte 256*64 + wpe 64*64 + ln_f 2*64 + per layer
    # (ln_1, ln_2: 2*2*64; c_attn 64*192+192; attn c_proj 64*64+64; c_fc 64*256+256;
    # mlp c_proj 256*64+64).
    per_layer = 4 * 64 + (64 * 192 + 192) + (64 * 64 + 64) + (64 * 256 + 256) + (256 * 64 + 64)
    assert _storage_bytes(graph, "parameter") == (256 * 64 + 64 * 64 + 2 * 64 + 2 * per_layer) * 4
    attentions = _nodes(graph, "accel_sim::attention")
    assert len(attentions) == 2 and all(n["attrs"]["is_causal"] for n in attentions)


@needs_transformers
@pytest.mark.parametrize("config_file", ["mistral-7b.json", "qwen2.5-7b.json"])
def test_tiny_mistral_and_qwen2_record_causal_attention(config_file):
    graph = capture_model(_tiny_hf_model(config_file, **TINY_DECODER), _input_ids(1, 16))
    attentions = _nodes(graph, "accel_sim::attention")
    assert len(attentions) == 2
    assert all(n["attrs"]["is_causal"] and len(n["inputs"]) == 3 for n in attentions)


@needs_transformers
def test_tiny_mixtral_captures_with_static_expert_routing():
    model = _tiny_hf_model(
        "mixtral-8x7b.json", **TINY_DECODER, num_local_experts=4, num_experts_per_tok=2
    )
    graph = capture_model(model, _input_ids(1, 16))
    _assert_well_formed(graph)
    assert len(_nodes(graph, "accel_sim::attention")) == 2
    assert not _nodes(graph, "nonzero")
    # 4 experts, each a fused gate+up [2*128, 64] and a down [64, 128] projection.
    gate_up = _named(graph, "model.layers.0.mlp.experts.gate_up_proj")
    assert gate_up["shape"] == [4, 2 * 128, 64]
    assert graph["storages"][gate_up["storage"]]["size_bytes"] == 4 * 256 * 64 * 2
    assert _named(graph, "model.layers.0.mlp.experts.down_proj")["shape"] == [4, 64, 128]
    grouped = [n for n in graph["nodes"] if "grouped_mm" in n["op"]]
    assert len(grouped) == 2 * 2  # up and down projection per layer


class _Lifetimes(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        held = x * 2  # bound to a local: lives until forward returns
        result = (x + 1).exp()  # x + 1 is a temporary: dropped as soon as exp returns
        return result * held


def test_python_lifetimes_become_release_points():
    graph = capture_model(_Lifetimes(), torch.randn(8))
    ops = [n["op"] for n in graph["nodes"]]
    assert ops == ["mul", "add", "exp", "mul"]

    def released(node_index: int) -> int:
        tensor = _tensor(graph, graph["nodes"][node_index]["outputs"][0])
        return graph["storages"][tensor["storage"]]["released_after"]

    assert released(1) == 2  # the temporary dies right after exp (node 2) consumed it
    assert released(0) == 3  # `held` lives to the end of forward
    assert released(2) == 3  # `result` too


# ---------------------------------------------------------------------------------------------
# Attention masks the model builds: the op counts the pairs the mask allows


def _simulated_flops(graph: dict, op: str = "accel_sim::attention") -> float:
    """The FLOPs the core counts for every `op` node of the graph."""
    report = accel_sim.simulate(graph, device="h100")
    return sum(node.flops for node in report.ops if node.op == op)


def _attention_forward_flops(batch_heads: int, head_dim: int, pairs: int) -> int:
    """S = Q K^T and O = P V over `pairs` query-key pairs per head, 2 FLOPs per multiply-add."""
    return 2 * batch_heads * pairs * head_dim * 2


@needs_transformers
@pytest.mark.parametrize(("alibi", "inputs"), [(False, 3), (True, 4)])
def test_falcon_causal_mask_is_recorded_as_causal_attention(alibi, inputs):
    """HF Falcon materializes its causal mask (adding ALiBi onto it when configured) and calls
    SDPA with attn_mask and is_causal=False; the capture reads the mask back as causal."""
    from torch.utils.flop_counter import FlopCounterMode

    batch, seq = 2, 32
    model = _tiny_hf_model("falcon-180b.json", num_hidden_layers=2, hidden_size=64, num_attention_heads=4,
                           num_kv_heads=2, vocab_size=256, alibi=alibi)
    graph = capture_model(model, _input_ids(batch, seq))
    _assert_well_formed(graph)
    attentions = _nodes(graph, "accel_sim::attention")
    assert len(attentions) == 2
    for node in attentions:
        assert node["attrs"]["is_causal"] is True
        # A mask that only masks is left out; one carrying the ALiBi bias is read by the kernel.
        assert len(node["inputs"]) == inputs
    # 2 layers, batch 2 x 4 heads, head_dim 64 / 4 = 16, causal pairs 32 * 33 / 2 = 528 per head.
    causal = 2 * _attention_forward_flops(2 * 4, 16, 32 * 33 // 2)
    assert _simulated_flops(graph) == causal
    # FlopCounterMode on the same model counts attention over all 32 * 32 pairs ("We aren't
    # accounting for causal attention here", torch/utils/flop_counter.py) and the GEMMs alike.
    with FlopCounterMode(display=False) as counter:
        model(**_input_ids(batch, seq))
    counted = {str(op): flops for op, flops in counter.get_flop_counts()["Global"].items()}
    linear = counted.pop("aten.mm")
    assert sum(counted.values()) == 2 * _attention_forward_flops(2 * 4, 16, 32 * 32)
    assert sum(counted.values()) - causal == 2 * _attention_forward_flops(2 * 4, 16, 32 * 31 // 2)
    assert _simulated_flops(graph, "mm") == linear


@needs_transformers
def test_sliding_window_mask_is_recorded_as_a_window():
    """Past its window a Mistral-style model passes a banded mask: causal, 8 keys per query."""
    model = _tiny_hf_model("mistral-7b.json", **TINY_DECODER, sliding_window=8)
    graph = capture_model(model, _input_ids(2, 32))
    attentions = _nodes(graph, "accel_sim::attention")
    assert len(attentions) == 2
    for node in attentions:
        assert len(node["inputs"]) == 3
        assert node["attrs"]["is_causal"] is True and node["attrs"]["window_size"] == 8
    # Query i sees min(i + 1, 8) keys: 1 + ... + 8 for the first 8, then 8 for the other 24.
    pairs = 8 * 9 // 2 + 24 * 8
    assert _simulated_flops(graph) == 2 * _attention_forward_flops(2 * 4, 16, pairs)


class _MaskedAttention(nn.Module):
    """SDPA under a mask made in forward ("tril", "additive", "blocks", "in_place") or given."""

    def __init__(self, mask_kind: str) -> None:
        super().__init__()
        self.mask_kind = mask_kind

    def forward(self, q: torch.Tensor, k: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        sq, sk = q.shape[-2], k.shape[-2]
        if self.mask_kind == "tril":  # bottom-right aligned: the queries are the last sq positions
            mask = torch.ones(sq, sk, dtype=torch.bool).tril(diagonal=sk - sq)
        elif self.mask_kind == "additive":
            mask = torch.full((sq, sk), float("-inf")).triu(1)
        elif self.mask_kind == "blocks":
            position = torch.arange(sq)
            mask = position[:, None] // 4 == position[None, :] // 4
        elif self.mask_kind == "in_place":
            mask = torch.zeros(sq, sk)
            mask.masked_fill_(torch.ones(sq, sk, dtype=torch.bool).triu(1), float("-inf"))
        return F.scaled_dot_product_attention(q, k, k, attn_mask=mask)


def _masked_attention(mask_kind: str, sq: int, mask: torch.Tensor | None = None) -> tuple[dict, dict]:
    """(graph, attention node) of batch 2 x 4 heads, sq queries over 8 keys, head_dim 16."""
    q = torch.empty(2, 4, sq, 16, device="meta")
    k = torch.empty(2, 4, 8, 16, device="meta")
    graph = capture_model(_MaskedAttention(mask_kind), (q, k) if mask is None else (q, k, mask))
    _assert_well_formed(graph)
    (node,) = _nodes(graph, "accel_sim::attention")
    return graph, node


@pytest.mark.parametrize(
    ("mask_kind", "sq", "mask", "attrs", "pairs"),
    [
        # 4 queries at positions 4..7 of 8 keys: query i sees keys 0..4 + i.
        ("tril", 4, None, {"is_causal": True, "query_offset": 4}, 5 + 6 + 7 + 8),
        ("additive", 8, None, {"is_causal": True}, 8 * 9 // 2),
        ("given", 8, torch.ones(8, 8, dtype=torch.bool).tril(), {"is_causal": True}, 8 * 9 // 2),
        ("given", 8, torch.ones(2, 1, 8, 8, dtype=torch.bool), {"is_causal": False}, 8 * 8),
    ],
)
def test_sdpa_mask_of_known_values_becomes_its_pattern(mask_kind, sq, mask, attrs, pairs):
    graph, node = _masked_attention(mask_kind, sq, mask)
    assert len(node["inputs"]) == 3  # the mask only masked: the kernel applies the pattern itself
    assert {key: node["attrs"].get(key) for key in attrs} == attrs
    assert _simulated_flops(graph) == _attention_forward_flops(2 * 4, 16, pairs)


@pytest.mark.parametrize(
    ("mask_kind", "mask"),
    [
        ("given", torch.ones(8, 8, dtype=torch.bool, device="meta").tril()),  # values unknown
        ("blocks", None),  # a block-diagonal pattern the op has no attrs for
        ("in_place", None),  # written in place: values depend on op order, not read
    ],
)
def test_sdpa_mask_of_unknown_values_or_other_patterns_stays(mask_kind, mask):
    graph, node = _masked_attention(mask_kind, 8, mask)
    assert len(node["inputs"]) == 4
    assert _simulated_flops(graph) == _attention_forward_flops(2 * 4, 16, 8 * 8)
    assert node["attrs"]["is_causal"] is False and "window_size" not in node["attrs"]


@needs_transformers
def test_bloom_eager_attention_is_counted_as_it_runs():
    """BLOOM's attention is eager in transformers (alibi.baddbmm, softmax, bmm; no SDPA, no
    attention interface): both GEMMs compute every query-key pair, as FlopCounterMode counts."""
    from torch.utils.flop_counter import FlopCounterMode

    config = transformers.BloomConfig(vocab_size=256, hidden_size=64, n_layer=2, n_head=4)
    with torch.device("meta"):
        model = transformers.BloomForCausalLM(config).eval()
    graph = capture_model(model, _input_ids(2, 32))
    assert not _nodes(graph, "accel_sim::attention")
    flops = {op: _simulated_flops(graph, op) for op in ("baddbmm", "bmm")}
    # batch 2 x 4 heads, 32 x 32 scores, head_dim 16: 2 * 8 * 32 * 32 * 16 per GEMM and layer;
    # baddbmm adds the ALiBi bias, one FLOP per score.
    assert flops["bmm"] == 2 * (2 * 8 * 32 * 32 * 16)
    assert flops["baddbmm"] == 2 * (2 * 8 * 32 * 32 * 16 + 8 * 32 * 32)
    with FlopCounterMode(display=False) as counter:
        model(**_input_ids(2, 32))
    counted = {str(op): f for op, f in counter.get_flop_counts()["Global"].items()}
    assert counted["aten.bmm"] == flops["bmm"]
    assert counted["aten.baddbmm"] == flops["baddbmm"] - 2 * 8 * 32 * 32  # without the bias add


def _eager_attention_gemms(graph: dict) -> list[dict]:
    return [n for n in graph["nodes"] if "attention_gemm" in n["attrs"]]


@needs_transformers
def test_bloom_eager_attention_counts_causal_pairs_in_model_flops():
    """BLOOM's eager GEMMs compute all 32 x 32 pairs (executed FLOPs, as FlopCounterMode counts
    them); the capture reads the causal mask added to their scores, so model FLOPs count the
    32 * 33 / 2 = 528 causal pairs only, and a hint says how much work the mask discards."""
    from torch.utils.flop_counter import FlopCounterMode

    from accel_sim.report.hints import hint_message

    config = transformers.BloomConfig(vocab_size=256, hidden_size=64, n_layer=2, n_head=4)
    with torch.device("meta"):
        model = transformers.BloomForCausalLM(config).eval()
    graph = capture_model(model, _input_ids(2, 32))
    gemms = _eager_attention_gemms(graph)
    assert [(n["op"], n["attrs"]["attention_gemm"]) for n in gemms] == [("baddbmm", "qk"), ("bmm", "pv")] * 2
    assert all(n["attrs"]["mask_is_causal"] is True for n in gemms)
    report = accel_sim.simulate(graph, device="h100")
    # 64 tokens through the linears (addmm: 2 FLOPs per weight and token, 1 per bias and token):
    # query_key_value 64 -> 192, dense 64 -> 64, dense_h_to_4h 64 -> 256, dense_4h_to_h 256 -> 64,
    # then the tied lm_head 64 -> 256 (mm).
    weights, biases = 64 * 192 + 64 * 64 + 64 * 256 + 256 * 64, 192 + 64 + 256 + 64
    linear = 2 * (2 * 64 * weights + 64 * biases) + 2 * 64 * 64 * 256
    # Attention over the causal pairs, batch 2 x 4 heads, head_dim 16: QK^T and P V 2 FLOPs per
    # multiply-add each, and baddbmm's ALiBi add, one FLOP per allowed score.
    causal = 8 * (32 * 33 // 2)
    attention = 2 * (2 * causal * 16 + causal + 2 * causal * 16)
    assert report.result.model_flops == linear + attention
    # Executed: every pair, as FlopCounterMode counts the same GEMMs (without the bias add).
    executed = {op: _simulated_flops(graph, op) for op in ("baddbmm", "bmm")}
    with FlopCounterMode(display=False) as counter:
        model(**_input_ids(2, 32))
    counted = {str(op): f for op, f in counter.get_flop_counts()["Global"].items()}
    assert counted["aten.bmm"] == executed["bmm"] == 2 * (2 * 8 * 32 * 32 * 16)
    assert counted["aten.baddbmm"] == executed["baddbmm"] - 2 * 8 * 32 * 32
    # The hint: the 32 * 31 / 2 = 496 discarded pairs of each head, 496 / 1024 of the work.
    (hint,) = [h for h in report.hints if h.kind.name == "masked_attention_pairs"]
    discarded = 8 * (32 * 31 // 2)
    assert hint.value == 2 * (2 * discarded * 16 + discarded + 2 * discarded * 16)
    assert hint.fraction == 496 / 1024
    assert hint_message(hint, report) == (
        "eager attention (e.g. transformer.h.0.self_attention) computes 515.84 kFLOP (48% of its "
        "attention) on pairs the causal mask discards; a fused kernel (SDPA/FlashAttention) skips them"
    )


@needs_transformers
def test_gptj_eager_attention_counts_causal_pairs_in_model_flops():
    """GPT-J's attention was eager in transformers (matmul, divide, add the causal mask,
    softmax, matmul): model FLOPs count the causal pairs, executed FLOPs all of them. From
    transformers 5.24 GPT-J calls the attention interface instead (SDPA by default), which the
    capture records as one causal attention op per layer, counting the causal pairs only."""
    from torch.utils.flop_counter import FlopCounterMode

    config = transformers.GPTJConfig(vocab_size=256, n_embd=64, n_layer=2, n_head=4, rotary_dim=8,
                                     n_positions=64, bos_token_id=1, eos_token_id=2)
    with torch.device("meta"):
        model = transformers.GPTJForCausalLM(config).eval()
    graph = capture_model(model, _input_ids(2, 32))
    fused = [n for n in graph["nodes"] if n["op"] == "accel_sim::attention"]
    if fused:
        assert len(fused) == 2 and not _eager_attention_gemms(graph)
        # 64 tokens, as below: the layers' linear FLOPs and the causal attention's.
        per_layer = 2 * 64 * (4 * 64 * 64 + 64 * 256 + 256 * 64) + 64 * (256 + 64)
        linear = 2 * per_layer + 2 * 64 * 64 * 256 + 64 * 256
        attention = 2 * _attention_forward_flops(2 * 4, 16, 32 * 33 // 2)
        assert accel_sim.simulate(graph, device="h100").result.model_flops == linear + attention
        return
    gemms = _eager_attention_gemms(graph)
    assert [n["attrs"]["attention_gemm"] for n in gemms] == ["qk", "pv"] * 2
    assert all(n["op"] == "bmm" and n["attrs"]["mask_is_causal"] is True for n in gemms)
    # 64 tokens: q, k, v, out_proj 64 x 64 without bias; fc_in 64 -> 256 and fc_out 256 -> 64
    # with biases (addmm: 1 FLOP per bias and token); lm_head 64 -> 256 with a bias.
    per_layer = 2 * 64 * (4 * 64 * 64 + 64 * 256 + 256 * 64) + 64 * (256 + 64)
    linear = 2 * per_layer + 2 * 64 * 64 * 256 + 64 * 256
    # Causal attention: batch 2 x 4 heads, 528 pairs, head_dim 16, QK^T and P V.
    attention = 2 * _attention_forward_flops(2 * 4, 16, 32 * 33 // 2)
    report = accel_sim.simulate(graph, device="h100")
    assert report.result.model_flops == linear + attention
    with FlopCounterMode(display=False) as counter:
        model(**_input_ids(2, 32))
    counted = {str(op): f for op, f in counter.get_flop_counts()["Global"].items()}
    assert counted["aten.bmm"] == _simulated_flops(graph, "bmm") == 2 * _attention_forward_flops(2 * 4, 16, 32 * 32)
