// Convolutions and pooling.
#include <string>

#include "accelsim/error.h"
#include "op_families.h"

namespace accelsim::ops {
namespace {

double product(const std::vector<int64_t>& v, size_t from) {
  double p = 1;
  for (size_t i = from; i < v.size(); ++i) p *= static_cast<double>(v[i]);
  return p;
}

// convolution(input, weight, bias?, stride, padding, dilation, transposed, output_padding, groups)
// Direct convolution: each output element is a dot product over (C_in / groups) * prod(kernel)
// inputs, 2 FLOPs per multiply-add; a transposed convolution does the same work per *input*
// element with weight [C_in, C_out / groups, k...]. Bias: one add per output element.
OpCount count_convolution(const Graph& g, const Node& n) {
  const TensorMeta& x = input(g, n, 0);
  const TensorMeta& w = input(g, n, 1);
  require_rank(n, x, 3, "input", true);
  require_rank(n, w, 3, "weight", true);
  const bool transposed = n.attr_bool("transposed", false);
  const double kernel = product(w.shape, 2);
  const double out = static_cast<double>(output_numel(g, n));
  OpCount c;
  c.op_class = OpClass::convolution;
  c.compute_dtype = x.dtype;
  if (transposed) {
    c.flops = 2.0 * static_cast<double>(x.numel()) * static_cast<double>(w.shape[1]) * kernel;
  } else {
    c.flops = 2.0 * out * static_cast<double>(w.shape[1]) * kernel;
  }
  if (n.inputs.size() > 2) c.flops += out;
  c.bytes_read = read_inputs(g, n);
  c.bytes_written = write_outputs(g, n);
  return c;
}

// convolution_backward(grad_output, input, weight, ...): grad-input and grad-weight are each a
// convolution of the forward's size: twice the forward FLOPs (bias grad is a reduction, ignored).
OpCount count_convolution_backward(const Graph& g, const Node& n) {
  const TensorMeta& gy = input(g, n, 0);
  const TensorMeta& w = input(g, n, 2);
  require_rank(n, w, 3, "weight", true);
  OpCount c;
  c.op_class = OpClass::convolution;
  c.compute_dtype = gy.dtype;
  c.flops = 2.0 * 2.0 * static_cast<double>(gy.numel()) * static_cast<double>(w.shape[1]) *
            product(w.shape, 2);
  c.bytes_read = read_inputs(g, n);
  c.bytes_written = write_outputs(g, n);
  return c;
}

// Windowed pooling: one compare/add per window element per output.
OpCount count_window_pool(const Graph& g, const Node& n) {
  std::vector<int64_t> kernel = n.attr_ints("kernel_size");
  OpCount c = count_streaming(g, n, OpClass::reduction, 1.0);
  double window = 1;
  for (int64_t k : kernel) window *= static_cast<double>(k);
  // A 2-D pool given one kernel number means a square window.
  if (kernel.size() == 1) window *= static_cast<double>(kernel[0]);
  c.flops = window * static_cast<double>(output_numel(g, n));
  return c;
}

// Adaptive pooling: every input element is accumulated once.
OpCount count_adaptive_pool(const Graph& g, const Node& n) {
  OpCount c = count_streaming(g, n, OpClass::reduction, 0.0);
  c.flops = static_cast<double>(input(g, n, 0).numel());
  return c;
}

}  // namespace

void add_convolution_ops(OpTable& t) {
  for (const char* op : {"convolution", "_convolution", "conv1d", "conv2d", "conv3d",
                         "mkldnn_convolution", "cudnn_convolution", "convolution_overrideable"}) {
    t[op] = count_convolution;
  }
  t["convolution_backward"] = count_convolution_backward;
  for (const char* op : {"max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_with_indices",
                         "max_pool3d_with_indices", "avg_pool1d", "avg_pool2d", "avg_pool3d"}) {
    t[op] = count_window_pool;
  }
  for (const char* op : {"adaptive_avg_pool1d", "adaptive_avg_pool2d", "_adaptive_avg_pool2d",
                         "adaptive_avg_pool3d", "_adaptive_avg_pool3d", "adaptive_max_pool2d",
                         "adaptive_max_pool1d", "adaptive_max_pool3d"}) {
    t[op] = count_adaptive_pool;
  }
}

}  // namespace accelsim::ops
