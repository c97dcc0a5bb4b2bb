#include "accelsim/model.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>

#include "accelsim/checked_arithmetic.h"
#include "accelsim/error.h"

namespace accelsim {

void ModelSpec::validate() const {
  const std::string who = "model '" + name + "'";
  ACCELSIM_CHECK(hidden_size > 0, who + ": hidden_size must be positive");
  ACCELSIM_CHECK(num_layers > 0, who + ": num_layers must be positive");
  // Bounds on the graph's size, far beyond any model (GPT-3 has 96 layers, Llama-3.1-405B 126;
  // DeepSeek-V3 256 routed experts): a training step of 16,384 layers is 0.74 M ops, built and
  // simulated in about 3 s on a 2-core machine (bench/RESULTS.md), and the time grows with the
  // ops; a sequential MoE layer emits a GEMM per expert.
  constexpr int64_t kMaxLayers = 1 << 14;
  constexpr int64_t kMaxExperts = 1 << 14;
  ACCELSIM_CHECK(num_layers <= kMaxLayers,
                 who + ": " + std::to_string(num_layers) + " layers are more than the " +
                     std::to_string(kMaxLayers) + " a graph is built for");
  ACCELSIM_CHECK(num_heads > 0, who + ": num_heads must be positive");
  ACCELSIM_CHECK(num_kv_heads > 0 && num_heads % num_kv_heads == 0,
                 who + ": num_heads (" + std::to_string(num_heads) +
                     ") must be a multiple of num_kv_heads (" + std::to_string(num_kv_heads) + ")");
  ACCELSIM_CHECK(head_dim > 0, who + ": head_dim must be positive");
  for (const auto& [field, p] : {std::pair<const char*, double>{"hidden_dropout", hidden_dropout},
                                 {"embedding_dropout", embedding_dropout},
                                 {"attention_dropout", attention_dropout}}) {
    // NaN fails both comparisons.
    ACCELSIM_CHECK(p >= 0.0 && p < 1.0, who + ": " + field + " (a dropout probability) must be in [0, 1)");
  }
  ACCELSIM_CHECK(ffn_size > 0, who + ": ffn_size must be positive");
  ACCELSIM_CHECK(vocab_size > 0 || (vision() && !lm_head),
                 who + ": vocab_size must be positive");
  if (vision()) {
    ACCELSIM_CHECK(image_height > 0 && image_width > 0 && num_channels > 0,
                   who + ": a vision model needs image_size and num_channels");
    ACCELSIM_CHECK(image_height % patch_size == 0 && image_width % patch_size == 0,
                   who + ": image size must be a multiple of patch_size");
  }
  ACCELSIM_CHECK(sliding_window >= 0, who + ": sliding_window must not be negative");
  ACCELSIM_CHECK(sliding_window_period >= 0, who + ": sliding_window_period must not be negative");
  ACCELSIM_CHECK(sliding_window_period == 0 || sliding_window > 0,
                 who + ": sliding_window_period needs a sliding_window");
  ACCELSIM_CHECK((!moe.router_bias && !moe.expert_bias) || moe.enabled(),
                 who + ": router_bias and expert_bias need experts");
  ACCELSIM_CHECK(rotary_dim >= 0 && rotary_dim <= head_dim && rotary_dim % 2 == 0,
                 who + ": rotary_dim must be an even number of dims no larger than head_dim");
  ACCELSIM_CHECK(!parallel_block || !post_norm,
                 who + ": a parallel residual block is pre-norm (post_norm must be off)");
  ACCELSIM_CHECK(parallel_block || !parallel_ffn_norm,
                 who + ": parallel_ffn_norm needs parallel_block");
  ACCELSIM_CHECK(int4_group_size >= 0 && int4_group_size % 2 == 0,
                 who + ": int4_group_size must be a non-negative even number");
  require_in_range(who, "embedding_multiplier", embedding_multiplier, kNonNegative);
  ACCELSIM_CHECK(nope_period >= 0 && attention_chunk >= 0, who + ": nope_period and attention_chunk must not be negative");
  ACCELSIM_CHECK(nope_period == 0 || sliding_window == 0,
                 who + ": NoPE layers and sliding windows at once are not laid out (one layer pattern)");
  require_in_range(who, "attention_softcap", attention_softcap, kNonNegative);
  require_in_range(who, "final_logit_softcap", final_logit_softcap, kNonNegative);
  ACCELSIM_CHECK(int4_group_size == 0 || fp4_weights == Fp4Format::none,
                 who + ": int4 and fp4 weights exclude each other");
  ACCELSIM_CHECK(type_vocab_size >= 0, who + ": type_vocab_size must not be negative");
  ACCELSIM_CHECK(!learned_positions || max_position_embeddings > 0,
                 who + ": learned positions need max_position_embeddings");
  if (mla.enabled()) {
    ACCELSIM_CHECK(mla.qk_rope_head_dim > 0 && mla.qk_nope_head_dim > 0 && mla.v_head_dim > 0,
                   who + ": MLA needs qk_rope_head_dim, qk_nope_head_dim and v_head_dim");
    ACCELSIM_CHECK(head_dim == mla.qk_nope_head_dim + mla.qk_rope_head_dim,
                   who + ": with MLA, head_dim must be qk_nope_head_dim + qk_rope_head_dim");
  }
  if (moe.enabled()) {
    ACCELSIM_CHECK(moe.top_k >= 1 && moe.top_k <= moe.num_experts,
                   who + ": top_k must be between 1 and num_experts");
    ACCELSIM_CHECK(moe.num_experts <= kMaxExperts,
                   who + ": " + std::to_string(moe.num_experts) + " experts are more than the " +
                       std::to_string(kMaxExperts) + " a graph is built for");
    ACCELSIM_CHECK(moe.expert_ffn_size > 0, who + ": expert_ffn_size must be positive");
    ACCELSIM_CHECK(moe.sparse_step >= 1, who + ": sparse_step must be at least 1");
    ACCELSIM_CHECK(moe.first_dense_layers >= 0 && moe.shared_ffn_size >= 0,
                   who + ": MoE sizes must not be negative");
    ACCELSIM_CHECK(moe.num_groups >= 1 && moe.num_experts % moe.num_groups == 0 &&
                       moe.top_k_groups >= 1 && moe.top_k_groups <= moe.num_groups,
                   who + ": expert groups must divide the experts, top-k groups within them");
  }
  ACCELSIM_CHECK(max_position_embeddings >= 0, who + ": max_position_embeddings must not be negative");
  // Every byte count derived from the model must fit in 64 bits: its parameter count, checked
  // term by term (each matrix, vocab_size x hidden_size among them, is a term), and the bytes of
  // its weights, which bound the bytes of each matrix.
  checked_product([&] { return who + ": parameters x bytes"; }, parameter_count(*this), size_bytes(weight_dtype));
}

namespace {

// Parameters of a model whose MoE layers hold `experts` routed experts. Every product and sum is
// checked (checked_arithmetic.h): a count that does not fit in 64 bits throws ConfigError naming
// the term (count_parameters adds the model's name).
int64_t count_with_experts(const ModelSpec& m, int64_t experts) {
  auto mul = [](const char* what, auto... factors) {
    return checked_product(what, static_cast<int64_t>(factors)...);
  };
  auto sum = [](const char* what, auto... terms) {
    return checked_sum(what, static_cast<int64_t>(terms)...);
  };
  const int64_t h = m.hidden_size;
  const int64_t q = mul("num_heads x head_dim", m.num_heads, m.head_dim);
  const int64_t kv = mul("num_kv_heads x head_dim", m.num_kv_heads, m.head_dim);
  const int64_t norm = m.norm == NormKind::rms_norm ? h : mul("2 x hidden_size", 2, h);  // LayerNorm has a bias
  // q, k, v, o projections.
  int64_t layer = sum("a layer's attention parameters", mul("hidden_size x num_heads x head_dim", 2, h, q),
                      mul("hidden_size x num_kv_heads x head_dim", 2, h, kv));
  if (m.mla.enabled()) {
    // q: [h -> q_lora] + RMSNorm + [q_lora -> heads * (nope + rope)], or [h -> heads * (nope +
    // rope)]; kv: [h -> kv_lora + rope] + RMSNorm + [kv_lora -> heads * (nope + v)]; o.
    const MlaSpec& a = m.mla;
    const char* what = "a layer's MLA parameters";
    const int64_t qk = mul("num_heads x (qk_nope_head_dim + qk_rope_head_dim)", m.num_heads,
                           sum(what, a.qk_nope_head_dim, a.qk_rope_head_dim));
    layer = a.q_lora_rank > 0
                ? sum(what, mul("hidden_size x q_lora_rank", h, a.q_lora_rank), a.q_lora_rank,
                      mul("q_lora_rank x num_heads x qk head dims", a.q_lora_rank, qk))
                : mul("hidden_size x num_heads x qk head dims", h, qk);
    layer = sum(what, layer,
                mul("hidden_size x (kv_lora_rank + qk_rope_head_dim)", h, sum(what, a.kv_lora_rank, a.qk_rope_head_dim)),
                a.kv_lora_rank,
                mul("kv_lora_rank x num_heads x (qk_nope_head_dim + v_head_dim)", a.kv_lora_rank, m.num_heads,
                    sum(what, a.qk_nope_head_dim, a.v_head_dim)),
                mul("num_heads x v_head_dim x hidden_size", m.num_heads, a.v_head_dim, h));
  }
  const char* layer_what = "a layer's parameters";
  if (m.qkv_bias) layer = sum(layer_what, layer, q, mul("2 x num_kv_heads x head_dim", 2, kv));
  if (m.output_bias) layer = sum(layer_what, layer, h);
  if (m.qk_norm) layer = sum(layer_what, layer, mul("2 x head_dim", 2, m.head_dim));
  if (m.attention_sinks) layer = sum(layer_what, layer, m.num_heads);
  // Before attention and before the FFN; a parallel block may share one.
  layer = sum(layer_what, layer, mul("a layer's norms", m.parallel_block && !m.parallel_ffn_norm ? 1 : m.sandwich_norms ? 4 : 2, norm));
  const int64_t ffn_matrices = m.gated_ffn ? 3 : 2;
  int64_t dense_ffn = mul("hidden_size x ffn_size x FFN matrices", ffn_matrices, h, m.ffn_size);
  if (m.ffn_bias) dense_ffn = sum(layer_what, dense_ffn, mul("FFN biases", ffn_matrices - 1, m.ffn_size), h);
  const MoeSpec& e = m.moe;
  // Router [experts, h], gated experts (gate, up, down), shared expert MLP and its gate.
  const int64_t moe_ffn =
      sum(layer_what, mul("hidden_size x num_experts", h, e.num_experts),
          mul("experts x 3 x hidden_size x expert_ffn_size", experts, 3, h, e.expert_ffn_size),
          mul("3 x hidden_size x shared_ffn_size", 3, h, e.shared_ffn_size), e.shared_expert_gate ? h : 0,
          e.router_bias ? e.num_experts : 0,
          e.expert_bias ? mul("experts x (2 x expert_ffn_size + hidden_size)", experts,
                              sum(layer_what, mul("2 x expert_ffn_size", 2, e.expert_ffn_size), h))
                        : 0);
  const char* what = "the parameter count";
  int64_t total = mul("vocab_size x hidden_size", m.vocab_size, h);
  if (m.final_norm) total = sum(what, total, norm);
  if (m.learned_positions) total = sum(what, total, mul("max_position_embeddings x hidden_size", m.max_position_embeddings, h));
  total = sum(what, total, mul("type_vocab_size x hidden_size", m.type_vocab_size, h));
  if (m.embedding_norm) total = sum(what, total, norm);
  if (m.lm_head_transform) total = sum(what, total, mul("hidden_size x hidden_size", h, h), h, norm);
  if (m.lm_head_bias) total = sum(what, total, m.vocab_size);
  if (m.vision()) {  // patch convolution + bias
    total = sum(what, total, mul("num_channels x patch_size^2 x hidden_size", m.num_channels, m.patch_size, m.patch_size, h), h);
    if (m.cls_token) total = sum(what, total, h);
  }
  if (m.pooler) total = sum(what, total, mul("hidden_size x hidden_size", h, h), h);
  // The layers: dense and MoE ones counted, then multiplied out (not a loop over the layers).
  const int64_t moe_layers = e.moe_layer_count(m.num_layers);
  const int64_t dense_layers = m.num_layers - moe_layers;
  total = sum(what, total, mul("num_layers x a layer's parameters", dense_layers, sum(layer_what, layer, dense_ffn)),
              mul("num_layers x a MoE layer's parameters", moe_layers, sum(layer_what, layer, moe_ffn)));
  if (!m.tied_embeddings && m.lm_head) total = sum(what, total, mul("vocab_size x hidden_size", m.vocab_size, h));
  return total;
}

int64_t count_parameters(const ModelSpec& m, int64_t experts) {
  try {
    return count_with_experts(m, experts);
  } catch (const ConfigError& e) {
    throw ConfigError("model '" + m.name + "': " + e.what());
  }
}

}  // namespace

std::string_view fp4_format_name(Fp4Format f) {
  switch (f) {
    case Fp4Format::none: return "none";
    case Fp4Format::nvfp4: return "nvfp4";
    case Fp4Format::mxfp4: return "mxfp4";
  }
  return "?";
}

int64_t parameter_count(const ModelSpec& m) { return count_parameters(m, m.moe.num_experts); }

int64_t active_parameter_count(const ModelSpec& m) { return count_parameters(m, m.moe.top_k); }

double expected_experts_touched(int64_t num_experts, int64_t top_k, int64_t tokens) {
  if (num_experts <= 0) return 0.0;
  const double e = static_cast<double>(num_experts);
  const double miss = 1.0 - static_cast<double>(top_k) / e;  // a token skips a given expert
  return e * (1.0 - std::pow(std::max(miss, 0.0), static_cast<double>(tokens)));
}

int64_t kv_cache_bytes(const ModelSpec& m, int64_t batch, int64_t tokens) {
  if (m.mla.enabled()) {
    // MLA caches the compressed latent and the shared RoPE key per token (DeepSeek-V2, sec. 2.1).
    return checked_product([&] {
                             return "model '" + m.name + "': the KV cache (num_layers x batch x tokens x "
                                    "(kv_lora_rank + qk_rope_head_dim) x bytes)";
                           },
                           m.num_layers, batch, tokens, m.mla.kv_lora_rank + m.mla.qk_rope_head_dim,
                           size_bytes(m.kv_cache_dtype));
  }
  // K and V per layer: [batch, kv_heads, tokens, head_dim].
  return checked_product([&] {
                           return "model '" + m.name + "': the KV cache (2 x num_layers x batch x tokens x "
                                  "num_kv_heads x head_dim x bytes)";
                         },
                         2, m.num_layers, batch, tokens, m.num_kv_heads, m.head_dim,
                         size_bytes(m.kv_cache_dtype));
}

}  // namespace accelsim
