// The op graph: nodes (ATen-level ops) over tensors over storages, in execution order.
//
// A Graph is a flat, append-only value: storages, tensors and nodes live in vectors and refer to
// each other by dense integer ids. Nodes are stored in the order they execute (a captured
// program is already topologically ordered). Builders check ids as they are added, so a Graph
// that was built without an exception is well formed.
//
//   Graph g;
//   StorageId s = g.add_storage({.size_bytes = 64, .kind = StorageKind::input});
//   TensorId x = g.add_tensor({.shape = {4, 4}, .dtype = DType::fp32, .storage = s});
//   ...
//   g.add_node({.op = "mm", .inputs = {x, w}, .outputs = {y}});
//
// Thread safety: const methods may be called concurrently.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "accelsim/tensor.h"

namespace accelsim {

// A non-tensor argument of an op (dim, alpha, is_causal, stride, ...), keyed by its schema name.
using AttrValue = std::variant<bool, int64_t, double, std::string, std::vector<int64_t>>;

struct Attr {
  std::string name;
  AttrValue value;
};

// Which part of a training step a node belongs to (inference graphs are all forward).
enum class Pass : uint8_t { forward, backward, optimizer };

std::string_view pass_name(Pass pass);
Pass parse_pass(std::string_view name);  // throws ConfigError

struct Node {
  std::string op;        // ATen packet name without namespace ("mm"), or "ns::name" for others
  std::string overload;  // "default", "Tensor", "Scalar", ...
  std::vector<TensorId> inputs;   // tensor arguments in schema order (lists flattened)
  std::vector<TensorId> outputs;  // tensor results in order
  std::vector<Attr> attrs;
  std::string module_path;  // "model.layers.0.self_attn.q_proj"; empty at top level
  std::string module_type;  // class name of the innermost module ("Linear")
  std::string source;       // "file.py:LINE" of the model code that issued the op
  Pass pass = Pass::forward;

  // Attribute lookup by name; nullptr when absent.
  const AttrValue* attr(std::string_view name) const;
  // Typed lookups returning `fallback` when the attribute is absent. Integers are accepted where
  // doubles are asked for; a value of another type throws ConfigError.
  int64_t attr_int(std::string_view name, int64_t fallback) const;
  double attr_double(std::string_view name, double fallback) const;
  bool attr_bool(std::string_view name, bool fallback) const;
  std::vector<int64_t> attr_ints(std::string_view name) const;  // empty when absent; an int becomes {int}
};

class Graph {
 public:
  std::string name;

  // Reserves room for this many storages, tensors and nodes (a hint; never required).
  void reserve(size_t storages, size_t tensors, size_t nodes);

  // REQUIRES: size_bytes >= 0.
  StorageId add_storage(const Storage& storage);
  // REQUIRES: tensor.storage names an existing storage; shape entries >= 0; strides empty or
  // of the same rank as shape.
  TensorId add_tensor(TensorMeta tensor);
  // REQUIRES: every input and output names an existing tensor. Returns the node's id, which is
  // also its position in execution order.
  NodeId add_node(Node node);
  // Marks a tensor as a graph output: its storage stays live until the end.
  void add_output(TensorId tensor);
  // Records that the program holds `storage` at least until after node `node` (Storage::released_after).
  // REQUIRES: both ids exist.
  void hold_storage_until(StorageId storage, NodeId node);

  std::span<const Storage> storages() const { return storages_; }
  std::span<const TensorMeta> tensors() const { return tensors_; }
  std::span<const Node> nodes() const { return nodes_; }
  std::span<const TensorId> outputs() const { return outputs_; }

  const Storage& storage(StorageId id) const;
  const TensorMeta& tensor(TensorId id) const;
  const Node& node(NodeId id) const;

  // For each tensor, the node that produced it (kNoNode for placeholders). The first producer
  // wins for tensors written in place by several nodes.
  std::vector<NodeId> producers() const;

 private:
  std::vector<Storage> storages_;
  std::vector<TensorMeta> tensors_;
  std::vector<Node> nodes_;
  std::vector<TensorId> outputs_;
};

}  // namespace accelsim
