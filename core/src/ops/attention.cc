// Fused attention: accel_sim::attention (the capture's op) and PyTorch's SDPA backend ops.
#include <algorithm>
#include <string>

#include "accelsim/error.h"
#include "op_families.h"

namespace accelsim::ops {
namespace {

// sum_{j=1..n} min(j, w): the keys seen by n successive causal queries under a window of w.
double windowed_triangle(double n, double w) {
  if (n <= w) return n * (n + 1.0) / 2.0;
  return w * (w + 1.0) / 2.0 + (n - w) * w;
}

struct AttentionShape {
  double heads = 0;  // batch * query heads
  int64_t sq = 0, skv = 0, d = 0, dv = 0;
  DType dtype = DType::fp32;
};

AttentionShape shape_of(const Graph& g, const Node& n, size_t q_index) {
  const TensorMeta& q = input(g, n, q_index);
  const TensorMeta& k = input(g, n, q_index + 1);
  const TensorMeta& v = input(g, n, q_index + 2);
  require_rank(n, q, 2, "query", true);
  require_rank(n, k, 2, "key", true);
  require_rank(n, v, 2, "value", true);
  AttentionShape s;
  s.sq = q.shape[q.shape.size() - 2];
  s.d = q.shape.back();
  s.skv = k.shape[k.shape.size() - 2];
  s.dv = v.shape.back();
  ACCELSIM_CHECK(k.shape.back() == s.d, "op '" + n.op + "': query and key head dims differ");
  const double per_head = static_cast<double>(s.sq) * static_cast<double>(s.d);
  s.heads = per_head > 0 ? static_cast<double>(q.numel()) / per_head : 0.0;
  s.dtype = q.dtype;
  return s;
}

// FLOPs over the unmasked score pairs: `d_matmuls` products with head dim D and `dv_matmuls`
// with value dim Dv, 2 FLOPs per multiply-add. Tensor inputs start with q at `q_index`.
OpCount count_attention(const Graph& g, const Node& n, size_t q_index, double d_matmuls,
                        double dv_matmuls) {
  const AttentionShape s = shape_of(g, n, q_index);
  const int64_t chunk = n.attr_int("chunk_size", 0);
  const int64_t offset = n.attr_int("query_offset", 0);
  // Decode under chunked attention: the query sees its chunk, ((offset) mod c) + 1 keys.
  const bool causal = n.attr_bool("is_causal", false) || (chunk > 0 && s.sq == 1);
  const double pairs =
      s.heads * score_pairs(s.sq, s.skv, causal, n.attr_int("window_size", 0), offset, chunk);
  OpCount c;
  c.op_class = OpClass::attention;
  c.compute_dtype = s.dtype;
  c.flops = 2.0 * pairs *
            (d_matmuls * static_cast<double>(s.d) + dv_matmuls * static_cast<double>(s.dv));
  c.bytes_read = read_inputs(g, n);
  const int64_t window = n.attr_int("window_size", 0);
  if ((chunk > 0 || (window > 0 && offset > 0)) && q_index == 0 && s.skv > 0) {
    // Only the keys its queries can see are read: from the first query's chunk start (or window
    // start) to the last query. Query positions are offset + 1 .. offset + sq (1-based).
    const int64_t first = chunk > 0 ? (offset / chunk) * chunk : std::max<int64_t>(0, offset + 1 - window);
    const double kept = static_cast<double>(std::min(s.skv, offset + s.sq - first)) / static_cast<double>(s.skv);
    const double kv = static_cast<double>(input(g, n, 1).accessed_bytes() + input(g, n, 2).accessed_bytes());
    c.bytes_read -= kv * (1.0 - kept);
  }
  c.bytes_written = write_outputs(g, n);
  c.attention = {.batch_heads = s.heads, .seq_q = s.sq, .seq_k = s.skv, .head_dim = s.d,
                 .value_dim = s.dv, .causal = n.attr_bool("is_causal", false),
                 .backward = q_index > 0, .softcap = n.attr_double("softcap", 0.0) > 0};
  return c;
}

// Forward: S = Q K^T and O = P V over the unmasked pairs only (FlashAttention skips fully
// masked tiles; Dao 2023, FlashAttention-2, sec. 3.1).
OpCount count_attention_forward(const Graph& g, const Node& n) {
  return count_attention(g, n, 0, 1.0, 1.0);
}

// Backward: five matmuls over the score pairs against the forward's two (FlashAttention-2
// paper, sec. 3.2): recompute S = Q K^T, dQ = dS K and dK = dS^T Q run over head dim D;
// dV = P^T dO and dP = dO V^T over value dim Dv. Inputs start with grad_out, then q, k, v.
OpCount count_attention_backward(const Graph& g, const Node& n) {
  return count_attention(g, n, 1, 3.0, 2.0);
}

}  // namespace

// Unmasked (query, key) pairs of one head. Causal masks follow torch SDPA's is_causal, which
// aligns the mask to the top-left corner: query i sees keys 0..i, or 0..offset+i when the
// queries are a chunk starting at position `offset` (context parallelism). A sliding window of
// `window` keys (0: none) caps what each query sees, as in Mistral (Jiang et al. 2023).
// Query positions 1 .. n of chunked causal attention (chunks of c): position t sees the
// ((t - 1) mod c) + 1 keys of its chunk up to itself; the sum over t.
double chunked_triangle(double n, double c) {
  const double whole = std::floor(n / c), rest = n - whole * c;
  return whole * c * (c + 1.0) / 2.0 + rest * (rest + 1.0) / 2.0;
}

double score_pairs(int64_t sq, int64_t skv, bool causal, int64_t window, int64_t offset, int64_t chunk) {
  if (chunk > 0 && causal) {
    const double o = static_cast<double>(offset), c = static_cast<double>(chunk);
    return chunked_triangle(o + static_cast<double>(sq), c) - chunked_triangle(o, c);
  }
  const double q = static_cast<double>(sq);
  const double k = static_cast<double>(skv);
  const double cap = window > 0 ? std::min(k, static_cast<double>(window)) : k;
  if (!causal) return q * cap;
  const double o = static_cast<double>(offset);
  // Query j (1-based absolute position o + j) sees min(o + j, cap) keys.
  return windowed_triangle(o + q, cap) - windowed_triangle(o, cap);
}

// All ops below take [..., heads, seq, head_dim] tensors. The varlen kernels
// (_flash_attention_forward, _efficient_attention_forward) take [batch, seq, heads, head_dim]
// and are deliberately absent: they are counted as unknown rather than miscounted.
void add_attention_ops(OpTable& t) {
  for (const char* op : {"accel_sim::attention", "scaled_dot_product_attention",
                         "_scaled_dot_product_flash_attention_for_cpu",
                         "_scaled_dot_product_flash_attention",
                         "_scaled_dot_product_efficient_attention",
                         "_scaled_dot_product_cudnn_attention",
                         "_scaled_dot_product_fused_attention_overrideable"}) {
    t[op] = count_attention_forward;
  }
  for (const char* op : {"accel_sim::attention_backward",
                         "_scaled_dot_product_flash_attention_for_cpu_backward",
                         "_scaled_dot_product_flash_attention_backward",
                         "_scaled_dot_product_efficient_attention_backward",
                         "_scaled_dot_product_cudnn_attention_backward"}) {
    t[op] = count_attention_backward;
  }
}

}  // namespace accelsim::ops
