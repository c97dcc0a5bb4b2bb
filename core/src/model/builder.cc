// build_graph() (builder.h): the model builder. This file holds the Builder's assembly of a graph
// (the layers in order, norms, linears with their LoRA adapters and int4/fp8 weights, the tensor-
// parallel collectives) and the options' validation; its seams are builder_embeddings.cc,
// builder_attention.cc, builder_mlp.cc and builder_training.cc, the class is builder_impl.h.
#include "accelsim/builder.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "accelsim/checked_arithmetic.h"
#include "accelsim/error.h"
#include "backward.h"

#include "builder_impl.h"

namespace accelsim {
namespace builder_detail {

Graph Builder::build() {
  graph_.name = m_.name;
  // Room for about 40 nodes, 80 tensors and 60 storages per layer, so vectors do not regrow.
  graph_.reserve(60 * m_.num_layers + 64, 80 * m_.num_layers + 64, 40 * m_.num_layers + 64);
  e_.module = "model";
  e_.module_type = "";
  TensorId embed = -1;
  TensorId x;
  if (m_.vision()) {
    x = patch_embeddings();
  } else {
    TensorId ids = e_.resident({b_, s_}, DType::int64, StorageKind::input, "input.input_ids");
    embed = e_.parameter({r_.vocab, m_.hidden_size}, m_.weight_dtype, "model.embed_tokens.weight");
    e_.module = "model.embed_tokens";
    e_.module_type = "Embedding";
    x = reduce_output(e_.op("embedding", {embed, ids}, {b_, s_, m_.hidden_size}, dt_));
    if (m_.embedding_multiplier > 0) x = e_.op("mul", {x}, {b_, s_, m_.hidden_size}, dt_);  // Gemma: * sqrt(h)
  }
  if (m_.vision() && sp_) x = e_.view(x, {b_, s_ / o_.tensor_parallel, m_.hidden_size});
  const TensorId embedded = x;
  if (m_.type_vocab_size > 0) x = add_token_types(x);
  if (m_.learned_positions) x = m_.vision() ? add_position_table(x) : add_positions(x);
  if (m_.embedding_norm) {
    e_.module = "model.embeddings.norm";
    e_.module_type = "LayerNorm";
    x = norm(x, "model.embeddings.norm");
  }
  x = dropout(x, m_.embedding_dropout);
  rotary_tables();
  for (int64_t l = 0; l < m_.num_layers; ++l) {
    x = m_.post_norm ? post_norm_layer(l, x) : m_.parallel_block ? parallel_layer(l, x) : layer(l, x);
  }
  if (m_.final_norm) {
    e_.module = "model.norm";
    e_.module_type = m_.norm == NormKind::rms_norm ? "RMSNorm" : "LayerNorm";
    x = norm(x, "model.norm");
  }
  x = gather_sequence(x);
  if (m_.lm_head) {
    lm_head(x, embed);
  } else {
    outputs_.push_back(x);  // the last hidden state is the output
  }
  if (m_.pooler) pool(x);  // computed in training too (HF ViTModel), but feeds no loss
  // HF's model forward keeps `inputs_embeds`, the positions and the cos/sin tables in locals
  // until it returns.
  if (eager_) {
    for (TensorId held : {embedded, positions_, cos_, sin_, position_embeddings_}) {
      if (held >= 0) e_.hold(held);
    }
  }
  if (train_) {
    train_step();
  } else {
    for (TensorId t : outputs_) graph_.add_output(t);
  }
  return std::move(graph_);
}

TensorId Builder::dropout(TensorId x, double p) {
  if (!train_ || p <= 0.0) return x;
  TensorId out = e_.fresh(e_.shape(x), e_.dtype(x));
  TensorId mask = e_.fresh(e_.shape(x), DType::boolean);
  e_.node("native_dropout", {x}, {out, mask}, {{"p", p}, {"train", true}});
  return out;
}

TensorId Builder::collective(const char* op, TensorId x, Shape shape, const char* group) {
  return e_.op(op, {x}, std::move(shape), e_.dtype(x), {{"group", std::string(group)}});
}

TensorId Builder::summa_gather(TensorId x, Shape shape, const char* group) {
  const int64_t panels = std::max(o_.tensor_parallel, o_.context_parallel);
  return e_.op("accel_sim::all_gather", {x}, std::move(shape), e_.dtype(x),
               {{"group", std::string(group)}, {"summa", panels}});
}

TensorId Builder::gather_sequence(TensorId x) {
  if (!sp_) {
    if (train_ && o_.tensor_parallel > 1) column_inputs_.push_back(x);
    return x;
  }
  Shape full = e_.shape(x);
  full[1] *= o_.tensor_parallel;
  return o_.summa ? summa_gather(x, full, "tp") : collective("accel_sim::all_gather", x, full, "tp");
}

TensorId Builder::reduce_output(TensorId y) {
  if (o_.tensor_parallel == 1) return y;
  if (o_.summa && summa_rows_.count(y) > 0) {
    // SUMMA's row-parallel GEMM left [b, s / m2, h / m1]: held as [b, s / (m1 m2), h].
    Shape part = e_.shape(y);
    part[1] /= o_.tensor_parallel;
    part.back() *= o_.tensor_parallel;
    return e_.view(y, part);
  }
  TensorId reduced;
  if (!sp_) {
    reduced = collective("accel_sim::all_reduce", y, e_.shape(y), "tp");
  } else {
    Shape part = e_.shape(y);
    part[1] /= o_.tensor_parallel;
    reduced = collective("accel_sim::reduce_scatter", y, part, "tp");
  }
  for (TensorId adapter : pending_adapters_) {
    const Shape& shape = e_.shape(reduced);
    reduced = e_.op("add", {reduced, e_.view(adapter, shape)}, shape, dt_);
  }
  pending_adapters_.clear();
  return reduced;
}

TensorId Builder::norm(TensorId x, const std::string& prefix) {
  const Shape shape = e_.shape(x);
  const int64_t width = shape.back();
  Shape stat = shape;
  stat.back() = 1;
  TensorId w = e_.parameter({width}, m_.weight_dtype, prefix + ".weight");
  if (m_.norm == NormKind::layer_norm) {
    TensorId b = e_.parameter({width}, m_.weight_dtype, prefix + ".bias");
    TensorId y = e_.fresh(shape, dt_);
    e_.node("native_layer_norm", {x, w, b}, {y, e_.fresh(stat, DType::fp32), e_.fresh(stat, DType::fp32)},
            {{"normalized_shape", std::vector<int64_t>{width}}});
    return y;
  }
  if (!eager_ && !o_.eager_norm) {
    TensorId y = e_.fresh(shape, dt_);
    e_.node("_fused_rms_norm", {x, w}, {y, e_.fresh(stat, DType::fp32)},
            {{"normalized_shape", std::vector<int64_t>{width}}});
    return y;
  }
  if (m_.sandwich_norms) {
    // HF Gemma2/Gemma3RMSNorm: x.float(); pow(2).mean(-1); + eps; rsqrt; x * rstd; then
    // * (1 + w.float()) in fp32; .type_as(x).
    TensorId x32 = e_.op("_to_copy", {x}, shape, DType::fp32);
    TensorId mean = e_.op("mean", {e_.op("pow", {x32}, shape, DType::fp32)}, stat, DType::fp32,
                          {{"dim", std::vector<int64_t>{-1}}});
    TensorId rstd = e_.op("rsqrt", {e_.op("add", {mean}, stat, DType::fp32)}, stat, DType::fp32);
    TensorId y32 = e_.op("mul", {x32, rstd}, shape, DType::fp32);
    TensorId scale = e_.op("add", {e_.op("_to_copy", {w}, {width}, DType::fp32)}, {width}, DType::fp32);
    return e_.op("_to_copy", {e_.op("mul", {y32, scale}, shape, DType::fp32)}, shape, dt_);
  }
  // HF LlamaRMSNorm: x.float(); pow(2).mean(-1); + eps; rsqrt; x * rstd; .to(dtype); w * x.
  TensorId x32 = e_.op("_to_copy", {x}, shape, DType::fp32);
  TensorId sq = e_.op("pow", {x32}, shape, DType::fp32);
  TensorId mean = e_.op("mean", {sq}, stat, DType::fp32, {{"dim", std::vector<int64_t>{-1}}});
  TensorId rstd = e_.op("rsqrt", {e_.op("add", {mean}, stat, DType::fp32)}, stat, DType::fp32);
  TensorId y32 = e_.op("mul", {x32, rstd}, shape, DType::fp32);
  TensorId y = e_.op("_to_copy", {y32}, shape, dt_);
  return e_.op("mul", {w, y}, shape, dt_);
}

bool Builder::int4(const std::string& prefix, bool quantizable) const {
  return (m_.int4_group_size > 0 || m_.fp4_weights != Fp4Format::none) && quantizable &&
         prefix.rfind("model.layers.", 0) == 0;
}

std::pair<TensorId, TensorId> Builder::int4_weight(Shape lead, int64_t out, int64_t in,
                                          const std::string& prefix) {
  if (m_.fp4_weights != Fp4Format::none) {
    const int64_t block = m_.fp4_block();
    ACCELSIM_CHECK(in % block == 0, "fp4 weights of '" + prefix + "': " + std::to_string(in) +
                                        " input channels are not a multiple of the block of " + std::to_string(block));
    Shape packed = lead;
    packed.insert(packed.end(), {out, in / 2});
    Shape scales = lead;
    scales.insert(scales.end(), {out, in / block});
    const DType scale = m_.fp4_weights == Fp4Format::nvfp4 ? DType::fp8_e4m3 : DType::uint8;
    return {e_.parameter(std::move(packed), DType::uint8, prefix + ".weight_packed"),
            e_.parameter(std::move(scales), scale, prefix + ".weight_scale")};
  }
  const int64_t group = m_.int4_group_size;
  ACCELSIM_CHECK(in % group == 0, "int4 weights of '" + prefix + "': " + std::to_string(in) +
                                      " input channels are not a multiple of the group size " +
                                      std::to_string(group));
  Shape packed = lead;
  packed.insert(packed.end(), {out, in / 2});
  Shape scales = lead;
  scales.insert(scales.end(), {in / group, out, 2});
  return {e_.parameter(std::move(packed), DType::uint8, prefix + ".qweight"),
          e_.parameter(std::move(scales), dt_, prefix + ".scales_and_zeros")};
}

TensorId Builder::linear(TensorId x, int64_t out, const std::string& prefix, bool bias,
                bool quantizable) {
  TensorId y = base_linear(x, out, prefix, bias, quantizable);
  return lora_targeted(prefix) ? lora_adapter(x, y, prefix) : y;
}

bool Builder::lora_targeted(const std::string& prefix) {
  if (!train_ || o_.lora_rank == 0 || prefix.rfind("model.layers.", 0) != 0) return false;
  const std::string leaf = prefix.substr(prefix.rfind('.') + 1);
  const std::vector<std::string>& targets = o_.lora_targets.empty() ? kLoraTargets : o_.lora_targets;
  if (std::find(targets.begin(), targets.end(), leaf) == targets.end()) return false;
  lora_matched_.insert(leaf);
  return true;
}

TensorId Builder::lora_adapter(TensorId x, TensorId y, const std::string& prefix) {
  const int64_t tp = o_.tensor_parallel, r = o_.lora_rank;
  const Shape out_shape = e_.shape(y);
  const int64_t in = e_.shape(x).back(), out = out_shape.back();
  const int64_t rows = e_.graph().tensor(x).numel() / in;
  const std::string leaf = prefix.substr(prefix.rfind('.') + 1);
  const bool row_parallel = leaf == "o_proj" || leaf == "down_proj";
  TensorId x2 = e_.view(x, {rows, in});
  TensorId a;
  if (row_parallel) {
    TensorId wa = lora_parameter({r, in}, prefix + ".lora_A.weight");
    a = e_.op("mm", {x2, e_.transposed(wa)}, {rows, r}, dt_);
    if (tp > 1) a = collective("accel_sim::all_reduce", a, {rows, r}, "tp");
  } else {
    // Under BuildOptions::lora_shared_input the projections of one input (q, k and v; gate and
    // up) share the first one's A and its output.
    const TensorMeta& xm = e_.graph().tensor(x2);
    const std::tuple<StorageId, int64_t, int64_t, int64_t> key{xm.storage, xm.storage_offset, rows, in};
    auto shared = lora_inputs_.find(key);
    if (o_.lora_shared_input && shared != lora_inputs_.end()) {
      a = shared->second;
    } else {
      TensorId wa = lora_parameter({r / tp, in}, prefix + ".lora_A.weight");
      a = e_.op("mm", {x2, e_.transposed(wa)}, {rows, r / tp}, dt_);
      if (tp > 1) a = collective("accel_sim::all_gather", a, {rows, r}, "tp");
      lora_inputs_[key] = a;
    }
  }
  // B's rows: the base's output width beside a column-parallel base (already this rank's
  // share), a TP share of the full width beside a row-parallel one.
  const int64_t b_rows = row_parallel ? out / tp : out;
  TensorId wb = lora_parameter({b_rows, r}, prefix + ".lora_B.weight");
  TensorId b = e_.op("mm", {a, e_.transposed(wb)}, {rows, b_rows}, dt_);
  if (row_parallel && tp > 1) b = collective("accel_sim::all_gather", b, {rows, out}, "tp");
  b = e_.op("mul", {b}, {rows, out}, dt_);  // alpha / rank
  if (row_parallel && tp > 1) {
    pending_adapters_.push_back(e_.view(b, out_shape));
    return y;
  }
  return e_.op("add", {y, e_.view(b, out_shape)}, out_shape, dt_);
}

TensorId Builder::lora_parameter(Shape shape, const std::string& name) {
  return e_.parameter(std::move(shape), m_.weight_dtype, name, /*adapter=*/true);
}

TensorId Builder::summa_linear(TensorId x, int64_t out, const std::string& prefix, bool bias) {
  const int64_t m1 = o_.tensor_parallel, m2 = o_.context_parallel;
  const std::string leaf = prefix.substr(prefix.rfind('.') + 1);
  Shape shape = e_.shape(x);
  // A row-parallel layer's input is this rank's [.., in / m1] (heads or FFN columns): gathered
  // over TP first, and its output is this rank's share of the hidden width.
  if (leaf == "o_proj" || leaf == "down_proj") {
    shape.back() *= m1;
    x = summa_gather(x, shape, "tp");
    out = divided(out, m1, "the hidden size");
  }
  const int64_t in = shape.back();
  const int64_t rows = e_.graph().tensor(x).numel() / in;
  TensorId w = e_.parameter({out, divided(in, m2, prefix + "'s input width", "context-parallel (SUMMA)")},
                            m_.weight_dtype, prefix + ".weight");
  TensorId full = summa_gather(w, {out, in}, "cp");
  TensorId y = e_.op("mm", {e_.view(x, {rows, in}), e_.transposed(full)}, {rows, out}, dt_);
  if (bias) {
    TensorId b = e_.parameter({out}, m_.weight_dtype, prefix + ".bias");
    y = e_.op("add", {y, b}, {rows, out}, dt_);
  }
  shape.back() = out;
  TensorId result = e_.view(y, shape);
  if (leaf == "o_proj" || leaf == "down_proj") summa_rows_.insert(result);
  return result;
}

TensorId Builder::base_linear(TensorId x, int64_t out, const std::string& prefix, bool bias,
                     bool quantizable) {
  const Shape shape = e_.shape(x);
  const int64_t in = shape.back();
  const int64_t rows = e_.graph().tensor(x).numel() / in;
  Shape out_shape = shape;
  out_shape.back() = out;
  if (int4(prefix, quantizable) && m_.fp4_weights != Fp4Format::none) {
    auto [packed, scales] = int4_weight({}, out, in, prefix);
    TensorId y = fp4_linear(e_.view(x, {rows, in}), packed, scales, out);
    if (bias) {
      TensorId b = e_.parameter({out}, dt_, prefix + ".bias");
      y = e_.op("add", {y, b}, {rows, out}, dt_);
    }
    return e_.view(y, out_shape);
  }
  if (int4(prefix, quantizable)) {
    auto [packed, scales] = int4_weight({}, out, in, prefix);
    TensorId y = e_.op("_weight_int4pack_mm", {e_.view(x, {rows, in}), packed, scales},
                       {rows, out}, dt_, {{"qGroupSize", m_.int4_group_size}});
    if (bias) {
      TensorId b = e_.parameter({out}, dt_, prefix + ".bias");
      y = e_.op("add", {y, b}, {rows, out}, dt_);
    }
    return e_.view(y, out_shape);
  }
  // fp8 GEMMs (BuildOptions::fp8_gemms) run the transformer blocks' linears; an inference
  // engine also leaves the MoE router and gates in 16 bits, as fp8 checkpoints do.
  const bool fp8 = o_.fp8_gemms && prefix.rfind("model.layers.", 0) == 0 && (train_ || quantizable);
  // Inference stores those weights in fp8 (TensorRT-LLM's --enable_fp8 engines, vLLM's fp8
  // checkpoints: per-tensor scaled e4m3); a training step keeps them in the weight dtype.
  // A training step keeps fp8 parameters only with BuildOptions::fp8_parameters.
  const bool fp8_stored = fp8 && (!train_ || o_.fp8_parameters);
  const DType stored = fp8_stored ? DType::fp8_e4m3 : m_.weight_dtype;
  if (o_.summa && prefix.rfind("model.layers.", 0) == 0) return summa_linear(x, out, prefix, bias);
  TensorId w = e_.parameter({out, in}, stored, prefix + ".weight");
  TensorId wt = e_.transposed(w);
  TensorId x2 = e_.view(x, {rows, in});
  TensorId y;
  if (fp8) {
    TensorId xq, wq;
    if (train_ && o_.fp8_recipe == Fp8Recipe::torchao) {
      // torchao's Float8Linear: this linear's own amax and cast of its input and its weight,
      // every micro-batch (Fp8Recipe).
      xq = float8_cast(x2);
      wq = float8_cast(w);
    } else {
      // Projections of one input (q, k and v; gate and up) share its cast, as Transformer
      // Engine's fused LayerNormLinear / LayerNormMLP cast the normalized input once.
      const TensorMeta& xm = e_.graph().tensor(x2);
      auto [cast, fresh] = fp8_inputs_.try_emplace({xm.storage, xm.storage_offset, rows, in}, -1);
      if (fresh) cast->second = e_.op("_to_copy", {x2}, {rows, in}, DType::fp8_e4m3);
      xq = cast->second;
      // Transformer Engine casts the weight on a step's first micro-batch only and reuses the
      // fp8 copy (is_first_microbatch, passed by Megatron-LM's TE wrappers): marked for
      // SimulateOptions::fp8_weight_cache. Inference reads the stored fp8 weight as is.
      wq = fp8_stored ? w
                      : e_.op("_to_copy", {w}, {out, in}, DType::fp8_e4m3, {{"once_per_step", true}});
    }
    y = e_.op("_scaled_mm", {xq, e_.transposed(wq)}, {rows, out}, dt_);
    if (bias) {
      // Biases stay in 16 bits: the weight dtype in training, the activation dtype in an fp8
      // inference engine (TensorRT-LLM keeps them in the engine's dtype).
      TensorId b = e_.parameter({out}, train_ ? m_.weight_dtype : dt_, prefix + ".bias");
      y = e_.op("add", {y, b}, {rows, out}, dt_);
    }
    return e_.view(y, out_shape);
  }
  if (bias) {
    TensorId b = e_.parameter({out}, m_.weight_dtype, prefix + ".bias");
    y = e_.op("addmm", {b, x2, wt}, {rows, out}, dt_);
  } else {
    y = e_.op("mm", {x2, wt}, {rows, out}, dt_);
  }
  return e_.view(y, out_shape);
}

std::pair<TensorId, TensorId> Builder::fp4_quantize(TensorId x2) {
  const Shape& shape = e_.shape(x2);
  const int64_t rows = shape[0], in = shape[1], block = m_.fp4_block();
  const TensorMeta& xm = e_.graph().tensor(x2);
  auto [cast, fresh] = fp4_inputs_.try_emplace({xm.storage, xm.storage_offset, rows, in}, std::pair<TensorId, TensorId>{-1, -1});
  if (fresh) {
    // One pass: each block's amax, its scale, the values rounded to e2m1 and packed.
    TensorId packed = e_.fresh({rows, in / 2}, DType::uint8);
    TensorId scales = e_.fresh({rows, in / block}, m_.fp4_weights == Fp4Format::nvfp4 ? DType::fp8_e4m3 : DType::uint8);
    e_.node("accel_sim::fp4_quantize", {x2}, {packed, scales}, {{"block", block}});
    cast->second = {packed, scales};
  }
  return cast->second;
}

TensorId Builder::fp4_linear(TensorId x2, TensorId packed, TensorId scales, int64_t out) {
  const int64_t rows = e_.shape(x2)[0];
  if (o_.fp4_gemms) {
    auto [xq, xs] = fp4_quantize(x2);
    return e_.op("accel_sim::fp4_mm", {xq, xs, packed, scales}, {rows, out}, dt_, {{"block", m_.fp4_block()}});
  }
  return e_.op("accel_sim::fp4_weight_mm", {x2, packed, scales}, {rows, out}, dt_, {{"block", m_.fp4_block()}});
}

TensorId Builder::float8_cast(TensorId x) {
  const Shape shape = e_.shape(x);
  e_.op("max", {e_.op("abs", {x}, shape, e_.dtype(x))}, {}, DType::fp32);
  return e_.op("_to_copy", {x}, shape, DType::fp8_e4m3);
}

TensorId Builder::layer(int64_t l, TensorId x) {
  const std::string p = "model.layers." + std::to_string(l);
  const Shape shape = e_.shape(x);
  e_.module = p + ".input_layernorm";
  e_.module_type = "Norm";
  TensorId normed_in = norm(x, p + ".input_layernorm");
  TensorId h = reduce_output(attention(l, gather_sequence(normed_in)));
  if (eager_) e_.hold(normed_in);  // held in `hidden_states` until self_attn returns
  if (m_.sandwich_norms) {  // Gemma: the attention output normed before the residual add
    e_.module = p + ".post_attention_layernorm";
    e_.module_type = "Norm";
    h = norm(h, p + ".post_attention_layernorm");
  }
  e_.module = p;
  e_.module_type = "DecoderLayer";
  h = dropout(h, m_.hidden_dropout);
  const TensorId layer_input = x;
  const TensorId attention_output = h;
  x = e_.op("add", {x, h}, shape, dt_);
  const std::string ffn_norm = p + (m_.sandwich_norms ? ".pre_feedforward_layernorm" : ".post_attention_layernorm");
  e_.module = ffn_norm;
  e_.module_type = "Norm";
  TensorId normed = norm(x, ffn_norm);
  TensorId gathered = gather_sequence(normed);
  h = reduce_output(m_.moe.is_moe_layer(l) ? moe(l, gathered) : ffn(l, gathered));
  if (eager_) e_.hold(normed);  // HF's decoder layer holds it in `hidden_states` until mlp returns
  if (m_.sandwich_norms) {
    e_.module = p + ".post_feedforward_layernorm";
    e_.module_type = "Norm";
    h = norm(h, p + ".post_feedforward_layernorm");
  }
  e_.module = p;
  e_.module_type = "DecoderLayer";
  h = dropout(h, m_.hidden_dropout);
  TensorId out = e_.op("add", {x, h}, shape, dt_);
  if (eager_) {
    e_.hold(layer_input);  // the caller's `hidden_states` holds it until the layer returns
    if (m_.family == "gpt2") e_.hold(attention_output);  // GPT2Block's `attn_output` local
  }
  return out;
}

TensorId Builder::parallel_layer(int64_t l, TensorId x) {
  const std::string p = "model.layers." + std::to_string(l);
  const Shape shape = e_.shape(x);
  e_.module = p + ".input_layernorm";
  e_.module_type = "Norm";
  TensorId normed_attention = norm(x, p + ".input_layernorm");
  TensorId normed_ffn = normed_attention;
  if (m_.parallel_ffn_norm) {
    e_.module = p + ".mlp_layernorm";
    normed_ffn = norm(x, p + ".mlp_layernorm");
  }
  TensorId attention_in = gather_sequence(normed_attention);
  TensorId ffn_in = m_.parallel_ffn_norm ? gather_sequence(normed_ffn) : attention_in;
  TensorId a = attention(l, attention_in);
  TensorId f = m_.moe.is_moe_layer(l) ? moe(l, ffn_in) : ffn(l, ffn_in);
  e_.module = p;
  e_.module_type = "DecoderLayer";
  TensorId h = reduce_output(e_.op("add", {f, a}, e_.shape(a), dt_));
  h = dropout(h, m_.hidden_dropout);
  TensorId out = e_.op("add", {x, h}, shape, dt_);
  if (gptj_weights_ >= 0) {
    // HF's GPTJBlock keeps its attention weights in a local until it returns, and GPTJModel's
    // loop keeps them in `outputs` until the next block returns.
    e_.hold(gptj_weights_);
    if (previous_gptj_weights_ >= 0) e_.hold(previous_gptj_weights_);
    previous_gptj_weights_ = gptj_weights_;
  }
  return out;
}

TensorId Builder::post_norm_layer(int64_t l, TensorId x) {
  const std::string p = "model.layers." + std::to_string(l);
  const Shape shape = e_.shape(x);
  TensorId a = reduce_output(attention(l, gather_sequence(x)));
  e_.module = p + ".attention_norm";
  e_.module_type = "Norm";
  a = dropout(a, m_.hidden_dropout);
  TensorId y = norm(e_.op("add", {a, x}, shape, dt_), p + ".attention_norm");
  TensorId f = reduce_output(ffn(l, gather_sequence(y)));
  e_.module = p + ".output_norm";
  e_.module_type = "Norm";
  f = dropout(f, m_.hidden_dropout);
  return norm(e_.op("add", {f, y}, shape, dt_), p + ".output_norm");
}

}  // namespace builder_detail

using namespace builder_detail;

int64_t step_kv_cache_bytes(const ModelSpec& model, const BuildOptions& options) {
  // Encoders keep no cache, and neither does a training step.
  if (!model.causal || options.phase == Phase::train) return 0;
  // Context parallelism splits the cache's tokens across ranks.
  const int64_t cp = options.context_parallel;
  const int64_t all = options.phase == Phase::prefill ? options.seq
                                                      : checked_add(options.context, 1, "the context + 1 tokens");
  const int64_t tokens_here = ceil_div(all, cp);
  if (model.mla.enabled()) {    // the latent cache is not split across heads: every rank holds it
    return kv_cache_bytes(model, options.batch, tokens_here);
  }
  const int64_t tp = options.tensor_parallel;
  const int64_t kv_heads = model.num_kv_heads >= tp ? model.num_kv_heads / tp : 1;
  return checked_product([&] {
                           return "model '" + model.name + "': this rank's KV cache (2 x num_layers x batch x "
                                  "tokens x num_kv_heads x head_dim x bytes)";
                         },
                         2, model.num_layers, options.batch, tokens_here, kv_heads, model.head_dim,
                         size_bytes(model.kv_cache_dtype));
}

int64_t vocab_rows_per_rank(int64_t vocab_size, int64_t tensor_parallel) {
  if (vocab_size % tensor_parallel == 0) return vocab_size / tensor_parallel;
  const int64_t unit = checked_mul(128, tensor_parallel, "128 x the tensor-parallel degree");
  return ceil_div(vocab_size, unit) * 128;
}

void BuildOptions::validate(const ModelSpec& model) const {
  model.validate();
  const BuildOptions& options = *this;
  ACCELSIM_CHECK(options.batch >= 1, "batch must be at least 1");
  ACCELSIM_CHECK(options.tensor_parallel >= 1, "the tensor-parallel degree must be at least 1");
  ACCELSIM_CHECK(options.expert_parallel >= 1 && options.context_parallel >= 1,
                 "expert- and context-parallel degrees must be at least 1");
  ACCELSIM_CHECK(!options.sequence_parallel || options.tensor_parallel > 1,
                 "sequence parallelism needs a tensor-parallel degree above 1");
  if (options.summa) {
    ACCELSIM_CHECK(options.tensor_parallel > 1 && options.context_parallel > 1 && options.sequence_parallel,
                   "2D SUMMA tensor parallelism needs a tensor-parallel and a context-parallel degree above 1 "
                   "(its grid) and sequence parallelism");
    ACCELSIM_CHECK(options.phase != Phase::decode, "2D SUMMA tensor parallelism splits the sequence: not a decode step");
    ACCELSIM_CHECK(!model.moe.enabled() && !model.mla.enabled() && !model.parallel_block,
                   "2D SUMMA tensor parallelism is modelled for dense sequential blocks without MLA (model '" +
                       model.name + "')");
    ACCELSIM_CHECK(!options.fp8_gemms && !options.fp4_gemms && model.int4_group_size == 0 &&
                       model.fp4_weights == Fp4Format::none && options.lora_rank == 0 &&
                       options.kernels == KernelStyle::fused,
                   "2D SUMMA tensor parallelism is modelled for 16-bit GEMMs with fused kernels, without LoRA");
  }
  ACCELSIM_CHECK(options.expert_imbalance >= 1.0 && std::isfinite(options.expert_imbalance),
                 "the expert load-imbalance factor must be at least 1 (the busiest rank over the mean)");
  ACCELSIM_CHECK(options.expert_parallel == 1 || model.moe.enabled(),
                 "expert parallelism needs a mixture-of-experts model");
  ACCELSIM_CHECK(!options.fp8_gemms || (model.int4_group_size == 0 && model.fp4_weights == Fp4Format::none),
                 "fp8 GEMMs exclude int4 and fp4 weights (model '" + model.name + "')");
  ACCELSIM_CHECK(!options.fp4_gemms || model.fp4_weights != Fp4Format::none,
                 "fp4 GEMMs need fp4 weights (model '" + model.name + "' has none)");
  ACCELSIM_CHECK(!options.fp8_parameters || (options.fp8_gemms && options.phase == Phase::train),
                 "fp8 parameters are a training step's under fp8 GEMMs (inference under fp8 GEMMs "
                 "stores its weights in fp8 already)");
  ACCELSIM_CHECK(!options.gradients_in_weight_dtype ||
                     (options.phase == Phase::train && options.master_weights),
                 "gradients in the weight dtype apply to a training step with master weights");
  ACCELSIM_CHECK(!options.fused_gated_activation || options.kernels == KernelStyle::fused,
                 "a fused gated activation is modelled with fused kernels only (HF eager runs the "
                 "activation and the product as two ops)");
  ACCELSIM_CHECK(options.cross_entropy == CrossEntropy::upcast || options.phase == Phase::train,
                 "a cross-entropy implementation applies to a training step");
  ACCELSIM_CHECK(options.recompute_interval >= 1, "the recompute interval must be at least 1 (every layer)");
  ACCELSIM_CHECK(options.recompute_interval == 1 || options.recompute != Recompute::none,
                 "a recompute interval applies to a recompute policy (recompute is none)");
  ACCELSIM_CHECK(options.fp8_recipe == Fp8Recipe::transformer_engine ||
                     (options.fp8_gemms && options.phase == Phase::train),
                 "torchao's float8 recipe applies to a training step under fp8 GEMMs");
  ACCELSIM_CHECK(!options.fp8_gemms || options.kernels == KernelStyle::fused,
                 "fp8 GEMMs are modelled with fused kernels only (HF eager has no fp8 path)");
  ACCELSIM_CHECK(options.kernels != KernelStyle::hf_eager || model.family != "falcon",
                 "HF-eager Falcon is not modelled (transformers expands K and V to every query head "
                 "before caching them and runs SDPA with an explicit mask); use fused kernels");
  ACCELSIM_CHECK(options.kernels != KernelStyle::hf_eager || !model.attention_sinks,
                 "HF-eager attention with sinks (gpt-oss) is not modelled (transformers concatenates "
                 "the sink logits to the scores and runs its own eager softmax); use fused kernels");
  ACCELSIM_CHECK(!options.eager_attention || options.context_parallel == 1,
                 "eager (unfused) attention under context parallelism is not modelled");
  ACCELSIM_CHECK(options.optimizer_impl == OptimizerImpl::fused ||
                     options.optimizer == Optimizer::adamw || options.optimizer == Optimizer::adam ||
                     options.optimizer == Optimizer::sgd || options.optimizer == Optimizer::none,
                 "the foreach and for-loop optimizer implementations are torch.optim's Adam, AdamW "
                 "and SGD (Adafactor and 8-bit Adam run their own kernels)");
  ACCELSIM_CHECK(options.lora_rank >= 0, "the LoRA rank must be at least 0 (0: no adapters)");
  ACCELSIM_CHECK((options.lora_targets.empty() && !options.lora_shared_input) || options.lora_rank > 0,
                 "LoRA targets and shared adapters need a LoRA rank above 0");
  if (options.lora_rank > 0) {
    ACCELSIM_CHECK(options.phase == Phase::train, "LoRA adapters apply to a training step");
    ACCELSIM_CHECK(!model.moe.enabled(),
                   "LoRA on a mixture-of-experts model (adapters on routed experts) is not modelled");
    ACCELSIM_CHECK(options.lora_rank % options.tensor_parallel == 0,
                   "the LoRA rank (" + std::to_string(options.lora_rank) +
                       ") must be divisible by the tensor-parallel degree (its A is split over it)");
    for (const std::string& t : options.lora_targets) {
      if (std::find(kLoraTargets.begin(), kLoraTargets.end(), t) != kLoraTargets.end()) continue;
      std::string known;
      for (const std::string& k : kLoraTargets) known += (known.empty() ? "" : ", ") + k;
      throw ConfigError("unknown LoRA target '" + t + "' (one of " + known + ")");
    }
  }
  if (options.phase == Phase::train) {
    ACCELSIM_CHECK(is_floating(model.weight_dtype) && model.int4_group_size == 0 &&
                       model.fp4_weights == Fp4Format::none,
                   "training needs floating-point weights (model '" + model.name + "' has " +
                       (model.int4_group_size > 0   ? std::string("int4")
                        : model.fp4_weights != Fp4Format::none ? std::string(fp4_format_name(model.fp4_weights))
                                                     : std::string(dtype_name(model.weight_dtype))) +
                       " weights)");
  }
  if (options.context_parallel > 1 && options.phase != Phase::decode) {
    const int64_t tokens = model.vision() ? model.image_tokens() : options.seq;
    const int64_t parts = checked_mul(options.context_parallel, model.causal ? 2 : 1,
                                      "the context-parallel degree");
    ACCELSIM_CHECK(tokens % parts == 0,
                   "context parallelism of " + std::to_string(options.context_parallel) +
                       " needs a sequence divisible by " + std::to_string(parts) +
                       (model.causal ? " (two causal chunks per rank)" : ""));
  }
  if (options.sequence_parallel) {
    const int64_t tokens = options.phase != Phase::decode
                               ? (model.vision() ? model.image_tokens() : options.seq) /
                                     options.context_parallel
                               : 1;
    ACCELSIM_CHECK(tokens % options.tensor_parallel == 0,
                   "sequence parallelism needs the tokens per rank (" + std::to_string(tokens) +
                       ") divisible by the tensor-parallel degree");
  }
  ACCELSIM_CHECK(model.causal || options.phase != Phase::decode,
                 "model '" + model.name + "' is an encoder: it has no decode phase");
  if (options.phase != Phase::decode) {
    // A vision model's sequence is its image's tokens; `seq` is ignored.
    ACCELSIM_CHECK(model.vision() || options.seq >= 1,
                   "prefill needs a sequence length of at least 1");
  } else {
    ACCELSIM_CHECK(options.context >= 0, "decode needs a context length of at least 0");
  }

  // The step's largest tensors must fit in 64-bit byte counts (each is checked again as the
  // builder creates it; these name the quantity): the hidden states and the FFN's in fp32 (norms
  // and HF-eager upcasts), the logits in fp32 (the loss), the attention scores of eager
  // attention, the KV cache, and in training the parameters with their gradients, fp32 master
  // weights and two optimizer states. Each message is built only when its check fails.
  auto named = [&model](const char* quantity) {
    return [&model, quantity] { return "model '" + model.name + "': " + quantity; };
  };
  const int64_t seq = model.vision() ? model.image_tokens()
                      : options.phase == Phase::decode ? 1 : options.seq;
  const int64_t keys = options.phase == Phase::decode ? checked_add(options.context, 1, named("context + 1"))
                                                      : seq;
  if (model.learned_positions && !model.vision()) {
    // A learned position table has one row per position (GPT-2's wpe, BERT's position
    // embeddings): a sequence longer than its rows cannot run. RoPE models compute their
    // positions and may be run past the trained length, as HF's rotary embeddings allow.
    const int64_t positions = options.phase == Phase::decode ? keys : options.seq;
    ACCELSIM_CHECK(positions <= model.max_position_embeddings,
                   "model '" + model.name + "' has a learned table of " +
                       std::to_string(model.max_position_embeddings) +
                       " positions (max_position_embeddings); " +
                       (options.phase == Phase::decode
                            ? "context " + std::to_string(options.context) + " + 1"
                            : "seq " + std::to_string(options.seq)) +
                       " needs " + std::to_string(positions));
  }
  checked_product(named("batch x seq x hidden_size x 4 bytes"), options.batch, seq, model.hidden_size, 4);
  checked_product(named("batch x seq x ffn_size x 4 bytes"), options.batch, seq, model.ffn_size, 4);
  checked_product(named("batch x seq x vocab_size x 4 bytes"), options.batch, seq, model.vocab_size, 4);
  if (model.moe.enabled()) {
    checked_product(named("batch x seq x top_k x expert_ffn_size x 4 bytes"), options.batch, seq,
                    model.moe.top_k, model.moe.expert_ffn_size, 4);
  }
  if (options.eager_attention || options.kernels == KernelStyle::hf_eager) {
    checked_product(named("batch x num_heads x seq x context x 4 bytes (attention scores)"), options.batch,
                    model.num_heads, seq, keys, 4);
  }
  checked_product(named("max_position_embeddings x head_dim x 4 bytes"), model.max_position_embeddings,
                  model.head_dim, 4);
  step_kv_cache_bytes(model, options);
  if (options.phase == Phase::train) {
    checked_product(named("parameters x bytes of weights, gradients, master weights and optimizer states"),
                    parameter_count(model), size_bytes(model.weight_dtype) + 16);
  }
}

Graph build_graph(const ModelSpec& model, const BuildOptions& options) {
  options.validate(model);
  return Builder(model, options).build();
}

}  // namespace accelsim
