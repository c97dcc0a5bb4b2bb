#include "accelsim/graph.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "accelsim/error.h"

namespace accelsim {
namespace {

// StorageId, TensorId and NodeId are int32.
constexpr size_t kMaxIds = static_cast<size_t>(std::numeric_limits<int32_t>::max());

std::string attr_type(const AttrValue& v) {
  switch (v.index()) {
    case 0: return "bool";
    case 1: return "int";
    case 2: return "float";
    case 3: return "string";
    default: return "int list";
  }
}

[[noreturn]] void bad_attr(const Node& node, std::string_view name, std::string_view want,
                           const AttrValue& got) {
  throw ConfigError("op '" + node.op + "': attribute '" + std::string(name) + "' should be " +
                    std::string(want) + ", got " + attr_type(got));
}

}  // namespace

std::string_view pass_name(Pass pass) {
  switch (pass) {
    case Pass::forward: return "forward";
    case Pass::backward: return "backward";
    case Pass::optimizer: return "optimizer";
  }
  return "forward";
}

Pass parse_pass(std::string_view name) {
  if (name == "forward") return Pass::forward;
  if (name == "backward") return Pass::backward;
  if (name == "optimizer") return Pass::optimizer;
  throw ConfigError("unknown pass '" + std::string(name) + "' (known: forward, backward, optimizer)");
}

const AttrValue* Node::attr(std::string_view name) const {
  for (const Attr& a : attrs) {
    if (a.name == name) return &a.value;
  }
  return nullptr;
}

int64_t Node::attr_int(std::string_view name, int64_t fallback) const {
  const AttrValue* v = attr(name);
  if (v == nullptr) return fallback;
  if (const auto* i = std::get_if<int64_t>(v)) return *i;
  if (const auto* b = std::get_if<bool>(v)) return *b ? 1 : 0;
  bad_attr(*this, name, "an int", *v);
}

double Node::attr_double(std::string_view name, double fallback) const {
  const AttrValue* v = attr(name);
  if (v == nullptr) return fallback;
  if (const auto* d = std::get_if<double>(v)) return *d;
  if (const auto* i = std::get_if<int64_t>(v)) return static_cast<double>(*i);
  bad_attr(*this, name, "a number", *v);
}

bool Node::attr_bool(std::string_view name, bool fallback) const {
  const AttrValue* v = attr(name);
  if (v == nullptr) return fallback;
  if (const auto* b = std::get_if<bool>(v)) return *b;
  if (const auto* i = std::get_if<int64_t>(v)) return *i != 0;
  bad_attr(*this, name, "a bool", *v);
}

std::vector<int64_t> Node::attr_ints(std::string_view name) const {
  const AttrValue* v = attr(name);
  if (v == nullptr) return {};
  if (const auto* l = std::get_if<std::vector<int64_t>>(v)) return *l;
  if (const auto* i = std::get_if<int64_t>(v)) return {*i};
  bad_attr(*this, name, "an int list", *v);
}

void Graph::reserve(size_t storages, size_t tensors, size_t nodes) {
  storages_.reserve(storages);
  tensors_.reserve(tensors);
  nodes_.reserve(nodes);
}

StorageId Graph::add_storage(const Storage& storage) {
  ACCELSIM_CHECK(storage.size_bytes >= 0,
                 "storage " + std::to_string(storages_.size()) + " has negative size_bytes");
  ACCELSIM_CHECK(storage.released_after >= kNoNode,
                 "storage " + std::to_string(storages_.size()) + " has a negative released_after");
  ACCELSIM_CHECK(storages_.size() < kMaxIds, "the graph has more storages than 32-bit ids can name");
  storages_.push_back(storage);
  return static_cast<StorageId>(storages_.size() - 1);
}

TensorId Graph::add_tensor(TensorMeta tensor) {
  // The messages are built only when a check fails: a graph adds thousands of tensors and nodes.
  auto id = [&] { return std::to_string(tensors_.size()); };
  ACCELSIM_CHECK(tensor.storage >= 0 && static_cast<size_t>(tensor.storage) < storages_.size(),
                 "tensor " + id() + " refers to unknown storage " + std::to_string(tensor.storage));
  ACCELSIM_CHECK(tensor.strides.empty() || tensor.strides.size() == tensor.shape.size(),
                 "tensor " + id() + " has " + std::to_string(tensor.strides.size()) +
                     " strides for a rank-" + std::to_string(tensor.shape.size()) + " shape");
  for (int64_t d : tensor.shape) {
    ACCELSIM_CHECK(d >= 0, "tensor " + id() + " has a negative dimension");
  }
  ACCELSIM_CHECK(tensor.storage_offset >= 0, "tensor " + id() + " has a negative storage offset");
  ACCELSIM_CHECK(tensor.dtype != DType::fp4_e2m1,
                 "tensor " + id() + " has dtype fp4_e2m1: fp4 values are stored packed, two per uint8 byte");
  ACCELSIM_CHECK(tensors_.size() < kMaxIds, "the graph has more tensors than 32-bit ids can name");
  tensor.logical_bytes();  // throws ConfigError when its byte count overflows 64 bits
  tensors_.push_back(std::move(tensor));
  return static_cast<TensorId>(tensors_.size() - 1);
}

NodeId Graph::add_node(Node node) {
  auto where = [&] { return "node " + std::to_string(nodes_.size()) + " (" + node.op + ")"; };
  ACCELSIM_CHECK(!node.op.empty(), where() + " has no op name");
  for (TensorId t : node.inputs) {
    ACCELSIM_CHECK(t >= 0 && static_cast<size_t>(t) < tensors_.size(),
                   where() + " reads unknown tensor " + std::to_string(t));
  }
  for (TensorId t : node.outputs) {
    ACCELSIM_CHECK(t >= 0 && static_cast<size_t>(t) < tensors_.size(),
                   where() + " writes unknown tensor " + std::to_string(t));
  }
  ACCELSIM_CHECK(nodes_.size() < kMaxIds, "the graph has more nodes than 32-bit ids can name");
  nodes_.push_back(std::move(node));
  return static_cast<NodeId>(nodes_.size() - 1);
}

void Graph::add_output(TensorId tensor) {
  ACCELSIM_CHECK(tensor >= 0 && static_cast<size_t>(tensor) < tensors_.size(),
                 "graph output names unknown tensor " + std::to_string(tensor));
  outputs_.push_back(tensor);
}

void Graph::hold_storage_until(StorageId storage, NodeId node) {
  ACCELSIM_CHECK(storage >= 0 && static_cast<size_t>(storage) < storages_.size(),
                 "unknown storage " + std::to_string(storage));
  ACCELSIM_CHECK(node >= 0 && static_cast<size_t>(node) < nodes_.size(),
                 "unknown node " + std::to_string(node));
  storages_[storage].released_after = std::max(storages_[storage].released_after, node);
}

const Storage& Graph::storage(StorageId id) const {
  ACCELSIM_CHECK(id >= 0 && static_cast<size_t>(id) < storages_.size(),
                 "unknown storage " + std::to_string(id));
  return storages_[id];
}

const TensorMeta& Graph::tensor(TensorId id) const {
  ACCELSIM_CHECK(id >= 0 && static_cast<size_t>(id) < tensors_.size(),
                 "unknown tensor " + std::to_string(id));
  return tensors_[id];
}

const Node& Graph::node(NodeId id) const {
  ACCELSIM_CHECK(id >= 0 && static_cast<size_t>(id) < nodes_.size(),
                 "unknown node " + std::to_string(id));
  return nodes_[id];
}

std::vector<NodeId> Graph::producers() const {
  std::vector<NodeId> producer(tensors_.size(), kNoNode);
  for (size_t n = 0; n < nodes_.size(); ++n) {
    for (TensorId t : nodes_[n].outputs) {
      if (producer[t] == kNoNode) producer[t] = static_cast<NodeId>(n);
    }
  }
  return producer;
}

}  // namespace accelsim
