// The op catalogue: from an op and the shapes of its tensors to the work it does.
//
// count_op() is layer 1 of the cost model: arithmetic (FLOPs) and memory traffic
// (bytes read and written, the accessed footprint of each tensor) of one node, plus its class.
// It knows the ATen ops that appear when capturing HF GPT-2, BERT, Llama, Mistral, Mixtral and
// Qwen models, common vision ops, and `accel_sim::attention`. An op it does not know is counted
// as memory-bound on the bytes of its inputs and outputs with `known = false`, never as zero.
//
// Counting conventions (docs/models/counting.md): a multiply-add is 2 FLOPs; attention counts
// its two matmuls only (QK^T and PV), over the unmasked score elements when causal; pointwise
// ops count 1 FLOP per output element; views cost nothing and launch no kernel. A batched
// matmul that a capture or the model builder marks as one GEMM of an eager attention core (attrs
// attention_gemm, mask_is_causal, mask_window_size, mask_query_offset; docs/formats/graph.md)
// counts every pair it computes as executed FLOPs and the pairs its mask discards as masked_flops.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "accelsim/dtype.h"
#include "accelsim/graph.h"

namespace accelsim {

enum class OpClass : uint8_t {
  view,           // metadata only: no kernel, no traffic
  allocation,     // empty/empty_like: memory, no kernel
  matmul,         // mm, bmm, addmm, grouped GEMMs
  attention,      // fused attention (SDPA backends, accel_sim::attention)
  convolution,
  normalization,  // layer/rms/batch/group norm
  softmax,
  elementwise,
  reduction,
  indexing,       // embedding, gather, scatter, index_put
  copy,           // casts, clones, cat, padding
  fill,           // zeros, ones, full, arange
  communication,  // collectives between ranks (accel_sim::all_reduce, ...): not timed on one device
  unknown,
};

std::string_view op_class_name(OpClass op_class);

// True for classes that run on matrix units (tensor cores) at the dtype's matrix peak.
bool uses_matrix_units(OpClass op_class);

// The problem a matrix or attention kernel solves, for cost models that time kernels from their
// shapes (layer 3) rather than from FLOPs and bytes alone. Zero when the op is not of that kind.
struct GemmDims {
  int64_t m = 0, n = 0, k = 0;  // one [m, k] x [k, n] product
  int64_t batch = 0;            // independent products (bmm batch, experts of a grouped GEMM)
};

struct AttentionDims {
  double batch_heads = 0;    // batch * query heads
  int64_t seq_q = 0, seq_k = 0, head_dim = 0, value_dim = 0;
  bool causal = false;
  bool backward = false;
  bool softcap = false;  // a tanh per score beside its exp (Gemma 2's logit soft-capping)
};

struct OpCount {
  double flops = 0.0;  // executed: what the kernel computes, the work latency is predicted from
  // The part of `flops` spent on query-key pairs an attention mask discards: an eager attention
  // GEMM (scores = Q K^T, context = P V) computes every pair and the mask drops some afterwards,
  // where a fused kernel skips them. Model FLOPs count only the rest (useful_flops()).
  double masked_flops = 0.0;
  double bytes_read = 0.0;
  double bytes_written = 0.0;
  double communication_bytes = 0.0;  // collectives: bytes of the result on this rank
  OpClass op_class = OpClass::unknown;
  DType compute_dtype = DType::fp32;  // dtype whose peak applies (operands for matmuls)
  bool launches_kernel = true;
  bool known = true;  // false: not in the catalogue, counted conservatively on bytes
  GemmDims gemm;            // matmul-class ops
  AttentionDims attention;  // attention-class ops

  double bytes() const { return bytes_read + bytes_written; }
  // The FLOPs that count as model FLOPs (SimulationResult::model_flops): all but masked_flops.
  double useful_flops() const { return flops - masked_flops; }
};

// Every figure of `c` by name, f("flops", c.flops), ...: the checks that must see them all
// (simulate()'s, physical_range.h) walk this list, so a new figure goes here too.
template <typename F>
void for_each_figure(const OpCount& c, F&& f) {
  f("flops", c.flops);
  f("masked_flops", c.masked_flops);
  f("bytes_read", c.bytes_read);
  f("bytes_written", c.bytes_written);
  f("communication_bytes", c.communication_bytes);
}

// Counts one node of `graph`. Never throws for an unknown op; throws ConfigError when a known
// op has the wrong number or rank of tensors.
OpCount count_op(const Graph& graph, const Node& node);

// True if `op` (a Node::op spelling) is in the catalogue.
bool is_known_op(std::string_view op);

// Every op the catalogue knows, sorted.
std::vector<std::string> known_ops();

}  // namespace accelsim
