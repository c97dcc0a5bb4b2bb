// Normalization layers and softmax.
//
// FLOPs per element count each arithmetic step once (a fused multiply-add counts 2):
//   layer/group norm: mean (1) + centre (1) + square-accumulate (2) + scale by rstd (1) = 5,
//                     plus 1 for the weight and 1 for the bias when present;
//   rms norm:         square-accumulate (2) + scale (1) = 3, plus 1 for the weight;
//   batch norm (inference): normalize with running stats (2: sub, mul) + weight + bias;
//   batch norm (training): adds the batch statistics (3: accumulate, square-accumulate);
//   softmax:          max (1) + subtract (1) + exp (1) + sum (1) + divide (1) = 5.
//   layer norm backward: recompute x_hat (2) + dy*w (1) + two row sums (dy*w, dy*w*x_hat: 3) +
//                     dx = rstd (g - mean(g) - x_hat mean(g x_hat)) (4) + weight grad dy*x_hat
//                     accumulated (2) + bias grad dy accumulated (1) = 13;
//   rms norm backward: the same without centring and bias: x_hat (1) + dy*w (1) + row sum (2) +
//                     dx (3) + weight grad (2) = 9.
// These ops are memory-bound on every device in the database; the FLOPs only matter for the
// roofline classification.
#include <string>

#include "op_families.h"

namespace accelsim::ops {
namespace {

OpCount with_flops(const Graph& g, const Node& n, OpClass op_class, double per_element) {
  OpCount c = count_streaming(g, n, op_class, 0.0);
  c.flops = per_element * static_cast<double>(input(g, n, 0).numel());
  return c;
}

// native_layer_norm(input, normalized_shape, weight?, bias?, eps) -> (out, mean, rstd)
OpCount count_layer_norm(const Graph& g, const Node& n) {
  const double affine = static_cast<double>(n.inputs.size() > 1 ? n.inputs.size() - 1 : 0);
  return with_flops(g, n, OpClass::normalization, 5.0 + affine);
}

// native_group_norm(input, weight?, bias?, N, C, HxW, group, eps) -> (out, mean, rstd)
OpCount count_group_norm(const Graph& g, const Node& n) { return count_layer_norm(g, n); }

// _fused_rms_norm(input, normalized_shape, weight?, eps) -> (out, rstd)
OpCount count_rms_norm(const Graph& g, const Node& n) {
  return with_flops(g, n, OpClass::normalization, n.inputs.size() > 1 ? 4.0 : 3.0);
}

// Batch norm variants take (input, weight?, bias?, running_mean?, running_var?, ...).
OpCount count_batch_norm(const Graph& g, const Node& n) {
  const bool training = n.op.find("no_training") == std::string::npos &&
                        n.attr_bool("training", n.op == "_native_batch_norm_legit" ||
                                                    n.op == "_native_batch_norm_legit_functional");
  return with_flops(g, n, OpClass::normalization, training ? 7.0 : 4.0);
}

OpCount count_softmax(const Graph& g, const Node& n) {
  return with_flops(g, n, OpClass::softmax, 5.0);
}

// _softmax_backward_data(grad_output, output, dim, input_dtype): grad * out, row sum,
// subtract, multiply: 4 per element.
OpCount count_softmax_backward(const Graph& g, const Node& n) {
  return with_flops(g, n, OpClass::softmax, 4.0);
}

// native_layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight?, bias?,
// output_mask) -> (grad_input, grad_weight, grad_bias); the work is per element of the input.
OpCount count_layer_norm_backward(const Graph& g, const Node& n) {
  OpCount c = count_streaming(g, n, OpClass::normalization, 0.0);
  c.flops = 13.0 * static_cast<double>(input(g, n, 1).numel());
  return c;
}

// _fused_rms_norm_backward(grad_out, input, normalized_shape, rstd, weight?, output_mask)
OpCount count_rms_norm_backward(const Graph& g, const Node& n) {
  OpCount c = count_streaming(g, n, OpClass::normalization, 0.0);
  c.flops = 9.0 * static_cast<double>(input(g, n, 1).numel());
  return c;
}

}  // namespace

void add_normalization_ops(OpTable& t) {
  t["native_layer_norm"] = count_layer_norm;
  t["layer_norm"] = count_layer_norm;
  t["native_group_norm"] = count_group_norm;
  t["group_norm"] = count_group_norm;
  t["_fused_rms_norm"] = count_rms_norm;
  t["rms_norm"] = count_rms_norm;
  t["native_layer_norm_backward"] = count_layer_norm_backward;
  t["_fused_rms_norm_backward"] = count_rms_norm_backward;
  for (const char* op : {"native_batch_norm", "_native_batch_norm_legit",
                         "_native_batch_norm_legit_no_training",
                         "_native_batch_norm_legit_functional", "batch_norm", "cudnn_batch_norm",
                         "miopen_batch_norm", "_batch_norm_impl_index", "instance_norm"}) {
    t[op] = count_batch_norm;
  }
  for (const char* op : {"_softmax", "softmax", "_log_softmax", "log_softmax", "_safe_softmax"}) {
    t[op] = count_softmax;
  }
  t["_softmax_backward_data"] = count_softmax_backward;
  t["_log_softmax_backward_data"] = count_softmax_backward;
}

}  // namespace accelsim::ops
