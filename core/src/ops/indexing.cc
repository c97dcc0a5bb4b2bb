// Gathers and scatters: embedding lookups, index/gather/scatter and index_put.
//
// A gather reads only the rows or elements it selects (as many as it writes) plus the indices;
// an in-place scatter reads its source values and indices and writes that many elements into
// `self`, leaving the rest of `self` untouched.
#include "op_families.h"

namespace accelsim::ops {
namespace {

// Gather-like ops whose output has the size of what they select: read = indices + output-sized
// selection from the source.
OpCount count_gather(const Graph& g, const Node& n) {
  OpCount c;
  c.op_class = OpClass::indexing;
  c.compute_dtype = result_dtype(g, n);
  c.bytes_written = write_outputs(g, n);
  c.bytes_read = read_inputs(g, n, 1) + c.bytes_written;
  return c;
}

// In-place scatters (index_put_, index_copy_, index_add_, scatter_, ...): read the indices and
// values (inputs after self), write as many elements as the values hold.
OpCount count_scatter_in_place(const Graph& g, const Node& n) {
  OpCount c;
  c.op_class = OpClass::indexing;
  c.compute_dtype = result_dtype(g, n);
  c.bytes_read = read_inputs(g, n, 1);
  c.bytes_written =
      n.inputs.size() > 1 ? static_cast<double>(g.tensor(n.inputs.back()).accessed_bytes()) : 0.0;
  c.flops = c.bytes_written > 0 && n.op.find("add") != std::string::npos
                ? static_cast<double>(g.tensor(n.inputs.back()).numel())
                : 0.0;
  return c;
}

// Out-of-place scatters copy `self` and then scatter into the copy.
OpCount count_scatter(const Graph& g, const Node& n) {
  return count_streaming(g, n, OpClass::indexing, 0.0);
}

// embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
// zero the weight gradient, then accumulate every grad_output row into it.
OpCount count_embedding_backward(const Graph& g, const Node& n) {
  OpCount c = count_streaming(g, n, OpClass::indexing, 0.0);
  c.flops = static_cast<double>(input(g, n, 0).numel());
  return c;
}

}  // namespace

void add_indexing_ops(OpTable& t) {
  for (const char* op : {"embedding", "index_select", "gather", "index", "_unsafe_index",
                         "take", "take_along_dim", "embedding_bag", "_embedding_bag"}) {
    t[op] = count_gather;
  }
  for (const char* op : {"index_put_", "_index_put_impl_", "index_copy_", "index_add_",
                         "scatter_", "scatter_add_", "scatter_reduce_", "masked_scatter_",
                         "index_reduce_"}) {
    t[op] = count_scatter_in_place;
  }
  for (const char* op : {"index_put", "_index_put_impl", "index_copy", "index_add", "scatter",
                         "scatter_add", "scatter_reduce", "masked_scatter", "index_fill",
                         "index_reduce", "slice_scatter", "select_scatter", "diagonal_scatter",
                         "as_strided_scatter", "searchsorted", "bucketize"}) {
    t[op] = count_scatter;
  }
  t["embedding_dense_backward"] = count_embedding_backward;
}

}  // namespace accelsim::ops
