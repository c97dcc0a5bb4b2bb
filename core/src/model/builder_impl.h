// Internal to the model builder (builder.cc and the files of its seams: builder_embeddings.cc,
// builder_attention.cc, builder_mlp.cc, builder_training.cc), not a public header: the graph
// emitter, the per-rank shapes and the Builder, whose members those files define.
#pragma once

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "accelsim/builder.h"
#include "accelsim/checked_arithmetic.h"
#include "accelsim/error.h"
#include "backward.h"

namespace accelsim::builder_detail {

using Shape = std::vector<int64_t>;

// bitsandbytes' Adam8bit: blockwise quantization with blocks of 2,048 elements and an fp32 absmax
// each (Dettmers et al. 2022, arXiv 2110.02861, sec. 2; bitsandbytes/functional.py,
// quantize_blockwise), for parameters of at least min_8bit_size = 4,096 elements
// (bitsandbytes/optim/optimizer.py, Optimizer8bit).
inline constexpr int64_t kAdam8bitBlock = 2048;
inline constexpr int64_t kAdam8bitMinElements = 4096;

// Whether torchtitan's op-level selective checkpointing saves the output of forward node `n` of
// a layer (Recompute::selective_op), `matmuls` counting the layer's aten.mm nodes so far: its
// policy saves aten.mm but every second one, the SDPA kernels and the reduce-scatters of
// tensor parallelism (_save_list and _custom_policy of torchtitan's
// distributed/activation_checkpoint.py). torchao's float8 GEMM is an aten.mm too where the policy
// sees it: its Float8Linear calls torch.mm on float8 tensor subclasses, which dispatch to
// _scaled_mm below the policy (torchao/float8/float8_linear.py, matmul_with_hp_or_float8_args).
// Other GEMM forms (addmm, bmm) are not on its list and run again.
inline bool op_sac_saves(const Node& n, int64_t& matmuls) {
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

// `value` split into `parts` equal shares over the `degree` ("tensor-parallel", "expert-parallel").
inline int64_t divided(int64_t value, int64_t parts, const std::string& what,
                       const std::string& degree = "tensor-parallel") {
  ACCELSIM_CHECK(value % parts == 0, what + " (" + std::to_string(value) + ") is not divisible by the " + degree +
                                         " degree " + std::to_string(parts));
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
    r_.vocab = vocab_rows_per_rank(m.vocab_size, tp);
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

  Graph build();

 private:
  // ViT: a stride-P convolution cuts [b, C, H, W] into (H/P)(W/P) patch vectors, a CLS token is
  // prepended: [b, tokens, hidden].
  TensorId patch_embeddings();

  // ViT: x + a learned [1, tokens, hidden] position table.
  TensorId add_position_table(TensorId x);

  // HF ViTModel's pooler: tanh(dense(first token)).
  void pool(TensorId x);

  // Dropout in a training step (torch's native_dropout): the output and a 1-byte mask that the
  // backward multiplies the gradient by. Inference, or p = 0, leaves `x` as is.
  TensorId dropout(TensorId x, double p);

  TensorId collective(const char* op, TensorId x, Shape shape, const char* group);
  // An all-gather of 2D SUMMA (BuildOptions::summa): attr "summa" holds its panels.
  TensorId summa_gather(TensorId x, Shape shape, const char* group);
  // A block linear under 2D SUMMA (BuildOptions::summa): the input gathered over TP where it is
  // row-parallel, the weight [out / m1, in / m2] gathered over CP, one GEMM.
  TensorId summa_linear(TensorId x, int64_t out, const std::string& prefix, bool bias);

  // Sequence parallelism keeps the residual stream split over the TP ranks' tokens; the
  // column-parallel projections need every token: all-gather before them (Korthikanti et al.
  // 2022, "Reducing Activation Recomputation in Large Transformer Models").
  TensorId gather_sequence(TensorId x);

  // A row-parallel projection leaves partial sums on each TP rank: all-reduce them, or
  // reduce-scatter them onto the sequence split under sequence parallelism.
  // LoRA adapters beside the row-parallel projections (pending_adapters_) are added after the
  // reduction, each on this rank's share of the tokens under sequence parallelism (Megatron's
  // scatter_to_sequence_parallel_region: a slice).
  TensorId reduce_output(TensorId y);

  // x + token_type_embeddings[token types] (BERT: all zeros for one segment, read from a buffer).
  TensorId add_token_types(TensorId x);

  // x + table[ids]: one embedding lookup added to the input embeddings (token types, positions).
  // `looked_up`, when given, receives the looked-up rows.
  TensorId add_lookup(TensorId x, TensorId table, TensorId ids, TensorId* looked_up = nullptr);

  // BERT keeps position ids in a [1, max_positions] buffer and slices it.
  TensorId position_buffer();

  // x + wpe[positions] (GPT-2): HF builds the positions with arange; an engine gets them as input.
  TensorId add_positions(TensorId x);

  // cos/sin for the positions of this step, computed once and shared by all layers.
  void rotary_tables();

  TensorId norm(TensorId x, const std::string& prefix);
  TensorId l2_norm(TensorId x);  // Llama 4's q/k normalization, no weights

  // Whether a block's linear layer holds packed 4-bit weights (ModelSpec::int4_group_size or
  // fp4_weights): those of the transformer layers, except the MoE router and gates, which
  // quantizers leave alone.
  bool int4(const std::string& prefix, bool quantizable = true) const;

  // Packed 4-bit weights [.., out, in / 2] (two per byte) and their scales: int4's scales and
  // zero points [.., in / group, out, 2] in the activation dtype; fp4's one-byte block scales
  // [.., out, in / block] (e4m3 for NVFP4, e8m0 held as uint8 for MXFP4).
  std::pair<TensorId, TensorId> int4_weight(Shape lead, int64_t out, int64_t in,
                                            const std::string& prefix);

  // Under BuildOptions::fp4_gemms: x [rows, in] quantized to FP4 blocks, (packed [rows, in / 2],
  // scales [rows, in / block]), once per input shared by the linears that read it.
  std::pair<TensorId, TensorId> fp4_quantize(TensorId x2);
  // x2 [rows, in] times packed fp4 weights (and their scales) [out, in / 2] -> [rows, out]: on the
  // fp4 units under fp4_gemms, dequantized in a 16-bit GEMM otherwise.
  TensorId fp4_linear(TensorId x2, TensorId packed, TensorId scales, int64_t out);

  // x [.., in] times a [out, in] weight (nn.Linear), with an optional bias, and a LoRA adapter
  // when BuildOptions::lora_rank targets it.
  TensorId linear(TensorId x, int64_t out, const std::string& prefix, bool bias,
                  bool quantizable = true);

  // Whether the linear at `prefix` takes a LoRA adapter (BuildOptions::lora_targets).
  bool lora_targeted(const std::string& prefix);

  // y + (alpha / rank) B (A x) for the base linear's input x and output y (BuildOptions::lora_rank
  // gives the layout). Beside a row-parallel base under TP the adapter's output waits in
  // pending_adapters_ until reduce_output() has reduced the base's partial sums.
  TensorId lora_adapter(TensorId x, TensorId y, const std::string& prefix);

  TensorId lora_parameter(Shape shape, const std::string& name);

  TensorId base_linear(TensorId x, int64_t out, const std::string& prefix, bool bias,
                       bool quantizable);

  // torchao's dynamic tensorwise cast to e4m3: the amax (torch.max(torch.abs(x)), a scalar the
  // scale comes from, taken before the cast and off the gradient's path), then the cast.
  TensorId float8_cast(TensorId x);

  // The dims of each head RoPE rotates (ModelSpec::rotary_dim; all of them by default).
  int64_t rotary_width() const { return m_.rotary_dim > 0 ? m_.rotary_dim : m_.head_dim; }

  // RoPE on q or k [b, heads, s, d]. With partial rotary (GPT-J) a fused kernel still reads and
  // writes the whole head and rotates its first rotary_dim dims; HF slices those dims off,
  // rotates them and concatenates the rest back (modeling_gptj.py), here with the rotation
  // written as for Llama (its own op sequence differs in a few views and a stack).
  TensorId rope(TensorId x);

  // HF's rotate-half RoPE, op by op: x cos + rotate_half(x) sin.
  TensorId rotate(TensorId x);

  // Appends this step's keys or values [b, kv_heads, s, d] to the layer's cache and returns
  // the tensor attention reads: [b, kv_heads, past + s, d].
  TensorId cache(TensorId x, const std::string& name);
  // A preallocated cache `name` of shape `full` written in place at this step's positions by `x`
  // (index_copy_ along the sequence), as HF's static cache and CUDA-graph serving keep it.
  TensorId write_in_place(TensorId x, const Shape& full, const std::string& name);

  // Interleaved RoPE as DeepSeek's HF code writes it: on [.., rope] split in halves x1, x2:
  // cat(x1 cos - x2 sin, x2 cos + x1 sin). One kernel when fused.
  TensorId rope_interleaved(TensorId x);

  // Multi-head latent attention (DeepSeek-V2/V3). The cache holds the normalized latent
  // [b, 1, t, kv_lora] and the RoPE key [b, 1, t, rope]. HF (and an engine's prefill) expands
  // the cached latent to per-head K and V with kv_b_proj; an engine's decode absorbs kv_b_proj
  // into the query and the output and attends in latent space (FlashMLA).
  TensorId mla_attention(int64_t l, TensorId x);

  // Attention of this rank's queries. Under context parallelism, prefill all-gathers K and V of
  // the whole sequence and, for causal models, gives each rank two query chunks (positions r and
  // 2cp-1-r of 2cp, "zigzag", which balances the causal work; the representative rank is r = 0);
  // decode attends over this rank's share of the cache and merges the partial outputs.
  // `gathered`: the keys and values already span the whole sequence (MLA gathers its latent).
  // Its nodes (the context-parallel gathers, the attention kernels or the unfused core) carry
  // the module path "<attention>.core": selective recomputation's region, the core attention
  // Megatron-LM checkpoints with --recompute-granularity selective.
  TensorId attend(TensorId q, TensorId keys, TensorId values, std::vector<Attr> attrs,
                  bool gathered = false);

  TensorId attend_core(TensorId q, TensorId keys, TensorId values, std::vector<Attr> attrs,
                       bool gathered);

  // One attention kernel writing `out`. In a training step it also writes the fp32 logsumexp of
  // each query row [.., heads, sq], which FlashAttention saves for its backward (Dao 2023).
  void attention_node(std::vector<TensorId> qkv, TensorId out, std::vector<Attr> attrs);

  TensorId attention_op(std::vector<TensorId> qkv, Shape out, std::vector<Attr> attrs);

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
  static std::vector<Attr> masked_gemm_attrs(const std::vector<Attr>& attention, const char* gemm);

  TensorId eager_core(const std::vector<TensorId>& qkv, const Shape& out,
                      const std::vector<Attr>& attention);

  // HF's GPTJAttention._attn (transformers has no SDPA path for GPT-J): q and k upcast to fp32,
  // scores divided by sqrt(head_dim), the additive causal mask [b, 1, sq, sk] (built by the
  // model's forward; an input here) added, softmax in fp32, cast back, P V, heads merged by a
  // contiguous copy.
  TensorId gptj_core(const std::vector<TensorId>& qkv, const Shape& out,
                     const std::vector<Attr>& attention);

  // Appends this step's [b, 1, s, width] latent (or RoPE key) to an MLA cache.
  TensorId mla_cache(TensorId x, int64_t width, const std::string& name);

  TensorId attention(int64_t l, TensorId x);

  // activation(gate) * up (BuildOptions::fused_gated_activation: one kernel that keeps gate and
  // up only). MoE experts are SwiGLU whatever the dense FFN's activation.
  TensorId gated(TensorId gate, TensorId up, Activation kind);
  TensorId gated(TensorId gate, TensorId up) { return gated(gate, up, m_.activation); }

  TensorId activation(TensorId x) { return activation(x, m_.activation); }

  TensorId activation(TensorId x, Activation kind);

  TensorId ffn(int64_t l, TensorId x);

  // DeepSeek-V3 router (HF DeepseekV3TopkRouter, noaux_tc): fp32 logits, sigmoid scores plus a
  // correction bias, the best top_k_groups of num_groups expert groups by the sum of their two
  // best scores, top-k among those, weights = the chosen scores renormalized and scaled.
  // Returns (scores, weights [t, k] fp32, ids [t, k]).
  std::tuple<TensorId, TensorId, TensorId> sigmoid_router(TensorId x2, const std::string& name);

  // Routed experts as grouped GEMMs, or one GEMM per touched expert: x [rows, k] against
  // per-expert weights w [E, n, k] (nn.Linear layout) -> [rows, n]. With int4 weights, w is
  // packed [E, n, k / 2] and `scales` [E, k / group, n, 2].
  TensorId experts_gemm(TensorId x, TensorId w, TensorId offsets, double touched,
                        TensorId scales = -1);

  TensorId moe(int64_t l, TensorId x);

  TensorId layer(int64_t l, TensorId x);

  // Parallel residual block (GPT-J, Falcon): x + attention(norm(x)) + ffn(norm'(x)), both norms
  // taken first as Falcon's decoder layer does. Under tensor parallelism both branches end in
  // row-parallel projections whose partial sums are added before one all-reduce (GPT-NeoX's
  // gpt_j_residual, Black et al. 2022, reduces the sum once). One dropout follows the sum
  // (Falcon's dropout_add; GPT-J drops each branch, p = 0 in its config).
  TensorId parallel_layer(int64_t l, TensorId x);

  // Post-norm (BERT): x = norm(x + attention(x)); x = norm(x + ffn(x)).
  TensorId post_norm_layer(int64_t l, TensorId x);

  void lm_head(TensorId x, TensorId embed);

  // ---- training step ------------------------------------------------------------------------

  // The loss, its backward, and the optimizer step. Language models (any model with an LM head)
  // take the cross-entropy of every position's logits against the next token, in fp32 as
  // HF and Megatron-LM compute it; a model without a head (ViT as a regression backbone, as in
  // the NERSC ERA5 study) takes the mean squared error of its last hidden state.
  void train_step();

  struct StateTensor {
    Shape shape;
    DType dtype;
    const char* name;
  };

  // The optimizer states of one parameter of `shape` (Optimizer explains each optimizer's), in
  // the order the step kernel takes them; `states` is torch.optim's count (adam, adamw, sgd).
  std::vector<StateTensor> optimizer_states(const Shape& shape, DType state_dtype, int states) const;

  // The optimizer step over the parameters that received a gradient. With master weights (mixed
  // precision, Megatron-LM's default for bf16) the optimizer updates fp32 copies and writes them
  // back into the 16-bit parameters (one _foreach_copy_ per group); states are fp32. Without, the
  // states have the parameters' dtype. The update runs as o_.optimizer_impl says (OptimizerImpl):
  // one fused kernel per transformer layer (and one for the other parameters), as torch.optim's
  // fused AdamW/Adam/SGD run over a parameter list; foreach ops over the whole parameter list;
  // or op by op for each parameter.
  void optimizer_step(const std::vector<TensorId>& grads);

  // One parameter's update in the optimizer's dtype: `target` (the parameter, or its fp32 master
  // copy), its gradient and its states in optimizer_states' order.
  struct ParamUpdate {
    TensorId target = -1, grad = -1;
    std::vector<TensorId> states;
  };

  // Writes the updated fp32 masters back into the 16-bit parameters.
  void copy_masters(const std::vector<TensorId>& params, const std::vector<TensorId>& masters_list);

  // torch.optim's update of one parameter op by op (torch/optim/adamw.py _single_tensor_adamw,
  // sgd.py _single_tensor_sgd; the scalars are host values):
  //   AdamW  p.mul_(1 - lr wd); m.lerp_(g, 1 - b1); v.mul_(b2).addcmul_(g, g, 1 - b2);
  //          d = (v.sqrt() / sqrt(bias_correction2)).add_(eps); p.addcdiv_(m, d, -step_size)
  //          (Adam: the same without the decay, its default weight_decay 0);
  //   SGD    buf.mul_(momentum).add_(g); p.add_(buf, alpha=-lr).
  // d is a temporary of the parameter's size, freed after the update.
  void for_loop_update(const ParamUpdate& u);

  // The same update as _foreach_* ops over every parameter at once (_multi_tensor_adamw,
  // _multi_tensor_sgd): each op one pass over its lists; the denominators are a new list of the
  // parameters' size (torch._foreach_sqrt), live until the last op. torch runs one such sequence
  // per parameter group; the builder's parameters form one group.
  void foreach_update(const std::vector<ParamUpdate>& us);

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
  std::set<TensorId> summa_rows_;  // 2D SUMMA: the row-parallel linears' outputs (reduce_output)
  // LoRA under lora_shared_input: A's output per input (storage, offset, rows, width).
  std::map<std::tuple<StorageId, int64_t, int64_t, int64_t>, TensorId> lora_inputs_;
  bool train_ = false;
  std::vector<TensorId> experts_locals_;  // HF-eager MoE locals held until the block returns
  TensorId sinks_ = -1;  // the layer's attention-sink logits while its attention is built, else -1
  // fp8 GEMMs: each input's cast, by the input's storage, offset and [rows, in].
  std::map<std::tuple<StorageId, int64_t, int64_t, int64_t>, TensorId> fp8_inputs_;
  // The fp4 (packed, scales) of a linear's input, by the same key (fp4_quantize).
  std::map<std::tuple<StorageId, int64_t, int64_t, int64_t>, std::pair<TensorId, TensorId>> fp4_inputs_;
};

}  // namespace accelsim::builder_detail
