// Small helpers for building graphs by hand in tests.
#pragma once

#include <string>
#include <vector>

#include "accelsim/graph.h"

namespace accelsim::testing {

inline std::vector<int64_t> contiguous_strides(const std::vector<int64_t>& shape) {
  std::vector<int64_t> strides(shape.size(), 1);
  for (size_t i = shape.size(); i-- > 1;) strides[i - 1] = strides[i] * shape[i];
  return strides;
}

// A contiguous tensor on a fresh storage of exactly its size.
inline TensorId new_tensor(Graph& g, std::vector<int64_t> shape, DType dtype = DType::fp32,
                           StorageKind kind = StorageKind::activation) {
  TensorMeta t{.shape = shape, .strides = contiguous_strides(shape), .dtype = dtype};
  t.storage = g.add_storage({.size_bytes = t.logical_bytes(), .kind = kind});
  return g.add_tensor(t);
}

// A tensor viewing `base`'s storage with another shape.
inline TensorId view_of(Graph& g, TensorId base, std::vector<int64_t> shape) {
  TensorMeta t{.shape = shape,
               .strides = contiguous_strides(shape),
               .dtype = g.tensor(base).dtype,
               .storage = g.tensor(base).storage};
  return g.add_tensor(t);
}

inline NodeId add(Graph& g, std::string op, std::vector<TensorId> inputs,
                  std::vector<TensorId> outputs, std::vector<Attr> attrs = {}) {
  return g.add_node(Node{.op = std::move(op),
                         .overload = "default",
                         .inputs = std::move(inputs),
                         .outputs = std::move(outputs),
                         .attrs = std::move(attrs)});
}

// On testing::round_device(): x [1000, 1000] bf16 input; W [1000, 1000] bf16 parameter.
//   n0: y = mm(x, W): 2e9 FLOPs / 100 TFLOP/s = 20 us; bytes 6e6 / 1 TB/s = 6 us -> compute, 21 us
//   n1: v = view(y): no kernel, 0 s
//   n2: z = gelu(v): 1e6 FLOPs / 1 TFLOP/s = 1 us; 4e6 B / 1 TB/s = 4 us -> memory, 5 us
//   n3: u = frobnicate(z): unknown, 4e6 B -> 4 us + 1 us = 5 us
// latency = 31 us; FLOPs = 2.001e9; bytes = 1.4e7.
inline Graph sample_graph() {
  Graph g;
  TensorId x = new_tensor(g, {1000, 1000}, DType::bf16, StorageKind::input);
  TensorId w = new_tensor(g, {1000, 1000}, DType::bf16, StorageKind::parameter);
  TensorId y = new_tensor(g, {1000, 1000}, DType::bf16);
  TensorId v = view_of(g, y, {1000000});
  TensorId z = new_tensor(g, {1000000}, DType::bf16);
  TensorId u = new_tensor(g, {1000000}, DType::bf16);
  add(g, "mm", {x, w}, {y});
  add(g, "view", {y}, {v});
  add(g, "gelu", {v}, {z});
  add(g, "frobnicate", {z}, {u});
  g.add_output(u);
  return g;
}

}  // namespace accelsim::testing
