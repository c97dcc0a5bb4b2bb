// Ops that move, fill or only describe data: views (no kernel), allocations (no kernel),
// copies and casts (read everything, write everything), fills (write only).
#include "op_families.h"

namespace accelsim::ops {
namespace {

OpCount count_view(const Graph& g, const Node& n) {
  OpCount c;
  c.op_class = OpClass::view;
  c.compute_dtype = result_dtype(g, n);
  c.launches_kernel = false;
  return c;
}

OpCount count_allocation(const Graph& g, const Node& n) {
  OpCount c = count_view(g, n);
  c.op_class = OpClass::allocation;
  return c;
}

OpCount count_copy(const Graph& g, const Node& n) {
  return count_streaming(g, n, OpClass::copy, 0.0);
}

// Fills write their output; they read no data of `self` (zeros_like and fill_ only need its
// shape), only an optional value tensor after it.
OpCount count_fill(const Graph& g, const Node& n) {
  OpCount c = count_streaming(g, n, OpClass::fill, 0.0);
  c.bytes_read = read_inputs(g, n, 1);
  return c;
}

}  // namespace

void add_data_movement_ops(OpTable& t) {
  for (const char* op :
       {"view", "_unsafe_view", "reshape", "_reshape_alias", "view_as", "t", "transpose",
        "permute", "expand", "expand_as", "slice", "select", "squeeze", "unsqueeze", "alias",
        "detach", "as_strided", "unfold", "diagonal", "split", "split_with_sizes",
        "unsafe_split", "unsafe_split_with_sizes", "chunk", "unsafe_chunk", "unbind", "narrow",
        "movedim", "swapaxes", "swapdims", "view_as_real", "view_as_complex", "real", "imag",
        "lift_fresh", "_indices", "_values", "numpy_T", "mT", "mH", "adjoint", "flatten",
        "unflatten", "squeeze_", "unsqueeze_", "t_", "transpose_", "as_strided_", "detach_",
        "_neg_view", "_conj_view", "resolve_conj", "resolve_neg", "_nested_view_from_buffer"}) {
    t[op] = count_view;
  }
  for (const char* op : {"empty", "empty_like", "empty_strided", "new_empty",
                         "new_empty_strided", "empty_permuted", "resize_", "set_"}) {
    t[op] = count_allocation;
  }
  for (const char* op :
       {"_to_copy", "copy", "copy_", "clone", "contiguous", "cat", "concat", "concatenate",
        "stack", "hstack", "vstack", "constant_pad_nd", "pad", "reflection_pad1d",
        "reflection_pad2d", "replication_pad1d", "replication_pad2d", "repeat",
        "repeat_interleave", "tile", "tril", "triu", "flip", "roll", "rot90", "lift_fresh_copy",
        "expand_copy", "permute_copy", "view_copy", "t_copy", "transpose_copy", "unsqueeze_copy",
        "squeeze_copy", "slice_copy", "select_copy", "alias_copy", "split_with_sizes_copy",
        "split_copy", "unbind_copy", "_unsafe_view_copy", "as_strided_copy", "detach_copy",
        "_to_dtype", "to", "type_as", "pixel_shuffle", "pixel_unshuffle", "im2col", "col2im",
        "upsample_nearest2d", "upsample_bilinear2d", "_upsample_nearest_exact2d", "masked_select",
        "_fused_moving_avg_obs_fq_helper", "channel_shuffle",
        "accel_sim::fp4_quantize"}) {  // fp4: each block's amax, scale and packed values in one pass
    t[op] = count_copy;
  }
  for (const char* op :
       {"zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "fill", "zero",
        "new_zeros", "new_ones", "new_full", "arange", "linspace", "logspace", "scalar_tensor",
        "rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "randperm", "eye",
        "tril_indices", "triu_indices", "normal", "uniform", "exponential", "random"}) {
    t[op] = count_fill;
  }
}

}  // namespace accelsim::ops
