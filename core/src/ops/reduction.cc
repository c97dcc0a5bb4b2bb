// Reductions, scans, sorting and losses: one accumulate (1 FLOP) per input element; every
// input is read once and every output written once.
#include "op_families.h"

namespace accelsim::ops {
namespace {

OpCount count_reduction(const Graph& g, const Node& n) {
  OpCount c = count_streaming(g, n, OpClass::reduction, 0.0);
  c.flops = n.inputs.empty() ? 0.0 : static_cast<double>(input(g, n, 0).numel());
  return c;
}

// nll_loss_forward(self [N, C] or [C], target [N], weight [C]?, reduction, ignore_index) ->
// (output, total_weight): each row reads its target and the one log-probability (and weight) it
// selects (ATen's nll_loss_forward_reduce_cuda_kernel_2d, aten/src/ATen/native/cuda/Loss.cu);
// the other C - 1 columns are never read. nll_loss2d_forward likewise per pixel.
OpCount count_nll_loss(const Graph& g, const Node& n) {
  const TensorMeta& self = input(g, n, 0);
  const TensorMeta& target = input(g, n, 1);
  const double picks = static_cast<double>(target.numel());
  OpCount c;
  c.op_class = OpClass::reduction;
  c.flops = picks;
  c.bytes_read = static_cast<double>(target.accessed_bytes()) + picks * static_cast<double>(size_bytes(self.dtype)) *
                                                                    (n.inputs.size() > 2 ? 2.0 : 1.0);
  c.bytes_written = write_outputs(g, n);
  c.compute_dtype = self.dtype;
  return c;
}

// nll_loss_backward(grad_output, self, target, weight?, reduction, ignore_index, total_weight)
// -> grad_input [N, C]: grad_input is zero-filled, then each row's target column written
// (LossNLL.cpp: grad_input.zero_() before the scatter kernel); `self` gives only the shape.
OpCount count_nll_loss_backward(const Graph& g, const Node& n) {
  const TensorMeta& target = input(g, n, 2);
  const double picks = static_cast<double>(target.numel());
  OpCount c;
  c.op_class = OpClass::reduction;
  c.flops = picks;
  c.bytes_read = static_cast<double>(input(g, n, 0).accessed_bytes() + target.accessed_bytes());
  c.bytes_written = write_outputs(g, n);
  c.compute_dtype = result_dtype(g, n);
  return c;
}

}  // namespace

void add_reduction_ops(OpTable& t) {
  for (const char* op : {"sum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin",
                         "aminmax", "var", "std", "var_mean", "std_mean", "norm",
                         "linalg_vector_norm", "any", "all", "logsumexp", "cumsum", "cumprod",
                         "cummax", "cummin", "count_nonzero", "nansum", "topk", "sort", "argsort",
                         "kthvalue", "median", "mode", "histc", "bincount",
                         "mse_loss", "mse_loss_backward", "l1_loss",
                         "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
                         "binary_cross_entropy_with_logits", "binary_cross_entropy_backward",
                         "kl_div", "cross_entropy_loss",
                         // the one-kernel LM loss the builder emits (BuildOptions::cross_entropy):
                         // one pass over the logits forward, read and write of their size backward
                         "accel_sim::cross_entropy", "accel_sim::cross_entropy_backward"}) {
    t[op] = count_reduction;
  }
  t["nll_loss_forward"] = count_nll_loss;
  t["nll_loss2d_forward"] = count_nll_loss;
  t["nll_loss_backward"] = count_nll_loss_backward;
  t["nll_loss2d_backward"] = count_nll_loss_backward;
}

}  // namespace accelsim::ops
