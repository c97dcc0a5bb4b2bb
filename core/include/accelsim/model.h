// ModelSpec: the hyperparameters of a transformer, enough to build its op graph for any shape.
//
// A ModelSpec is plain data, filled from an HF config (python/accel_sim/io/model_config.py) or
// in code. parameter_count() counts weights the way HF's num_parameters() does (tied embeddings
// once), so the two can be checked against each other.
//
//   ModelSpec llama{.name = "llama-3-8b", .hidden_size = 4096, .num_layers = 32, ...};
//   int64_t n = parameter_count(llama);  // 8,030,261,248
#pragma once

#include <cstdint>
#include <string>

#include "accelsim/dtype.h"

namespace accelsim {

// gelu_new is GELU's tanh approximation as GPT-2 writes it in Python (eight pointwise ops in
// HF-eager graphs, one kernel when fused); gelu_tanh is F.gelu(approximate="tanh").
enum class Activation : uint8_t { gelu, gelu_tanh, gelu_new, silu, relu };

// Mixture-of-experts FFN layers (Mixtral, Qwen-MoE, DeepSeek). num_experts = 0: a dense model.
struct MoeSpec {
  int64_t num_experts = 0;         // routed experts per MoE layer
  int64_t top_k = 0;               // experts each token is routed to
  int64_t expert_ffn_size = 0;     // intermediate size of one routed expert (gated)
  int64_t shared_ffn_size = 0;     // width of the always-on shared expert MLP; 0: none
  bool shared_expert_gate = false; // Qwen2-MoE: sigmoid(Linear(hidden, 1)) scales the shared expert
  int64_t first_dense_layers = 0;  // DeepSeek first_k_dense_replace: leading layers stay dense
  int64_t sparse_step = 1;         // Qwen2-MoE decoder_sparse_step: layer l is MoE if (l+1) % step == 0
  bool normalize_top_k = false;    // renormalize the top-k routing weights to sum to 1
  bool fp32_combine = false;       // weight and sum expert outputs in fp32 (HF Mixtral)
  bool sigmoid_scoring = false;    // DeepSeek-V3: sigmoid scores plus a correction bias, no softmax
  int64_t num_groups = 1;          // DeepSeek-V3 group-limited routing: experts in n_group groups,
  int64_t top_k_groups = 1;        //   tokens routed within their topk_group best groups
  bool router_bias = false;        // gpt-oss: a bias on the router's logits
  // Llama 4: the top-k router logits through a sigmoid (no softmax over the experts); the scores
  // scale the routed rows (HF Llama4TextMoe scales the input, costed here as the same multiply on
  // the output rows).
  bool sigmoid_top_k = false;
  bool expert_bias = false;        // gpt-oss: biases on each routed expert's gate/up and down outputs

  bool enabled() const { return num_experts > 0; }
  bool is_moe_layer(int64_t layer) const {
    return enabled() && layer >= first_dense_layers && (layer + 1) % sparse_step == 0;
  }
  // How many of layers 0 .. num_layers - 1 are MoE layers: the multiples of sparse_step among
  // layer + 1 = first_dense_layers + 1 .. num_layers.
  int64_t moe_layer_count(int64_t num_layers) const {
    if (!enabled() || num_layers <= first_dense_layers) return 0;
    const int64_t step = sparse_step >= 1 ? sparse_step : 1;
    return num_layers / step - first_dense_layers / step;
  }
};
enum class NormKind : uint8_t { rms_norm, layer_norm };

// Multi-head latent attention (DeepSeek-V2/V3): queries through an optional low-rank
// bottleneck, keys and values from a compressed latent of kv_lora_rank dims (cached) plus a
// shared RoPE key of qk_rope_head_dim dims. kv_lora_rank = 0: ordinary attention.
struct MlaSpec {
  int64_t q_lora_rank = 0;  // 0: q projected directly from the hidden state
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;

  bool enabled() const { return kv_lora_rank > 0; }
};

// How a model's linear weights hold FP4 values (ModelSpec::fp4_weights).
enum class Fp4Format : uint8_t { none, nvfp4, mxfp4 };

struct ModelSpec {
  std::string name;
  std::string family;  // HF model_type ("llama", "gpt2", ...): selects HF-eager op details
  bool causal = true;  // decoder (causal self-attention) or encoder

  int64_t hidden_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;  // = num_heads for MHA, 1 for MQA, in between for GQA
  int64_t head_dim = 0;      // usually hidden_size / num_heads
  int64_t ffn_size = 0;      // intermediate size of the dense FFN
  int64_t vocab_size = 0;
  int64_t max_position_embeddings = 0;

  Activation activation = Activation::silu;
  bool gated_ffn = true;  // SwiGLU/GeGLU: gate, up and down projections; else up and down
  NormKind norm = NormKind::rms_norm;
  bool rotary = true;              // RoPE; else no position computation in the layers
  int64_t rotary_dim = 0;          // RoPE on the first rotary_dim dims of each head (GPT-J: 64 of
                                   //   256); 0: all of head_dim
  bool learned_positions = false;  // a [max_position_embeddings, hidden] table added to the input (GPT-2)
  bool fused_qkv = false;          // one [hidden, (heads + 2 kv_heads) * head_dim] projection (GPT-2 c_attn)
  bool post_norm = false;          // norm after each residual add (BERT) instead of before each sublayer
  // Parallel residual block: x + attention(norm(x)) + ffn(norm'(x)) instead of two residual steps.
  // GPT-J (Wang & Komatsuzaki 2021) and Falcon-7B share one norm (norm' = norm); Falcon's
  // new_decoder_architecture (Falcon-40B/180B) gives the FFN its own (parallel_ffn_norm).
  bool parallel_block = false;
  bool parallel_ffn_norm = false;
  int64_t type_vocab_size = 0;     // token-type (segment) embeddings added to the input (BERT)
  bool embedding_norm = false;     // a norm over the summed input embeddings (BERT)
  bool final_norm = true;          // a norm after the last layer (pre-norm decoders)
  bool lm_head_transform = false;  // dense + activation + norm before the output projection (BERT MLM)
  bool lm_head_bias = false;       // a bias on the output projection (BERT MLM decoder)
  bool lm_head = true;             // an output projection to the vocabulary

  // Vision transformers (ViT): the input is an image cut into patch_size x patch_size patches
  // by a strided convolution; a CLS token is prepended; a pooler may follow. patch_size = 0:
  // a text model.
  int64_t image_height = 0;
  int64_t image_width = 0;
  int64_t patch_size = 0;
  int64_t num_channels = 0;
  bool cls_token = false;
  bool pooler = false;  // dense + tanh on the first token (HF ViTModel)

  bool vision() const { return patch_size > 0; }
  // Tokens of one image: patches plus the CLS token.
  int64_t image_tokens() const {
    return vision() ? (image_height / patch_size) * (image_width / patch_size) + (cls_token ? 1 : 0)
                    : 0;
  }
  bool tied_embeddings = false;    // lm_head shares the embedding matrix
  bool qkv_bias = false;           // biases on q, k, v projections (Qwen2)
  bool output_bias = false;        // bias on the attention output projection
  bool ffn_bias = false;           // biases on the FFN projections
  bool qk_norm = false;            // RMSNorm over head_dim on q and k (Qwen3)
  int64_t sliding_window = 0;      // 0: full attention
  // With sliding_window: layer l attends through the window unless (l + 1) is a multiple of
  // this period, when it attends to everything (gpt-oss and Gemma 2 alternate, period 2:
  // HF layer_types sliding, full, sliding, ...). 0: every layer uses the window (Mistral).
  int64_t sliding_window_period = 0;
  bool windowed_layer(int64_t layer) const {
    return sliding_window > 0 && (sliding_window_period <= 0 || (layer + 1) % sliding_window_period != 0);
  }
  // Llama 4: every nope_period-th layer ((l + 1) % nope_period == 0) has no rotary embedding and
  // attends to the whole context; the others attend within chunks of attention_chunk tokens (a
  // token sees the tokens of its own chunk up to itself) and L2-normalize q and k (qk_l2_norm,
  // no weights). 0: none of it.
  int64_t nope_period = 0;
  int64_t attention_chunk = 0;
  bool qk_l2_norm = false;
  bool nope_layer(int64_t layer) const { return nope_period > 0 && (layer + 1) % nope_period == 0; }
  bool chunked_layer(int64_t layer) const { return attention_chunk > 0 && !nope_layer(layer); }
  // Layers the builder must lay out for one repeat of the layer pattern (1 when all alike).
  int64_t layer_pattern() const {
    if (nope_period > 1) return nope_period;
    return sliding_window > 0 && sliding_window_period > 1 ? sliding_window_period : 1;
  }
  // gpt-oss: a learned logit per query head joins each softmax's denominator ("attention
  // sinks"): num_heads parameters per layer, read by the attention kernel.
  bool attention_sinks = false;
  // Dropout probabilities of a training step (HF configs: GPT-2 resid_pdrop / embd_pdrop /
  // attn_pdrop, BERT hidden_dropout_prob / attention_probs_dropout_prob). Hidden dropout follows
  // the attention output projection and the FFN, embedding dropout the summed embeddings; each
  // keeps a 1-byte mask for backward. Attention dropout runs inside the fused attention kernel
  // (FlashAttention regenerates its mask in backward). Inference ignores them.
  double hidden_dropout = 0.0;
  double embedding_dropout = 0.0;
  double attention_dropout = 0.0;
  MoeSpec moe;
  MlaSpec mla;
  // Gemma 2 and 3 (HF Gemma2/Gemma3 decoder layers): each sublayer's output normed again before
  // its residual add (post_attention_layernorm, post_feedforward_layernorm) beside the pre-norms
  // (input_layernorm, pre_feedforward_layernorm): four norms a layer.
  bool sandwich_norms = false;
  // The token embeddings multiplied by this (Gemma: sqrt(hidden_size)); 0: not scaled.
  double embedding_multiplier = 0.0;
  // Logit soft-capping, c * tanh(x / c) (Gemma 2, arXiv 2408.00118 sec. 2): of the attention
  // scores (a tanh per score in the fused kernel) and of the LM head's logits; 0: none.
  double attention_softcap = 0.0;
  double final_logit_softcap = 0.0;
  // Multi-token-prediction modules after the last layer (DeepSeek-V3's num_nextn_predict_layers):
  // not run by a plain forward; speculative decoding's mtp drafter (serve.h) runs them.
  int64_t mtp_layers = 0;  // when enabled, head_dim = qk_nope_head_dim + qk_rope_head_dim

  DType weight_dtype = DType::bf16;
  DType activation_dtype = DType::bf16;
  DType kv_cache_dtype = DType::bf16;
  // Weight-only int4 (AWQ/GPTQ): the linear layers of every transformer block, routed experts
  // included, hold packed 4-bit weights (two per byte) with a scale and a zero point in the
  // activation dtype per group of this many input channels; embeddings, norms, the MoE router,
  // MLA's kv_b_proj and the LM head keep weight_dtype. 0: no int4 weights.
  int64_t int4_group_size = 0;
  // FP4 weights of the same linear layers (int4_group_size's), packed two values per byte, with a
  // one-byte scale per block of input channels:
  //   nvfp4  blocks of 16, an fp8 (e4m3) scale each, and one fp32 scale per tensor (NVIDIA,
  //          "Introducing NVFP4 for Efficient and Accurate Low-Precision Inference", 2025:
  //          https://developer.nvidia.com/blog/introducing-nvfp4-for-efficient-and-accurate-low-precision-inference/);
  //   mxfp4  blocks of 32, an e8m0 (power of two) scale each (OCP Microscaling Formats (MX)
  //          Specification v1.0, 2023, sec. 5: https://www.opencompute.org/documents/ocp-microscaling-formats-mx-v1-0-spec-final-pdf).
  // The GEMMs dequantize them to the activation dtype, or run on fp4 units with the activations
  // quantized too under BuildOptions::fp4_gemms. Excludes int4 weights.
  Fp4Format fp4_weights = Fp4Format::none;
  int64_t fp4_block() const { return fp4_weights == Fp4Format::nvfp4 ? 16 : fp4_weights == Fp4Format::mxfp4 ? 32 : 0; }

  // Throws ConfigError naming the model and the field when a size is missing or inconsistent
  // (heads not divisible by KV heads, ...).
  void validate() const;
};

std::string_view fp4_format_name(Fp4Format f);  // "none", "nvfp4", "mxfp4"

// Total parameters as HF's num_parameters() counts them.
int64_t parameter_count(const ModelSpec& model);

// Parameters one token uses: every dense weight, the router, the shared expert and top_k of
// the routed experts per MoE layer (equals parameter_count for dense models).
int64_t active_parameter_count(const ModelSpec& model);

// Routing assumption for MoE layers: each token picks its top_k experts uniformly at random,
// so `tokens` tokens touch E * (1 - (1 - k/E)^tokens) distinct experts on average (k for one
// token, all E for many). The weights of untouched experts are not read.
double expected_experts_touched(int64_t num_experts, int64_t top_k, int64_t tokens);

// Bytes of K and V cached for `tokens` tokens of `batch` sequences (all layers, one replica).
int64_t kv_cache_bytes(const ModelSpec& model, int64_t batch, int64_t tokens);

}  // namespace accelsim
