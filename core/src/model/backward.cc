// One file for every op's backward rule (795 lines): each rule is a dozen lines over the walk's
// shared state (each storage's gradient, what autograd saves, the reverse collectives), which
// rules split by op family would have to pass around; backward.h states the walk.
#include "backward.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "accelsim/error.h"

namespace accelsim {
namespace {

using Shape = std::vector<int64_t>;

// A [.., a, b] view as [.., b, a] (the transpose a matmul's gradient reads; no copy).
Shape swap_last(Shape shape) {
  std::swap(shape[shape.size() - 1], shape[shape.size() - 2]);
  return shape;
}

class Backward {
 public:
  Backward(Graph& g, const BackwardOptions& o) : g_(g), o_(o) {
    const auto storages = g.storages();
    root_.assign(storages.size(), -1);
    for (TensorId t = 0; t < static_cast<TensorId>(g.tensors().size()); ++t) {
      const StorageId s = g.tensor(t).storage;
      if (root_[s] < 0) root_[s] = t;  // a storage's first tensor gives its shape
    }
    grad_.assign(storages.size(), -1);
    reduce_.assign(storages.size(), 0);
    for (TensorId t : o.all_reduce_grad_of) reduce_[g.tensor(t).storage] = 1;
    // Which storages carry values that depend on a parameter (requires_grad).
    needs_.assign(storages.size(), 0);
    for (StorageId s = 0; s < static_cast<StorageId>(storages.size()); ++s) {
      // A frozen parameter (Storage::frozen) takes no gradient: a matmul with a frozen weight
      // runs its dgrad alone and keeps no input for a wgrad.
      needs_[s] = storages[s].kind == StorageKind::parameter && !storages[s].frozen;
    }
    producer_.assign(storages.size(), kNoNode);
    for (NodeId i = 0; i < static_cast<NodeId>(g.nodes().size()); ++i) {
      for (TensorId t : g.node(i).outputs) producer_[g.tensor(t).storage] = i;
    }
    for (const Node& n : g.nodes()) {
      bool any = false;
      for (TensorId t : n.inputs) any = any || needs_[g.tensor(t).storage];
      if (!any) continue;
      for (TensorId t : n.outputs) {
        if (is_floating(g.tensor(t).dtype)) needs_[g.tensor(t).storage] = 1;
      }
    }
  }

  std::vector<TensorId> run(TensorId loss) {
    const NodeId forward_nodes = static_cast<NodeId>(g_.nodes().size());
    current_ = Node{.module_path = "loss"};
    TensorId seed = fresh({}, g_.tensor(loss).dtype, StorageKind::activation);
    emit("ones_like", {loss}, {seed});
    grad_[g_.tensor(loss).storage] = seed;
    for (NodeId n = forward_nodes - 1; n >= 0; --n) {
      current_ = g_.node(n);  // a copy: emitting nodes reallocates the node vector
      differentiate();
    }
    std::vector<TensorId> grads(grad_.size(), -1);
    for (StorageId s = 0; s < static_cast<StorageId>(grad_.size()); ++s) {
      if (g_.storage(s).kind == StorageKind::parameter) grads[s] = grad_[s];
    }
    return grads;
  }

 private:
  // ---- tensors and nodes -------------------------------------------------------------------

  const TensorMeta& meta(TensorId t) const { return g_.tensor(t); }
  const Shape& shape(TensorId t) const { return g_.tensor(t).shape; }
  StorageId storage(TensorId t) const { return g_.tensor(t).storage; }
  bool is_parameter(StorageId s) const { return g_.storage(s).kind == StorageKind::parameter; }

  TensorId fresh(Shape shape, DType dtype, StorageKind kind) {
    TensorMeta t{.shape = std::move(shape), .dtype = dtype};
    t.storage = g_.add_storage({.size_bytes = t.logical_bytes(), .kind = kind});
    return g_.add_tensor(std::move(t));
  }

  TensorId alias(TensorId base, Shape shape, Shape strides = {}) {
    TensorMeta t{.shape = std::move(shape),
                 .strides = std::move(strides),
                 .dtype = meta(base).dtype,
                 .storage = meta(base).storage};
    return g_.add_tensor(std::move(t));
  }

  // The [.., b, a] transpose of a contiguous-or-not [.., a, b] tensor, as a view.
  TensorId transposed(TensorId t) {
    const Shape& s = shape(t);
    Shape strides(s.size());
    int64_t stride = 1;
    for (size_t i = s.size(); i-- > 0;) {
      strides[i] = stride;
      stride *= s[i];
    }
    std::swap(strides[s.size() - 1], strides[s.size() - 2]);
    return alias(t, swap_last(s), std::move(strides));
  }

  void emit(const char* op, std::vector<TensorId> inputs, std::vector<TensorId> outputs,
            std::vector<Attr> attrs = {}) {
    g_.add_node(Node{.op = op,
                     .overload = "default",
                     .inputs = std::move(inputs),
                     .outputs = std::move(outputs),
                     .attrs = std::move(attrs),
                     .module_path = current_.module_path,
                     .module_type = current_.module_type,
                     .pass = Pass::backward});
  }

  TensorId op(const char* name, std::vector<TensorId> inputs, Shape out, DType dtype,
              std::vector<Attr> attrs = {}) {
    TensorId t = fresh(std::move(out), dtype, StorageKind::activation);
    emit(name, std::move(inputs), {t}, std::move(attrs));
    return t;
  }

  // ---- gradient bookkeeping ----------------------------------------------------------------

  bool needs(TensorId t) const {
    return needs_[storage(t)] && is_floating(meta(t).dtype);
  }

  DType grad_dtype(StorageId s) const {
    if (is_parameter(s)) return o_.parameter_grad_dtype;
    // The gradient of an fp8-quantized value travels in 16 bits (Transformer Engine returns
    // bf16 gradients from its fp8 GEMMs).
    const DType d = meta(root_[s]).dtype;
    return d == DType::fp8_e4m3 || d == DType::fp8_e5m2 ? DType::bf16 : d;
  }

  StorageKind grad_kind(StorageId s) const {
    return is_parameter(s) ? StorageKind::gradient : StorageKind::activation;
  }

  // A view that repeats elements (a stride-0 dimension of size > 1): its gradient is summed.
  bool broadcasts(TensorId t) const {
    const TensorMeta& m = meta(t);
    for (size_t i = 0; i < m.strides.size(); ++i) {
      if (m.strides[i] == 0 && m.shape[i] > 1) return true;
    }
    return false;
  }

  bool partial(TensorId t) const { return meta(t).numel() < meta(root_[storage(t)]).numel(); }

  // The gradient buffer of a storage, created (without a kernel) on first need.
  TensorId buffer(StorageId s) {
    if (grad_[s] < 0) grad_[s] = fresh(shape(root_[s]), grad_dtype(s), grad_kind(s));
    return grad_[s];
  }

  // Where the gradient of `t` is written by the op about to be emitted: into the base's buffer
  // for a slice, else a new tensor (shaped like the base, so a weight's gradient has the
  // weight's layout) that commit() then records or accumulates.
  TensorId slot(TensorId t) {
    const StorageId s = storage(t);
    if (broadcasts(t)) return fresh(shape(t), grad_dtype(s), StorageKind::activation);
    if (partial(t)) return alias(buffer(s), shape(t));
    const bool first = grad_[s] < 0;
    return fresh(shape(root_[s]), grad_dtype(s), first ? grad_kind(s) : StorageKind::activation);
  }

  // Records `gt` as (a contribution to) the gradient of `t`.
  void commit(TensorId t, TensorId gt) {
    const StorageId s = storage(t);
    if (broadcasts(t)) {
      TensorId summed = fresh(shape(root_[s]), grad_dtype(s), grad_[s] < 0 ? grad_kind(s)
                                                                          : StorageKind::activation);
      emit("sum", {gt}, {summed});
      gt = summed;
    } else if (partial(t)) {
      if (storage(gt) != storage(buffer(s))) {
        TensorId part = alias(grad_[s], shape(t));
        emit("copy_", {part, gt}, {part});
      }
      return;
    }
    if (grad_[s] < 0) {
      // A parameter's gradient lives in its own buffer of the gradient dtype (AccumulateGrad, or
      // Megatron-LM's fp32 main_grad): a contribution held elsewhere is copied into one.
      if (is_parameter(s) && (g_.storage(storage(gt)).kind != StorageKind::gradient ||
                              meta(gt).dtype != grad_dtype(s))) {
        TensorId owned = fresh(shape(root_[s]), grad_dtype(s), StorageKind::gradient);
        emit("_to_copy", {gt}, {owned});
        gt = owned;
      }
      grad_[s] = gt;
      return;
    }
    TensorId sum = alias(grad_[s], shape(grad_[s]));
    emit("add_", {grad_[s], gt}, {sum});
  }

  // Emits `name(inputs)` producing the gradient of `t`, and records it.
  void grad_op(const char* name, std::vector<TensorId> inputs, TensorId t,
               std::vector<Attr> attrs = {}) {
    TensorId out = slot(t);
    emit(name, std::move(inputs), {out}, std::move(attrs));
    commit(t, out);
  }

  // The gradient of `x` for an op whose output gradient `dy` may be broadcast over x (x + bias,
  // x * gate): dy itself, or dy summed down to x's elements.
  void reduce_to(TensorId x, TensorId dy) {
    if (meta(x).numel() == meta(dy).numel()) {
      commit(x, dy);
    } else {
      grad_op("sum", {dy}, x);
    }
  }

  // The gradient flowing into a node's output `o`: a view of its storage's gradient.
  TensorId out_grad(TensorId o) {
    const StorageId s = storage(o);
    if (grad_[s] < 0) return -1;
    if (shape(grad_[s]) == shape(o)) return grad_[s];
    return alias(grad_[s], shape(o));
  }

  // ---- rules -------------------------------------------------------------------------------

  void differentiate() {
    const Node& n = current_;
    std::vector<TensorId> dys(n.outputs.size(), -1);
    bool any = false;
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const StorageId s = storage(n.outputs[i]);
      if (grad_[s] >= 0 && reduce_[s]) {
        // Megatron's f operator: the input of a column-parallel layer is replicated, so its
        // gradient, a partial sum on each rank, is all-reduced.
        TensorId reduced = fresh(shape(grad_[s]), meta(grad_[s]).dtype, StorageKind::activation);
        emit("accel_sim::all_reduce", {grad_[s]}, {reduced}, {{"group", std::string("tp")}});
        grad_[s] = reduced;
        reduce_[s] = 0;
      }
      dys[i] = out_grad(n.outputs[i]);
      any = any || dys[i] >= 0;
    }
    if (!any) return;
    // An in-place op (an output on the storage of an input it updates) turns the value before
    // it into the value after it: the gradient w.r.t. the value before replaces the one after.
    // copy_ into a slice is the exception: it writes one part of a larger value, whose gradient
    // the other parts still need.
    if (n.op != "copy_") {
      for (TensorId out : n.outputs) {
        for (TensorId in_tensor : n.inputs) {
          if (storage(out) == storage(in_tensor)) grad_[storage(out)] = -1;
        }
      }
    }
    const TensorId dy = dys[0];
    const std::vector<TensorId>& x = n.inputs;
    auto in = [&](size_t i) { return i < x.size() && needs(x[i]); };
    const std::string& op = n.op;

    if (op == "mm" || op == "bmm") {
      matmul(dy, x[0], x[1]);
    } else if (op == "_scaled_mm") {
      scaled_matmul(dy, x[0], x[1]);
    } else if (op == "addmm") {
      if (in(0)) reduce_to(x[0], dy);
      matmul(dy, x[1], x[2]);
    } else if (op == "_grouped_mm") {
      grouped_mm(dy, x);
    } else if (op == "accel_sim::attention") {
      attention(dys);
    } else if (op == "_fused_rms_norm" || op == "native_layer_norm") {
      norm(dys);
    } else if (op == "embedding") {
      if (in(0)) {
        grad_op("embedding_dense_backward", {dy, x[1]}, x[0],
                {{"num_weights", shape(x[0])[0]}});
      }
    } else if (op == "add" || op == "add_" || op == "sub") {
      if (in(0)) reduce_to(x[0], dy);
      if (in(1)) {
        if (op == "sub") {
          grad_op("neg", {dy}, x[1]);
        } else {
          reduce_to(x[1], dy);
        }
      }
    } else if (op == "mul" || op == "div" || op == "div_") {
      if (x.size() == 1) {
        if (in(0)) grad_op(op == "mul" ? "mul" : "div", {dy}, x[0]);
      } else {
        // d(a*b) = dy*b, dy*a; d(a/b) = dy/b, -dy*a/b^2 (one product, then summed if broadcast).
        if (in(0)) broadcast_product(op == "mul" ? "mul" : "div", dy, x[1], x[0]);
        if (in(1)) broadcast_product("mul", dy, x[0], x[1]);
      }
    } else if (op == "native_dropout") {
      if (in(0)) {
        const double keep = 1.0 - n.attr_double("p", 0.0);
        grad_op("native_dropout_backward", {dy, n.outputs[1]}, x[0], {{"scale", 1.0 / keep}});
      }
    } else if (op == "silu" || op == "gelu") {
      if (in(0)) grad_op(op == "silu" ? "silu_backward" : "gelu_backward", {dy, x[0]}, x[0], n.attrs);
    } else if (op == "relu") {
      if (in(0)) grad_op("threshold_backward", {dy, n.outputs[0]}, x[0]);
    } else if (op == "pow") {
      // Autograd's pow_backward for a scalar exponent: grad * (exponent * x.pow(exponent - 1)),
      // three elementwise kernels (pow, the scalar product, the product with grad).
      if (in(0)) {
        const Shape& s = shape(x[0]);
        const DType dt = meta(x[0]).dtype;
        TensorId powered = fresh(s, dt, StorageKind::activation);
        emit("pow", {x[0]}, {powered});
        TensorId scaled = fresh(s, dt, StorageKind::activation);
        emit("mul", {powered}, {scaled});
        grad_op("mul", {dy, scaled}, x[0]);
      }
    } else if (op == "rsqrt") {
      // Autograd: -0.5 * grad * result.pow(3), three elementwise kernels.
      if (in(0)) {
        const Shape& s = shape(n.outputs[0]);
        const DType dt = meta(n.outputs[0]).dtype;
        TensorId scaled = fresh(s, dt, StorageKind::activation);
        emit("mul", {dy}, {scaled});
        TensorId cubed = fresh(s, dt, StorageKind::activation);
        emit("pow", {n.outputs[0]}, {cubed});
        grad_op("mul", {scaled, cubed}, x[0]);
      }
    } else if (op == "neg") {
      if (in(0)) grad_op("neg", {dy}, x[0]);
    } else if (op == "mean") {
      // Autograd: grad.expand(input's shape) / the count reduced, one kernel writing the input's
      // shape.
      if (in(0)) grad_op("div", {dy}, x[0]);
    } else if (op == "tanh" || op == "sigmoid") {
      if (in(0)) grad_op(op == "tanh" ? "tanh_backward" : "sigmoid_backward", {dy, n.outputs[0]}, x[0]);
    } else if (op == "_softmax" || op == "_log_softmax") {
      if (in(0)) {
        grad_op(op == "_softmax" ? "_softmax_backward_data" : "_log_softmax_backward_data",
                {dy, n.outputs[0]}, x[0], {{"dim", int64_t{-1}}});
      }
    } else if (op == "_to_copy" || op == "clone") {
      if (in(0)) {
        if (meta(x[0]).dtype == meta(dy).dtype) {
          commit(x[0], dy);
        } else {
          grad_op("_to_copy", {dy}, x[0]);
        }
      }
    } else if (op == "accel_sim::gated_activation") {
      // One kernel reads dy, gate and up, computes activation(gate) again and writes both
      // gradients (Megatron-Core's SwiGLUFunction.backward).
      std::vector<TensorId> outs;
      std::vector<TensorId> targets;
      for (size_t i = 0; i < 2; ++i) {
        if (!in(i)) continue;
        targets.push_back(x[i]);
        outs.push_back(slot(x[i]));
      }
      emit("accel_sim::gated_activation_backward", {dy, x[0], x[1]}, outs, n.attrs);
      for (size_t i = 0; i < targets.size(); ++i) commit(targets[i], outs[i]);
    } else if (op == "accel_sim::rotary_embedding") {
      // The inverse rotation: the same kernel with -sin.
      if (in(0)) grad_op("accel_sim::rotary_embedding", {dy, x[1]}, x[0]);
    } else if (op == "cat") {
      // Each part's gradient is a slice of dy: a view, no kernel.
      for (TensorId part : x) {
        if (needs(part)) commit(part, alias(dy, shape(part)));
      }
    } else if (op == "copy_") {
      // A copy into a slice of a larger tensor: the source's gradient is that slice's.
      if (in(1)) commit(x[1], dy);
    } else if (op == "sum") {
      if (in(0)) commit(x[0], expanded(dy, x[0], n));
    } else if (op == "index" || op == "gather" || op == "topk") {
      scatter_back(dys);
    } else if (op == "convolution") {
      std::vector<TensorId> outs;
      for (size_t i = 1; i < x.size(); ++i) {
        if (in(i)) outs.push_back(slot(x[i]));
      }
      emit("convolution_backward", {dy, x[0], x[1]}, outs, n.attrs);
      size_t k = 0;
      for (size_t i = 1; i < x.size(); ++i) {
        if (in(i)) commit(x[i], outs[k++]);
      }
    } else if (op == "nll_loss_forward") {
      if (in(0)) grad_op("nll_loss_backward", {dy, x[0], x[1], n.outputs[1]}, x[0]);
    } else if (op == "accel_sim::cross_entropy") {
      // One kernel reads the logits and the rows' log-sum-exp and writes the logits' gradient:
      // over the logits themselves where the loss runs in place (Megatron-LM's
      // vocab_parallel_cross_entropy writes the gradient over its kept fp32 softmax).
      if (in(0) && n.attr_bool("in_place", false)) {
        const TensorId over = alias(x[0], shape(x[0]));
        emit("accel_sim::cross_entropy_backward", {dy, x[0], n.outputs[1], x[1]}, {over});
        commit(x[0], over);
      } else if (in(0)) {
        grad_op("accel_sim::cross_entropy_backward", {dy, x[0], n.outputs[1], x[1]}, x[0]);
      }
    } else if (op == "mse_loss") {
      if (in(0)) grad_op("mse_loss_backward", {dy, x[0], x[1]}, x[0]);
    } else if (op == "new_empty" || op == "empty" || op == "new_zeros" || op == "zeros_like") {
      // A buffer later filled in place (by copy_ into slices): nothing flows further back.
    } else if (op == "accel_sim::all_reduce") {
      if (in(0)) commit(x[0], dy);  // Megatron's g operator: identity in backward
    } else if (op == "accel_sim::all_gather") {
      if (in(0)) grad_op("accel_sim::reduce_scatter", {dy}, x[0], n.attrs);
    } else if (op == "accel_sim::reduce_scatter") {
      if (in(0)) grad_op("accel_sim::all_gather", {dy}, x[0], n.attrs);
    } else if (op == "accel_sim::all_to_all") {
      if (in(0)) grad_op("accel_sim::all_to_all", {dy}, x[0], n.attrs);
    } else {
      throw ConfigError("the training step has no backward rule for op '" + op + "' (module '" +
                        n.module_path + "')");
    }
  }

  // Gradient of `target` in `dy (op) other`: the product, summed down if `target` was broadcast.
  void broadcast_product(const char* name, TensorId dy, TensorId other, TensorId target) {
    if (meta(target).numel() == meta(dy).numel()) {
      grad_op(name, {dy, other}, target);
      return;
    }
    TensorId full = op(name, {dy, other}, shape(dy), meta(dy).dtype);
    grad_op("sum", {full}, target);
  }

  // The input a weight gradient reads, when sequence parallelism all-gathered it in the forward:
  // gathered again from the saved shard, as Megatron-LM's sequence parallelism and Transformer
  // Engine's LayerNormLinear do (Korthikanti et al. 2022, sec. 4.2.2: the all-gather is repeated
  // in the backward so only the 1/tp shard is kept), so the gathered copy dies with its forward.
  // An fp8 GEMM's input is the cast of the gathered tensor: the shard is gathered and cast again.
  // One gather per gathered tensor serves all its GEMMs (q, k and v; gate and up). Under context
  // parallelism attention's K and V are gathered again the same way (`group` "cp"): Megatron-LM
  // keeps only this rank's chunk of K and V and gathers them again in the backward
  // (docs/source/api-guide/context_parallel.rst).
  TensorId regathered(TensorId a, const char* group_name = "tp") {
    TensorId gathered = a;
    bool cast = false;
    NodeId p = producer_[storage(gathered)];
    if (p != kNoNode && g_.node(p).op == "_to_copy" && g_.node(p).pass == Pass::forward) {
      gathered = g_.node(p).inputs[0];
      p = producer_[storage(gathered)];
      cast = true;
    }
    if (p == kNoNode || g_.node(p).op != "accel_sim::all_gather" || g_.node(p).pass != Pass::forward) return a;
    const Node gather = g_.node(p);
    const AttrValue* group = gather.attr("group");
    const std::string* name = group != nullptr ? std::get_if<std::string>(group) : nullptr;
    if (name == nullptr || *name != group_name) return a;
    const auto key = std::make_pair(storage(a), cast);
    auto it = regathered_.find(key);
    if (it == regathered_.end()) {
      TensorId full = op("accel_sim::all_gather", {gather.inputs[0]}, shape(gather.outputs[0]),
                         meta(gather.outputs[0]).dtype, gather.attrs);
      if (cast) full = op("_to_copy", {full}, shape(full), meta(a).dtype);
      it = regathered_.emplace(key, full).first;
    }
    return alias(it->second, shape(a));
  }

  // Y = A B ([.., m, k] x [.., k, n]): dA = dY B^T (dgrad), dB = A^T dY (wgrad). A weight's
  // gradient is produced in the weight's own [n, k] layout as dY^T A (same FLOPs).
  void matmul(TensorId dy, TensorId a, TensorId b) {
    const char* name = shape(dy).size() == 3 ? "bmm" : "mm";
    // Under 2D SUMMA the weight was gathered over the CP ranks for the forward's GEMM only: the
    // dgrad gathers it again (BuildOptions::summa).
    if (needs(a)) grad_op(name, {dy, transposed(regathered(b, "cp"))}, a);
    if (!needs(b)) return;
    a = regathered(a);
    TensorId out = slot(b);
    if (shape(out) == shape(b)) {
      emit(name, {transposed(a), dy}, {out});
    } else {
      emit(name, {transposed(dy), a}, {out});
    }
    commit(b, out);
  }

  // An fp8 GEMM's backward as Transformer Engine runs it: the output gradient is cast to
  // e5m2 once, then dgrad (dY W) and wgrad (X^T dY) are fp8 GEMMs reading the saved fp8 X and W
  // and writing 16-bit gradients.
  // Under BackwardOptions::fp8_recast (torchao), each operand is amax-reduced and cast anew, the
  // input and the weight from the 16-bit tensors the forward cast.
  void scaled_matmul(TensorId dy, TensorId a, TensorId b) {
    if (o_.fp8_recast) amax(dy);
    TensorId dq = fresh(shape(dy), DType::fp8_e5m2, StorageKind::activation);
    emit("_to_copy", {dy}, {dq});
    if (needs(a)) grad_op("_scaled_mm", {dq, transposed(o_.fp8_recast ? recast(b) : b)}, a);
    if (!needs(b)) return;
    a = o_.fp8_recast ? recast(a) : regathered(a);
    TensorId out = slot(b);
    if (shape(out) == shape(b)) {
      emit("_scaled_mm", {transposed(a), dq}, {out});
    } else {
      emit("_scaled_mm", {transposed(dq), a}, {out});
    }
    commit(b, out);
  }

  // torchao's amax of a tensor before its cast: torch.max(torch.abs(x)), a scalar the cast's
  // scale comes from.
  void amax(TensorId x) {
    emit("max", {op("abs", {x}, shape(x), meta(x).dtype)}, {fresh({}, DType::fp32, StorageKind::activation)});
  }

  // `t` (a forward fp8 cast, or a view of one) cast again from the tensor the forward cast, in
  // the same shape and layout: the amax and the cast of the 16-bit source.
  TensorId recast(TensorId t) {
    const NodeId p = producer_[storage(t)];
    if (p == kNoNode || g_.node(p).op != "_to_copy" || g_.node(p).pass != Pass::forward) return t;
    const TensorId source = g_.node(p).inputs[0];
    amax(source);
    TensorId q = op("_to_copy", {source}, shape(source), meta(t).dtype);
    return shape(t) == shape(q) ? q : transposed(q);
  }

  // Y = grouped_mm(X [rows, k], W^T [E, k, n]): dX = grouped_mm(dY, W [E, n, k]) reading the
  // touched experts' weights; dW [E, n, k] = dY^T X split along the rows by expert (the 2-D x
  // 2-D form, 2 * n * k * rows FLOPs).
  void grouped_mm(TensorId dy, const std::vector<TensorId>& x) {
    const Node& n = current_;
    if (needs(x[0])) {
      TensorId w = x[1];
      TensorId w_nk = alias(w, swap_last(shape(w)));
      std::vector<TensorId> inputs = {dy, w_nk};
      if (x.size() > 2) inputs.push_back(x[2]);
      grad_op("_grouped_mm", std::move(inputs), x[0], n.attrs);
    }
    if (needs(x[1])) {
      TensorId out = slot(x[1]);
      std::vector<TensorId> inputs = {transposed(dy), x[0]};
      if (x.size() > 2) inputs.push_back(x[2]);
      emit("_grouped_mm", std::move(inputs), {out});
      commit(x[1], out);
    }
  }

  // FlashAttention's backward reads q, k, v (K and V gathered again under context parallelism),
  // the output and its logsumexp (the forward's second output, when it has one) and writes dq,
  // dk, dv; with attention sinks (a fourth input) it reads them and writes their gradient too.
  void attention(const std::vector<TensorId>& dys) {
    const Node& n = current_;
    std::vector<TensorId> inputs = {dys[0], n.inputs[0], regathered(n.inputs[1], "cp"),
                                    regathered(n.inputs[2], "cp"), n.outputs[0]};
    if (n.outputs.size() > 1) inputs.push_back(n.outputs[1]);
    for (size_t i = 3; i < n.inputs.size(); ++i) inputs.push_back(n.inputs[i]);
    std::vector<TensorId> outs;
    std::vector<TensorId> targets;
    for (size_t i = 0; i < n.inputs.size(); ++i) {
      if (!needs(n.inputs[i])) continue;
      targets.push_back(n.inputs[i]);
      outs.push_back(slot(n.inputs[i]));
    }
    emit("accel_sim::attention_backward", std::move(inputs), outs, n.attrs);
    for (size_t i = 0; i < targets.size(); ++i) commit(targets[i], outs[i]);
  }

  // RMSNorm: (y, rstd) = f(x, w); LayerNorm: (y, mean, rstd) = f(x, w, b). The backward kernel
  // reads dy, x, the saved statistics and the weight.
  void norm(const std::vector<TensorId>& dys) {
    const Node& n = current_;
    const bool layer = n.op == "native_layer_norm";
    std::vector<TensorId> inputs = {dys[0], n.inputs[0]};
    for (size_t i = 1; i < n.outputs.size(); ++i) inputs.push_back(n.outputs[i]);
    for (size_t i = 1; i < n.inputs.size(); ++i) inputs.push_back(n.inputs[i]);
    std::vector<TensorId> outs;
    std::vector<TensorId> targets;
    for (TensorId t : n.inputs) {
      if (!needs(t)) continue;
      targets.push_back(t);
      outs.push_back(slot(t));
    }
    emit(layer ? "native_layer_norm_backward" : "_fused_rms_norm_backward", std::move(inputs), outs,
         n.attrs);
    for (size_t i = 0; i < targets.size(); ++i) commit(targets[i], outs[i]);
  }

  // dy of a reduction (sum over `dim`) broadcast back to the input's shape: a stride-0 view.
  TensorId expanded(TensorId dy, TensorId x, const Node& n) {
    const Shape& xs = shape(x);
    const int64_t rank = static_cast<int64_t>(xs.size());
    std::vector<char> reduced(xs.size(), 0);
    std::vector<int64_t> dims = n.attr_ints("dim");
    if (dims.empty()) std::fill(reduced.begin(), reduced.end(), 1);
    for (int64_t d : dims) reduced[static_cast<size_t>((d % rank + rank) % rank)] = 1;
    Shape strides(xs.size(), 0);
    int64_t stride = 1;
    for (size_t i = xs.size(); i-- > 0;) {
      if (reduced[i]) continue;
      strides[i] = stride;
      stride *= xs[i];
    }
    return alias(dy, xs, std::move(strides));
  }

  // index/gather/topk select elements of x: their gradient is scattered into zeros of x's shape.
  void scatter_back(const std::vector<TensorId>& dys) {
    const Node& n = current_;
    if (!needs(n.inputs[0]) || dys[0] < 0) return;
    const TensorId x = n.inputs[0];
    const TensorId indices = n.op == "topk" ? n.outputs[1] : n.inputs[1];
    TensorId out = slot(x);
    emit("new_zeros", {dys[0]}, {out});
    TensorId written = alias(out, shape(out));
    if (n.op == "index") {
      emit("index_put_", {out, indices, dys[0]}, {written}, {{"accumulate", true}});
    } else {
      emit(n.op == "gather" ? "scatter_add_" : "scatter_", {out, indices, dys[0]}, {written},
           {{"dim", int64_t{-1}}});
    }
    commit(x, out);
  }

  Graph& g_;
  const BackwardOptions& o_;
  Node current_;
  std::vector<TensorId> root_;   // per storage: its first tensor
  std::vector<TensorId> grad_;   // per storage: its gradient (root-shaped), or -1
  std::vector<char> needs_;      // per storage: depends on a parameter
  std::vector<char> reduce_;     // per storage: gradient all-reduced over "tp" when complete
  std::vector<NodeId> producer_;  // per storage: the forward node that wrote it (kNoNode: none)
  std::map<std::pair<StorageId, bool>, TensorId> regathered_;  // see regathered()
};

}  // namespace

std::vector<TensorId> append_backward(Graph& graph, TensorId loss, const BackwardOptions& options) {
  ACCELSIM_CHECK(graph.tensor(loss).numel() == 1, "the loss must be a single value");
  return Backward(graph, options).run(loss);
}

void recompute_regions(Graph& graph, const std::vector<std::vector<NodeId>>& regions,
                       const std::vector<std::vector<NodeId>>& saved) {
  ACCELSIM_CHECK(saved.empty() || saved.size() == regions.size(),
                 "saved nodes are given per recompute region");
  const auto nodes = graph.nodes();
  const auto tensors = graph.tensors();
  const auto storages = graph.storages();
  const auto node_count = static_cast<NodeId>(nodes.size());
  // The region owning each storage: the one whose node first writes it (views and in-place
  // results on a storage written earlier, outside the region, stay with that writer).
  std::vector<int> owner(storages.size(), -1);
  std::vector<NodeId> first_writer(storages.size(), kNoNode);
  for (NodeId i = 0; i < node_count; ++i) {
    for (TensorId t : nodes[i].outputs) {
      const StorageId st = tensors[t].storage;
      if (first_writer[st] == kNoNode) first_writer[st] = i;
    }
  }
  std::vector<int> region_of(nodes.size(), -1);
  std::vector<std::set<std::string>> modules(regions.size());
  for (size_t r = 0; r < regions.size(); ++r) {
    for (NodeId i : regions[r]) {
      ACCELSIM_CHECK(i >= 0 && i < node_count && nodes[i].pass == Pass::forward,
                     "a recompute region holds forward nodes only");
      region_of[i] = static_cast<int>(r);
      modules[r].insert(nodes[i].module_path);
    }
  }
  // A saved node belongs to its region (its values are read inside it, its backward is the
  // region's) but writes values no recomputation replaces.
  std::vector<char> is_saved(nodes.size(), 0);
  for (size_t r = 0; r < saved.size(); ++r) {
    for (NodeId i : saved[r]) {
      ACCELSIM_CHECK(i >= 0 && i < node_count && nodes[i].pass == Pass::forward,
                     "a recompute region saves forward nodes only");
      region_of[i] = static_cast<int>(r);
      modules[r].insert(nodes[i].module_path);
      is_saved[i] = 1;
    }
  }
  for (size_t st = 0; st < storages.size(); ++st) {
    if (first_writer[st] != kNoNode && storages[st].kind == StorageKind::activation &&
        !is_saved[first_writer[st]]) {
      owner[st] = region_of[first_writer[st]];
    }
  }
  // A value the forward reads outside its region is the region's output. torch.utils.checkpoint
  // (and Megatron-LM's CheckpointFunction) returns it to the ops after the region, which keep it
  // if their own backward needs it; the region's backward reads the value its recomputation
  // writes. So the region's backward nodes (those of its modules) read the recomputed output and
  // every other backward node the forward's.
  std::vector<char> escapes(storages.size(), 0);
  for (NodeId i = 0; i < node_count; ++i) {
    if (nodes[i].pass != Pass::forward) continue;
    for (TensorId t : nodes[i].inputs) {
      const StorageId st = tensors[t].storage;
      if (owner[st] >= 0 && owner[st] != region_of[i]) escapes[st] = 1;
    }
  }
  auto reads_recomputed = [&](NodeId i, StorageId st) {
    const int r = owner[st];
    return r >= 0 && (!escapes[st] || modules[r].count(nodes[i].module_path) > 0);
  };
  // Where each region is recomputed: before the first non-forward node reading its values.
  std::vector<NodeId> at(regions.size(), kNoNode);
  for (NodeId i = 0; i < node_count; ++i) {
    if (nodes[i].pass == Pass::forward) continue;
    for (TensorId t : nodes[i].inputs) {
      const StorageId st = tensors[t].storage;
      if (reads_recomputed(i, st) && at[owner[st]] == kNoNode) at[owner[st]] = i;
    }
  }
  std::vector<std::vector<int>> starting(nodes.size());
  for (size_t r = 0; r < regions.size(); ++r) {
    if (at[r] != kNoNode) starting[at[r]].push_back(static_cast<int>(r));
  }

  Graph out;
  out.name = graph.name;
  out.reserve(storages.size() * 2, tensors.size() * 2, nodes.size() * 2);
  for (Storage st : storages) {
    st.released_after = kNoNode;  // renumbered below
    out.add_storage(st);
  }
  for (const TensorMeta& t : tensors) out.add_tensor(t);
  // Copies of every tensor on a region's storages, on fresh storages.
  std::vector<TensorId> copy(tensors.size(), -1);
  std::vector<StorageId> storage_copy(storages.size(), -1);
  for (size_t t = 0; t < tensors.size(); ++t) {
    const StorageId st = tensors[t].storage;
    const int r = owner[st];
    if (r < 0 || at[r] == kNoNode) continue;
    if (storage_copy[st] < 0) {
      storage_copy[st] = out.add_storage({.size_bytes = storages[st].size_bytes,
                                          .kind = StorageKind::activation});
    }
    TensorMeta m = tensors[t];
    m.storage = storage_copy[st];
    copy[t] = out.add_tensor(std::move(m));
  }
  std::vector<char> active(regions.size(), 0);
  // A recomputed node of region r writes and reads its region's copies; a backward node reads
  // the copies of the regions recomputed so far where reads_recomputed says so.
  auto in_region = [&](std::vector<TensorId> ids, int r) {
    for (TensorId& t : ids) {
      if (owner[tensors[t].storage] == r) t = copy[t];
    }
    return ids;
  };
  auto in_backward = [&](std::vector<TensorId> ids, NodeId i) {
    for (TensorId& t : ids) {
      const StorageId st = tensors[t].storage;
      if (reads_recomputed(i, st) && active[owner[st]]) t = copy[t];
    }
    return ids;
  };
  std::vector<NodeId> new_index(nodes.size(), kNoNode);
  for (NodeId i = 0; i < node_count; ++i) {
    for (int r : starting[i]) {
      active[r] = 1;
      for (NodeId j : regions[r]) {
        Node n = nodes[j];
        n.inputs = in_region(std::move(n.inputs), r);
        n.outputs = in_region(std::move(n.outputs), r);
        n.pass = Pass::backward;
        n.attrs.push_back({"recompute", true});
        out.add_node(std::move(n));
      }
    }
    Node n = nodes[i];
    if (n.pass != Pass::forward) {
      n.inputs = in_backward(std::move(n.inputs), i);
      n.outputs = in_backward(std::move(n.outputs), i);
    }
    new_index[i] = out.add_node(std::move(n));
  }
  for (size_t st = 0; st < storages.size(); ++st) {
    if (storages[st].released_after != kNoNode) {
      out.hold_storage_until(static_cast<StorageId>(st), new_index[storages[st].released_after]);
    }
  }
  for (TensorId t : graph.outputs()) out.add_output(t);
  graph = std::move(out);
}

void prepend_node(Graph& graph, Node node) {
  Graph out;
  out.name = graph.name;
  out.reserve(graph.storages().size(), graph.tensors().size(), graph.nodes().size() + 1);
  for (Storage st : graph.storages()) {
    if (st.released_after != kNoNode) ++st.released_after;
    out.add_storage(st);
  }
  for (const TensorMeta& t : graph.tensors()) out.add_tensor(t);
  out.add_node(std::move(node));
  for (const Node& n : graph.nodes()) out.add_node(n);
  for (TensorId t : graph.outputs()) out.add_output(t);
  graph = std::move(out);
}

}  // namespace accelsim
