// The model builder's training step: the loss, the backward (backward.h), recomputation and the
// optimizer step with its states.
#include "builder_impl.h"

namespace accelsim::builder_detail {

void Builder::train_step() {
  ACCELSIM_CHECK(pending_adapters_.empty(), "internal: a row-parallel LoRA adapter was not added");
  // Every named LoRA target must be one of the model's linears (a name that matches none would
  // leave the adapters out silently).
  if (o_.lora_rank > 0) {
    for (const std::string& t : o_.lora_targets) {
      ACCELSIM_CHECK(lora_matched_.count(t) > 0,
                     "LoRA target '" + t + "' is not a linear of model '" + m_.name + "'");
    }
    ACCELSIM_CHECK(!lora_matched_.empty(),
                   "model '" + m_.name + "' has none of the linears LoRA adapters sit beside");
  }
  e_.module = "loss";
  TensorId loss;
  if (m_.lm_head) {
    e_.module_type = "CrossEntropyLoss";
    TensorId logits = outputs_.front();
    const int64_t rows = e_.shape(logits)[0];
    const int64_t vocab = e_.shape(logits)[1];
    // The upcast losses take 16-bit logits to fp32 first (CrossEntropy), and the 16-bit logits
    // die there, as torchtitan's training step deletes them before the backward. An HF
    // encoder's masked-LM head (a model that is not causal: BertForMaskedLM.forward) calls
    // CrossEntropyLoss on its logits as they are, where causal LMs' ForCausalLMLoss upcasts:
    // under HF's eager kernels and without autocast (master weights) it runs in their dtype.
    const bool own_dtype = o_.cross_entropy == CrossEntropy::upcast && eager_ && !m_.causal &&
                           !o_.master_weights;
    if (o_.cross_entropy != CrossEntropy::fused && !own_dtype && e_.dtype(logits) != DType::fp32) {
      logits = e_.op("_to_copy", {logits}, {rows, vocab}, DType::fp32);
    }
    if (o_.tensor_parallel > 1) {
      // Vocabulary-parallel cross-entropy: each rank holds a slice of the vocabulary, so the
      // row statistics are all-reduced (Megatron-LM's vocab_parallel_cross_entropy).
      TensorId stats = e_.op("logsumexp", {logits}, {rows}, DType::fp32,
                             {{"dim", std::vector<int64_t>{-1}}});
      collective("accel_sim::all_reduce", stats, {rows}, "tp");
    }
    TensorId target = e_.resident({rows}, DType::int64, StorageKind::input, "input.labels");
    loss = e_.fresh({}, DType::fp32);
    if (o_.cross_entropy == CrossEntropy::upcast) {
      TensorId logp = e_.op("_log_softmax", {logits}, {rows, vocab}, e_.dtype(logits), {{"dim", int64_t{-1}}});
      e_.node("nll_loss_forward", {logp, target}, {loss, e_.fresh({}, DType::fp32)},
              {{"reduction", int64_t{1}}, {"ignore_index", int64_t{-100}}});
    } else {
      e_.node("accel_sim::cross_entropy", {logits, target}, {loss, e_.fresh({rows}, DType::fp32)},
              {{"ignore_index", int64_t{-100}}, {"in_place", o_.cross_entropy == CrossEntropy::vocab_parallel}});
    }
  } else {
    e_.module_type = "MSELoss";
    const TensorId out = outputs_.front();
    TensorId target = e_.resident(e_.shape(out), dt_, StorageKind::input, "input.targets");
    loss = e_.op("mse_loss", {out, target}, {}, dt_, {{"reduction", int64_t{1}}});
  }
  graph_.add_output(loss);

  const DType grad_dtype =
      o_.master_weights && !o_.gradients_in_weight_dtype ? DType::fp32 : m_.weight_dtype;
  const std::vector<TensorId> grads = append_backward(
      graph_, loss,
      {.parameter_grad_dtype = grad_dtype, .all_reduce_grad_of = column_inputs_,
       .fp8_recast = o_.fp8_gemms && o_.fp8_recipe == Fp8Recipe::torchao});
  if (o_.recompute != Recompute::none) {
    // Full: each transformer layer is one checkpoint, its input stays and its forward runs
    // again. Selective: each layer's core attention (attend(): the context-parallel K/V
    // gathers and the attention kernel, or the unfused core), as Megatron-LM's
    // --recompute-granularity selective checkpoints it (megatron/core/transformer/attention.py,
    // _checkpointed_attention_forward): q, k and v stay, the kernel runs again in the backward.
    // Selective_op: each layer is one checkpoint whose saved ops (Recompute) keep their
    // outputs and do not run again. Only every recompute_interval-th layer is checkpointed.
    std::vector<std::vector<NodeId>> layers(static_cast<size_t>(m_.num_layers));
    std::vector<std::vector<NodeId>> saved(static_cast<size_t>(m_.num_layers));
    std::vector<int64_t> matmuls(static_cast<size_t>(m_.num_layers), 0);
    const std::string prefix = "model.layers.";
    const std::string core = ".core";
    for (NodeId i = 0; i < static_cast<NodeId>(graph_.nodes().size()); ++i) {
      const Node& n = graph_.node(i);
      if (n.pass != Pass::forward || n.module_path.rfind(prefix, 0) != 0) continue;
      if (o_.recompute == Recompute::selective &&
          (n.module_path.size() < core.size() ||
           n.module_path.compare(n.module_path.size() - core.size(), core.size(), core) != 0)) {
        continue;
      }
      const size_t end = n.module_path.find('.', prefix.size());
      const int64_t l = std::stoll(n.module_path.substr(prefix.size(), end - prefix.size()));
      if ((l + 1) % o_.recompute_interval != 0) continue;
      const auto at = static_cast<size_t>(l);
      if (o_.recompute == Recompute::selective_op && op_sac_saves(n, matmuls[at])) {
        saved[at].push_back(i);
      } else {
        layers[at].push_back(i);
      }
    }
    recompute_regions(graph_, layers, saved);
  }
  if (o_.persistent_gradients) {
    // One _foreach_zero_ over last step's gradients before the forward.
    std::vector<TensorId> held, zeroed;
    for (TensorId g : grads) {
      if (g < 0) continue;
      held.push_back(g);
      zeroed.push_back(e_.alias(g, e_.shape(g)));
    }
    prepend_node(graph_, Node{.op = "_foreach_zero_", .overload = "default", .inputs = held,
                              .outputs = zeroed, .module_path = "optimizer",
                              .module_type = "Optimizer", .pass = Pass::optimizer});
  }
  if (o_.optimizer != Optimizer::none) optimizer_step(grads);
  // The gradients stay on the parameters (.grad, Megatron-Core's grad buffer) until the next
  // step zeroes or frees them: live to the step's end, through the whole optimizer step.
  for (TensorId g : grads) {
    if (g >= 0) e_.hold(g);
  }
}

std::vector<Builder::StateTensor> Builder::optimizer_states(const Shape& shape, DType state_dtype, int states) const {
  std::vector<StateTensor> out;
  if (o_.optimizer == Optimizer::adafactor) {
    if (shape.size() < 2) return {{shape, state_dtype, ".exp_avg_sq"}};
    Shape row(shape.begin(), shape.end() - 1), col(shape.begin(), shape.end() - 2);
    col.push_back(shape.back());
    return {{row, state_dtype, ".exp_avg_sq_row"}, {col, state_dtype, ".exp_avg_sq_col"}};
  }
  if (o_.optimizer == Optimizer::adam8bit) {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    if (n < kAdam8bitMinElements) return {{shape, DType::fp32, ".state1"}, {shape, DType::fp32, ".state2"}};
    const Shape blocks{ceil_div(n, kAdam8bitBlock)};
    return {{Shape{n}, DType::uint8, ".state1"}, {Shape{n}, DType::uint8, ".state2"},
            {blocks, DType::fp32, ".absmax1"}, {blocks, DType::fp32, ".absmax2"}};
  }
  for (int i = 0; i < states; ++i) out.push_back({shape, state_dtype, i == 0 ? ".exp_avg" : ".exp_avg_sq"});
  return out;
}

void Builder::optimizer_step(const std::vector<TensorId>& grads) {
  e_.pass = Pass::optimizer;
  e_.module_type = "Optimizer";
  const bool masters = o_.master_weights && m_.weight_dtype != DType::fp32;
  const DType state_dtype = o_.master_weights ? DType::fp32 : m_.weight_dtype;
  const int states = o_.optimizer == Optimizer::sgd ? 1 : 2;
  const char* kernel = o_.optimizer == Optimizer::adamw     ? "_fused_adamw_"
                       : o_.optimizer == Optimizer::adam    ? "_fused_adam_"
                       : o_.optimizer == Optimizer::sgd     ? "_fused_sgd_"
                       : o_.optimizer == Optimizer::adafactor ? "accel_sim::adafactor_step"
                                                            : "accel_sim::adam8bit_step";
  // Parameters grouped by layer, in creation order.
  std::vector<std::pair<std::string, std::vector<TensorId>>> groups;
  for (TensorId p : e_.parameters) {
    if (grads[graph_.tensor(p).storage] < 0) continue;  // no gradient reaches it (a pooler)
    const std::string& name = graph_.tensor(p).name;
    std::string group = "model";
    if (name.rfind("model.layers.", 0) == 0) group = name.substr(0, name.find('.', 13));
    auto it = std::find_if(groups.begin(), groups.end(),
                           [&](const auto& entry) { return entry.first == group; });
    if (it == groups.end()) it = groups.insert(groups.end(), {group, {}});
    it->second.push_back(p);
  }
  std::vector<ParamUpdate> all;                    // foreach: every parameter's, one list
  std::vector<std::vector<TensorId>> group_masters;  // foreach: each group's masters, copied after
  for (const auto& [group, params] : groups) {
    e_.module = group;
    std::vector<ParamUpdate> updates;
    std::vector<TensorId> masters_list;
    for (TensorId p : params) {
      const TensorMeta& meta = graph_.tensor(p);
      const Shape shape = meta.shape;
      const std::string name = meta.name;
      ParamUpdate u{.target = p, .grad = grads[meta.storage], .states = {}};
      if (masters) {
        u.target = e_.resident(shape, DType::fp32, StorageKind::optimizer_state, name + ".master");
        masters_list.push_back(u.target);
      }
      for (const auto& [state_shape, dtype, state_name] : optimizer_states(shape, state_dtype, states)) {
        u.states.push_back(e_.resident(state_shape, dtype, StorageKind::optimizer_state, name + state_name));
      }
      updates.push_back(std::move(u));
    }
    if (o_.optimizer_impl == OptimizerImpl::foreach) {
      all.insert(all.end(), updates.begin(), updates.end());
      group_masters.push_back(std::move(masters_list));
      continue;  // the masters' copies follow the one foreach update
    }
    if (o_.optimizer_impl == OptimizerImpl::for_loop) {
      for (const ParamUpdate& u : updates) for_loop_update(u);
    } else {
      std::vector<TensorId> inputs, outputs, other_states;
      for (const ParamUpdate& u : updates) inputs.push_back(u.target);
      for (const ParamUpdate& u : updates) inputs.push_back(u.grad);
      for (const ParamUpdate& u : updates) other_states.insert(other_states.end(), u.states.begin(), u.states.end());
      for (const ParamUpdate& u : updates) outputs.push_back(e_.alias(u.target, e_.shape(u.target)));
      inputs.insert(inputs.end(), other_states.begin(), other_states.end());
      for (TensorId t : other_states) outputs.push_back(e_.alias(t, e_.shape(t)));
      const auto listed = static_cast<int64_t>(updates.size());
      e_.node(kernel, std::move(inputs), std::move(outputs), {{"parameters", listed}});
    }
    if (masters) copy_masters(params, masters_list);
  }
  if (!all.empty()) {
    e_.module = "optimizer";
    foreach_update(all);
    for (size_t i = 0; masters && i < groups.size(); ++i) {
      e_.module = groups[i].first;
      copy_masters(groups[i].second, group_masters[i]);
    }
  }
}

void Builder::copy_masters(const std::vector<TensorId>& params, const std::vector<TensorId>& masters_list) {
  std::vector<TensorId> copy_in = params;
  copy_in.insert(copy_in.end(), masters_list.begin(), masters_list.end());
  std::vector<TensorId> written;
  for (TensorId p : params) written.push_back(e_.alias(p, e_.shape(p)));
  e_.node("_foreach_copy_", std::move(copy_in), std::move(written));
}

void Builder::for_loop_update(const ParamUpdate& u) {
  const Shape shape = e_.shape(u.target);
  auto in_place = [&](const char* op, TensorId self, std::vector<TensorId> others) {
    others.insert(others.begin(), self);
    e_.node(op, std::move(others), {e_.alias(self, e_.shape(self))});
  };
  if (o_.optimizer == Optimizer::sgd) {
    in_place("mul_", u.states[0], {});
    in_place("add_", u.states[0], {u.grad});
    in_place("add_", u.target, {u.states[0]});
    return;
  }
  const TensorId m = u.states[0], v = u.states[1];
  if (o_.optimizer == Optimizer::adamw) in_place("mul_", u.target, {});
  in_place("lerp_", m, {u.grad});
  in_place("mul_", v, {});
  in_place("addcmul_", v, {u.grad, u.grad});
  const TensorId d = e_.op("sqrt", {v}, shape, e_.dtype(v));
  in_place("div_", d, {});
  in_place("add_", d, {});
  in_place("addcdiv_", u.target, {m, d});
}

void Builder::foreach_update(const std::vector<ParamUpdate>& us) {
  std::vector<TensorId> targets, grads, m, v;
  for (const ParamUpdate& u : us) {
    targets.push_back(u.target);
    grads.push_back(u.grad);
    m.push_back(u.states[0]);
    if (u.states.size() > 1) v.push_back(u.states[1]);
  }
  auto written = [&](const std::vector<TensorId>& list) {
    std::vector<TensorId> out;
    for (TensorId t : list) out.push_back(e_.alias(t, e_.shape(t)));
    return out;
  };
  auto step = [&](const char* op, const char* overload, std::vector<std::vector<TensorId>> lists,
                  std::vector<TensorId> outputs) {
    std::vector<TensorId> inputs;
    for (const auto& list : lists) inputs.insert(inputs.end(), list.begin(), list.end());
    graph_.add_node(Node{.op = op, .overload = overload, .inputs = std::move(inputs),
                         .outputs = std::move(outputs), .module_path = e_.module,
                         .module_type = e_.module_type, .pass = Pass::optimizer});
  };
  if (o_.optimizer == Optimizer::sgd) {
    step("_foreach_mul_", "Scalar", {m}, written(m));
    step("_foreach_add_", "List", {m, grads}, written(m));
    step("_foreach_add_", "List", {targets, m}, written(targets));
    return;
  }
  if (o_.optimizer == Optimizer::adamw) step("_foreach_mul_", "Scalar", {targets}, written(targets));
  step("_foreach_lerp_", "Scalar", {m, grads}, written(m));
  step("_foreach_mul_", "Scalar", {v}, written(v));
  step("_foreach_addcmul_", "Scalar", {v, grads, grads}, written(v));
  std::vector<TensorId> d;
  for (TensorId t : v) d.push_back(e_.fresh(e_.shape(t), e_.dtype(t)));
  step("_foreach_sqrt", "default", {v}, d);
  step("_foreach_div_", "ScalarList", {d}, written(d));
  step("_foreach_add_", "Scalar", {d}, written(d));
  step("_foreach_addcdiv_", "ScalarList", {targets, m, d}, written(targets));
}

}  // namespace accelsim::builder_detail
