// build_graph(): the op graph of a transformer forward for a phase and shape, without PyTorch.
//
// The builder emits the same IR as a captured graph (graph.h), with ops the catalogue knows, so
// everything downstream (simulate, memory, reports) works on either. Two kernel styles:
//   fused     what an inference engine runs: one RMSNorm/LayerNorm kernel, one RoPE kernel,
//             K/V written in place into a preallocated cache, logits for the last token only;
//   hf_eager  what HF transformers runs eagerly: norms written out op by op in fp32, RoPE as
//             slices/neg/cat, the cache grown by cat, logits for every token.
// A training step (Phase::train) is the forward of a prefill over every position, a loss, the
// backward appended by reverse-mode differentiation of that forward (dgrad and wgrad GEMMs,
// FlashAttention's backward, norm and activation backward kernels; src/model/backward.h) and a
// fused optimizer step, with gradients and optimizer states in their own storage kinds.
// A tensor-parallel degree divides heads, FFN width and vocabulary as Megatron-LM does
// (Shoeybi et al. 2019); sequence, expert and context parallelism split tokens and experts. The
// graph is that of one rank; its collectives are accel_sim::all_reduce / all_gather /
// reduce_scatter / all_to_all nodes (group "tp", "ep" or "cp") that a single-device simulation
// does not time.
//
//   Graph g = build_graph(llama, {.phase = Phase::decode, .batch = 8, .context = 4096});
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "accelsim/graph.h"
#include "accelsim/model.h"

namespace accelsim {

enum class Phase : uint8_t {
  prefill,  // `seq` new tokens per sequence, empty cache
  decode,   // one new token per sequence against `context` cached tokens
  train,    // one training step on `seq` tokens per sequence: forward, loss, backward, optimizer
};

// The optimizer of a training step; `none` stops after backward.
//   adamw, adam, sgd  torch.optim's fused kernels (two states per element, one for SGD);
//   adafactor         HF transformers' Adafactor as its Trainer builds it (optim="adafactor": no
//                     first moment; the second moment of a matrix factored into a row and a column
//                     vector, of a vector kept whole; Shazeer & Stern 2018, arXiv 1804.04235,
//                     Algorithm 4; transformers/optimization.py, Adafactor.step);
//   adam8bit          bitsandbytes' Adam8bit (Dettmers et al. 2022, arXiv 2110.02861): both states
//                     1 byte per element with an fp32 absmax per block of 2,048 elements, for
//                     parameters of at least 4,096 elements (min_8bit_size); smaller ones keep
//                     32-bit states.
enum class Optimizer : uint8_t { adamw, adam, sgd, none, adafactor, adam8bit };

// How adamw, adam and sgd run (torch.optim's three implementations; torch/optim/adamw.py):
//   fused     one multi-tensor kernel per parameter group doing the whole update in one pass
//             (fused=True; Apex's, Transformer Engine's and DeepSpeed's FusedAdam alike);
//   foreach   the update as a sequence of _foreach_* ops over the parameter list, each one pass
//             over its tensors (_multi_tensor_adamw; torch's default on CUDA since 2.0), with the
//             denominator sqrt(v) / bias correction + eps materialised for the whole list;
//   for_loop  the same update op by op, parameter by parameter (_single_tensor_adamw, and the
//             loop transformers.AdamW ran as HF Trainer's default optimizer before adamw_torch):
//             eight kernels per parameter for Adam(W), three for SGD with momentum.
// Optimizer::adafactor and adam8bit are their own kernels and run fused only.
enum class OptimizerImpl : uint8_t { fused, foreach, for_loop };

enum class KernelStyle : uint8_t { fused, hf_eager };

// Activation recomputation in a training step (Korthikanti et al. 2022, "Reducing Activation
// Recomputation in Large Transformer Models"): none keeps every value the backward reads;
// selective checkpoints each layer's core attention as Megatron-LM's --recompute-granularity
// selective does: its inputs q, k and v stay, and what it alone keeps for its backward (the
// unfused core's scores and probabilities; a FlashAttention kernel's log-sum-exp, its output
// where the next GEMM keeps an fp8 copy instead; the K and V gathered under context
// parallelism) is made again by running it once more in the backward; full keeps each layer's
// input and runs the layer's forward again in the backward; selective_op is torchtitan's op-level
// selective checkpointing (torch.utils.checkpoint with a policy, torchtitan
// distributed/activation_checkpoint.py, _custom_policy): each layer is one checkpoint whose
// GEMMs' outputs are saved but every second one in the layer's order (the 1st, 3rd, ... mm),
// and whose attention kernels' outputs and tensor-parallel reduce-scatters' outputs are saved;
// every other op of the layer (norms, RoPE, activations, residual adds, the unsaved GEMMs) runs
// again in the backward from the layer's input and the saved values.
enum class Recompute : uint8_t { none, selective, full, selective_op };

// How a training step's fp8 GEMMs are fed (BuildOptions::fp8_gemms):
//   transformer_engine  Transformer Engine's recipe: each distinct input cast once (q, k and v
//                       share one cast, as do gate and up: its LayerNormLinear), the amax taken
//                       in the cast kernel, the fp8 copies kept for the backward (1 byte per
//                       element), the weight casts cached over a step's micro-batches;
//   torchao             torchao's Float8Linear with dynamic tensorwise scaling (torchtitan's
//                       float8): every nn.Linear casts its own input and its weight, each after
//                       an amax of its own (torch.max(torch.abs(x)): a reduction before the
//                       cast), keeps the 16-bit input and weight for the backward, and there
//                       casts the output gradient to e5m2 and the weight and the input to e4m3
//                       again, each after its amax (torchao/float8/float8_linear.py,
//                       matmul_with_hp_or_float8_args; float8_scaling_utils.py).
enum class Fp8Recipe : uint8_t { transformer_engine, torchao };

// How a training step takes the cross-entropy of its logits (the stack's training.cross_entropy):
//   upcast          PyTorch's F.cross_entropy of logits.float(), as HF transformers'
//                   ForCausalLMLoss and torchtitan's loss compute it: a _to_copy of the logits to
//                   fp32, _log_softmax (its fp32 output kept for the backward) and nll_loss; the
//                   backward writes the fp32 gradient of the log-softmax and of its input, then
//                   casts it to the logits' dtype: three fp32 tensors of the logits' size live
//                   at once at the backward's start. Logits already in fp32 are not copied;
//                   under HF's eager kernels an encoder's masked-LM head (a model that is not
//                   causal: BERT's), which calls CrossEntropyLoss on its logits as they are,
//                   takes the loss in their dtype unless autocast (master weights) upcasts it.
//   fused           one kernel on the logits in their own (16-bit) dtype, op
//                   accel_sim::cross_entropy, keeping the logits and each row's log-sum-exp (fp32)
//                   for its backward, accel_sim::cross_entropy_backward, which writes the logits'
//                   gradient in their dtype (flash-attn's losses/cross_entropy.py
//                   CrossEntropyLoss, llm-foundry's loss_fn 'fused_crossentropy').
//   vocab_parallel  Megatron-LM's vocab_parallel_cross_entropy: the logits upcast to fp32, their
//                   softmax computed in place over the copy and kept, the backward writing the
//                   gradient in place over it (megatron/core/tensor_parallel/cross_entropy.py):
//                   accel_sim::cross_entropy on the fp32 copy, its backward in place; one fp32
//                   tensor of the logits' size.
enum class CrossEntropy : uint8_t { upcast, fused, vocab_parallel };

// How MoE experts run: one grouped GEMM over all experts (torch._grouped_mm, CUTLASS grouped
// GEMM) or one GEMM per expert that received tokens (a loop over experts).
enum class MoeImpl : uint8_t { grouped, sequential };

// The blocks' linears a LoRA adapter can sit beside (BuildOptions::lora_targets), by the last
// part of their module names.
inline const std::vector<std::string> kLoraTargets = {"q_proj", "k_proj", "v_proj", "qkv_proj",
                                                      "o_proj", "gate_proj", "up_proj", "down_proj"};

struct BuildOptions {
  Phase phase = Phase::prefill;
  int64_t batch = 1;
  int64_t seq = 0;      // prefill: tokens per sequence (vision models: ignored, the image decides)
  int64_t context = 0;  // decode: tokens already in the cache
  KernelStyle kernels = KernelStyle::fused;
  int64_t tensor_parallel = 1;  // must divide heads, FFN width and vocabulary
  bool sequence_parallel = false;  // norms and residuals on tokens / tensor_parallel (needs TP > 1)
  int64_t expert_parallel = 1;     // MoE experts split across this many ranks (all-to-all)
  // Under expert parallelism: the busiest rank's routed rows over the mean (>= 1; 1 = perfectly
  // balanced routing, the default). The step waits for that rank, as the load-imbalance factor of
  // AMD Primus' projection and Calculon do.
  double expert_imbalance = 1.0;
  int64_t context_parallel = 1;    // each sequence (and decode's cache) split across this many ranks
  // 2D SUMMA tensor parallelism over the tensor_parallel x context_parallel grid (Xu et al. 2021,
  // "An Efficient 2D Method for Training Super-Large Deep Learning Models", arXiv 2104.05343; the
  // NERSC performance model's 2D TP, Subramanian et al. 2024, arXiv 2410.00273): the TP ranks (m1)
  // split the hidden and FFN widths and the heads, the CP ranks (m2) the sequence, and each block
  // linear's weight [out, in] over both ([out / m1, in / m2]). Before each GEMM its input is
  // gathered over the TP ranks (a row-parallel one's too, instead of reducing its output) and
  // its weight over the CP ranks; the backward gathers both again and reduce-scatters dX over TP
  // and dW over CP. Attention gathers K and V over the CP ranks as context parallelism does.
  // The collectives carry attr "summa": the simulation pipelines them with their GEMMs in
  // max(m1, m2) panels (SimulateOptions). The residual stream [b, s / m2, h / m1] is held as
  // sequence parallelism's [b, s / (m1 m2), h] (the same elements). Not modelled: the norms'
  // statistics all-reduced over TP (two values a token). Needs sequence_parallel, TP and CP
  // above 1, a dense model of sequential blocks (no parallel attention + FFN block) without MLA,
  // 16-bit GEMMs with fused kernels, no LoRA, and not a decode step; the embedding, the LM head,
  // the norms and the biases stay whole on every CP rank (1D tensor-parallel).
  bool summa = false;
  MoeImpl moe_impl = MoeImpl::grouped;
  // Training step only.
  Optimizer optimizer = Optimizer::adamw;
  OptimizerImpl optimizer_impl = OptimizerImpl::fused;
  // Mixed precision as Megatron-LM runs bf16/fp16 models: parameters in the model's weight dtype
  // for forward and backward, gradients, fp32 master weights and optimizer states in fp32
  // (18 bytes per bf16 parameter with Adam). Off: gradients and states in the weight dtype.
  bool master_weights = true;
  Recompute recompute = Recompute::none;
  // The policy applies to every recompute_interval-th layer only, the others keeping all they
  // save: torchtitan's selective_ac_option = N wraps the blocks it counts from 1 to a multiple of
  // N (layers N - 1, 2N - 1, ... from 0; distributed/activation_checkpoint.py, use_layer_sac).
  // 1: every layer. REQUIRES >= 1.
  int64_t recompute_interval = 1;
  // Attention as the unfused core (batched GEMMs, a softmax over the materialized scores,
  // dropout, a copy back) instead of one fused FlashAttention-style kernel.
  bool eager_attention = false;
  // RMSNorm as its eager op sequence even with fused kernels: x.float(), pow, mean, + eps, rsqrt,
  // x * rstd, the cast back and the weight's product, seven kernels each way where PyTorch's
  // fused kernel runs one (HF's LlamaRMSNorm; torchtitan's RMSNorm, and torch.nn.RMSNorm before
  // PyTorch's _fused_rms_norm). hf_eager kernels always run it so; LayerNorm is one kernel.
  bool eager_norm = false;
  // Training step only: gradients kept between steps and zeroed at the start of this one
  // (optimizer.zero_grad(set_to_none=False), PyTorch's default before 2.0), so they are live
  // from the first forward op; otherwise each is created by its first backward contribution.
  bool persistent_gradients = false;
  // The transformer blocks' linear layers run as fp8 GEMMs (torch._scaled_mm, e4m3 operands with
  // per-tensor scales, the output in the activation dtype); each distinct input is cast to e4m3
  // once (q, k and v share one cast, as do gate and up). Embeddings, norms, the LM head, MLA's
  // kv_b_proj and MoE experts stay as they are.
  //   Training step: Transformer Engine's fp8 recipe. Weights stay in the weight dtype and are
  //   cast to e4m3 each step; the backward keeps the fp8 copies (1 byte per element) instead of
  //   the 16-bit input. The weight casts carry attr "once_per_step" (TE caches them over a step's
  //   micro-batches; SimulateOptions::fp8_weight_cache counts them once).
  //   Prefill and decode: an fp8 inference engine (TensorRT-LLM --enable_fp8, vLLM fp8
  //   checkpoints). The weights are stored in e4m3 (1 byte, no cast op), biases in the
  //   activation dtype; the MoE router and gates stay 16-bit. An fp8 KV cache is the model's
  //   kv_cache_dtype, independent of this option.
  // Fused kernels only; excludes int4 weights.
  bool fp8_gemms = false;
  // Inference with FP4 weights (ModelSpec::fp4_weights): the linears' activations are quantized
  // to FP4 blocks too (one streaming pass over each linear's input) and the GEMMs run on the
  // device's FP4 units (W4A4: TensorRT-LLM's and vLLM's NVFP4 on Blackwell). Off: the weights are
  // dequantized inside a 16-bit GEMM (W4A16: MXFP4 on Hopper through Marlin). Excludes fp8_gemms.
  bool fp4_gemms = false;
  // A training step's fp8 recipe under fp8_gemms.
  Fp8Recipe fp8_recipe = Fp8Recipe::transformer_engine;

  // Training under fp8_gemms: the blocks' linear weights are fp8 parameters (e4m3, 1 byte per
  // element), as Transformer Engine's fp8_model_init and Megatron-Core's --fp8-param-gather keep
  // them (on in every fp8 recipe of NeMo's Megatron-Bridge: training/mixed_precision.py,
  // fp8_param_gather = True): no 16-bit copy and no per-step cast; the optimizer's fp32 master
  // weights are the primary copy, and a sharded data-parallel gather moves 1 byte per weight.
  // Not modelled, here or for the cast weights: the transposed fp8 copy Hopper's fp8 GEMMs read
  // in the backward (1 byte per weight more in both cases).
  bool fp8_parameters = false;
  // With master_weights, the parameters' gradient buffers in the weight dtype instead of fp32:
  // Megatron-Core's DistributedDataParallelConfig.grad_reduce_in_fp32 = False (its default;
  // NeMo's Llama performance recipes set it so), DeepSpeed ZeRO's bf16 gradient accumulation.
  bool gradients_in_weight_dtype = false;
  // The gated FFN's activation(gate) * up as one kernel (op accel_sim::gated_activation) that
  // keeps only gate and up for its backward and computes activation(gate) again there, as
  // Megatron-Core's fused bias-SwiGLU and bias-GeGLU do (megatron/core/fusions/
  // fused_bias_swiglu.py: SwiGLUFunction saves its input alone); off, the activation and the
  // product are two ops and the product's backward keeps activation(gate) as well (autograd of
  // F.silu(w1 x) * w3 x, as HF transformers and torchtitan's eager FeedForward run it): one
  // [tokens, ffn] tensor more per layer. Dense, shared-expert and routed-expert FFNs alike.
  // Fused kernels only.
  bool fused_gated_activation = false;
  // Training step of a model with an LM head: how its cross-entropy runs (CrossEntropy). A model
  // without an LM head takes its MSE loss either way.
  CrossEntropy cross_entropy = CrossEntropy::upcast;
  // Training step only: LoRA fine-tuning (Hu et al. 2021, arXiv:2106.09685). Every parameter of
  // the model is frozen (no gradient, no optimizer state, no weight-gradient GEMM; a frozen
  // linear keeps no input for its backward) and each targeted linear of the transformer blocks
  // gains a trainable adapter: y = W x + (alpha / rank) B (A x), A [rank, in] and B [out, rank]
  // in the weight dtype, the scale one elementwise op. Under tensor parallelism the adapters run
  // as Megatron-Core's ParallelLinearAdapter (Megatron-Bridge peft/utils.py): beside a
  // column-parallel base, A is split over the rank (its [tokens, rank / TP] outputs all-gathered)
  // and B like the base; beside a row-parallel base (o_proj, down_proj), A takes the split input
  // (its [tokens, rank] partial sums all-reduced) and B is column-parallel, its [tokens, out / TP]
  // outputs all-gathered to the base's full width and added after the base's reduction. 0: off.
  // Adapter dropout is not modelled (0 by default in Megatron-Bridge's LoRA and HF PEFT's).
  int64_t lora_rank = 0;
  // The blocks' linears that take adapters (of kLoraTargets); empty: all of them, as
  // Megatron-Bridge's LoRA targets linear_qkv, linear_proj, linear_fc1 and linear_fc2 by
  // default (peft/lora.py) and HF PEFT's target_modules="all-linear" does.
  std::vector<std::string> lora_targets;
  // LoRA: the projections of one input share one adapter A (q, k and v; gate and up), as
  // Megatron-Core's fused linear_qkv and linear_fc1 carry one adapter each whose B spans the
  // fused output (Megatron-Bridge peft/lora.py); off: one adapter per projection, as HF PEFT
  // wraps each nn.Linear.
  bool lora_shared_input = false;

  // Validates `model` and these options for it: throws ConfigError naming the option when the
  // options do not suit the model (build_graph's REQUIRES, divisibility by the parallel degrees)
  // or when a quantity of the step (a tensor's bytes, the KV cache, the parameters with their
  // training states) does not fit in 64-bit byte counts.
  void validate(const ModelSpec& model) const;
};

// REQUIRES: options.validate(model) passes (model.validate(); prefill: seq >= 1; decode:
// context >= 0; batch >= 1; ...). Throws ConfigError otherwise.
Graph build_graph(const ModelSpec& model, const BuildOptions& options);

// Bytes of one rank's KV cache after this step (prefill: `seq` tokens; decode: `context` + 1;
// a training step keeps none),
// with KV heads split by the tensor-parallel degree (replicated when fewer than the degree).
int64_t step_kv_cache_bytes(const ModelSpec& model, const BuildOptions& options);

// One tensor-parallel rank's rows of the word embedding and LM head: the vocabulary over the
// degree, or, when the degree does not divide it, padded as Megatron-LM pads it to a multiple of
// 128 x TP (make_vocab_size_divisible_by = 128): 128 rows of each of ceil(vocab / (128 x TP))
// units. The padded rows are never looked up.
int64_t vocab_rows_per_rank(int64_t vocab_size, int64_t tensor_parallel);

}  // namespace accelsim
