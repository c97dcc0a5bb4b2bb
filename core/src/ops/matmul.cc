// Matrix multiplications: mm, bmm, addmm, baddbmm, matmul, mv, dot, grouped and scaled GEMMs.
#include <algorithm>
#include <string>
#include <variant>

#include "accelsim/error.h"
#include "accelsim/model.h"
#include "op_families.h"

namespace accelsim::ops {
namespace {

// A GEMM of an eager attention core (attr attention_gemm) computes every query-key pair of its
// heads: "qk", scores = Q K^T, rows are the queries and columns the keys; "pv", context = P V,
// rows are the queries and the reduction runs over the keys. Its mask (attrs mask_is_causal,
// mask_window_size, mask_query_offset: the pairs accel_sim::attention's is_causal, window_size
// and query_offset describe) lets some of them through; the work on the others is masked_flops,
// the same share of the op's FLOPs (every pair costs alike, its bias add included).
void count_masked_pairs(const Node& n, OpCount& c) {
  const AttrValue* role = n.attr("attention_gemm");
  if (role == nullptr) return;
  const std::string* name = std::get_if<std::string>(role);
  ACCELSIM_CHECK(name != nullptr && (*name == "qk" || *name == "pv"),
                 "op '" + n.op + "': attr 'attention_gemm' must be \"qk\" or \"pv\"");
  const int64_t queries = c.gemm.m;
  const int64_t keys = *name == "qk" ? c.gemm.n : c.gemm.k;
  const int64_t window = n.attr_int("mask_window_size", 0);
  const int64_t offset = n.attr_int("mask_query_offset", 0);
  ACCELSIM_CHECK(window >= 0 && offset >= 0,
                 "op '" + n.op + "': attrs 'mask_window_size' and 'mask_query_offset' must be >= 0");
  const double all = static_cast<double>(queries) * static_cast<double>(keys);
  if (all <= 0) return;
  const int64_t chunk = n.attr_int("mask_chunk_size", 0);
  const double allowed = score_pairs(queries, keys, n.attr_bool("mask_is_causal", false) || (chunk > 0 && queries == 1),
                                     window, offset, chunk);
  c.masked_flops = c.flops / all * (all - allowed);
}

// A product of a [..., M, K] by a [..., K, N] operand costs one multiply-add (2 FLOPs) per
// output element per K: 2 * numel(out) * K (the standard GEMM count, e.g. Kaplan et al. 2020).
OpCount count_product(const Graph& g, const Node& n, size_t a_index, size_t b_index,
                      bool adds_bias) {
  const TensorMeta& a = input(g, n, a_index);
  const TensorMeta& b = input(g, n, b_index);
  require_rank(n, a, 1, "first matrix operand", true);
  require_rank(n, b, 1, "second matrix operand", true);
  const int64_t k = a.shape.back();
  const int64_t b_k = b.shape.size() == 1 ? b.shape[0] : b.shape[b.shape.size() - 2];
  ACCELSIM_CHECK(k == b_k, "op '" + n.op + "': inner dimensions differ (" + std::to_string(k) +
                               " vs " + std::to_string(b_k) + ")");
  const double out = static_cast<double>(output_numel(g, n));
  OpCount c;
  c.op_class = OpClass::matmul;
  c.compute_dtype = a.dtype;
  // The bias/accumulator add (addmm, baddbmm) is one more FLOP per output element.
  c.flops = 2.0 * out * static_cast<double>(k) + (adds_bias ? out : 0.0);
  c.bytes_read = read_inputs(g, n);
  c.bytes_written = write_outputs(g, n);
  const TensorMeta& y = output(g, n, 0);
  c.gemm.k = k;
  c.gemm.n = b.shape.size() == 1 ? 1 : b.shape.back();
  c.gemm.m = a.shape.size() == 1 ? 1 : a.shape[a.shape.size() - 2];
  const double mn = static_cast<double>(c.gemm.m) * static_cast<double>(c.gemm.n);
  c.gemm.batch = mn > 0 ? std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(y.numel()) / mn)) : 1;
  count_masked_pairs(n, c);
  return c;
}

OpCount count_mm(const Graph& g, const Node& n) {
  require_rank(n, input(g, n, 0), 2, "self");
  require_rank(n, input(g, n, 1), 2, "mat2");
  return count_product(g, n, 0, 1, false);
}

OpCount count_addmm(const Graph& g, const Node& n) {
  require_rank(n, input(g, n, 1), 2, "mat1");
  require_rank(n, input(g, n, 2), 2, "mat2");
  return count_product(g, n, 1, 2, true);
}

OpCount count_bmm(const Graph& g, const Node& n) {
  require_rank(n, input(g, n, 0), 3, "self");
  require_rank(n, input(g, n, 1), 3, "mat2");
  return count_product(g, n, 0, 1, false);
}

OpCount count_baddbmm(const Graph& g, const Node& n) {
  require_rank(n, input(g, n, 1), 3, "batch1");
  require_rank(n, input(g, n, 2), 3, "batch2");
  return count_product(g, n, 1, 2, true);
}

OpCount count_matmul(const Graph& g, const Node& n) { return count_product(g, n, 0, 1, false); }

OpCount count_addmv(const Graph& g, const Node& n) { return count_product(g, n, 1, 2, true); }

// torch._grouped_mm(mat_a, mat_b, offs, bias, out_dtype): one GEMM per group (MoE experts).
//   2-D x 3-D: tokens [T, K] against per-group weights [G, K, N] -> [T, N]: 2*T*K*N.
//   3-D x 3-D: [G, M, K] x [G, K, N] -> [G, M, N]: 2*G*M*N*K.
//   2-D x 2-D: [M, Ktot] x [Ktot, N] split along K by offs -> [G, M, N]: 2*M*N*Ktot.
OpCount count_grouped_mm(const Graph& g, const Node& n) {
  const TensorMeta& a = input(g, n, 0);
  const TensorMeta& b = input(g, n, 1);
  require_rank(n, a, 2, "mat_a", true);
  require_rank(n, b, 2, "mat_b", true);
  OpCount c;
  c.op_class = OpClass::matmul;
  c.compute_dtype = a.dtype;
  if (a.shape.size() == 2 && b.shape.size() == 2) {
    c.flops = 2.0 * static_cast<double>(a.shape[0]) * static_cast<double>(b.shape[1]) *
              static_cast<double>(a.shape[1]);
  } else {
    c.flops = 2.0 * static_cast<double>(output_numel(g, n)) * static_cast<double>(a.shape.back());
  }
  c.bytes_read = read_inputs(g, n);
  c.bytes_written = write_outputs(g, n);
  if (a.shape.size() == 2 && b.shape.size() == 2) {
    // Weight gradient: [M, Ktot] x [Ktot, N] split along K into G groups.
    c.gemm = {.m = a.shape[0], .n = b.shape[1], .k = a.shape[1],
              .batch = std::max<int64_t>(1, output_numel(g, n) / std::max<int64_t>(1, a.shape[0] * b.shape[1]))};
    if (c.gemm.batch > 1) c.gemm.k = std::max<int64_t>(1, a.shape[1] / c.gemm.batch);
  } else if (a.shape.size() == 2) {
    // Tokens against per-group weights: each group gets its share of the rows.
    const int64_t groups = std::max<int64_t>(1, b.shape[0]);
    c.gemm = {.m = std::max<int64_t>(1, a.shape[0] / groups), .n = output(g, n, 0).shape.back(),
              .k = a.shape[1], .batch = groups};
  } else {
    c.gemm = {.m = a.shape[a.shape.size() - 2], .n = output(g, n, 0).shape.back(),
              .k = a.shape.back(), .batch = a.shape[0]};
  }
  if (a.shape.size() == 2 && b.shape.size() == 3 && b.shape[0] > 0) {
    // Only experts that receive tokens have their weights read. Routing assumption (stated in
    // model.h): each token's top_k experts are uniform at random; without a top_k attribute
    // (captured graphs) every routed row is taken as an independent token.
    // The model builder states the expectation itself (attr experts_touched), e.g. under expert
    // parallelism, where a rank's experts see tokens from the whole group.
    const int64_t top_k = n.attr_int("top_k", 1);
    const double touched = n.attr_double(
        "experts_touched",
        expected_experts_touched(b.shape[0], top_k, a.shape[0] / std::max<int64_t>(top_k, 1)));
    c.bytes_read -= static_cast<double>(b.accessed_bytes()) *
                    (1.0 - touched / static_cast<double>(b.shape[0]));
  }
  return c;
}

// Weight-only quantized GEMMs: activations x [rows, K] against packed low-bit weights,
// dequantized on the fly and multiplied at the activations' precision (the matrix units run
// x's dtype):
//   _weight_int4pack_mm(x, w_packed, qGroupSize, scales_and_zeros) -> [rows, N]
//   _weight_int8pack_mm(x, w_int8 [N, K], scales [N]) -> [rows, N]
// FLOPs 2 * rows * K * N with K from x and N from the output (the packed weight's shape is a
// storage layout); bytes: the packed weight, its scales, x and the output.
OpCount count_weight_only_mm(const Graph& g, const Node& n) {
  const TensorMeta& x = input(g, n, 0);
  require_rank(n, x, 2, "self");
  const TensorMeta& y = output(g, n, 0);
  OpCount c;
  c.op_class = OpClass::matmul;
  c.compute_dtype = x.dtype;
  c.flops = 2.0 * static_cast<double>(x.shape[0]) * static_cast<double>(x.shape[1]) *
            static_cast<double>(y.shape.back());
  c.bytes_read = read_inputs(g, n);
  c.bytes_written = write_outputs(g, n);
  c.gemm = {.m = x.shape[0], .n = y.shape.back(), .k = x.shape[1], .batch = 1};
  return c;
}

// FP4 GEMMs on fp4 units (W4A4: NVFP4, MXFP4), operands packed two values per byte with
// one-byte block scales:
//   accel_sim::fp4_mm(x_packed [rows, K / 2], x_scales, w_packed [N, K / 2], w_scales) -> [rows, N]
//   accel_sim::fp4_grouped_mm(x_packed, w_packed [E, K / 2, N], offsets, x_scales, w_scales)
// FLOPs 2 * rows * K * N at the fp4 rate; bytes: the packed operands, the scales and the output.
OpCount count_fp4_mm(const Graph& g, const Node& n) {
  const TensorMeta& x = input(g, n, 0);
  require_rank(n, x, 2, "x_packed");
  const TensorMeta& y = output(g, n, 0);
  OpCount c;
  c.op_class = OpClass::matmul;
  c.compute_dtype = DType::fp4_e2m1;
  const int64_t k = 2 * x.shape[1];
  c.flops = 2.0 * static_cast<double>(x.shape[0]) * static_cast<double>(k) * static_cast<double>(y.shape.back());
  c.bytes_read = read_inputs(g, n);
  c.bytes_written = write_outputs(g, n);
  c.gemm = {.m = x.shape[0], .n = y.shape.back(), .k = k, .batch = 1};
  return c;
}

OpCount count_fp4_grouped_mm(const Graph& g, const Node& n) {
  // The grouped GEMM's count over the packed operands, then K and the FLOPs of the values.
  OpCount c = count_grouped_mm(g, n);
  c.compute_dtype = DType::fp4_e2m1;
  c.flops *= 2.0;
  c.gemm.k *= 2;
  return c;
}

}  // namespace

void add_matmul_ops(OpTable& t) {
  t["accel_sim::fp4_mm"] = count_fp4_mm;
  t["accel_sim::fp4_grouped_mm"] = count_fp4_grouped_mm;
  t["accel_sim::fp4_weight_mm"] = count_weight_only_mm;
  t["_weight_int4pack_mm"] = count_weight_only_mm;
  t["_weight_int8pack_mm"] = count_weight_only_mm;
  t["mm"] = count_mm;
  t["addmm"] = count_addmm;
  t["_addmm_activation"] = count_addmm;
  t["bmm"] = count_bmm;
  t["baddbmm"] = count_baddbmm;
  t["matmul"] = count_matmul;
  t["mv"] = count_matmul;
  t["dot"] = count_matmul;
  t["vdot"] = count_matmul;
  t["addmv"] = count_addmv;
  t["_int_mm"] = count_mm;      // int8 x int8 -> int32
  t["_scaled_mm"] = count_mm;   // fp8 GEMM with scales (extra scale inputs are read)
  t["_grouped_mm"] = count_grouped_mm;
  t["_scaled_grouped_mm"] = count_grouped_mm;
}

}  // namespace accelsim::ops
