"""HF config.json -> `_core.ModelSpec`, and the index of shipped models (data/models/models.yaml).

    spec = load_model_spec("llama-3-8b")          # a shipped model by id or alias
    spec = load_model_spec("path/to/config.json")  # any supported HF config

The builder covers dense decoders with RoPE, RMSNorm and SwiGLU (model types below); other
model types and structural fields it does not model yet are refused with an error that names
them, never built wrongly.
"""

from __future__ import annotations

import functools
import importlib.resources
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from accel_sim import _core
from accel_sim.errors import UsageError
from accel_sim.io import fields

BUILDER_MODEL_TYPES = ("llama", "mistral", "qwen2", "qwen3", "mixtral", "qwen2_moe", "qwen3_moe", "gpt2", "gptj", "falcon", "bert",
                       "vit", "deepseek_v3", "gpt_oss", "gemma2", "gemma3_text", "llama4_text")
_GEMMA_TYPES = ("gemma2", "gemma3_text")
_MOE_TYPES = ("mixtral", "qwen2_moe", "qwen3_moe", "deepseek_v3", "gpt_oss", "llama4_text")

_ACTIVATIONS = {
    "silu": _core.Activation.silu,
    "swish": _core.Activation.silu,
    "gelu": _core.Activation.gelu,
    "gelu_new": _core.Activation.gelu_new,
    "gelu_pytorch_tanh": _core.Activation.gelu_tanh,
    "relu": _core.Activation.relu,
}
_DTYPES = {"bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "bf16": "bf16", "fp16": "fp16", "fp32": "fp32"}
# Fields that change a model's structure in ways the builder does not model yet.
_STRUCTURAL = ("n_routed_experts", "kv_lora_rank", "q_lora_rank")
_DENSE_ONLY = ("num_local_experts", "num_experts")


@dataclass(frozen=True)
class ModelEntry:
    """A shipped model: its id, config file and where its numbers come from."""

    id: str
    file: str
    family: str
    aliases: tuple[str, ...]
    hub_id: str
    source: str
    params: int | None


def _key(name: str) -> str:
    return re.sub(r"[^a-z0-9]", "", name.lower())


def _models_dir() -> Path:
    return Path(str(importlib.resources.files("accel_sim") / "data" / "models"))


def shipped_models() -> list[ModelEntry]:
    return list(_shipped_models())


@functools.lru_cache(maxsize=1)
def _shipped_models() -> tuple[ModelEntry, ...]:
    """The index is parsed once per process (a sweep looks models up once per point)."""
    index = _models_dir() / "models.yaml"
    data = yaml.safe_load(index.read_text(encoding="utf-8"))
    return tuple(
        ModelEntry(
            id=m["id"],
            file=m["file"],
            family=m.get("family", ""),
            aliases=tuple(str(a) for a in m.get("aliases", [])),
            hub_id=m.get("hub_id", ""),
            source=m.get("source", ""),
            params=m.get("params"),
        )
        for m in data["models"]
    )


def find_model(name: str) -> ModelEntry | None:
    key = _key(name)
    for entry in shipped_models():
        if key in {_key(entry.id), *(_key(a) for a in entry.aliases)}:
            return entry
    return None


def load_model_config(name_or_path: str) -> tuple[dict, str]:
    """The HF config dict of a shipped model (by id or alias) or of a config.json path."""
    entry = find_model(name_or_path)
    path = _models_dir() / entry.file if entry is not None else Path(name_or_path)
    if not path.is_file():
        known = ", ".join(e.id for e in shipped_models())
        raise UsageError(f"unknown model '{name_or_path}' (known: {known}; or give a config.json path)")
    config = fields.parse_json(fields.read_text(path, "model config"), str(path), "config")
    if not isinstance(config, dict):
        raise UsageError(f"{path}: a config must be a JSON object")
    return config, str(path)


# A model dimension beyond 2^31 is far beyond any model; products of dimensions (bytes of a weight,
# of an activation) are checked for overflow by the core.
_DIM_MAX = 2**31 - 1


def _int(config: dict, key: str, where: str, default: int | None = None) -> int:
    value = config.get(key, default)
    if value is None:
        raise UsageError(f"{where}: missing '{key}'")
    return fields.integer(value, where, key, minimum=0, maximum=_DIM_MAX)


def _flag(config: dict, key: str, where: str, default: bool) -> bool:
    """A true/false field (null: the default); a string or number is refused, not read as truthy."""
    value = config.get(key)
    return default if value is None else fields.boolean(value, where, key)


def _fraction(config: dict, key: str, where: str) -> float:
    """A dropout probability in [0, 1) (null or absent: 0)."""
    value = config.get(key)
    if value is None:
        return 0.0
    p = fields.number(value, where, key, minimum=0.0)
    if p >= 1.0:
        raise UsageError(f"{where}: '{key}' must be a probability below 1, got {value}")
    return p


WEIGHT_DTYPES = ("bf16", "fp16", "fp32", "fp8", "int8", "int4", "nvfp4", "mxfp4")
FP4_FORMATS = ("nvfp4", "mxfp4")  # packed fp4 weights with one-byte block scales (core/include/accelsim/model.h)
KV_DTYPES = ("bf16", "fp16", "fp32", "fp8", "int8")
_INT4_GROUP = 128  # AWQ's and GPTQ's default group size


def _storage_dtype(name: str) -> str:
    return "fp8_e4m3" if name == "fp8" else name


def _read_quantization(spec: Any, config: dict, where: str) -> None:
    """A checkpoint's `quantization_config` (AWQ/GPTQ 4- or 8-bit, fp8): its weight format."""
    q = config.get("quantization_config")
    if not q:
        return
    fields.mapping(q, where, "quantization_config")
    method, bits = str(q.get("quant_method", "")).lower(), q.get("bits", q.get("w_bit"))
    if method in ("awq", "gptq") and bits == 4 and not isinstance(bits, bool):
        group = q.get("group_size", q.get("q_group_size", _INT4_GROUP))
        spec.int4_group_size = (_INT4_GROUP if group in (None, -1) else
                                fields.integer(group, f"{where}: quantization_config", "group_size", minimum=1,
                                               maximum=_DIM_MAX))
    elif method == "gptq" and bits == 8:
        spec.weight_dtype = _core.DType.int8
    elif method == "fp8":
        spec.weight_dtype = _core.DType.fp8_e4m3
    elif method == "mxfp4":  # gpt-oss's checkpoints: MXFP4 expert weights
        spec.fp4_weights = _core.Fp4Format.mxfp4
    else:
        raise UsageError(f"{where}: quantization_config with quant_method {method!r} and bits {bits!r} "
                         "is not supported (supported: awq/gptq 4-bit, gptq 8-bit, fp8, mxfp4)")


def spec_from_hf_config(config: dict, where: str, name: str = "", dtype: str | None = None,
                        weight_dtype: str | None = None, kv_dtype: str | None = None) -> Any:
    """Validates an HF config of a supported model type and returns its ModelSpec.

    `dtype` is the model's dtype (activations, and weights and KV cache unless given);
    `weight_dtype` one of WEIGHT_DTYPES (int4: packed weight-only, groups of 128; nvfp4, mxfp4:
    packed fp4 with block scales);
    `kv_dtype` one of KV_DTYPES."""
    model_type = config.get("model_type")
    if model_type not in BUILDER_MODEL_TYPES:
        raise UsageError(
            f"{where}: model_type {model_type!r} is not supported by the model builder yet "
            f"(supported: {', '.join(BUILDER_MODEL_TYPES)}); capture a script with get_model() instead"
        )
    _check_architectures(config, model_type, where)
    if model_type == "gpt2":
        config = _gpt2_as_common(config, where)
    elif model_type == "gptj":
        config = _gptj_as_common(config, where)
    elif model_type == "falcon":
        config = _falcon_as_common(config, where)
    fields = (() if model_type == "deepseek_v3" else _STRUCTURAL) + (() if model_type in _MOE_TYPES else _DENSE_ONLY)
    for field in fields:
        if config.get(field):
            raise UsageError(f"{where}: field '{field}' ({config[field]!r}) is not supported for model_type {model_type!r}")
    # Gemma names its MLP activation hidden_activation (hidden_act is Gemma 1's, which HF ignores).
    act = config.get("hidden_activation") if model_type in _GEMMA_TYPES else config.get("hidden_act", "silu")
    if not isinstance(act, str) or act not in _ACTIVATIONS:
        raise UsageError(f"{where}: hidden_act {act!r} is not supported (known: {', '.join(_ACTIVATIONS)})")

    spec = _core.ModelSpec()
    spec.name = name or (config.get("_name_or_path") if isinstance(config.get("_name_or_path"), str) else "") or model_type
    spec.family = model_type
    spec.hidden_size = _int(config, "hidden_size", where)
    spec.num_layers = _int(config, "num_hidden_layers", where)
    spec.num_heads = _int(config, "num_attention_heads", where)
    spec.num_kv_heads = _int(config, "num_key_value_heads", where, spec.num_heads)
    head_dim = config.get("head_dim")
    spec.head_dim = _int(config, "head_dim", where) if head_dim is not None else spec.hidden_size // max(spec.num_heads, 1)
    spec.ffn_size = _int(config, "intermediate_size", where)
    spec.vocab_size = _int(config, "vocab_size", where, 0 if model_type == "vit" else None)
    spec.max_position_embeddings = _int(config, "max_position_embeddings", where, 0)
    spec.activation = _ACTIVATIONS[act]
    spec.gated_ffn = True
    spec.norm = _core.NormKind.rms_norm
    spec.rotary = True
    spec.tied_embeddings = _flag(config, "tie_word_embeddings", where, False)
    if model_type in ("qwen2", "qwen2_moe"):
        spec.qkv_bias = True  # Qwen2 always has q/k/v biases and none on o_proj
    else:
        attention_bias = _flag(config, "attention_bias", where, False)  # Llama/Qwen3: q, k, v and o
        spec.qkv_bias = attention_bias
        spec.output_bias = attention_bias
    spec.ffn_bias = _flag(config, "mlp_bias", where, False)
    spec.qk_norm = model_type in ("qwen3", "qwen3_moe")
    if model_type == "gpt2":
        # GPT-2: LayerNorm, learned positions, fused c_attn, biases everywhere, 4h GELU MLP,
        # lm_head tied to the token embedding (HF's default).
        spec.gated_ffn = False
        spec.norm = _core.NormKind.layer_norm
        spec.rotary = False
        spec.learned_positions = True
        spec.fused_qkv = True
        spec.qkv_bias = spec.output_bias = spec.ffn_bias = True
        spec.tied_embeddings = _flag(config, "tie_word_embeddings", where, True)
    if model_type == "gptj":
        # GPT-J (HF GPTJForCausalLM): one LayerNorm feeding attention and the MLP in parallel,
        # RoPE on the first rotary_dim dims of each head, q/k/v/out without biases, a 4h MLP with
        # biases, an untied lm_head with a bias.
        spec.gated_ffn = False
        spec.norm = _core.NormKind.layer_norm
        spec.parallel_block = True
        spec.rotary_dim = _int(config, "rotary_dim", where, 0)
        spec.qkv_bias = spec.output_bias = False
        spec.ffn_bias = spec.lm_head_bias = True
    if model_type == "falcon":
        _read_falcon(spec, config, where)
    if model_type == "bert":
        # BERT (BertForMaskedLM): a post-norm encoder with learned positions, token types and an
        # embedding LayerNorm; biases everywhere; an MLM head (dense, GELU, LayerNorm, decoder
        # tied to the word embeddings plus a bias).
        if config.get("position_embedding_type") not in (None, "absolute"):
            raise UsageError(f"{where}: position_embedding_type {config['position_embedding_type']!r} is not supported")
        spec.causal = False
        spec.gated_ffn = False
        spec.norm = _core.NormKind.layer_norm
        spec.rotary = False
        spec.learned_positions = True
        spec.post_norm = True
        spec.type_vocab_size = _int(config, "type_vocab_size", where, 2)
        spec.embedding_norm = True
        spec.final_norm = False
        spec.lm_head_transform = True
        spec.lm_head_bias = True
        spec.qkv_bias = spec.output_bias = spec.ffn_bias = True
        spec.tied_embeddings = _flag(config, "tie_word_embeddings", where, True)
    if model_type == "vit":
        _read_vit(spec, config, where)
    if model_type == "deepseek_v3":
        _read_mla(spec, config, where)
    _read_dropout(spec, config, model_type, where)
    window = 0 if config.get("sliding_window") is None else _int(config, "sliding_window", where)
    use_window = _flag(config, "use_sliding_window", where, model_type in ("mistral", "gpt_oss"))
    spec.sliding_window = window if use_window else 0
    if model_type == "gpt_oss":
        # gpt-oss (HF GptOssForCausalLM): attention sinks, q/k/v/o biases (attention_bias), the
        # window on the layers layer_types names "sliding_attention".
        spec.attention_sinks = True
        spec.sliding_window_period = _window_period(config.get("layer_types"), spec.num_layers, where)
    if model_type in _MOE_TYPES:
        _read_moe(spec, config, model_type, where)
    if model_type in _GEMMA_TYPES:
        _read_gemma(spec, config, model_type, where)
    if model_type == "llama4_text":
        _read_llama4(spec, config, where)
    if config.get("num_nextn_predict_layers"):  # DeepSeek-V3's multi-token-prediction modules
        spec.mtp_layers = _int(config, "num_nextn_predict_layers", where)
    # A config without a dtype loads in fp32 in transformers.
    named = config.get("torch_dtype") or config.get("dtype") or "float32"
    chosen = dtype or (_DTYPES.get(named) if isinstance(named, str) else None)
    if chosen is None:
        raise UsageError(f"{where}: torch_dtype {config.get('torch_dtype')!r} is not supported")
    for field in ("weight_dtype", "activation_dtype", "kv_cache_dtype"):
        setattr(spec, field, _core.parse_dtype(chosen))
    _read_quantization(spec, config, where)
    if weight_dtype is not None:
        if weight_dtype not in WEIGHT_DTYPES:
            raise UsageError(f"unknown weight dtype {weight_dtype!r} (known: {', '.join(WEIGHT_DTYPES)})")
        spec.int4_group_size = _INT4_GROUP if weight_dtype == "int4" else 0
        spec.fp4_weights = getattr(_core.Fp4Format, weight_dtype if weight_dtype in FP4_FORMATS else "none")
        packed = weight_dtype == "int4" or weight_dtype in FP4_FORMATS
        spec.weight_dtype = _core.parse_dtype(chosen if packed else _storage_dtype(weight_dtype))
    if kv_dtype is not None:
        if kv_dtype not in KV_DTYPES:
            raise UsageError(f"unknown KV-cache dtype {kv_dtype!r} (known: {', '.join(KV_DTYPES)})")
        spec.kv_cache_dtype = _core.parse_dtype(_storage_dtype(kv_dtype))
    try:
        spec.validate()
    except ValueError as e:
        raise UsageError(f"{where}: {e}") from None
    return spec


# The head the builder puts on each family, as HF names the class that carries it. A config whose
# `architectures` names another head (a sequence classifier, a token classifier, a QA head, ...)
# is refused rather than built as something it is not.
_BUILT_HEADS = {"bert": ("ForMaskedLM", "the masked-LM head"), "vit": ("ViTModel", "no head, the pooler")}
_DEFAULT_HEAD = ("ForCausalLM", "the causal-LM head")


def _check_architectures(config: dict, model_type: str, where: str) -> None:
    archs = config.get("architectures")
    if archs is None:
        return
    if not isinstance(archs, list) or not all(isinstance(a, str) for a in archs):
        raise UsageError(f"{where}: 'architectures' must be a list of class names, got {archs!r}")
    suffix, head = _BUILT_HEADS.get(model_type, _DEFAULT_HEAD)
    for arch in archs:
        # GPT-2's causal-LM class is GPT2LMHeadModel.
        if not (arch.endswith(suffix) or (suffix == "ForCausalLM" and arch.endswith("LMHeadModel"))):
            raise UsageError(f"{where}: architectures names {arch}; the model builder builds {model_type} with "
                             f"{head} (*{suffix}), not that class's head; capture a script with get_model() instead")


def _read_dropout(spec: Any, config: dict, model_type: str, where: str) -> None:
    """Dropout probabilities of a training step, under each family's config names."""
    names = {"gpt2": ("resid_pdrop", "embd_pdrop", "attn_pdrop"),
             "gptj": ("resid_pdrop", "embd_pdrop", "attn_pdrop"),
             "bert": ("hidden_dropout_prob", "hidden_dropout_prob", "attention_probs_dropout_prob"),
             "vit": ("hidden_dropout_prob", "hidden_dropout_prob", "attention_probs_dropout_prob")}
    hidden, embedding, attention = names.get(model_type, ("hidden_dropout", "embedding_dropout", "attention_dropout"))
    spec.hidden_dropout = _fraction(config, hidden, where)
    spec.embedding_dropout = _fraction(config, embedding, where)
    spec.attention_dropout = _fraction(config, attention, where)


def _read_mla(spec: Any, config: dict, where: str) -> None:
    """DeepSeek-V3 multi-head latent attention: low-rank q, a cached kv latent plus a RoPE key."""
    mla = spec.mla
    mla.q_lora_rank = 0 if config.get("q_lora_rank") is None else _int(config, "q_lora_rank", where)
    mla.kv_lora_rank = _int(config, "kv_lora_rank", where)
    mla.qk_nope_head_dim = _int(config, "qk_nope_head_dim", where)
    mla.qk_rope_head_dim = _int(config, "qk_rope_head_dim", where)
    mla.v_head_dim = _int(config, "v_head_dim", where)
    spec.head_dim = mla.qk_nope_head_dim + mla.qk_rope_head_dim
    spec.num_kv_heads = spec.num_heads


def _read_vit(spec: Any, config: dict, where: str) -> None:
    """HF ViTModel: a pre-norm encoder over image patches with a CLS token, a learned position
    table, LayerNorm, GELU, biases (q/k/v per qkv_bias), a final LayerNorm and a pooler."""
    size = config.get("image_size", 224)
    if isinstance(size, list) and len(size) == 2:
        height, width = (fields.integer(v, where, f"image_size[{i}]", minimum=1, maximum=_DIM_MAX)
                         for i, v in enumerate(size))
    elif isinstance(size, int) and not isinstance(size, bool):
        height = width = fields.integer(size, where, "image_size", minimum=1, maximum=_DIM_MAX)
    else:
        raise UsageError(f"{where}: 'image_size' must be an integer or [height, width], got {size!r:.60}")
    spec.image_height, spec.image_width = height, width
    spec.patch_size = _int(config, "patch_size", where)
    spec.num_channels = _int(config, "num_channels", where, 3)
    spec.cls_token = True
    spec.pooler = True
    spec.lm_head = False
    spec.causal = False
    spec.gated_ffn = False
    spec.norm = _core.NormKind.layer_norm
    spec.rotary = False
    spec.learned_positions = True
    spec.max_position_embeddings = spec.image_tokens()
    spec.qkv_bias = _flag(config, "qkv_bias", where, True)
    spec.output_bias = spec.ffn_bias = True
    spec.tied_embeddings = False


def _gpt2_as_common(config: dict, where: str) -> dict:
    """GPT-2's config names (n_embd, n_layer, ...) in the common spelling."""
    hidden = _int(config, "n_embd", where)
    inner = config.get("n_inner")
    return {
        **config,
        "hidden_size": hidden,
        "num_hidden_layers": _int(config, "n_layer", where),
        "num_attention_heads": _int(config, "n_head", where),
        "intermediate_size": inner if inner is not None else 4 * hidden,
        "max_position_embeddings": _int(config, "n_positions", where),
        "hidden_act": config.get("activation_function", "gelu_new"),
    }


def _gptj_as_common(config: dict, where: str) -> dict:
    """GPT-J's config names (GPTJConfig: n_embd, n_layer, n_inner, ...) in the common spelling."""
    # GPT-2's names, but embeddings untied unless the config says otherwise (GPTJConfig's default).
    return {**_gpt2_as_common(config, where), "tie_word_embeddings": _flag(config, "tie_word_embeddings", where, False)}


def _falcon_as_common(config: dict, where: str) -> dict:
    """Falcon's config names (FalconConfig) in the common spelling. KV heads as HF's FalconAttention
    takes them: num_kv_heads with the new decoder architecture or without multi_query, else one."""
    if _flag(config, "alibi", where, False):
        raise UsageError(f"{where}: field 'alibi' (True) is not supported for model_type 'falcon' (ALiBi positions)")
    hidden = _int(config, "hidden_size", where)
    heads = _int(config, "num_attention_heads", where)
    new_arch = _flag(config, "new_decoder_architecture", where, False)
    multi_query = _flag(config, "multi_query", where, True)
    kv = _int(config, "num_kv_heads", where, heads) if (new_arch or not multi_query) else 1
    ffn = config.get("ffn_hidden_size")
    return {
        **config,
        "num_key_value_heads": kv,
        "intermediate_size": ffn if ffn is not None else 4 * hidden,
        "max_position_embeddings": _int(config, "max_position_embeddings", where, 2048),
        "hidden_act": config.get("activation", "gelu"),
        "tie_word_embeddings": _flag(config, "tie_word_embeddings", where, True),
    }


def _read_falcon(spec: Any, config: dict, where: str) -> None:
    """HF FalconForCausalLM: a fused query_key_value projection, LayerNorm, a 4h MLP, biases on
    every linear iff `bias`, RoPE. The new decoder architecture (Falcon-40B/180B) and
    parallel_attn (Falcon-7B) make the block parallel: with two norms (ln_attn, ln_mlp) when
    num_ln_in_parallel_attn is 2, which the new architecture defaults to, else one."""
    spec.gated_ffn = False
    spec.norm = _core.NormKind.layer_norm
    spec.fused_qkv = True
    spec.qkv_bias = spec.output_bias = spec.ffn_bias = _flag(config, "bias", where, False)
    new_arch = _flag(config, "new_decoder_architecture", where, False)
    spec.parallel_block = new_arch or _flag(config, "parallel_attn", where, True)
    norms = config.get("num_ln_in_parallel_attn")
    if norms is None:
        norms = 2 if new_arch else 1
    if isinstance(norms, bool) or norms not in (1, 2):
        raise UsageError(f"{where}: num_ln_in_parallel_attn must be 1 or 2, got {norms!r}")
    spec.parallel_ffn_norm = new_arch and norms == 2


def _read_gemma(spec: Any, config: dict, model_type: str, where: str) -> None:
    """Gemma 2 (HF Gemma2ForCausalLM) and Gemma 3's text model (Gemma3ForCausalLM): four norms a
    layer, embeddings scaled by sqrt(hidden_size), tied LM head, local sliding-window layers
    between global ones (Gemma 2: every other layer; Gemma 3: five of six), logit soft-capping
    (Gemma 2), q/k RMSNorm (Gemma 3)."""
    import math

    spec.sandwich_norms = True
    spec.embedding_multiplier = math.sqrt(spec.hidden_size)
    spec.tied_embeddings = _flag(config, "tie_word_embeddings", where, True)
    for key, field in (("attn_logit_softcapping", "attention_softcap"), ("final_logit_softcapping", "final_logit_softcap")):
        if config.get(key) is not None:
            setattr(spec, field, fields.number(config[key], where, key, minimum=0.0))
    spec.qk_norm = model_type == "gemma3_text"
    if config.get("sliding_window") is not None:
        spec.sliding_window = _int(config, "sliding_window", where)
        if config.get("layer_types") is not None:
            spec.sliding_window_period = _window_period(config["layer_types"], spec.num_layers, where)
        else:  # Gemma 2 alternates; Gemma 3 names its pattern (transformers' defaults: 2 and 6)
            spec.sliding_window_period = 2 if model_type == "gemma2" else _int(config, "sliding_window_pattern", where, 6)


def _read_llama4(spec: Any, config: dict, where: str) -> None:
    """Llama 4's text model (HF Llama4ForCausalLM): every no_rope_layer_interval-th layer (4)
    without RoPE and attending globally, the others within attention_chunk_size chunks with q and
    k L2-normalized (use_qk_norm)."""
    interval = 4  # transformers' Llama4TextConfig: no_rope_layer_interval
    listed = config.get("no_rope_layers")
    default = [int((i + 1) % interval != 0) for i in range(spec.num_layers)]
    if listed is not None and list(listed) != default:
        raise UsageError(f"{where}: no_rope_layers {listed!r} is not every {interval}th layer without RoPE, the only "
                         "pattern the builder lays out")
    spec.nope_period = interval
    spec.attention_chunk = _int(config, "attention_chunk_size", where, 8192)
    spec.qk_l2_norm = _flag(config, "use_qk_norm", where, True)


def _window_period(layer_types: Any, layers: int, where: str) -> int:
    """The period p of a layer_types list that windows every layer but each p-th (ModelSpec's
    sliding_window_period; 0 when all are windowed); any other pattern is refused."""
    if not isinstance(layer_types, list) or len(layer_types) != layers:
        raise UsageError(f"{where}: layer_types must list one attention type per layer ({layers})")
    full = [i for i, t in enumerate(layer_types) if t == "full_attention"]
    if any(t not in ("full_attention", "sliding_attention") for t in layer_types):
        raise UsageError(f"{where}: layer_types may name only 'sliding_attention' and 'full_attention'")
    period = full[0] + 1 if full else 0
    if period and full != list(range(period - 1, layers, period)):
        raise UsageError(f"{where}: layer_types {layer_types!r} is not every-p-th-layer-full, the only pattern "
                         "the builder lays out")
    return period


def _read_moe(spec: Any, config: dict, model_type: str, where: str) -> None:
    """MoE fields of Mixtral, Qwen2-MoE and Qwen3-MoE configs (transformers 5.x semantics)."""
    moe = spec.moe
    if model_type == "deepseek_v3":
        moe.num_experts = _int(config, "n_routed_experts", where)
        moe.expert_ffn_size = _int(config, "moe_intermediate_size", where)
        moe.shared_ffn_size = _int(config, "n_shared_experts", where, 0) * moe.expert_ffn_size
        moe.first_dense_layers = _int(config, "first_k_dense_replace", where, 0)
        if _int(config, "moe_layer_freq", where, 1) != 1:
            raise UsageError(f"{where}: field 'moe_layer_freq' ({config['moe_layer_freq']!r}) other than 1 is not supported")
        if config.get("scoring_func", "sigmoid") != "sigmoid" or config.get("topk_method", "noaux_tc") != "noaux_tc":
            raise UsageError(f"{where}: only sigmoid scoring with topk_method 'noaux_tc' is supported")
        moe.sigmoid_scoring = True
        moe.num_groups = _int(config, "n_group", where, 1)
        moe.top_k_groups = _int(config, "topk_group", where, 1)
        moe.normalize_top_k = _flag(config, "norm_topk_prob", where, True)
        moe.fp32_combine = True
    elif model_type == "gpt_oss":
        # Router with a bias, top-k of its logits softmaxed (the same weights as the top-k of the
        # softmax renormalized); each expert's fused gate_up and down projections carry biases.
        # The expert activation, (up + 1) * gate * sigmoid(1.702 gate) with both clamped, costs as
        # SwiGLU's silu(gate) * up plus the bias adds.
        moe.num_experts = _int(config, "num_local_experts", where)
        moe.expert_ffn_size = spec.ffn_size
        moe.normalize_top_k = True
        moe.router_bias = moe.expert_bias = True
    elif model_type == "llama4_text":
        # HF Llama4TextMoe: a router without bias, the top-k logits through a sigmoid, routed
        # experts of intermediate_size and one shared expert of the same width; MoE layers every
        # interleave_moe_layer_step-th layer (moe_layers), the others a dense MLP of
        # intermediate_size_mlp.
        moe.num_experts = _int(config, "num_local_experts", where)
        moe.expert_ffn_size = _int(config, "intermediate_size", where)
        moe.shared_ffn_size = moe.expert_ffn_size
        moe.sigmoid_top_k = True
        moe.sparse_step = _int(config, "interleave_moe_layer_step", where, 1) or 1
        spec.ffn_size = _int(config, "intermediate_size_mlp", where)
        listed = config.get("moe_layers")
        if listed is not None and list(listed) != list(range(moe.sparse_step - 1, spec.num_layers, moe.sparse_step)):
            raise UsageError(f"{where}: moe_layers {listed!r} is not every interleave_moe_layer_step-th layer, the "
                             "only pattern the builder lays out")
    elif model_type == "mixtral":
        moe.num_experts = _int(config, "num_local_experts", where)
        moe.expert_ffn_size = spec.ffn_size
        moe.normalize_top_k = True  # Mixtral renormalizes its top-k weights
        moe.fp32_combine = True
    else:
        moe.num_experts = _int(config, "num_experts", where)
        moe.expert_ffn_size = _int(config, "moe_intermediate_size", where)
        moe.normalize_top_k = _flag(config, "norm_topk_prob", where, model_type == "qwen3_moe")
        moe.sparse_step = _int(config, "decoder_sparse_step", where, 1) or 1
        if config.get("mlp_only_layers"):
            raise UsageError(f"{where}: field 'mlp_only_layers' ({config['mlp_only_layers']!r}) is not supported yet")
    if model_type == "qwen2_moe":
        moe.shared_ffn_size = _int(config, "shared_expert_intermediate_size", where)
        moe.shared_expert_gate = True
    moe.top_k = _int(config, "num_experts_per_tok", where)


def load_model_spec(name_or_path: str, dtype: str | None = None, weight_dtype: str | None = None,
                    kv_dtype: str | None = None) -> Any:
    config, where = load_model_config(name_or_path)
    entry = find_model(name_or_path)
    return spec_from_hf_config(config, where, name=entry.id if entry else Path(where).stem, dtype=dtype,
                               weight_dtype=weight_dtype, kv_dtype=kv_dtype)
