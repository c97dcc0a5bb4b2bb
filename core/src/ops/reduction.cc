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

}  // namespace

void add_reduction_ops(OpTable& t) {
  for (const char* op : {"sum", "mean", "prod", "amax", "amin", "max", "min", "argmax", "argmin",
                         "aminmax", "var", "std", "var_mean", "std_mean", "norm",
                         "linalg_vector_norm", "any", "all", "logsumexp", "cumsum", "cumprod",
                         "cummax", "cummin", "count_nonzero", "nansum", "topk", "sort", "argsort",
                         "kthvalue", "median", "mode", "histc", "bincount",
                         "nll_loss_forward", "nll_loss2d_forward", "nll_loss_backward",
                         "nll_loss2d_backward", "mse_loss", "mse_loss_backward", "l1_loss",
                         "smooth_l1_loss", "huber_loss", "binary_cross_entropy",
                         "binary_cross_entropy_with_logits", "binary_cross_entropy_backward",
                         "kl_div", "cross_entropy_loss",
                         // the fused LM loss the builder emits (BuildOptions::fused_cross_entropy):
                         // one pass over the logits forward, read and write of their size backward
                         "accel_sim::cross_entropy", "accel_sim::cross_entropy_backward"}) {
    t[op] = count_reduction;
  }
}

}  // namespace accelsim::ops
