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

namespace accelsim {
namespace {

using Shape = std::vector<int64_t>;

// bitsandbytes' Adam8bit: blockwise quantization with blocks of 2,048 elements and an fp32 absmax
// each (Dettmers et al. 2022, arXiv 2110.02861, sec. 2; bitsandbytes/functional.py,
// quantize_blockwise), for parameters of at least min_8bit_size = 4,096 elements
// (bitsandbytes/optim/optimizer.py, Optimizer8bit).
constexpr int64_t kAdam8bitBlock = 2048;
constexpr int64_t kAdam8bitMinElements = 4096;

// Whether torchtitan's op-level selective checkpointing saves the output of forward node `n` of
// a layer (Recompute::selective_op), `matmuls` counting the layer's aten.mm nodes so far: its
// policy saves aten.mm but every second one, the SDPA kernels and the reduce-scatters of
// tensor parallelism (_save_list and _custom_policy of torchtitan's
// distributed/activation_checkpoint.py). torchao's float8 GEMM is an aten.mm too where the policy
// sees it: its Float8Linear calls torch.mm on float8 tensor subclasses, which dispatch to
// _scaled_mm below the policy (torchao/float8/float8_linear.py, matmul_with_hp_or_float8_args).
// Other GEMM forms (addmm, bmm) are not on its list and run again.
bool op_sac_saves(const Node& n, int64_t& matmuls) {
  if (n.op == "mm" || n.op == "_scaled_mm") return ++matmuls % 2 == 1;
  return n.op == "accel_sim::attention" || n.op == "accel_sim::reduce_scatter";
}

// Appends storages, tensors and nodes to a graph; `module` labels the nodes it emits.
class Emitter {
 public:
  explicit Emitter(Graph& graph) : g_(graph) {}

  std::string module;
  std::string module_type;
  Pass pass = Pass::forward;
  std::vector<TensorId> parameters;  // in creation order
  bool freeze_model = false;         // LoRA: the model's parameters take no gradient

  // Tensors the builder creates are contiguous unless given strides (empty strides mean
  // contiguous in TensorMeta), which saves building a stride vector per tensor.
  TensorId resident(Shape shape, DType dtype, StorageKind kind, std::string name, bool frozen = false) {
    TensorMeta t{.shape = std::move(shape), .dtype = dtype, .name = std::move(name)};
    t.storage = g_.add_storage({.size_bytes = t.logical_bytes(), .kind = kind, .frozen = frozen});
    return g_.add_tensor(std::move(t));
  }

  // A parameter; frozen (Storage::frozen) under freeze_model unless it is an adapter's.
  TensorId parameter(Shape shape, DType dtype, const std::string& name, bool adapter = false) {
    parameters.push_back(resident(std::move(shape), dtype, StorageKind::parameter, name, freeze_model && !adapter));
    return parameters.back();
  }

  TensorId fresh(Shape shape, DType dtype) {
    return resident(std::move(shape), dtype, StorageKind::activation, "");
  }

  // A tensor on `base`'s storage with another shape (view, transpose, slice, unsqueeze).
  TensorId alias(TensorId base, Shape shape, Shape strides = {}) {
    const TensorMeta& b = g_.tensor(base);
    TensorMeta t{.shape = std::move(shape),
                 .strides = std::move(strides),
                 .dtype = b.dtype,
                 .storage = b.storage};
    return g_.add_tensor(std::move(t));
  }

  // A view of `base` (view, transpose, slice, unsqueeze, select): a tensor on its storage. Views
  // launch no kernel and cost nothing, so no node is emitted for them; consumers of the view
  // touch the base's storage, which is all liveness needs.
  TensorId view(TensorId base, Shape shape, Shape strides = {}) {
    return alias(base, std::move(shape), std::move(strides));
  }

  // The transpose of a 2-D weight [n, k] as the [k, n] view that mm consumes (`t`).
  TensorId transposed(TensorId weight) {
    const int64_t n = g_.tensor(weight).shape[0];
    const int64_t k = g_.tensor(weight).shape[1];
    return view(weight, {k, n}, {1, k});
  }

  // An op with one new output.
  TensorId op(const char* name, std::vector<TensorId> inputs, Shape shape, DType dtype,
              std::vector<Attr> attrs = {}) {
    TensorId out = fresh(std::move(shape), dtype);
    node(name, std::move(inputs), {out}, std::move(attrs));
    return out;
  }

  void node(const char* name, std::vector<TensorId> inputs, std::vector<TensorId> outputs,
            std::vector<Attr> attrs = {}) {
    g_.add_node(Node{.op = name,
                     .overload = "default",
                     .inputs = std::move(inputs),
                     .outputs = std::move(outputs),
                     .attrs = std::move(attrs),
                     .module_path = module,
                     .module_type = module_type,
                     .pass = pass});
  }

  // Keeps `t`'s storage live until the node emitted last, as a Python local holding it would.
  void hold(TensorId t) {
    g_.hold_storage_until(g_.tensor(t).storage, static_cast<NodeId>(g_.nodes().size()) - 1);
  }

  const Shape& shape(TensorId t) const { return g_.tensor(t).shape; }
  DType dtype(TensorId t) const { return g_.tensor(t).dtype; }
  Graph& graph() { return g_; }

 private:
  Graph& g_;
};

int64_t divided(int64_t value, int64_t parts, const std::string& what) {
  ACCELSIM_CHECK(value % parts == 0, what + " (" + std::to_string(value) +
                                         ") is not divisible by the tensor-parallel degree " +
                                         std::to_string(parts));
  return value / parts;
}

// Per-rank sizes under tensor parallelism (Megatron-LM: heads, FFN columns/rows and the
// vocabulary are split; KV heads fewer than the degree are replicated, one per rank).
struct RankShape {
  int64_t heads, kv_heads, ffn, vocab;
};

class Builder {
 public:
  Builder(const ModelSpec& m, const BuildOptions& o) : m_(m), o_(o), e_(graph_) {
    const int64_t tp = o.tensor_parallel;
    r_.heads = divided(m.num_heads, tp, "num_heads");
    r_.kv_heads = m.num_kv_heads >= tp ? divided(m.num_kv_heads, tp, "num_kv_heads") : 1;
    r_.ffn = divided(m.ffn_size, tp, "ffn_size");
    // A vocabulary the TP degree does not divide is padded as Megatron-LM pads it, to a multiple
    // of 128 x TP (make_vocab_size_divisible_by = 128); the padded rows are never looked up.
    // Each rank holds 128 rows of each of ceil(vocab / (128 x TP)) units.
    const int64_t unit = checked_mul(128, tp, "128 x the tensor-parallel degree");
    r_.vocab = m.vocab_size % tp == 0 ? m.vocab_size / tp : ceil_div(m.vocab_size, unit) * 128;
    b_ = o.batch;
    cp_ = o.context_parallel;
    sp_ = o.sequence_parallel;
    // Context parallelism splits each sequence (and, in decode, the cache) across cp ranks.
    // A training step runs the forward of a prefill (every position, no cache).
    train_ = o.phase == Phase::train;
    e_.freeze_model = train_ && o.lora_rank > 0;
    s_ = m.vision() ? m.image_tokens() / cp_ : o.phase != Phase::decode ? o.seq / cp_ : 1;
    // Decode: this rank's share of the context + 1 tokens, rounded up, less the new one.
    if (o.phase == Phase::decode) {
      const int64_t keys = o.context + 1;  // validated to fit
      past_ = ceil_div(keys, cp_) - 1;
    }
    eager_ = o.kernels == KernelStyle::hf_eager;
    dt_ = m.activation_dtype;
  }

  Graph build() {
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

 private:
  // ViT: a stride-P convolution cuts [b, C, H, W] into (H/P)(W/P) patch vectors, a CLS token is
  // prepended: [b, tokens, hidden].
  TensorId patch_embeddings() {
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

  // ViT: x + a learned [1, tokens, hidden] position table.
  TensorId add_position_table(TensorId x) {
    e_.module = "model.embeddings";
    e_.module_type = "Embeddings";
    TensorId table = e_.parameter({1, s_, m_.hidden_size}, m_.weight_dtype,
                                  "model.embeddings.position_embeddings");
    return e_.op("add", {x, table}, {b_, s_, m_.hidden_size}, dt_);
  }

  // HF ViTModel's pooler: tanh(dense(first token)).
  void pool(TensorId x) {
    e_.module = "model.pooler";
    e_.module_type = "Pooler";
    const int64_t h = m_.hidden_size;
    TensorId first = e_.view(x, {b_, h}, {s_ * h, 1});
    TensorId pooled = e_.op("tanh", {linear(first, h, "model.pooler.dense", true)}, {b_, h}, dt_);
    outputs_.push_back(pooled);
  }

  // Dropout in a training step (torch's native_dropout): the output and a 1-byte mask that the
  // backward multiplies the gradient by. Inference, or p = 0, leaves `x` as is.
  TensorId dropout(TensorId x, double p) {
    if (!train_ || p <= 0.0) return x;
    TensorId out = e_.fresh(e_.shape(x), e_.dtype(x));
    TensorId mask = e_.fresh(e_.shape(x), DType::boolean);
    e_.node("native_dropout", {x}, {out, mask}, {{"p", p}, {"train", true}});
    return out;
  }

  TensorId collective(const char* op, TensorId x, Shape shape, const char* group) {
    return e_.op(op, {x}, std::move(shape), e_.dtype(x), {{"group", std::string(group)}});
  }

  // Sequence parallelism keeps the residual stream split over the TP ranks' tokens; the
  // column-parallel projections need every token: all-gather before them (Korthikanti et al.
  // 2022, "Reducing Activation Recomputation in Large Transformer Models").
  TensorId gather_sequence(TensorId x) {
    if (!sp_) {
      if (train_ && o_.tensor_parallel > 1) column_inputs_.push_back(x);
      return x;
    }
    Shape full = e_.shape(x);
    full[1] *= o_.tensor_parallel;
    return collective("accel_sim::all_gather", x, full, "tp");
  }

  // A row-parallel projection leaves partial sums on each TP rank: all-reduce them, or
  // reduce-scatter them onto the sequence split under sequence parallelism.
  // LoRA adapters beside the row-parallel projections (pending_adapters_) are added after the
  // reduction, each on this rank's share of the tokens under sequence parallelism (Megatron's
  // scatter_to_sequence_parallel_region: a slice).
  TensorId reduce_output(TensorId y) {
    if (o_.tensor_parallel == 1) return y;
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

  // x + token_type_embeddings[token types] (BERT: all zeros for one segment, read from a buffer).
  TensorId add_token_types(TensorId x) {
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

  // x + table[ids]: one embedding lookup added to the input embeddings (token types, positions).
  // `looked_up`, when given, receives the looked-up rows.
  TensorId add_lookup(TensorId x, TensorId table, TensorId ids, TensorId* looked_up = nullptr) {
    const Shape shape = e_.shape(x);
    TensorId rows = e_.op("embedding", {table, ids},
                          {e_.shape(ids)[0], e_.shape(ids)[1], shape[2]}, dt_);
    if (looked_up != nullptr) *looked_up = rows;
    e_.module = "model.embeddings";
    e_.module_type = "";
    return e_.op("add", {x, rows}, shape, dt_);
  }

  // BERT keeps position ids in a [1, max_positions] buffer and slices it.
  TensorId position_buffer() {
    if (position_ids_ < 0) {
      position_ids_ = e_.resident({1, m_.max_position_embeddings}, DType::int64,
                                  StorageKind::buffer, "model.embeddings.position_ids");
    }
    return position_ids_;
  }

  // x + wpe[positions] (GPT-2): HF builds the positions with arange; an engine gets them as input.
  TensorId add_positions(TensorId x) {
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

  // cos/sin for the positions of this step, computed once and shared by all layers.
  void rotary_tables() {
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

  TensorId norm(TensorId x, const std::string& prefix) {
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
    // HF LlamaRMSNorm: x.float(); pow(2).mean(-1); + eps; rsqrt; x * rstd; .to(dtype); w * x.
    TensorId x32 = e_.op("_to_copy", {x}, shape, DType::fp32);
    TensorId sq = e_.op("pow", {x32}, shape, DType::fp32);
    TensorId mean = e_.op("mean", {sq}, stat, DType::fp32, {{"dim", std::vector<int64_t>{-1}}});
    TensorId rstd = e_.op("rsqrt", {e_.op("add", {mean}, stat, DType::fp32)}, stat, DType::fp32);
    TensorId y32 = e_.op("mul", {x32, rstd}, shape, DType::fp32);
    TensorId y = e_.op("_to_copy", {y32}, shape, dt_);
    return e_.op("mul", {w, y}, shape, dt_);
  }

  // Whether a block's linear layer holds int4 weights (ModelSpec::int4_group_size): those of
  // the transformer layers, except the MoE router and gates, which quantizers leave alone.
  bool int4(const std::string& prefix, bool quantizable = true) const {
    return m_.int4_group_size > 0 && quantizable && prefix.rfind("model.layers.", 0) == 0;
  }

  // Packed int4 weights [.., out, in / 2] (two per byte) and their scales and zero points
  // [.., in / group, out, 2] in the activation dtype.
  std::pair<TensorId, TensorId> int4_weight(Shape lead, int64_t out, int64_t in,
                                            const std::string& prefix) {
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

  // x [.., in] times a [out, in] weight (nn.Linear), with an optional bias, and a LoRA adapter
  // when BuildOptions::lora_rank targets it.
  TensorId linear(TensorId x, int64_t out, const std::string& prefix, bool bias,
                  bool quantizable = true) {
    TensorId y = base_linear(x, out, prefix, bias, quantizable);
    return lora_targeted(prefix) ? lora_adapter(x, y, prefix) : y;
  }

  // Whether the linear at `prefix` takes a LoRA adapter (BuildOptions::lora_targets).
  bool lora_targeted(const std::string& prefix) {
    if (!train_ || o_.lora_rank == 0 || prefix.rfind("model.layers.", 0) != 0) return false;
    const std::string leaf = prefix.substr(prefix.rfind('.') + 1);
    const std::vector<std::string>& targets = o_.lora_targets.empty() ? kLoraTargets : o_.lora_targets;
    if (std::find(targets.begin(), targets.end(), leaf) == targets.end()) return false;
    lora_matched_.insert(leaf);
    return true;
  }

  // y + (alpha / rank) B (A x) for the base linear's input x and output y (BuildOptions::lora_rank
  // gives the layout). Beside a row-parallel base under TP the adapter's output waits in
  // pending_adapters_ until reduce_output() has reduced the base's partial sums.
  TensorId lora_adapter(TensorId x, TensorId y, const std::string& prefix) {
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

  TensorId lora_parameter(Shape shape, const std::string& name) {
    return e_.parameter(std::move(shape), m_.weight_dtype, name, /*adapter=*/true);
  }

  TensorId base_linear(TensorId x, int64_t out, const std::string& prefix, bool bias,
                       bool quantizable) {
    const Shape shape = e_.shape(x);
    const int64_t in = shape.back();
    const int64_t rows = e_.graph().tensor(x).numel() / in;
    Shape out_shape = shape;
    out_shape.back() = out;
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

  // torchao's dynamic tensorwise cast to e4m3: the amax (torch.max(torch.abs(x)), a scalar the
  // scale comes from, taken before the cast and off the gradient's path), then the cast.
  TensorId float8_cast(TensorId x) {
    const Shape shape = e_.shape(x);
    e_.op("max", {e_.op("abs", {x}, shape, e_.dtype(x))}, {}, DType::fp32);
    return e_.op("_to_copy", {x}, shape, DType::fp8_e4m3);
  }

  // The dims of each head RoPE rotates (ModelSpec::rotary_dim; all of them by default).
  int64_t rotary_width() const { return m_.rotary_dim > 0 ? m_.rotary_dim : m_.head_dim; }

  // RoPE on q or k [b, heads, s, d]. With partial rotary (GPT-J) a fused kernel still reads and
  // writes the whole head and rotates its first rotary_dim dims; HF slices those dims off,
  // rotates them and concatenates the rest back (modeling_gptj.py), here with the rotation
  // written as for Llama (its own op sequence differs in a few views and a stack).
  TensorId rope(TensorId x) {
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

  // HF's rotate-half RoPE, op by op: x cos + rotate_half(x) sin.
  TensorId rotate(TensorId x) {
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

  // Appends this step's keys or values [b, kv_heads, s, d] to the layer's cache and returns
  // the tensor attention reads: [b, kv_heads, past + s, d].
  TensorId cache(TensorId x, const std::string& name) {
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
    // A preallocated cache written in place at this step's positions.
    TensorId c = e_.resident(full, m_.kv_cache_dtype, StorageKind::buffer, name);
    TensorId index = e_.resident({s_}, DType::int64, StorageKind::input, name + ".positions");
    TensorId written = e_.alias(c, full);
    e_.node("index_copy_", {c, index, x}, {written}, {{"dim", int64_t{2}}});
    return written;
  }

  // Interleaved RoPE as DeepSeek's HF code writes it: on [.., rope] split in halves x1, x2:
  // cat(x1 cos - x2 sin, x2 cos + x1 sin). One kernel when fused.
  TensorId rope_interleaved(TensorId x) {
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

  // Multi-head latent attention (DeepSeek-V2/V3). The cache holds the normalized latent
  // [b, 1, t, kv_lora] and the RoPE key [b, 1, t, rope]. HF (and an engine's prefill) expands
  // the cached latent to per-head K and V with kv_b_proj; an engine's decode absorbs kv_b_proj
  // into the query and the output and attends in latent space (FlashMLA).
  TensorId mla_attention(int64_t l, TensorId x) {
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

  // Attention of this rank's queries. Under context parallelism, prefill all-gathers K and V of
  // the whole sequence and, for causal models, gives each rank two query chunks (positions r and
  // 2cp-1-r of 2cp, "zigzag", which balances the causal work; the representative rank is r = 0);
  // decode attends over this rank's share of the cache and merges the partial outputs.
  // `gathered`: the keys and values already span the whole sequence (MLA gathers its latent).
  // Its nodes (the context-parallel gathers, the attention kernels or the unfused core) carry
  // the module path "<attention>.core": selective recomputation's region, the core attention
  // Megatron-LM checkpoints with --recompute-granularity selective.
  TensorId attend(TensorId q, TensorId keys, TensorId values, std::vector<Attr> attrs,
                  bool gathered = false) {
    const std::string module = e_.module;
    e_.module = module + ".core";
    TensorId o = attend_core(q, keys, values, std::move(attrs), gathered);
    e_.module = module;
    return o;
  }

  TensorId attend_core(TensorId q, TensorId keys, TensorId values, std::vector<Attr> attrs,
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

  // One attention kernel writing `out`. In a training step it also writes the fp32 logsumexp of
  // each query row [.., heads, sq], which FlashAttention saves for its backward (Dao 2023).
  void attention_node(std::vector<TensorId> qkv, TensorId out, std::vector<Attr> attrs) {
    std::vector<TensorId> outs = {out};
    if (train_) {
      Shape rows = e_.shape(out);
      rows.pop_back();
      outs.push_back(e_.fresh(std::move(rows), DType::fp32));
    }
    e_.node("accel_sim::attention", std::move(qkv), std::move(outs), std::move(attrs));
  }

  TensorId attention_op(std::vector<TensorId> qkv, Shape out, std::vector<Attr> attrs) {
    if (o_.eager_attention) return eager_core(qkv, out, attrs);
    if (eager_ && m_.family == "gptj") return gptj_core(qkv, out, attrs);
    if (sinks_ >= 0) qkv.push_back(sinks_);
    TensorId o = e_.fresh(std::move(out), dt_);
    attention_node(std::move(qkv), o, std::move(attrs));
    return o;
  }

  // The unfused attention core Korthikanti et al. analyse (Megatron-LM without FlashAttention):
  // scores = Q K^T as a batched GEMM, one fused scale-mask-softmax kernel, dropout on the
  // probabilities (training), P V, and the copy back to [b, s, heads, dv] for the output
  // projection. The scores, probabilities and dropout output are [b * heads, sq, sk] tensors;
  // the backward keeps the probabilities, the dropout mask and output, Q, K and V. Masks and
  // sliding windows are applied inside the softmax (the full sq x sk product is computed); GQA
  // reads shared K/V heads without copying them. Its nodes are attend()'s, with the module path
  // "<attention>.core" (selective recomputation's region).
  // The attrs of an eager core's GEMM `gemm` ("qk" or "pv"): the query-key pairs its mask allows,
  // as the fused op's `attention` attrs give them (is_causal, window_size, query_offset), so that
  // model FLOPs count the same pairs whichever way attention runs (op_catalog.h).
  static std::vector<Attr> masked_gemm_attrs(const std::vector<Attr>& attention, const char* gemm) {
    std::vector<Attr> attrs = {{"attention_gemm", std::string(gemm)}};
    for (const Attr& a : attention) {
      if (a.name == "is_causal" || a.name == "window_size" || a.name == "query_offset") {
        attrs.push_back({"mask_" + a.name, a.value});
      }
    }
    return attrs;
  }

  TensorId eager_core(const std::vector<TensorId>& qkv, const Shape& out,
                      const std::vector<Attr>& attention) {
    const Shape& q = e_.shape(qkv[0]);
    const int64_t b = q[0], h = q[1], sq = q[2], d = q[3];
    const int64_t sk = e_.shape(qkv[1])[2], dv = out[3];
    TensorId scores = e_.op("bmm", {e_.view(qkv[0], {b * h, sq, d}),
                                    e_.view(qkv[1], {b * h, d, sk}, {sk * d, 1, d})},
                            {b * h, sq, sk}, dt_, masked_gemm_attrs(attention, "qk"));
    TensorId probs = e_.op("_softmax", {scores}, {b * h, sq, sk}, dt_,
                           {{"dim", int64_t{-1}}, {"half_to_float", false}});
    probs = dropout(probs, m_.attention_dropout);
    TensorId ctx = e_.op("bmm", {probs, e_.view(qkv[2], {b * h, sk, dv})}, {b * h, sq, dv}, dt_,
                         masked_gemm_attrs(attention, "pv"));
    TensorId o = e_.op("clone", {e_.view(ctx, {b, sq, h, dv}, {h * sq * dv, dv, sq * dv, 1})},
                       {b, sq, h, dv}, dt_);
    return e_.view(o, {b, h, sq, dv}, {sq * h * dv, dv, h * dv, 1});
  }

  // HF's GPTJAttention._attn (transformers has no SDPA path for GPT-J): q and k upcast to fp32,
  // scores divided by sqrt(head_dim), the additive causal mask [b, 1, sq, sk] (built by the
  // model's forward; an input here) added, softmax in fp32, cast back, P V, heads merged by a
  // contiguous copy.
  TensorId gptj_core(const std::vector<TensorId>& qkv, const Shape& out,
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

  // Appends this step's [b, 1, s, width] latent (or RoPE key) to an MLA cache.
  TensorId mla_cache(TensorId x, int64_t width, const std::string& name) {
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
    TensorId c = e_.resident(full, m_.kv_cache_dtype, StorageKind::buffer, name);
    TensorId index = e_.resident({s_}, DType::int64, StorageKind::input, name + ".positions");
    TensorId written = e_.alias(c, full);
    e_.node("index_copy_", {c, index, x}, {written}, {{"dim", int64_t{2}}});
    return written;
  }

  TensorId attention(int64_t l, TensorId x) {
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
    q = rope(heads_first(q, r_.heads, p + ".q_norm"));
    k = rope(heads_first(k, r_.kv_heads, p + ".k_norm"));
    v = heads_first(v, r_.kv_heads, "");
    // Decoders cache K and V for later steps; an encoder attends over this step's K and V only.
    const bool cached = m_.causal && !train_;
    TensorId keys = cached ? cache(k, p + ".key_cache") : k;
    TensorId values = cached ? cache(v, p + ".value_cache") : v;
    std::vector<Attr> attrs = {{"is_causal", s_ > 1 && m_.causal},
                               {"enable_gqa", r_.heads != r_.kv_heads}};
    if (m_.windowed_layer(l)) attrs.push_back({"window_size", m_.sliding_window});
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

  // activation(gate) * up (BuildOptions::fused_gated_activation: one kernel that keeps gate and
  // up only). MoE experts are SwiGLU whatever the dense FFN's activation.
  TensorId gated(TensorId gate, TensorId up, Activation kind) {
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
  TensorId gated(TensorId gate, TensorId up) { return gated(gate, up, m_.activation); }

  TensorId activation(TensorId x) { return activation(x, m_.activation); }

  TensorId activation(TensorId x, Activation kind) {
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

  TensorId ffn(int64_t l, TensorId x) {
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

  // DeepSeek-V3 router (HF DeepseekV3TopkRouter, noaux_tc): fp32 logits, sigmoid scores plus a
  // correction bias, the best top_k_groups of num_groups expert groups by the sum of their two
  // best scores, top-k among those, weights = the chosen scores renormalized and scaled.
  // Returns (scores, weights [t, k] fp32, ids [t, k]).
  std::tuple<TensorId, TensorId, TensorId> sigmoid_router(TensorId x2, const std::string& name) {
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

  // Routed experts as grouped GEMMs, or one GEMM per touched expert: x [rows, k] against
  // per-expert weights w [E, n, k] (nn.Linear layout) -> [rows, n]. With int4 weights, w is
  // packed [E, n, k / 2] and `scales` [E, k / group, n, 2].
  TensorId experts_gemm(TensorId x, TensorId w, TensorId offsets, double touched,
                        TensorId scales = -1) {
    const int64_t rows = e_.shape(x)[0];
    const int64_t k = e_.shape(x)[1];
    const int64_t experts = e_.shape(w)[0];
    const int64_t n = e_.shape(w)[1];
    const int64_t kw = e_.shape(w)[2];  // k, or k / 2 packed
    if (o_.moe_impl == MoeImpl::grouped) {
      TensorId wt = e_.view(w, {experts, kw, n}, {n * kw, 1, kw});
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
      if (scales >= 0) {
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

  TensorId moe(int64_t l, TensorId x) {
    const std::string p = "model.layers." + std::to_string(l) + ".mlp";
    const MoeSpec& moe = m_.moe;
    const int64_t h = m_.hidden_size;
    const int64_t t = b_ * s_;
    const int64_t k = moe.top_k;
    const int64_t experts = moe.num_experts;
    const int64_t ep = o_.expert_parallel;
    const int64_t local = divided(experts, ep, "num_experts") ;  // this rank's experts
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

  TensorId layer(int64_t l, TensorId x) {
    const std::string p = "model.layers." + std::to_string(l);
    const Shape shape = e_.shape(x);
    e_.module = p + ".input_layernorm";
    e_.module_type = "Norm";
    TensorId normed_in = norm(x, p + ".input_layernorm");
    TensorId h = reduce_output(attention(l, gather_sequence(normed_in)));
    if (eager_) e_.hold(normed_in);  // held in `hidden_states` until self_attn returns
    e_.module = p;
    e_.module_type = "DecoderLayer";
    h = dropout(h, m_.hidden_dropout);
    const TensorId layer_input = x;
    const TensorId attention_output = h;
    x = e_.op("add", {x, h}, shape, dt_);
    e_.module = p + ".post_attention_layernorm";
    e_.module_type = "Norm";
    TensorId normed = norm(x, p + ".post_attention_layernorm");
    TensorId gathered = gather_sequence(normed);
    h = reduce_output(m_.moe.is_moe_layer(l) ? moe(l, gathered) : ffn(l, gathered));
    if (eager_) e_.hold(normed);  // HF's decoder layer holds it in `hidden_states` until mlp returns
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

  // Parallel residual block (GPT-J, Falcon): x + attention(norm(x)) + ffn(norm'(x)), both norms
  // taken first as Falcon's decoder layer does. Under tensor parallelism both branches end in
  // row-parallel projections whose partial sums are added before one all-reduce (GPT-NeoX's
  // gpt_j_residual, Black et al. 2022, reduces the sum once). One dropout follows the sum
  // (Falcon's dropout_add; GPT-J drops each branch, p = 0 in its config).
  TensorId parallel_layer(int64_t l, TensorId x) {
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

  // Post-norm (BERT): x = norm(x + attention(x)); x = norm(x + ffn(x)).
  TensorId post_norm_layer(int64_t l, TensorId x) {
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

  void lm_head(TensorId x, TensorId embed) {
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
    outputs_.insert(outputs_.begin(), logits);
  }

  // ---- training step ------------------------------------------------------------------------

  // The loss, its backward, and the optimizer step. Language models (any model with an LM head)
  // take the cross-entropy of every position's logits against the next token, in fp32 as
  // HF and Megatron-LM compute it; a model without a head (ViT as a regression backbone, as in
  // the NERSC ERA5 study) takes the mean squared error of its last hidden state.
  void train_step() {
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

  struct StateTensor {
    Shape shape;
    DType dtype;
    const char* name;
  };

  // The optimizer states of one parameter of `shape` (Optimizer explains each optimizer's), in
  // the order the step kernel takes them; `states` is torch.optim's count (adam, adamw, sgd).
  std::vector<StateTensor> optimizer_states(const Shape& shape, DType state_dtype, int states) const {
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

  // The optimizer step over the parameters that received a gradient. With master weights (mixed
  // precision, Megatron-LM's default for bf16) the optimizer updates fp32 copies and writes them
  // back into the 16-bit parameters (one _foreach_copy_ per group); states are fp32. Without, the
  // states have the parameters' dtype. The update runs as o_.optimizer_impl says (OptimizerImpl):
  // one fused kernel per transformer layer (and one for the other parameters), as torch.optim's
  // fused AdamW/Adam/SGD run over a parameter list; foreach ops over the whole parameter list;
  // or op by op for each parameter.
  void optimizer_step(const std::vector<TensorId>& grads) {
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

  // One parameter's update in the optimizer's dtype: `target` (the parameter, or its fp32 master
  // copy), its gradient and its states in optimizer_states' order.
  struct ParamUpdate {
    TensorId target = -1, grad = -1;
    std::vector<TensorId> states;
  };

  // Writes the updated fp32 masters back into the 16-bit parameters.
  void copy_masters(const std::vector<TensorId>& params, const std::vector<TensorId>& masters_list) {
    std::vector<TensorId> copy_in = params;
    copy_in.insert(copy_in.end(), masters_list.begin(), masters_list.end());
    std::vector<TensorId> written;
    for (TensorId p : params) written.push_back(e_.alias(p, e_.shape(p)));
    e_.node("_foreach_copy_", std::move(copy_in), std::move(written));
  }

  // torch.optim's update of one parameter op by op (torch/optim/adamw.py _single_tensor_adamw,
  // sgd.py _single_tensor_sgd; the scalars are host values):
  //   AdamW  p.mul_(1 - lr wd); m.lerp_(g, 1 - b1); v.mul_(b2).addcmul_(g, g, 1 - b2);
  //          d = (v.sqrt() / sqrt(bias_correction2)).add_(eps); p.addcdiv_(m, d, -step_size)
  //          (Adam: the same without the decay, its default weight_decay 0);
  //   SGD    buf.mul_(momentum).add_(g); p.add_(buf, alpha=-lr).
  // d is a temporary of the parameter's size, freed after the update.
  void for_loop_update(const ParamUpdate& u) {
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

  // The same update as _foreach_* ops over every parameter at once (_multi_tensor_adamw,
  // _multi_tensor_sgd): each op one pass over its lists; the denominators are a new list of the
  // parameters' size (torch._foreach_sqrt), live until the last op. torch runs one such sequence
  // per parameter group; the builder's parameters form one group.
  void foreach_update(const std::vector<ParamUpdate>& us) {
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

  const ModelSpec& m_;
  const BuildOptions& o_;
  Graph graph_;
  Emitter e_;
  RankShape r_{};
  int64_t b_ = 0, s_ = 0, past_ = 0, cp_ = 1;
  bool sp_ = false;
  bool eager_ = false;
  DType dt_ = DType::bf16;
  TensorId cos_ = -1, sin_ = -1, positions_ = -1, position_embeddings_ = -1, position_ids_ = -1;
  TensorId causal_mask_ = -1;  // HF GPT-J's additive mask, shared by the layers
  TensorId gptj_weights_ = -1, previous_gptj_weights_ = -1;  // HF GPT-J's attention weights
  std::vector<TensorId> outputs_;
  std::vector<TensorId> column_inputs_;  // training under TP: inputs of column-parallel layers
  std::set<std::string> lora_matched_;      // the LoRA targets some linear matched
  std::vector<TensorId> pending_adapters_;  // adapter outputs waiting for reduce_output()
  // LoRA under lora_shared_input: A's output per input (storage, offset, rows, width).
  std::map<std::tuple<StorageId, int64_t, int64_t, int64_t>, TensorId> lora_inputs_;
  bool train_ = false;
  std::vector<TensorId> experts_locals_;  // HF-eager MoE locals held until the block returns
  TensorId sinks_ = -1;  // the layer's attention-sink logits while its attention is built, else -1
  // fp8 GEMMs: each input's cast, by the input's storage, offset and [rows, in].
  std::map<std::tuple<StorageId, int64_t, int64_t, int64_t>, TensorId> fp8_inputs_;
};

}  // namespace

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

void BuildOptions::validate(const ModelSpec& model) const {
  model.validate();
  const BuildOptions& options = *this;
  ACCELSIM_CHECK(options.batch >= 1, "batch must be at least 1");
  ACCELSIM_CHECK(options.tensor_parallel >= 1, "the tensor-parallel degree must be at least 1");
  ACCELSIM_CHECK(options.expert_parallel >= 1 && options.context_parallel >= 1,
                 "expert- and context-parallel degrees must be at least 1");
  ACCELSIM_CHECK(!options.sequence_parallel || options.tensor_parallel > 1,
                 "sequence parallelism needs a tensor-parallel degree above 1");
  ACCELSIM_CHECK(options.expert_imbalance >= 1.0 && std::isfinite(options.expert_imbalance),
                 "the expert load-imbalance factor must be at least 1 (the busiest rank over the mean)");
  ACCELSIM_CHECK(options.expert_parallel == 1 || model.moe.enabled(),
                 "expert parallelism needs a mixture-of-experts model");
  ACCELSIM_CHECK(!options.fp8_gemms || model.int4_group_size == 0,
                 "fp8 GEMMs and int4 weights exclude each other (model '" + model.name + "')");
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
    ACCELSIM_CHECK(is_floating(model.weight_dtype) && model.int4_group_size == 0,
                   "training needs floating-point weights (model '" + model.name + "' has " +
                       (model.int4_group_size > 0 ? std::string("int4")
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
