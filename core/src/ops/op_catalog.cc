#include "accelsim/op_catalog.h"

#include <algorithm>
#include <string>

#include "accelsim/error.h"
#include "op_families.h"

namespace accelsim {
namespace ops {

const TensorMeta& input(const Graph& graph, const Node& node, size_t i) {
  ACCELSIM_CHECK(i < node.inputs.size(), "op '" + node.op + "' needs at least " +
                                             std::to_string(i + 1) + " tensor inputs, got " +
                                             std::to_string(node.inputs.size()));
  return graph.tensor(node.inputs[i]);
}

const TensorMeta& output(const Graph& graph, const Node& node, size_t i) {
  ACCELSIM_CHECK(i < node.outputs.size(), "op '" + node.op + "' needs at least " +
                                              std::to_string(i + 1) + " tensor outputs, got " +
                                              std::to_string(node.outputs.size()));
  return graph.tensor(node.outputs[i]);
}

void require_rank(const Node& node, const TensorMeta& t, size_t rank, const char* what,
                  bool at_least) {
  const bool ok = at_least ? t.shape.size() >= rank : t.shape.size() == rank;
  ACCELSIM_CHECK(ok, "op '" + node.op + "': " + what + " must have rank " +
                         (at_least ? ">= " : "") + std::to_string(rank) + ", got rank " +
                         std::to_string(t.shape.size()));
}

double read_inputs(const Graph& graph, const Node& node, size_t first) {
  // A tensor passed twice (addcmul_(v, g, g), mul(x, x)) is read from memory once: each thread
  // loads the same element for both operands.
  double bytes = 0;
  for (size_t i = first; i < node.inputs.size(); ++i) {
    const TensorId t = node.inputs[i];
    if (std::find(node.inputs.begin() + static_cast<std::ptrdiff_t>(first),
                  node.inputs.begin() + static_cast<std::ptrdiff_t>(i), t) !=
        node.inputs.begin() + static_cast<std::ptrdiff_t>(i)) {
      continue;
    }
    bytes += static_cast<double>(graph.tensor(t).accessed_bytes());
  }
  return bytes;
}

double write_outputs(const Graph& graph, const Node& node) {
  double bytes = 0;
  for (TensorId t : node.outputs) bytes += static_cast<double>(graph.tensor(t).accessed_bytes());
  return bytes;
}

int64_t output_numel(const Graph& graph, const Node& node) {
  return node.outputs.empty() ? 0 : graph.tensor(node.outputs[0]).numel();
}

DType result_dtype(const Graph& graph, const Node& node) {
  if (!node.outputs.empty()) return graph.tensor(node.outputs[0]).dtype;
  if (!node.inputs.empty()) return graph.tensor(node.inputs[0]).dtype;
  return DType::fp32;
}

OpCount count_streaming(const Graph& graph, const Node& node, OpClass op_class,
                        double flops_per_element) {
  OpCount c;
  c.op_class = op_class;
  c.flops = flops_per_element * static_cast<double>(output_numel(graph, node));
  c.bytes_read = read_inputs(graph, node);
  c.bytes_written = write_outputs(graph, node);
  c.compute_dtype = result_dtype(graph, node);
  return c;
}

OpCount count_unknown(const Graph& graph, const Node& node) {
  // Conservative: one pass over every input and output, no arithmetic credited.
  OpCount c = count_streaming(graph, node, OpClass::unknown, 0.0);
  c.known = false;
  return c;
}

}  // namespace ops

namespace {

const ops::OpTable& table() {
  // Built once on first use and never modified afterwards; safe to read from many threads.
  static const ops::OpTable kTable = [] {
    ops::OpTable t;
    ops::add_matmul_ops(t);
    ops::add_attention_ops(t);
    ops::add_convolution_ops(t);
    ops::add_normalization_ops(t);
    ops::add_pointwise_ops(t);
    ops::add_reduction_ops(t);
    ops::add_indexing_ops(t);
    ops::add_data_movement_ops(t);
    ops::add_communication_ops(t);
    ops::add_optimizer_ops(t);
    return t;
  }();
  return kTable;
}

// Exact name first; an in-place variant ("add_") falls back to its functional op ("add"),
// whose count is the same because the in-place output is the `self` input.
ops::CountFn find(const std::string& op) {
  const ops::OpTable& t = table();
  if (auto it = t.find(op); it != t.end()) return it->second;
  if (op.size() > 1 && op.back() == '_' && op[op.size() - 2] != '_') {
    if (auto it = t.find(op.substr(0, op.size() - 1)); it != t.end()) {
      return it->second;
    }
  }
  return nullptr;
}

}  // namespace

std::string_view op_class_name(OpClass op_class) {
  switch (op_class) {
    case OpClass::view: return "view";
    case OpClass::allocation: return "allocation";
    case OpClass::matmul: return "matmul";
    case OpClass::attention: return "attention";
    case OpClass::convolution: return "convolution";
    case OpClass::normalization: return "normalization";
    case OpClass::softmax: return "softmax";
    case OpClass::elementwise: return "elementwise";
    case OpClass::reduction: return "reduction";
    case OpClass::indexing: return "indexing";
    case OpClass::copy: return "copy";
    case OpClass::fill: return "fill";
    case OpClass::communication: return "communication";
    case OpClass::unknown: return "unknown";
  }
  return "unknown";
}

bool uses_matrix_units(OpClass op_class) {
  return op_class == OpClass::matmul || op_class == OpClass::attention ||
         op_class == OpClass::convolution;
}

OpCount count_op(const Graph& graph, const Node& node) {
  ops::CountFn fn = find(node.op);
  return fn != nullptr ? fn(graph, node) : ops::count_unknown(graph, node);
}

bool is_known_op(std::string_view op) { return find(std::string(op)) != nullptr; }

std::vector<std::string> known_ops() {
  std::vector<std::string> names;
  names.reserve(table().size());
  for (const auto& [name, fn] : table()) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace accelsim
