// The model builder's embeddings and heads: token, position and token-type tables, patch
// embeddings, rotary tables, the pooler and the LM head.
#include "builder_impl.h"

namespace accelsim::builder_detail {

TensorId Builder::patch_embeddings() {
  e_.module = "model.embeddings.patch_embeddings";
  e_.module_type = "PatchEmbeddings";
  const int64_t h = m_.hidden_size;
  const int64_t p = m_.patch_size;
  const int64_t gh = m_.image_height / p;
  const int64_t gw = m_.image_width / p;
  TensorId pixels = e_.resident({b_, m_.num_channels, m_.image_height, m_.image_width}, dt_,
                                StorageKind::input, "input.pixel_values");
  TensorId w = e_.parameter({h, m_.num_channels, p, p}, m_.weight_dtype,
                            "model.embeddings.patch_embeddings.projection.weight");
  TensorId bias = e_.parameter({h}, m_.weight_dtype,
                               "model.embeddings.patch_embeddings.projection.bias");
  TensorId conv = e_.op("convolution", {pixels, w, bias}, {b_, h, gh, gw}, dt_,
                        {{"stride", std::vector<int64_t>{p, p}},
                         {"padding", std::vector<int64_t>{0, 0}},
                         {"dilation", std::vector<int64_t>{1, 1}},
                         {"transposed", false},
                         {"groups", int64_t{1}}});
  TensorId patches = e_.view(conv, {b_, gh * gw, h}, {h * gh * gw, 1, gh * gw});
  if (!m_.cls_token) return patches;
  e_.module = "model.embeddings";
  e_.module_type = "Embeddings";
  TensorId cls = e_.parameter({1, 1, h}, m_.weight_dtype, "model.embeddings.cls_token");
  return e_.op("cat", {e_.view(cls, {b_, 1, h}, {0, h, 1}), patches}, {b_, s_, h}, dt_,
               {{"dim", int64_t{1}}});
}

TensorId Builder::add_position_table(TensorId x) {
  e_.module = "model.embeddings";
  e_.module_type = "Embeddings";
  TensorId table = e_.parameter({1, s_, m_.hidden_size}, m_.weight_dtype,
                                "model.embeddings.position_embeddings");
  return e_.op("add", {x, table}, {b_, s_, m_.hidden_size}, dt_);
}

void Builder::pool(TensorId x) {
  e_.module = "model.pooler";
  e_.module_type = "Pooler";
  const int64_t h = m_.hidden_size;
  TensorId first = e_.view(x, {b_, h}, {s_ * h, 1});
  TensorId pooled = e_.op("tanh", {linear(first, h, "model.pooler.dense", true)}, {b_, h}, dt_);
  outputs_.push_back(pooled);
}

TensorId Builder::add_token_types(TensorId x) {
  e_.module = "model.embeddings.token_type_embeddings";
  e_.module_type = "Embedding";
  const int64_t h = m_.hidden_size;
  const int64_t s = e_.shape(x)[1];  // this rank's tokens
  TensorId table = e_.parameter({m_.type_vocab_size, h}, m_.weight_dtype,
                                "model.embeddings.token_type_embeddings.weight");
  TensorId types;
  if (eager_) {
    // HF: buffered_token_type_ids.gather(1, position_ids) expanded over the batch.
    TensorId buffer = e_.resident({1, m_.max_position_embeddings}, DType::int64,
                                  StorageKind::buffer, "model.embeddings.token_type_ids");
    TensorId pos = e_.view(position_buffer(), {1, s});
    types = e_.view(e_.op("gather", {buffer, pos}, {1, s}, DType::int64), {b_, s}, {0, 1});
  } else {
    types = e_.resident({b_, s}, DType::int64, StorageKind::input, "input.token_type_ids");
  }
  return add_lookup(x, table, types);
}

TensorId Builder::add_lookup(TensorId x, TensorId table, TensorId ids, TensorId* looked_up) {
  const Shape shape = e_.shape(x);
  TensorId rows = e_.op("embedding", {table, ids},
                        {e_.shape(ids)[0], e_.shape(ids)[1], shape[2]}, dt_);
  if (looked_up != nullptr) *looked_up = rows;
  e_.module = "model.embeddings";
  e_.module_type = "";
  return e_.op("add", {x, rows}, shape, dt_);
}

TensorId Builder::position_buffer() {
  if (position_ids_ < 0) {
    position_ids_ = e_.resident({1, m_.max_position_embeddings}, DType::int64,
                                StorageKind::buffer, "model.embeddings.position_ids");
  }
  return position_ids_;
}

TensorId Builder::add_positions(TensorId x) {
  e_.module = "model.embed_positions";
  e_.module_type = "Embedding";
  const int64_t h = m_.hidden_size;
  const int64_t s = e_.shape(x)[1];  // this rank's tokens
  TensorId table = e_.parameter({m_.max_position_embeddings, h}, m_.weight_dtype,
                                "model.embed_positions.weight");
  TensorId pos;
  if (eager_ && !m_.causal) {
    pos = e_.view(position_buffer(), {1, s});  // BERT slices its position_ids buffer
  } else if (eager_) {
    pos = e_.op("arange", {}, {s}, DType::int64);
    pos = e_.op("add", {pos}, {s}, DType::int64);
    positions_ = pos;
    pos = e_.view(pos, {1, s});
  } else {
    pos = e_.resident({b_, s}, DType::int64, StorageKind::input, "input.positions");
  }
  return add_lookup(x, table, pos, &position_embeddings_);
}

void Builder::rotary_tables() {
  if (!m_.rotary) return;
  e_.module = "model.rotary_emb";
  e_.module_type = "RotaryEmbedding";
  const int64_t d = m_.mla.enabled() ? m_.mla.qk_rope_head_dim : rotary_width();
  if (eager_) {
    // HF: positions = arange + past; freqs = positions x inv_freq; emb = cat(freqs, freqs);
    // cos, sin scaled by attention_scaling, cast to the model dtype.
    TensorId inv_freq = e_.resident({d / 2}, DType::fp32, StorageKind::buffer,
                                    "model.rotary_emb.inv_freq");
    TensorId pos = e_.op("arange", {}, {s_}, DType::int64);
    pos = e_.op("add", {pos}, {s_}, DType::int64);
    positions_ = pos;
    TensorId pos3 = e_.view(pos, {1, s_, 1});
    TensorId posf = e_.op("_to_copy", {pos3}, {1, s_, 1}, DType::fp32);
    TensorId freqs = e_.op("mul", {posf, inv_freq}, {1, s_, d / 2}, DType::fp32);
    TensorId emb = e_.op("cat", {freqs, freqs}, {1, s_, d}, DType::fp32);
    TensorId cos = e_.op("mul", {e_.op("cos", {emb}, {1, s_, d}, DType::fp32)}, {1, s_, d},
                         DType::fp32);
    TensorId sin = e_.op("mul", {e_.op("sin", {emb}, {1, s_, d}, DType::fp32)}, {1, s_, d},
                         DType::fp32);
    cos_ = e_.view(e_.op("_to_copy", {cos}, {1, s_, d}, dt_), {1, 1, s_, d});
    sin_ = e_.view(e_.op("_to_copy", {sin}, {1, s_, d}, dt_), {1, 1, s_, d});
  } else {
    // Inference engines keep a [max_positions, head_dim] cos/sin cache and gather the rows
    // of this step's positions once.
    const int64_t rows = std::max<int64_t>(m_.max_position_embeddings, past_ + s_);
    TensorId cache =
        e_.resident({rows, d}, dt_, StorageKind::buffer, "model.rotary_emb.cos_sin_cache");
    TensorId pos = e_.resident({b_ * s_}, DType::int64, StorageKind::input, "input.positions");
    cos_ = e_.op("index_select", {cache, pos}, {b_ * s_, d}, dt_, {{"dim", int64_t{0}}});
  }
}

void Builder::lm_head(TensorId x, TensorId embed) {
  e_.module = "lm_head";
  e_.module_type = "Linear";
  const int64_t h = m_.hidden_size;
  if (m_.lm_head_transform) {  // BERT MLM: dense, activation, norm
    e_.module = "lm_head.transform";
    x = norm(activation(linear(x, h, "lm_head.transform.dense", true)), "lm_head.transform.norm");
    e_.module = "lm_head";
  }
  // Engines compute logits for the last position of each sequence; HF (and any encoder, which
  // predicts every position) for every position.
  const int64_t rows = eager_ || train_ || !m_.causal ? b_ * s_ : b_;
  TensorId x2 = rows == b_ * s_ ? e_.view(x, {rows, h}) : e_.view(x, {b_, h}, {s_ * h, 1});
  TensorId w = m_.tied_embeddings ? embed : e_.parameter({r_.vocab, h}, m_.weight_dtype, "lm_head.weight");
  TensorId logits;
  if (m_.lm_head_bias) {
    TensorId bias = e_.parameter({r_.vocab}, m_.weight_dtype, "lm_head.bias");
    logits = e_.op("addmm", {bias, x2, e_.transposed(w)}, {rows, r_.vocab}, dt_);
  } else {
    logits = e_.op("mm", {x2, e_.transposed(w)}, {rows, r_.vocab}, dt_);
  }
  if (m_.final_logit_softcap > 0) {  // Gemma 2: logits / c, tanh, * c
    logits = e_.op("mul", {e_.op("tanh", {e_.op("div", {logits}, {rows, r_.vocab}, dt_)}, {rows, r_.vocab}, dt_)},
                   {rows, r_.vocab}, dt_);
  }
  outputs_.insert(outputs_.begin(), logits);
}

}  // namespace accelsim::builder_detail
