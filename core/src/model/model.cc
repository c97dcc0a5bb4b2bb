#include "accelsim/model.h"

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
  ACCELSIM_CHECK(ffn_size > 0, who + ": ffn_size must be positive");
  ACCELSIM_CHECK(vocab_size > 0, who + ": vocab_size must be positive");
  ACCELSIM_CHECK(sliding_window >= 0, who + ": sliding_window must not be negative");
}

int64_t parameter_count(const ModelSpec& m) {
  const int64_t h = m.hidden_size;
  const int64_t q = m.num_heads * m.head_dim;
  const int64_t kv = m.num_kv_heads * m.head_dim;
  const int64_t norm = m.norm == NormKind::rms_norm ? h : 2 * h;  // LayerNorm has a bias
  int64_t layer = h * q + 2 * h * kv + q * h;                      // q, k, v, o projections
  if (m.qkv_bias) layer += q + 2 * kv;
  if (m.output_bias) layer += h;
  if (m.qk_norm) layer += 2 * m.head_dim;
  const int64_t ffn_matrices = m.gated_ffn ? 3 : 2;
  layer += ffn_matrices * h * m.ffn_size;
  if (m.ffn_bias) layer += (ffn_matrices - 1) * m.ffn_size + h;
  layer += 2 * norm;  // before attention and before the FFN
  int64_t total = m.vocab_size * h + m.num_layers * layer + norm;
  if (!m.tied_embeddings) total += m.vocab_size * h;
  return total;
}

int64_t kv_cache_bytes(const ModelSpec& m, int64_t batch, int64_t tokens) {
  // K and V per layer: [batch, kv_heads, tokens, head_dim].
  return 2 * m.num_layers * batch * tokens * m.num_kv_heads * m.head_dim *
         size_bytes(m.kv_cache_dtype);
}

}  // namespace accelsim
