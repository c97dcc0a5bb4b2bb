// The model builder's feed-forward blocks: gated and plain activations, the MLP, MoE routing
// and the experts' grouped GEMMs.
#include "builder_impl.h"

namespace accelsim::builder_detail {

TensorId Builder::gated(TensorId gate, TensorId up, Activation kind) {
  const Shape shape = e_.shape(gate);
  if (o_.fused_gated_activation) {
    const char* name = kind == Activation::silu   ? "silu"
                       : kind == Activation::relu ? "relu"
                       : kind == Activation::gelu ? "gelu"
                                                  : "gelu_tanh";
    return e_.op("accel_sim::gated_activation", {gate, up}, shape, dt_,
                 {{"activation", std::string(name)}});
  }
  TensorId a = activation(gate, kind);
  return e_.op("mul", {a, up}, shape, dt_);
}

TensorId Builder::activation(TensorId x, Activation kind) {
  const Shape shape = e_.shape(x);
  switch (kind) {
    case Activation::silu: return e_.op("silu", {x}, shape, dt_);
    case Activation::relu: return e_.op("relu", {x}, shape, dt_);
    case Activation::gelu: return e_.op("gelu", {x}, shape, dt_);
    case Activation::gelu_tanh:
      return e_.op("gelu", {x}, shape, dt_, {{"approximate", std::string("tanh")}});
    case Activation::gelu_new:
      break;
  }
  if (!eager_) return e_.op("gelu", {x}, shape, dt_, {{"approximate", std::string("tanh")}});
  // GPT-2's NewGELUActivation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), op by op.
  TensorId half = e_.op("mul", {x}, shape, dt_);
  TensorId cube = e_.op("mul", {e_.op("pow", {x}, shape, dt_)}, shape, dt_);
  TensorId inner = e_.op("mul", {e_.op("add", {x, cube}, shape, dt_)}, shape, dt_);
  TensorId one_plus = e_.op("add", {e_.op("tanh", {inner}, shape, dt_)}, shape, dt_);
  TensorId out = e_.op("mul", {half, one_plus}, shape, dt_);
  e_.hold(x);  // the module's `input` argument lives until forward returns
  return out;
}

TensorId Builder::ffn(int64_t l, TensorId x) {
  const std::string p = "model.layers." + std::to_string(l) + ".mlp";
  const Shape wide{b_, s_, r_.ffn};
  e_.module_type = "Linear";
  if (m_.gated_ffn) {
    e_.module = p + ".gate_proj";
    TensorId gate = linear(x, r_.ffn, p + ".gate_proj", m_.ffn_bias);
    e_.module = p + ".up_proj";
    TensorId up = linear(x, r_.ffn, p + ".up_proj", m_.ffn_bias);
    e_.module = p + ".act_fn";
    TensorId h = gated(gate, up);
    e_.module = p + ".down_proj";
    return linear(h, m_.hidden_size, p + ".down_proj", m_.ffn_bias);
  }
  e_.module = p + ".up_proj";
  TensorId up = linear(x, r_.ffn, p + ".up_proj", m_.ffn_bias);
  e_.module = p + ".act_fn";
  TensorId a = activation(up);
  e_.module = p + ".down_proj";
  return linear(a, m_.hidden_size, p + ".down_proj", m_.ffn_bias);
}

std::tuple<TensorId, TensorId, TensorId> Builder::sigmoid_router(TensorId x2, const std::string& name) {
  const MoeSpec& moe = m_.moe;
  const int64_t t = e_.shape(x2)[0];
  const int64_t h = e_.shape(x2)[1];
  const int64_t experts = moe.num_experts, k = moe.top_k, g = moe.num_groups;
  TensorId w = e_.parameter({experts, h}, m_.weight_dtype, name + ".weight");
  TensorId bias = e_.resident({experts}, m_.weight_dtype, StorageKind::buffer,
                              name + ".e_score_correction_bias");
  TensorId logits;
  if (eager_) {
    TensorId x32 = e_.op("_to_copy", {x2}, {t, h}, DType::fp32);
    TensorId w32 = e_.op("_to_copy", {w}, {experts, h}, DType::fp32);
    logits = e_.op("mm", {x32, e_.transposed(w32)}, {t, experts}, DType::fp32);
  } else {
    logits = e_.op("mm", {x2, e_.transposed(w)}, {t, experts}, dt_);
  }
  TensorId scores = e_.op("sigmoid", {logits}, {t, experts}, DType::fp32);
  TensorId biased = e_.op("add", {scores, bias}, {t, experts}, DType::fp32);
  TensorId choice = biased;
  if (g > 1) {
    TensorId top2 = e_.fresh({t, g, 2}, DType::fp32);
    e_.node("topk", {e_.view(biased, {t, g, experts / g})}, {top2, e_.fresh({t, g, 2}, DType::int64)},
            {{"k", int64_t{2}}, {"dim", int64_t{-1}}});
    TensorId group_scores = e_.op("sum", {top2}, {t, g}, DType::fp32, {{"dim", std::vector<int64_t>{-1}}});
    TensorId best = e_.fresh({t, moe.top_k_groups}, DType::int64);
    e_.node("topk", {group_scores}, {e_.fresh({t, moe.top_k_groups}, DType::fp32), best},
            {{"k", moe.top_k_groups}, {"dim", int64_t{-1}}});
    TensorId mask = e_.op("zeros_like", {group_scores}, {t, g}, DType::fp32);
    TensorId scattered = e_.alias(mask, {t, g});
    e_.node("scatter_", {mask, best}, {scattered}, {{"dim", int64_t{1}}});
    TensorId expert_mask = e_.op("clone", {e_.view(scattered, {t, g, experts / g}, {g, 1, 0})},
                                 {t, g, experts / g}, DType::fp32);
    TensorId keep = e_.op("_to_copy", {e_.view(expert_mask, {t, experts})}, {t, experts}, DType::boolean);
    TensorId drop = e_.op("bitwise_not", {keep}, {t, experts}, DType::boolean);
    choice = e_.op("masked_fill", {biased, drop}, {t, experts}, DType::fp32);
  }
  TensorId ids = e_.fresh({t, k}, DType::int64);
  e_.node("topk", {choice}, {e_.fresh({t, k}, DType::fp32), ids}, {{"k", k}, {"dim", int64_t{-1}}});
  TensorId weights = e_.op("gather", {scores, ids}, {t, k}, DType::fp32, {{"dim", int64_t{1}}});
  TensorId sum = e_.op("add", {e_.op("sum", {weights}, {t, 1}, DType::fp32,
                                     {{"dim", std::vector<int64_t>{-1}}})},
                       {t, 1}, DType::fp32);
  TensorId normed = e_.alias(weights, {t, k});
  e_.node("div_", {weights, sum}, {normed});
  TensorId scaled = e_.op("mul", {normed}, {t, k}, DType::fp32);  // routed_scaling_factor
  return {logits, scaled, ids};
}

TensorId Builder::experts_gemm(TensorId x, TensorId w, TensorId offsets, double touched,
                      TensorId scales) {
  const int64_t rows = e_.shape(x)[0];
  const int64_t k = e_.shape(x)[1];
  const int64_t experts = e_.shape(w)[0];
  const int64_t n = e_.shape(w)[1];
  const int64_t kw = e_.shape(w)[2];  // k, or k / 2 packed
  const bool fp4 = scales >= 0 && m_.fp4_weights != Fp4Format::none;
  if (o_.moe_impl == MoeImpl::grouped) {
    TensorId wt = e_.view(w, {experts, kw, n}, {n * kw, 1, kw});
    if (fp4 && o_.fp4_gemms) {
      // The rows quantized once, then every touched expert's GEMM on the fp4 units.
      auto [xq, xs] = fp4_quantize(x);
      return e_.op("accel_sim::fp4_grouped_mm", {xq, wt, offsets, xs, scales}, {rows, n}, dt_,
                   {{"top_k", m_.moe.top_k}, {"experts_touched", touched}});
    }
    std::vector<TensorId> inputs = {x, wt, offsets};
    if (scales >= 0) inputs.push_back(scales);
    return e_.op("_grouped_mm", std::move(inputs), {rows, n}, dt_,
                 {{"top_k", m_.moe.top_k}, {"experts_touched", touched}});
  }
  // Sequential: the expected number of touched experts, each with an equal share of rows.
  const int64_t hit = std::min<int64_t>(experts, std::max<int64_t>(1, std::llround(touched)));
  const int64_t share = ceil_div(rows, hit);
  TensorId out = e_.fresh({rows, n}, dt_);
  for (int64_t i = 0; i < hit; ++i) {
    const int64_t r = std::min(share, rows - i * share);
    if (r <= 0) break;
    TensorId xi = e_.view(x, {r, k});
    TensorId yi;
    if (fp4) {
      const Shape& sc = e_.shape(scales);
      yi = fp4_linear(xi, e_.view(w, {n, kw}), e_.view(scales, {sc[1], sc[2]}), n);
    } else if (scales >= 0) {
      const Shape& sc = e_.shape(scales);
      yi = e_.op("_weight_int4pack_mm",
                 {xi, e_.view(w, {n, kw}), e_.view(scales, {sc[1], sc[2], sc[3]})}, {r, n}, dt_,
                 {{"qGroupSize", m_.int4_group_size}});
    } else {
      TensorId wi = e_.view(w, {k, n}, {1, k});  // expert i's [n, k] slice, transposed
      yi = e_.op("mm", {xi, wi}, {r, n}, dt_);
    }
    TensorId slot = e_.alias(out, {r, n});
    e_.node("copy_", {slot, yi}, {slot});
  }
  return out;
}

TensorId Builder::moe(int64_t l, TensorId x) {
  const std::string p = "model.layers." + std::to_string(l) + ".mlp";
  const MoeSpec& moe = m_.moe;
  const int64_t h = m_.hidden_size;
  const int64_t t = b_ * s_;
  const int64_t k = moe.top_k;
  const int64_t experts = moe.num_experts;
  const int64_t ep = o_.expert_parallel;
  const int64_t local = divided(experts, ep, "num_experts", "expert-parallel");  // this rank's experts
  const int64_t fe = divided(moe.expert_ffn_size, o_.tensor_parallel, "expert_ffn_size");
  const int64_t rows = t * k;  // routed rows sent, and (balanced) received, by this rank
  // Expected experts of this rank that receive tokens: the EP group routes t * ep tokens.
  const double touched = expected_experts_touched(experts, k, t * ep) / static_cast<double>(ep);
  TensorId x2 = e_.view(x, {t, h});
  e_.module_type = "SparseMoeBlock";

  // The always-on shared expert (Qwen2-MoE computes it before routing, DeepSeek after).
  auto shared_expert = [&]() -> TensorId {
    const int64_t fs = divided(moe.shared_ffn_size, o_.tensor_parallel, "shared_ffn_size");
    const std::string sp = p + ".shared_expert";
    e_.module = sp + ".gate_proj";
    TensorId gate = linear(x2, fs, sp + ".gate_proj", false);
    e_.module = sp + ".up_proj";
    TensorId up = linear(x2, fs, sp + ".up_proj", false);
    TensorId prod = gated(gate, up, Activation::silu);
    e_.module = sp + ".down_proj";
    return linear(prod, h, sp + ".down_proj", false);
  };
  const bool shared_first = moe.shared_ffn_size > 0 && moe.shared_expert_gate;
  TensorId shared = shared_first ? shared_expert() : -1;

  // Router: logits, softmax in fp32, top-k (renormalized for Mixtral-style routers).
  e_.module = p + ".gate";
  TensorId logits, probs, weights, ids;
  if (moe.sigmoid_scoring) {
    std::tie(logits, weights, ids) = sigmoid_router(x2, p + ".gate");
    probs = logits;
  } else if (moe.sigmoid_top_k) {
    // Llama 4: top-k of the raw logits, then a sigmoid of the k chosen ones.
    logits = linear(x2, experts, p + ".gate", moe.router_bias, /*quantizable=*/false);
    probs = logits;
    TensorId top = e_.fresh({t, k}, dt_);
    ids = e_.fresh({t, k}, DType::int64);
    e_.node("topk", {logits}, {top, ids}, {{"k", k}, {"dim", int64_t{-1}}});
    weights = e_.op("sigmoid", {e_.op("_to_copy", {top}, {t, k}, DType::fp32)}, {t, k}, DType::fp32);
  } else {
    logits = linear(x2, experts, p + ".gate", moe.router_bias, /*quantizable=*/false);
    if (eager_) logits = e_.op("_to_copy", {logits}, {t, experts}, DType::fp32);
    probs = e_.op("_softmax", {logits}, {t, experts}, DType::fp32, {{"dim", int64_t{-1}}});
    weights = e_.fresh({t, k}, DType::fp32);
    ids = e_.fresh({t, k}, DType::int64);
    e_.node("topk", {probs}, {weights, ids}, {{"k", k}, {"dim", int64_t{-1}}});
  }
  if (moe.normalize_top_k && !moe.sigmoid_scoring) {
    TensorId sum = e_.op("sum", {weights}, {t, 1}, DType::fp32, {{"dim", std::vector<int64_t>{-1}}});
    TensorId normed = e_.alias(weights, {t, k});
    e_.node("div_", {weights, sum}, {normed});
    weights = normed;
  }
  const DType combine = moe.fp32_combine ? DType::fp32 : dt_;
  if (eager_ && !moe.fp32_combine) weights = e_.op("_to_copy", {weights}, {t, k}, dt_);

  // Dispatch: sort the (token, expert) pairs by expert and gather the tokens in that order.
  e_.module = p + ".experts";
  e_.module_type = "Experts";
  TensorId sorted = e_.fresh({rows}, DType::int64);
  TensorId order = e_.fresh({rows}, DType::int64);
  e_.node("sort", {e_.view(ids, {rows})}, {sorted, order}, {{"dim", int64_t{-1}}});
  TensorId token = eager_ ? e_.op("floor_divide", {order}, {rows}, DType::int64) : order;
  TensorId xs = e_.op("index", {x2, token}, {rows, h}, dt_);
  TensorId ws = e_.op("index", {e_.view(weights, {rows}), order}, {rows}, e_.dtype(weights));
  TensorId offsets;
  if (eager_) {
    TensorId idf = e_.op("_to_copy", {sorted}, {rows}, DType::fp32);
    TensorId hist = e_.op("histc", {idf}, {local}, DType::fp32, {{"bins", local}});
    offsets = e_.op("cumsum", {hist}, {local}, DType::int32, {{"dim", int64_t{0}}});
    experts_locals_ = {idf, hist};
  } else {
    offsets = e_.op("histc", {sorted}, {local}, DType::int32, {{"bins", local}});
  }
  // Expert parallelism: send each row to the rank that owns its expert, and back afterwards.
  // The busiest rank receives expert_imbalance times the mean share of rows, and the step waits
  // for it (its expert GEMMs, activation and all-to-all).
  const int64_t busiest =
      ep > 1 ? static_cast<int64_t>(std::ceil(static_cast<double>(rows) * o_.expert_imbalance)) : rows;
  if (ep > 1) xs = collective("accel_sim::all_to_all", xs, {busiest, h}, "ep");

  TensorId gate_up, down, gate_up_scales = -1, down_scales = -1;
  if (int4(p)) {
    std::tie(gate_up, gate_up_scales) = int4_weight({local}, 2 * fe, h, p + ".experts.gate_up_proj");
    std::tie(down, down_scales) = int4_weight({local}, h, fe, p + ".experts.down_proj");
  } else {
    gate_up = e_.parameter({local, 2 * fe, h}, m_.weight_dtype, p + ".experts.gate_up_proj");
    down = e_.parameter({local, h, fe}, m_.weight_dtype, p + ".experts.down_proj");
  }
  TensorId gu = experts_gemm(xs, gate_up, offsets, touched, gate_up_scales);
  // gpt-oss: each expert adds its own bias to the rows it computed (one elementwise pass).
  auto expert_bias = [&](TensorId y, int64_t width, const std::string& name) {
    if (!moe.expert_bias) return y;
    TensorId bias = e_.parameter({local, width}, m_.weight_dtype, name);
    return e_.op("add", {y, bias}, e_.shape(y), dt_);
  };
  gu = expert_bias(gu, 2 * fe, p + ".experts.gate_up_proj_bias");
  TensorId hidden = gated(e_.view(gu, {busiest, fe}), e_.view(gu, {busiest, fe}), Activation::silu);
  TensorId y = expert_bias(experts_gemm(hidden, down, offsets, touched, down_scales), h,
                           p + ".experts.down_proj_bias");
  if (ep > 1) y = collective("accel_sim::all_to_all", y, {rows, h}, "ep");

  // Combine: weight each expert output, put rows back in token order, sum over the k experts.
  TensorId weighted = e_.op("mul", {y, e_.view(ws, {rows, 1})}, {rows, h}, combine);
  if (eager_) {
    TensorId inverse = e_.fresh({rows}, DType::int64);
    e_.node("empty_like", {order}, {inverse});
    TensorId positions = e_.op("arange", {}, {rows}, DType::int64);
    TensorId filled = e_.alias(inverse, {rows});
    e_.node("index_put_", {inverse, order, positions}, {filled});
    experts_locals_.push_back(filled);
    order = filled;
  }
  TensorId back = e_.op("index", {weighted, order}, {rows, h}, combine);
  TensorId out = e_.op("sum", {e_.view(back, {t, k, h})}, {t, h}, combine,
                       {{"dim", std::vector<int64_t>{1}}});
  if (eager_ && moe.fp32_combine) out = e_.op("_to_copy", {out}, {t, h}, dt_);
  if (eager_) {
    // HF's experts function keeps every intermediate in a local until it returns, and the
    // block keeps the router's outputs.
    // The temporaries of `down(act(gate) * up)` (gu, a, hidden) and of the combine
    // expression (weighted, back) die at once.
    for (TensorId held : {logits, weights, ids, sorted, order, xs, ws, offsets, y}) {
      e_.hold(held);
    }
    for (TensorId held : experts_locals_) e_.hold(held);
    experts_locals_.clear();
  }

  if (moe.shared_ffn_size > 0 && !shared_first) shared = shared_expert();
  e_.module = p;
  if (shared >= 0) {
    if (moe.shared_expert_gate) {
      e_.module = p + ".shared_expert_gate";
      TensorId g = linear(x2, 1, p + ".shared_expert_gate", false, /*quantizable=*/false);
      e_.module = p;
      shared = e_.op("mul", {e_.op("sigmoid", {g}, {t, 1}, dt_), shared}, {t, h}, dt_);
    }
    out = e_.op("add", {out, shared}, {t, h}, dt_);
  }
  return e_.view(out, {b_, s_, h});
}

}  // namespace accelsim::builder_detail
