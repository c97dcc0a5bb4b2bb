// Optimizer steps: PyTorch's fused kernels (_fused_adamw_, _fused_adam_, _fused_sgd_) and the
// multi-tensor copy that writes updated fp32 master weights back into low-precision parameters.
//
// The ops take lists of tensors, flattened in the IR in schema order:
//   _fused_adam(w)_(self[N], grads[N], exp_avgs[N], exp_avg_sqs[N], max_exp_avg_sqs[0 or N],
//                   state_steps[N or 0])
//   _fused_sgd_(self[N], grads[N], momentum_buffer_list[N])
//   _foreach_copy_(self[N], src[N])
//   _foreach_zero_(self[N])  (zero_grad without set_to_none)
//   _foreach_add_ / _mul_ / _sub_ / _div_ / _lerp_ / _addcmul_ / _addcdiv_ / _sqrt: the steps of
//   torch.optim's foreach implementations, one pass over their lists each
// They update `self` and the states in place: a node either lists the updated tensors as its
// outputs (the model builder does) or has none (PyTorch's schema returns nothing), in which case
// the written bytes are those of the updated lists.
//
// FLOPs per parameter element, counted from the update rules in the torch.optim documentation
// (AdamW, Adam, SGD algorithm boxes); scalars such as the bias corrections are per step, not
// per element:
//   Adam/AdamW: weight decay (2) + first moment (3) + second moment (4) + bias corrections (2) +
//               sqrt, add eps, divide, scale, subtract (5) = 16;
//   SGD with momentum: weight decay (2) + momentum buffer (3) + update (2) = 7.
// These kernels are memory-bound on every device in the database.
#include <string>

#include "accelsim/error.h"
#include "op_families.h"

namespace accelsim::ops {
namespace {

double bytes_of(const Graph& g, const Node& n, size_t first, size_t count) {
  double bytes = 0;
  for (size_t i = first; i < first + count && i < n.inputs.size(); ++i) {
    bytes += static_cast<double>(g.tensor(n.inputs[i]).accessed_bytes());
  }
  return bytes;
}

double numel_of(const Graph& g, const Node& n, size_t count) {
  double elements = 0;
  for (size_t i = 0; i < count; ++i) elements += static_cast<double>(g.tensor(n.inputs[i]).numel());
  return elements;
}

// `lists`: how many N-long tensor lists precede the optional state_steps list; `updated`: the
// indices of the lists written in place.
OpCount count_multi_tensor(const Graph& g, const Node& n, size_t lists,
                           std::initializer_list<size_t> updated, double flops_per_element) {
  // state_steps are 0-d tensors at the end; everything before them is `lists` lists of N.
  size_t steps = 0;
  while (steps < n.inputs.size() && g.tensor(n.inputs[n.inputs.size() - 1 - steps]).shape.empty()) {
    ++steps;
  }
  const size_t listed = n.inputs.size() - steps;
  ACCELSIM_CHECK(listed % lists == 0, "op '" + n.op + "': expected " + std::to_string(lists) +
                                          " tensor lists of equal length, got " +
                                          std::to_string(listed) + " tensors");
  const size_t count = listed / lists;
  OpCount c;
  c.op_class = OpClass::elementwise;
  c.compute_dtype = count > 0 ? g.tensor(n.inputs[0]).dtype : DType::fp32;
  c.flops = flops_per_element * numel_of(g, n, count);
  c.bytes_read = read_inputs(g, n);
  if (!n.outputs.empty()) {
    c.bytes_written = write_outputs(g, n);
  } else {
    for (size_t list : updated) c.bytes_written += bytes_of(g, n, list * count, count);
  }
  return c;
}

// Adam and AdamW: self, grads, exp_avgs, exp_avg_sqs (+ max_exp_avg_sqs with amsgrad, which the
// update also writes).
OpCount count_adam(const Graph& g, const Node& n) {
  if (n.attr_bool("amsgrad", false)) return count_multi_tensor(g, n, 5, {0, 2, 3, 4}, 16.0);
  return count_multi_tensor(g, n, 4, {0, 2, 3}, 16.0);
}

OpCount count_sgd(const Graph& g, const Node& n) {
  return count_multi_tensor(g, n, 3, {0, 2}, 7.0);
}

// accel_sim::adafactor_step(self[N], grads[N], states...) and accel_sim::adam8bit_step (the model
// builder's, builder.h Optimizer): a parameter's states vary in number and shape (Adafactor's row
// and column vectors; Adam8bit's 1-byte states and their per-block absmax), so the bytes are
// every input read and every output written, and the FLOPs are per parameter element:
//   Adafactor (Shazeer & Stern 2018, Algorithm 4): G^2 + eps (2), row and column sums (2),
//     the factored estimate R C / sum(R) (2), G / sqrt (2), the update's RMS (2), its clip and
//     the scaled step with weight decay (5) = 15;
//   Adam8bit: Adam's 16 plus, for each of its two states, a codebook dequantization times the
//     block's absmax (2) and a requantization (divide, search: 3) = 26.
OpCount count_stateful_step(const Graph& g, const Node& n, double flops_per_element) {
  // The parameters' count is the node's `parameters` attribute: self[N] and grads[N] lead.
  const int64_t listed = n.attr_int("parameters", -1);
  ACCELSIM_CHECK(listed >= 0 && static_cast<size_t>(2 * listed) <= n.inputs.size(),
                 "op '" + n.op + "': needs a 'parameters' count of its leading parameter list");
  OpCount c;
  c.op_class = OpClass::elementwise;
  c.compute_dtype = DType::fp32;
  c.flops = flops_per_element * numel_of(g, n, static_cast<size_t>(listed));
  c.bytes_read = read_inputs(g, n);
  c.bytes_written = write_outputs(g, n);
  return c;
}

// _foreach_copy_(self, src): reads src, writes self; no arithmetic (a cast at most).
OpCount count_foreach_copy(const Graph& g, const Node& n) {
  OpCount c = count_multi_tensor(g, n, 2, {0}, 0.0);
  c.op_class = OpClass::copy;
  c.bytes_read = bytes_of(g, n, n.inputs.size() / 2, n.inputs.size() / 2);
  return c;
}

// _foreach_add_ / _foreach_mul_ (and the like) over one list and a scalar (overloads Scalar,
// ScalarList, Tensor) or two lists (List): one FLOP per element of `self`, which it reads and
// writes; the second list is read. torch.optim increments its step counts this way.
OpCount count_foreach_pointwise(const Graph& g, const Node& n) {
  const size_t lists = n.overload == "List" ? 2 : 1;
  ACCELSIM_CHECK(n.inputs.size() % lists == 0,
                 "op '" + n.op + "': the tensor lists differ in length");
  const size_t count = n.inputs.size() / lists;
  OpCount c;
  c.op_class = OpClass::elementwise;
  c.compute_dtype = count > 0 ? g.tensor(n.inputs[0]).dtype : DType::fp32;
  c.flops = numel_of(g, n, count);
  c.bytes_read = bytes_of(g, n, 0, n.inputs.size());
  c.bytes_written = bytes_of(g, n, 0, count);
  return c;
}

// The other _foreach_* ops of torch.optim's foreach Adam(W) (_multi_tensor_adamw), as `lists`
// lists of N tensors: _foreach_lerp_(self, tensors1, weight) 2, _foreach_addcmul_(self, tensor1,
// tensor2, value) and _foreach_addcdiv_ 3, _foreach_sqrt(self) 1 (a new list out; its in-place
// form updates self). One FLOP per element of the first list, as for the pointwise ops; a list
// passed twice (addcmul_ of the gradients with themselves) is read once (read_inputs); the
// written bytes are the outputs' or, with none listed, the first list's.
OpCount count_foreach_lists(const Graph& g, const Node& n, size_t lists) {
  ACCELSIM_CHECK(n.inputs.size() % lists == 0,
                 "op '" + n.op + "': expected " + std::to_string(lists) +
                     " tensor lists of equal length, got " + std::to_string(n.inputs.size()) + " tensors");
  const size_t count = n.inputs.size() / lists;
  OpCount c;
  c.op_class = OpClass::elementwise;
  c.compute_dtype = count > 0 ? g.tensor(n.inputs[0]).dtype : DType::fp32;
  c.flops = numel_of(g, n, count);
  c.bytes_read = read_inputs(g, n);
  c.bytes_written = n.outputs.empty() ? bytes_of(g, n, 0, count) : write_outputs(g, n);
  return c;
}

// _foreach_zero_(self): writes zeros into each tensor (optimizer.zero_grad(set_to_none=False)).
OpCount count_foreach_zero(const Graph& g, const Node& n) {
  OpCount c = count_multi_tensor(g, n, 1, {0}, 0.0);
  c.op_class = OpClass::copy;
  c.bytes_read = 0;
  return c;
}

}  // namespace

void add_optimizer_ops(OpTable& t) {
  t["_foreach_zero_"] = count_foreach_zero;
  for (const char* op : {"_foreach_add_", "_foreach_mul_", "_foreach_sub_", "_foreach_div_"}) {
    t[op] = count_foreach_pointwise;
  }
  t["_foreach_lerp_"] = [](const Graph& g, const Node& n) { return count_foreach_lists(g, n, 2); };
  for (const char* op : {"_foreach_addcmul_", "_foreach_addcdiv_"}) {
    t[op] = [](const Graph& g, const Node& n) { return count_foreach_lists(g, n, 3); };
  }
  for (const char* op : {"_foreach_sqrt", "_foreach_sqrt_"}) {
    t[op] = [](const Graph& g, const Node& n) { return count_foreach_lists(g, n, 1); };
  }
  t["_fused_adamw_"] = count_adam;
  t["_fused_adam_"] = count_adam;
  t["_fused_adamw"] = count_adam;
  t["_fused_adam"] = count_adam;
  t["_fused_sgd_"] = count_sgd;
  t["_fused_sgd"] = count_sgd;
  t["_foreach_copy_"] = count_foreach_copy;
  t["accel_sim::adafactor_step"] = [](const Graph& g, const Node& n) { return count_stateful_step(g, n, 15.0); };
  t["accel_sim::adam8bit_step"] = [](const Graph& g, const Node& n) { return count_stateful_step(g, n, 26.0); };
}

}  // namespace accelsim::ops
