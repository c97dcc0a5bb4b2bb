// The model builder's attention: RoPE, the KV cache, the fused, eager and GPT-J cores, MLA.
#include "builder_impl.h"

namespace accelsim::builder_detail {

TensorId Builder::l2_norm(TensorId x) {
  // x * rsqrt(mean(x^2) + eps) over the head dim, in fp32 (HF Llama4TextL2Norm), one fused pass
  // in an engine's kernels.
  const Shape shape = e_.shape(x);
  if (!eager_) return e_.op("accel_sim::l2_norm", {x}, shape, dt_);
  Shape stat = shape;
  stat.back() = 1;
  TensorId x32 = e_.op("_to_copy", {x}, shape, DType::fp32);
  TensorId mean = e_.op("mean", {e_.op("pow", {x32}, shape, DType::fp32)}, stat, DType::fp32,
                        {{"dim", std::vector<int64_t>{-1}}});
  TensorId rstd = e_.op("rsqrt", {e_.op("add", {mean}, stat, DType::fp32)}, stat, DType::fp32);
  return e_.op("_to_copy", {e_.op("mul", {x32, rstd}, shape, DType::fp32)}, shape, dt_);
}

TensorId Builder::rope(TensorId x) {
  if (!m_.rotary) return x;
  const Shape shape = e_.shape(x);
  if (!eager_) return e_.op("accel_sim::rotary_embedding", {x, cos_}, shape, dt_);
  if (rotary_width() < shape.back()) {
    Shape rot = shape, pass = shape;
    rot.back() = rotary_width();
    pass.back() = shape.back() - rotary_width();
    const Shape strides{shape[1] * shape[2] * shape[3], shape[2] * shape[3], shape[3], 1};
    TensorId rotated = rotate(e_.view(x, rot, strides));
    return e_.op("cat", {rotated, e_.view(x, pass, strides)}, shape, dt_, {{"dim", int64_t{-1}}});
  }
  return rotate(x);
}

TensorId Builder::rotate(TensorId x) {
  const Shape shape = e_.shape(x);
  Shape half = shape;
  half.back() /= 2;
  TensorId xc = e_.op("mul", {x, cos_}, shape, dt_);
  TensorId x1 = e_.view(x, half);
  TensorId x2 = e_.view(x, half);
  TensorId rotated = e_.op("cat", {e_.op("neg", {x2}, half, dt_), x1}, shape, dt_);
  TensorId xs = e_.op("mul", {rotated, sin_}, shape, dt_);
  return e_.op("add", {xc, xs}, shape, dt_);
}

TensorId Builder::write_in_place(TensorId x, const Shape& full, const std::string& name) {
  TensorId c = e_.resident(full, m_.kv_cache_dtype, StorageKind::buffer, name);
  TensorId index = e_.resident({s_}, DType::int64, StorageKind::input, name + ".positions");
  TensorId written = e_.alias(c, full);
  e_.node("index_copy_", {c, index, x}, {written}, {{"dim", int64_t{2}}});
  return written;
}

TensorId Builder::cache(TensorId x, const std::string& name) {
  const int64_t d = m_.head_dim;
  const Shape full{b_, r_.kv_heads, past_ + s_, d};
  if (eager_) {
    // DynamicCache: torch.cat([past, new], dim=-2) copies the whole cache every step, and the
    // layer's old cache is freed as the new one replaces it. The past is therefore an
    // activation that dies after the cat: the peak holds every new cache plus the old one of
    // the layer being replaced, as torch.cuda measured it (validation/measured/, decode rows).
    std::vector<TensorId> parts;
    if (past_ > 0) {
      parts.push_back(e_.resident({b_, r_.kv_heads, past_, d}, m_.kv_cache_dtype,
                                  StorageKind::activation, name));
    }
    parts.push_back(x);
    TensorId all = e_.op("cat", parts, full, m_.kv_cache_dtype, {{"dim", int64_t{-2}}});
    outputs_.push_back(all);  // the cache is returned to the caller
    return all;
  }
  return write_in_place(x, full, name);
}

TensorId Builder::rope_interleaved(TensorId x) {
  const Shape shape = e_.shape(x);
  if (!eager_) return e_.op("accel_sim::rotary_embedding", {x, cos_}, shape, dt_);
  Shape half = shape;
  half.back() /= 2;
  TensorId x1 = e_.view(x, half);
  TensorId x2 = e_.view(x, half);
  TensorId c = e_.view(cos_, {1, 1, s_, half.back()});
  TensorId sn = e_.view(sin_, {1, 1, s_, half.back()});
  TensorId a = e_.op("sub", {e_.op("mul", {x1, c}, half, dt_), e_.op("mul", {x2, sn}, half, dt_)},
                     half, dt_);
  TensorId b = e_.op("add", {e_.op("mul", {x2, c}, half, dt_), e_.op("mul", {x1, sn}, half, dt_)},
                     half, dt_);
  return e_.op("cat", {a, b}, shape, dt_, {{"dim", int64_t{-1}}});
}

TensorId Builder::mla_attention(int64_t l, TensorId x) {
  const std::string p = "model.layers." + std::to_string(l) + ".self_attn";
  e_.module_type = "Attention";
  const MlaSpec& a = m_.mla;
  const int64_t heads = r_.heads;
  const int64_t nope = a.qk_nope_head_dim, rope = a.qk_rope_head_dim, dv = a.v_head_dim;
  const int64_t qk = nope + rope;
  const int64_t kvl = a.kv_lora_rank;
  TensorId q;
  if (a.q_lora_rank > 0) {
    e_.module = p + ".q_a_proj";
    TensorId qa = linear(x, a.q_lora_rank, p + ".q_a_proj", false);
    e_.module = p + ".q_a_layernorm";
    qa = norm(qa, p + ".q_a_layernorm");
    e_.module = p + ".q_b_proj";
    q = linear(qa, heads * qk, p + ".q_b_proj", false);
  } else {
    e_.module = p + ".q_proj";
    q = linear(x, heads * qk, p + ".q_proj", false);
  }
  e_.module = p;
  TensorId q4 = e_.view(q, {b_, heads, s_, qk});
  TensorId q_pass = e_.view(q4, {b_, heads, s_, nope});
  TensorId q_rot = rope_interleaved(e_.view(q4, {b_, heads, s_, rope}));
  e_.module = p + ".kv_a_proj_with_mqa";
  TensorId kva = linear(x, kvl + rope, p + ".kv_a_proj_with_mqa", false);
  e_.module = p + ".kv_a_layernorm";
  TensorId latent = e_.view(norm(e_.view(kva, {b_, s_, kvl}), p + ".kv_a_layernorm"), {b_, 1, s_, kvl});
  e_.module = p;
  TensorId k_rot = rope_interleaved(e_.view(kva, {b_, 1, s_, rope}));
  // Cache the latent and the RoPE key (one "KV head" each).
  TensorId latent_all = mla_cache(latent, kvl, p + ".latent_cache");
  TensorId k_rot_all = mla_cache(k_rot, rope, p + ".rope_key_cache");
  if (cp_ > 1 && o_.phase != Phase::decode) {
    // Context parallelism gathers the small latent and RoPE key of the whole sequence, not
    // the expanded per-head K and V.
    latent_all = collective("accel_sim::all_gather", latent_all, {b_, 1, s_ * cp_, kvl}, "cp");
    k_rot_all = collective("accel_sim::all_gather", k_rot_all, {b_, 1, s_ * cp_, rope}, "cp");
  }
  const int64_t t_all = e_.shape(latent_all)[2];
  TensorId wkv = e_.parameter({heads * (nope + dv), kvl}, m_.weight_dtype, p + ".kv_b_proj.weight");
  std::vector<Attr> attrs = {{"is_causal", s_ > 1}, {"enable_gqa", false}};

  TensorId o;
  if (!eager_ && o_.phase == Phase::decode) {
    // Absorbed: q_latent = q_nope W_UK per head, attend over [latent, rope key] (MQA, one KV
    // head), then out = o_latent W_UV per head.
    TensorId w_uk = e_.view(wkv, {heads, nope, kvl});
    TensorId w_uv = e_.view(wkv, {heads, kvl, dv});
    TensorId q_lat = e_.op("bmm", {e_.view(q_pass, {heads, b_ * s_, nope}), w_uk},
                           {heads, b_ * s_, kvl}, dt_);
    TensorId q_full = e_.op("cat", {e_.view(q_lat, {b_, heads, s_, kvl}), q_rot},
                            {b_, heads, s_, kvl + rope}, dt_, {{"dim", int64_t{-1}}});
    TensorId k_full = e_.op("cat", {latent_all, k_rot_all}, {b_, 1, t_all, kvl + rope}, dt_,
                            {{"dim", int64_t{-1}}});
    attrs[1] = {"enable_gqa", true};
    TensorId o_lat = attend(q_full, k_full, latent_all, std::move(attrs));
    o = e_.op("bmm", {e_.view(o_lat, {heads, b_ * s_, kvl}), w_uv}, {heads, b_ * s_, dv}, dt_);
  } else {
    // Expanded: per-head K = [k_nope, rope key] and V from the cached latent.
    e_.module = p + ".kv_b_proj";
    TensorId wkv_t = e_.transposed(wkv);
    TensorId kv = e_.op("mm", {e_.view(latent_all, {b_ * t_all, kvl}), wkv_t},
                        {b_ * t_all, heads * (nope + dv)}, dt_);
    e_.module = p;
    TensorId kv4 = e_.view(kv, {b_, heads, t_all, nope + dv});
    TensorId k_nope = e_.view(kv4, {b_, heads, t_all, nope});
    TensorId v = e_.view(kv4, {b_, heads, t_all, dv});
    TensorId qf = e_.op("cat", {q_pass, q_rot}, {b_, heads, s_, qk}, dt_, {{"dim", int64_t{-1}}});
    TensorId k = e_.fresh({b_, heads, t_all, qk}, dt_);
    e_.node("new_empty", {kv4}, {k});
    TensorId k1 = e_.alias(k, {b_, heads, t_all, nope});
    e_.node("copy_", {k1, k_nope}, {k1});
    TensorId k2 = e_.alias(k, {b_, heads, t_all, rope});
    e_.node("copy_", {k2, e_.view(k_rot_all, {b_, heads, t_all, rope}, {t_all * rope, 0, rope, 1})}, {k2});
    TensorId oh = attend(qf, k, v, std::move(attrs), /*gathered=*/cp_ > 1);
    // The output [b, heads, s, v] is in the query's layout, whose last dim differs: HF's
    // transpose(1, 2).reshape copies it.
    o = eager_ ? e_.op("clone", {e_.view(oh, {b_, s_, heads, dv})}, {b_, s_, heads, dv}, dt_) : oh;
  }
  e_.module = p + ".o_proj";
  return linear(e_.view(o, {b_, s_, heads * dv}), m_.hidden_size, p + ".o_proj", false);
}

TensorId Builder::attend(TensorId q, TensorId keys, TensorId values, std::vector<Attr> attrs,
                bool gathered) {
  const std::string module = e_.module;
  e_.module = module + ".core";
  TensorId o = attend_core(q, keys, values, std::move(attrs), gathered);
  e_.module = module;
  return o;
}

TensorId Builder::attend_core(TensorId q, TensorId keys, TensorId values, std::vector<Attr> attrs,
                     bool gathered) {
  const int64_t heads = e_.shape(q)[1];
  const int64_t d = e_.shape(q)[3];
  const int64_t dv = e_.shape(values)[3];
  const Shape out{b_, heads, s_, dv};
  if (cp_ == 1) return attention_op({q, keys, values}, out, std::move(attrs));
  if (o_.phase == Phase::decode) {
    TensorId partial = e_.op("accel_sim::attention", {q, keys, values}, out, dt_, std::move(attrs));
    TensorId all = collective("accel_sim::all_gather", partial, {cp_, b_, heads, s_, dv}, "cp");
    return e_.op("sum", {all}, out, dt_, {{"dim", std::vector<int64_t>{0}}});
  }
  TensorId kf = keys;
  TensorId vf = values;
  if (!gathered) {
    Shape kfull = e_.shape(keys);
    kfull[2] *= cp_;
    Shape vfull = e_.shape(values);
    vfull[2] *= cp_;
    kf = collective("accel_sim::all_gather", keys, kfull, "cp");
    vf = collective("accel_sim::all_gather", values, vfull, "cp");
  }
  if (!m_.causal) return attention_op({q, kf, vf}, out, std::move(attrs));
  const int64_t chunk = s_ / 2;
  TensorId o = e_.fresh(out, dt_);
  for (const int64_t offset : {int64_t{0}, (2 * cp_ - 1) * chunk}) {
    std::vector<Attr> a = attrs;
    a.push_back({"query_offset", offset});
    TensorId oc = e_.alias(o, {b_, heads, chunk, dv});
    attention_node({e_.view(q, {b_, heads, chunk, d}), kf, vf}, oc, std::move(a));
  }
  return o;
}

void Builder::attention_node(std::vector<TensorId> qkv, TensorId out, std::vector<Attr> attrs) {
  std::vector<TensorId> outs = {out};
  if (train_) {
    Shape rows = e_.shape(out);
    rows.pop_back();
    outs.push_back(e_.fresh(std::move(rows), DType::fp32));
  }
  e_.node("accel_sim::attention", std::move(qkv), std::move(outs), std::move(attrs));
}

TensorId Builder::attention_op(std::vector<TensorId> qkv, Shape out, std::vector<Attr> attrs) {
  if (o_.eager_attention) return eager_core(qkv, out, attrs);
  if (eager_ && m_.family == "gptj") return gptj_core(qkv, out, attrs);
  if (sinks_ >= 0) qkv.push_back(sinks_);
  TensorId o = e_.fresh(std::move(out), dt_);
  attention_node(std::move(qkv), o, std::move(attrs));
  return o;
}

std::vector<Attr> Builder::masked_gemm_attrs(const std::vector<Attr>& attention, const char* gemm) {
  std::vector<Attr> attrs = {{"attention_gemm", std::string(gemm)}};
  for (const Attr& a : attention) {
    if (a.name == "is_causal" || a.name == "window_size" || a.name == "query_offset" || a.name == "chunk_size") {
      attrs.push_back({"mask_" + a.name, a.value});
    }
  }
  return attrs;
}

TensorId Builder::eager_core(const std::vector<TensorId>& qkv, const Shape& out,
                    const std::vector<Attr>& attention) {
  const Shape& q = e_.shape(qkv[0]);
  const int64_t b = q[0], h = q[1], sq = q[2], d = q[3];
  const int64_t sk = e_.shape(qkv[1])[2], dv = out[3];
  TensorId scores = e_.op("bmm", {e_.view(qkv[0], {b * h, sq, d}),
                                  e_.view(qkv[1], {b * h, d, sk}, {sk * d, 1, d})},
                          {b * h, sq, sk}, dt_, masked_gemm_attrs(attention, "qk"));
  for (const Attr& a : attention) {
    if (a.name != "softcap") continue;
    // HF Gemma2's eager attention: scores / c, tanh, * c.
    scores = e_.op("mul", {e_.op("tanh", {e_.op("div", {scores}, {b * h, sq, sk}, dt_)}, {b * h, sq, sk}, dt_)},
                   {b * h, sq, sk}, dt_);
  }
  TensorId probs = e_.op("_softmax", {scores}, {b * h, sq, sk}, dt_,
                         {{"dim", int64_t{-1}}, {"half_to_float", false}});
  probs = dropout(probs, m_.attention_dropout);
  TensorId ctx = e_.op("bmm", {probs, e_.view(qkv[2], {b * h, sk, dv})}, {b * h, sq, dv}, dt_,
                       masked_gemm_attrs(attention, "pv"));
  TensorId o = e_.op("clone", {e_.view(ctx, {b, sq, h, dv}, {h * sq * dv, dv, sq * dv, 1})},
                     {b, sq, h, dv}, dt_);
  return e_.view(o, {b, h, sq, dv}, {sq * h * dv, dv, h * dv, 1});
}

TensorId Builder::gptj_core(const std::vector<TensorId>& qkv, const Shape& out,
                   const std::vector<Attr>& attention) {
  const Shape& qs = e_.shape(qkv[0]);
  const int64_t b = qs[0], h = qs[1], sq = qs[2], d = qs[3];
  const int64_t sk = e_.shape(qkv[1])[2], dv = out[3];
  auto fp32 = [&](TensorId t) {
    return dt_ == DType::fp32 ? t : e_.op("_to_copy", {t}, e_.shape(t), DType::fp32);
  };
  TensorId q = fp32(qkv[0]);
  TensorId k = fp32(qkv[1]);
  TensorId scores = e_.op("bmm", {e_.view(q, {b * h, sq, d}), e_.view(k, {b * h, d, sk}, {sk * d, 1, d})},
                          {b * h, sq, sk}, DType::fp32, masked_gemm_attrs(attention, "qk"));
  TensorId scaled = e_.op("div", {scores}, {b * h, sq, sk}, DType::fp32);
  if (causal_mask_ < 0) {
    causal_mask_ = e_.resident({b, 1, sq, sk}, DType::fp32, StorageKind::input, "input.causal_mask");
  }
  TensorId masked = e_.op("add", {e_.view(scaled, {b, h, sq, sk}),
                                  e_.view(causal_mask_, {b, h, sq, sk}, {sq * sk, 0, sk, 1})},
                          {b, h, sq, sk}, DType::fp32);
  TensorId probs = e_.op("_softmax", {e_.view(masked, {b * h, sq, sk})}, {b * h, sq, sk}, DType::fp32,
                         {{"dim", int64_t{-1}}, {"half_to_float", false}});
  if (dt_ != DType::fp32) probs = e_.op("_to_copy", {probs}, {b * h, sq, sk}, dt_);
  gptj_weights_ = probs;  // returned as attn_weights, held by the block and the model's loop
  TensorId ctx = e_.op("bmm", {probs, e_.view(qkv[2], {b * h, sk, dv})}, {b * h, sq, dv}, dt_,
                       masked_gemm_attrs(attention, "pv"));
  TensorId o = e_.op("clone", {e_.view(ctx, {b, sq, h, dv}, {h * sq * dv, dv, sq * dv, 1})},
                     {b, sq, h, dv}, dt_);
  return e_.view(o, {b, h, sq, dv}, {sq * h * dv, dv, h * dv, 1});
}

TensorId Builder::mla_cache(TensorId x, int64_t width, const std::string& name) {
  if (train_) return x;  // a training step keeps no cache
  const Shape full{b_, 1, past_ + s_, width};
  if (eager_) {
    std::vector<TensorId> parts;
    if (past_ > 0) {
      parts.push_back(  // replaced and freed as in cache()
          e_.resident({b_, 1, past_, width}, m_.kv_cache_dtype, StorageKind::activation, name));
    }
    parts.push_back(x);
    TensorId all = e_.op("cat", parts, full, m_.kv_cache_dtype, {{"dim", int64_t{-2}}});
    outputs_.push_back(all);
    return all;
  }
  return write_in_place(x, full, name);
}

TensorId Builder::attention(int64_t l, TensorId x) {
  if (m_.mla.enabled()) return mla_attention(l, x);
  const std::string p = "model.layers." + std::to_string(l) + ".self_attn";
  e_.module = p;
  e_.module_type = "Attention";
  const int64_t d = m_.head_dim;
  auto heads_first = [&](TensorId t, int64_t heads, const std::string& norm_prefix) {
    TensorId t4 = e_.view(t, {b_, s_, heads, d});
    if (m_.qk_norm && !norm_prefix.empty()) t4 = norm(t4, norm_prefix);
    return e_.view(t4, {b_, heads, s_, d});
  };
  TensorId q, k, v, qkv = -1;
  if (m_.fused_qkv) {  // one projection, then views of its three parts
    e_.module = p + ".qkv_proj";
    qkv = linear(x, (r_.heads + 2 * r_.kv_heads) * d, p + ".qkv_proj", m_.qkv_bias);
    q = e_.view(qkv, {b_, s_, r_.heads * d});
    k = e_.view(qkv, {b_, s_, r_.kv_heads * d});
    v = e_.view(qkv, {b_, s_, r_.kv_heads * d});
  } else {
    e_.module = p + ".q_proj";
    q = linear(x, r_.heads * d, p + ".q_proj", m_.qkv_bias);
    e_.module = p + ".k_proj";
    k = linear(x, r_.kv_heads * d, p + ".k_proj", m_.qkv_bias);
    e_.module = p + ".v_proj";
    v = linear(x, r_.kv_heads * d, p + ".v_proj", m_.qkv_bias);
  }
  e_.module = p;
  if (m_.nope_layer(l)) {
    // Llama 4's NoPE layers: no rotary embedding; the queries scaled by the attention
    // temperature of their positions (attn_temperature_tuning: log, floor, mul).
    q = heads_first(q, r_.heads, "");
    q = e_.op("mul", {q}, e_.shape(q), dt_);
    k = heads_first(k, r_.kv_heads, "");
  } else if (m_.qk_l2_norm) {
    // Llama 4's RoPE layers: rotary embedding, then q and k L2-normalized (no weights).
    q = l2_norm(rope(heads_first(q, r_.heads, "")));
    k = l2_norm(rope(heads_first(k, r_.kv_heads, "")));
  } else {
    q = rope(heads_first(q, r_.heads, p + ".q_norm"));
    k = rope(heads_first(k, r_.kv_heads, p + ".k_norm"));
  }
  v = heads_first(v, r_.kv_heads, "");
  // Decoders cache K and V for later steps; an encoder attends over this step's K and V only.
  const bool cached = m_.causal && !train_;
  TensorId keys = cached ? cache(k, p + ".key_cache") : k;
  TensorId values = cached ? cache(v, p + ".value_cache") : v;
  std::vector<Attr> attrs = {{"is_causal", s_ > 1 && m_.causal},
                             {"enable_gqa", r_.heads != r_.kv_heads}};
  if (m_.windowed_layer(l)) attrs.push_back({"window_size", m_.sliding_window});
  if (m_.attention_softcap > 0) attrs.push_back({"softcap", m_.attention_softcap});
  if (m_.chunked_layer(l)) attrs.push_back({"chunk_size", m_.attention_chunk});
  // A decode step's position, where the layer reads only part of its cache (a window, a chunk).
  if (past_ > 0 && s_ == 1 && (m_.chunked_layer(l) || m_.windowed_layer(l))) attrs.push_back({"query_offset", past_});
  // Attention sinks (gpt-oss): one learned logit per query head, read by the fused kernel,
  // which also writes their gradient.
  sinks_ = m_.attention_sinks ? e_.parameter({r_.heads}, m_.weight_dtype, p + ".sinks") : -1;
  // The kernels return the output in the query's [b, s, heads, d] memory order, so the
  // transpose back and the reshape are views.
  TensorId o = attend(q, keys, values, std::move(attrs));
  sinks_ = -1;
  TensorId o2 = e_.view(e_.view(o, {b_, s_, r_.heads, d}),
                        {b_, s_, r_.heads * d});
  e_.module = p + ".o_proj";
  TensorId out = linear(o2, m_.hidden_size, p + ".o_proj", m_.output_bias);
  if (eager_ && qkv >= 0) e_.hold(qkv);  // held by the split's q, k, v locals
  return out;
}

}  // namespace accelsim::builder_detail
