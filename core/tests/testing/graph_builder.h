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

}  // namespace accelsim::testing
