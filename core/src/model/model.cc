#include "accelsim/model.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "accelsim/error.h"

namespace accelsim {

void ModelSpec::validate() const {
  const std::string who = "model '" + name + "'";
  ACCELSIM_CHECK(hidden_size > 0, who + ": hidden_size must be positive");
  ACCELSIM_CHECK(num_layers > 0, who + ": num_layers must be positive");
  ACCELSIM_CHECK(num_heads > 0, who + ": num_heads must be positive");
  ACCELSIM_CHECK(num_kv_heads > 0 && num_heads % num_kv_heads == 0,
                 who + ": num_heads (" + std::to_string(num_heads) +
                     ") must be a multiple of num_kv_heads (" + std::to_string(num_kv_heads) + ")");
  ACCELSIM_CHECK(head_dim > 0, who + ": head_dim must be positive");
  for (double p : {hidden_dropout, embedding_dropout, attention_dropout}) {
    ACCELSIM_CHECK(p >= 0.0 && p < 1.0, who + ": dropout probabilities must be in [0, 1)");
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
  ACCELSIM_CHECK(rotary_dim >= 0 && rotary_dim <= head_dim && rotary_dim % 2 == 0,
                 who + ": rotary_dim must be an even number of dims no larger than head_dim");
  ACCELSIM_CHECK(!parallel_block || !post_norm,
                 who + ": a parallel residual block is pre-norm (post_norm must be off)");
  ACCELSIM_CHECK(parallel_block || !parallel_ffn_norm,
                 who + ": parallel_ffn_norm needs parallel_block");
  ACCELSIM_CHECK(int4_group_size >= 0 && int4_group_size % 2 == 0,
                 who + ": int4_group_size must be a non-negative even number");
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
    ACCELSIM_CHECK(moe.expert_ffn_size > 0, who + ": expert_ffn_size must be positive");
    ACCELSIM_CHECK(moe.sparse_step >= 1, who + ": sparse_step must be at least 1");
    ACCELSIM_CHECK(moe.first_dense_layers >= 0 && moe.shared_ffn_size >= 0,
                   who + ": MoE sizes must not be negative");
    ACCELSIM_CHECK(moe.num_groups >= 1 && moe.num_experts % moe.num_groups == 0 &&
                       moe.top_k_groups >= 1 && moe.top_k_groups <= moe.num_groups,
                   who + ": expert groups must divide the experts, top-k groups within them");
  }
}

namespace {

// Parameters of a model whose MoE layers hold `experts` routed experts.
int64_t count_with_experts(const ModelSpec& m, int64_t experts) {
  const int64_t h = m.hidden_size;
  const int64_t q = m.num_heads * m.head_dim;
  const int64_t kv = m.num_kv_heads * m.head_dim;
  const int64_t norm = m.norm == NormKind::rms_norm ? h : 2 * h;  // LayerNorm has a bias
  int64_t layer = h * q + 2 * h * kv + q * h;                      // q, k, v, o projections
  if (m.mla.enabled()) {
    // q: [h -> q_lora] + RMSNorm + [q_lora -> heads * (nope + rope)], or [h -> heads * (nope +
    // rope)]; kv: [h -> kv_lora + rope] + RMSNorm + [kv_lora -> heads * (nope + v)]; o.
    const MlaSpec& a = m.mla;
    const int64_t qk = m.num_heads * (a.qk_nope_head_dim + a.qk_rope_head_dim);
    layer = a.q_lora_rank > 0 ? h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * qk : h * qk;
    layer += h * (a.kv_lora_rank + a.qk_rope_head_dim) + a.kv_lora_rank +
             a.kv_lora_rank * m.num_heads * (a.qk_nope_head_dim + a.v_head_dim) +
             m.num_heads * a.v_head_dim * h;
  }
  if (m.qkv_bias) layer += q + 2 * kv;
  if (m.output_bias) layer += h;
  if (m.qk_norm) layer += 2 * m.head_dim;
  // Before attention and before the FFN; a parallel block may share one.
  layer += (m.parallel_block && !m.parallel_ffn_norm ? 1 : 2) * norm;
  const int64_t ffn_matrices = m.gated_ffn ? 3 : 2;
  int64_t dense_ffn = ffn_matrices * h * m.ffn_size;
  if (m.ffn_bias) dense_ffn += (ffn_matrices - 1) * m.ffn_size + h;
  const MoeSpec& e = m.moe;
  // Router [experts, h], gated experts (gate, up, down), shared expert MLP and its gate.
  const int64_t moe_ffn = h * e.num_experts + experts * 3 * h * e.expert_ffn_size +
                          3 * h * e.shared_ffn_size + (e.shared_expert_gate ? h : 0);
  int64_t total = m.vocab_size * h;
  if (m.final_norm) total += norm;
  if (m.learned_positions) total += m.max_position_embeddings * h;
  total += m.type_vocab_size * h;
  if (m.embedding_norm) total += norm;
  if (m.lm_head_transform) total += h * h + h + norm;
  if (m.lm_head_bias) total += m.vocab_size;
  if (m.vision()) {
    total += m.num_channels * m.patch_size * m.patch_size * h + h;  // patch convolution + bias
    if (m.cls_token) total += h;
  }
  if (m.pooler) total += h * h + h;
  for (int64_t l = 0; l < m.num_layers; ++l) {
    total += layer + (e.is_moe_layer(l) ? moe_ffn : dense_ffn);
  }
  if (!m.tied_embeddings && m.lm_head) total += m.vocab_size * h;
  return total;
}

}  // namespace

int64_t parameter_count(const ModelSpec& m) { return count_with_experts(m, m.moe.num_experts); }

int64_t active_parameter_count(const ModelSpec& m) { return count_with_experts(m, m.moe.top_k); }

double expected_experts_touched(int64_t num_experts, int64_t top_k, int64_t tokens) {
  if (num_experts <= 0) return 0.0;
  const double e = static_cast<double>(num_experts);
  const double miss = 1.0 - static_cast<double>(top_k) / e;  // a token skips a given expert
  return e * (1.0 - std::pow(std::max(miss, 0.0), static_cast<double>(tokens)));
}

int64_t kv_cache_bytes(const ModelSpec& m, int64_t batch, int64_t tokens) {
  if (m.mla.enabled()) {
    // MLA caches the compressed latent and the shared RoPE key per token (DeepSeek-V2, sec. 2.1).
    return m.num_layers * batch * tokens * (m.mla.kv_lora_rank + m.mla.qk_rope_head_dim) *
           size_bytes(m.kv_cache_dtype);
  }
  // K and V per layer: [batch, kv_heads, tokens, head_dim].
  return 2 * m.num_layers * batch * tokens * m.num_kv_heads * m.head_dim *
         size_bytes(m.kv_cache_dtype);
}

}  // namespace accelsim
