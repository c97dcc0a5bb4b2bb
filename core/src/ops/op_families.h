// Internal to the op catalogue: shared counting helpers and the per-family registration
// functions. Each family file (matmul.cc, attention.cc, ...) adds its ops to an OpTable.
#pragma once

#include <string>
#include <unordered_map>

#include "accelsim/graph.h"
#include "accelsim/op_catalog.h"

namespace accelsim::ops {

using CountFn = OpCount (*)(const Graph& graph, const Node& node);
using OpTable = std::unordered_map<std::string, CountFn>;

// The i-th tensor input; throws ConfigError naming the op when it is missing.
const TensorMeta& input(const Graph& graph, const Node& node, size_t i);
// The i-th tensor output; throws ConfigError naming the op when it is missing.
const TensorMeta& output(const Graph& graph, const Node& node, size_t i);
// Throws ConfigError unless `t` has rank `rank` (or >= rank when `at_least`).
void require_rank(const Node& node, const TensorMeta& t, size_t rank, const char* what,
                  bool at_least = false);

double read_inputs(const Graph& graph, const Node& node, size_t first = 0);  // accessed bytes
double write_outputs(const Graph& graph, const Node& node);                  // accessed bytes
int64_t output_numel(const Graph& graph, const Node& node);  // first output's (0 if none)
DType result_dtype(const Graph& graph, const Node& node);    // first output's, else first input's

// Query-key pairs of one attention head that a mask lets through: every Sq x Skv pair, or with
// `causal` those of torch SDPA's top-left causal mask shifted by `offset` (query i sees keys
// 0 .. offset + i), each query seeing at most `window` keys when `window` > 0 (attention.cc).
double score_pairs(int64_t sq, int64_t skv, bool causal, int64_t window, int64_t offset, int64_t chunk = 0);

// Reads every input, writes every output, `flops_per_element` per element of the first output.
OpCount count_streaming(const Graph& graph, const Node& node, OpClass op_class,
                        double flops_per_element);
// The catalogue's answer for an op it does not know.
OpCount count_unknown(const Graph& graph, const Node& node);

void add_matmul_ops(OpTable& table);
void add_attention_ops(OpTable& table);
void add_convolution_ops(OpTable& table);
void add_normalization_ops(OpTable& table);
void add_pointwise_ops(OpTable& table);
void add_reduction_ops(OpTable& table);
void add_indexing_ops(OpTable& table);
void add_data_movement_ops(OpTable& table);  // views, copies, fills, allocations
void add_communication_ops(OpTable& table);  // collectives the model builder emits
void add_optimizer_ops(OpTable& table);      // fused and multi-tensor optimizer steps

}  // namespace accelsim::ops
