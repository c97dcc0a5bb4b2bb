// Internal to the model builder: reverse-mode differentiation of a forward graph.
//
// append_backward() walks the forward nodes from last to first and appends the ops an autograd
// engine runs for each: dgrad and wgrad GEMMs for every matmul, FlashAttention's backward kernel,
// the fused norm backward kernels, the activation backward kernels, scatters for gathers, and the
// reverse collective for every collective (all-gather <-> reduce-scatter, all-to-all both ways;
// Megatron-LM's f/g operators, Shoeybi et al. 2019). Each backward op reads the tensors autograd
// saves for it (a matmul's inputs, an activation's input, attention's q, k, v, out and
// logsumexp), so the liveness analysis keeps exactly those forward tensors alive into backward.
//
// Gradients are tracked per storage, shaped like the storage's first tensor: a view's gradient
// is written into (or accumulated onto) its base's, as autograd does for views. Parameter
// gradients live in StorageKind::gradient storages of the requested dtype; the first
// contribution creates one and later ones (tied embeddings) accumulate into it in place.
//
// The forward graph must hold only ops the builder emits; an op without a rule whose output
// carries a gradient throws ConfigError naming it.
#pragma once

#include <vector>

#include "accelsim/graph.h"

namespace accelsim {

struct BackwardOptions {
  DType parameter_grad_dtype = DType::fp32;
  // Tensors whose gradient is all-reduced over group "tp" once complete: the inputs of
  // column-parallel layers under tensor parallelism without sequence parallelism.
  std::vector<TensorId> all_reduce_grad_of;
  // fp8 GEMMs whose backward casts the 16-bit operands again (torchao's Float8Linear,
  // Fp8Recipe::torchao): dgrad and wgrad read fresh e4m3 casts, each after its amax, of the
  // tensors the forward cast, not the forward's fp8 copies.
  bool fp8_recast = false;
};

// Appends the backward of `graph`'s nodes, seeded with d(loss)/d(loss) = 1 for the 0-d `loss`.
// Returns, per storage id, the tensor holding that parameter's gradient (-1 when the storage is
// not a parameter or no gradient reaches it).
std::vector<TensorId> append_backward(Graph& graph, TensorId loss, const BackwardOptions& options);

// Activation recomputation (torch.utils.checkpoint, Megatron-LM's recompute): each region, a
// list of forward node ids, is run again in the backward, just before the first backward node
// that reads a value the region produced, and from there on the backward reads the recomputed
// values. A value the forward reads after the region (the region's output) is the exception: the
// backward nodes of the region's own modules read the recomputed one, every other backward node
// the forward's (as autograd's saved tensors of the ops after a checkpoint hold it). Values the
// backward reads only through the region die with the forward; what stays alive into the
// backward is what the region reads from outside (its checkpointed inputs) and the outputs the
// ops after it keep. The recomputed nodes are tagged Pass::backward with the attribute
// recompute = true. A region none of whose values the backward reads is left alone.
// `saved` (empty, or one list per region) names forward nodes inside each region that a
// selective-checkpointing policy saves (torch.utils.checkpoint's CheckpointPolicy.MUST_SAVE):
// they do not run again, their outputs stay alive as the forward wrote them and are read by the
// recomputed nodes, and their backward nodes read the region's recomputed values like the rest.
void recompute_regions(Graph& graph, const std::vector<std::vector<NodeId>>& regions,
                       const std::vector<std::vector<NodeId>>& saved = {});

// Inserts `node` before the graph's first node (node ids shift by one; recorded releases follow).
void prepend_node(Graph& graph, Node node);

}  // namespace accelsim
