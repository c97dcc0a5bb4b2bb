// Pointwise (elementwise) ops: arithmetic, comparisons, activations and their backward ops.
//
// Convention: 1 FLOP per output element, whatever the function (an activation such as GELU
// costs several instructions, but these ops are bound by memory traffic on every device in the
// database, so the count only affects the roofline classification). Broadcast inputs are read
// at their accessed size (stride-0 dimensions once).
#include "op_families.h"

namespace accelsim::ops {
namespace {

OpCount count_pointwise(const Graph& g, const Node& n) {
  return count_streaming(g, n, OpClass::elementwise, 1.0);
}

}  // namespace

void add_pointwise_ops(OpTable& t) {
  for (const char* op : {
           // arithmetic
           "add", "sub", "rsub", "mul", "div", "neg", "abs", "reciprocal", "pow", "sqrt", "rsqrt",
           "square", "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sin", "cos", "tan",
           "sinh", "cosh", "asin", "acos", "atan", "atan2", "asinh", "acosh", "atanh", "erf",
           "erfc", "erfinv", "floor", "ceil", "round", "trunc", "frac", "sign", "sgn", "fmod",
           "remainder", "floor_divide", "lerp", "addcmul", "addcdiv", "clamp", "clamp_min",
           "clamp_max", "clip", "maximum", "minimum", "fmax", "fmin", "hypot", "logaddexp",
           "xlogy", "copysign", "nan_to_num", "lgamma", "digamma", "logit", "sinc", "positive",
           "true_divide", "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not",
           "bitwise_left_shift", "bitwise_right_shift", "_conj", "conj_physical",
           // comparisons and selection
           "eq", "ne", "lt", "le", "gt", "ge", "logical_and", "logical_or", "logical_xor",
           "logical_not", "isnan", "isinf", "isfinite", "signbit", "where", "masked_fill",
           // activations
           "relu", "relu6", "gelu", "silu", "sigmoid", "tanh", "hardtanh", "hardsigmoid",
           "hardswish", "leaky_relu", "elu", "selu", "celu", "softplus", "mish", "threshold",
           "prelu", "_prelu_kernel", "glu", "log_sigmoid_forward", "native_dropout", "dropout",
           "bernoulli",
           // backward of pointwise ops
           "gelu_backward", "silu_backward", "sigmoid_backward", "tanh_backward",
           "threshold_backward", "hardtanh_backward", "leaky_relu_backward", "elu_backward",
           "softplus_backward", "mish_backward", "hardswish_backward", "hardsigmoid_backward",
           "native_dropout_backward", "glu_backward", "log_sigmoid_backward",
           // fused kernels the model builder emits: RoPE applied to q or k in one pass; a gated
           // FFN's activation(gate) * up and its backward (BuildOptions::fused_gated_activation)
           "accel_sim::rotary_embedding", "accel_sim::gated_activation",
           "accel_sim::gated_activation_backward"}) {
    t[op] = count_pointwise;
  }
}

}  // namespace accelsim::ops
