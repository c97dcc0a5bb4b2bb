#include "accelsim/training.h"

#include <algorithm>
#include <string>

#include "accelsim/error.h"
#include "accelsim/memory.h"

namespace accelsim {
namespace {

TrainingEstimate infeasible(std::string reason) {
  TrainingEstimate e;
  e.reason = std::move(reason);
  return e;
}

}  // namespace

TrainingEstimate estimate_training(const ModelSpec& model, const BuildOptions& base,
                                   const ParallelLayout& layout, const DeviceSpec& device,
                                   const SystemSpec& system, const SimulateOptions& options) {
  model.validate();
  device.validate();
  system.validate();
  const ParallelLayout& l = layout;
  for (int64_t d : {l.tp, l.pp, l.dp, l.cp, l.ep, l.micro_batch, l.global_batch, l.virtual_stages}) {
    if (d < 1) return infeasible("parallel degrees, batch sizes and virtual stages must be at least 1");
  }
  if (l.zero < 0 || l.zero > 1) return infeasible("ZeRO stage " + std::to_string(l.zero) + " is not modelled (0 or 1)");
  if (model.num_layers < l.pp * l.virtual_stages) {
    return infeasible(std::to_string(model.num_layers) + " layers are fewer than " +
                      std::to_string(l.pp) + " stages x " + std::to_string(l.virtual_stages) +
                      " virtual stages");
  }
  if (l.global_batch % (l.dp * l.micro_batch) != 0) {
    return infeasible("the global batch " + std::to_string(l.global_batch) +
                      " is not a multiple of dp x micro-batch = " + std::to_string(l.dp * l.micro_batch));
  }
  if (l.dp % l.ep != 0) return infeasible("the expert-parallel degree must divide the data-parallel degree");
  const int64_t m = l.global_batch / (l.dp * l.micro_batch);
  if (l.virtual_stages > 1 && m % l.pp != 0) {
    return infeasible("interleaved 1F1B needs the micro-batches per step (" + std::to_string(m) +
                      ") to be a multiple of pp");
  }

  // Placement, inner groups first (TP, CP, EP inside DP, then the rest of DP); pipeline stages
  // come last.
  const auto [groups, room] = place_groups(
      system, {{"tp", l.tp}, {"cp", l.cp}, {"ep", l.ep}, {"dp", l.dp / l.ep}});
  const int64_t dp_in = groups[3].ranks_per_domain * groups[2].ranks_per_domain;
  SimulateOptions o = options;
  o.system = system;
  o.groups = {groups[0], groups[1], groups[2]};
  o.micro_batches = 1;

  BuildOptions b = base;
  b.phase = Phase::train;
  b.batch = l.micro_batch;
  b.tensor_parallel = l.tp;
  b.sequence_parallel = l.sequence_parallel;
  b.context_parallel = l.cp;
  b.expert_parallel = l.ep;
  b.persistent_gradients = false;
  // Layers that do not split evenly leave some stages one layer more (Megatron-LM then counts
  // the embedding and the loss as layers of the first and last stage); the step waits for the
  // heaviest stage: ceil(layers / pp) of them.
  ModelSpec stage = model;
  stage.num_layers = (model.num_layers + l.pp - 1) / l.pp;
  SimulationResult r, whole;
  Graph g;
  try {
    g = build_graph(stage, b);
    r = simulate(g, device, o);
    BuildOptions full = b;
    full.optimizer = Optimizer::none;
    whole = simulate(build_graph(model, full), device, o);
  } catch (const ConfigError& e) {
    return infeasible(e.what());
  }

  TrainingEstimate e;
  e.micro_batches = m;
  const double per_mb = r.forward_time_s + r.backward_time_s;
  e.compute_s = static_cast<double>(m) * per_mb;
  e.tp_comm_s = static_cast<double>(m) * r.communication_time_s;
  e.bubble_s = static_cast<double>(l.pp - 1) / static_cast<double>(l.virtual_stages) * per_mb;
  if (l.pp > 1) {
    // One micro-batch's activations [micro-batch, seq / cp (/ tp under SP), hidden] in the
    // activation dtype, to the neighbouring stage: in the same domain while there is room.
    double act = static_cast<double>(l.micro_batch) * static_cast<double>(b.seq) / l.cp *
                 static_cast<double>(model.hidden_size) * size_bytes(model.activation_dtype);
    if (l.sequence_parallel) act /= static_cast<double>(l.tp);
    const CollectiveEstimate p2p = estimate_collective(
        {.kind = CollectiveKind::send_recv, .bytes = act, .ranks = 2,
         .ranks_per_domain = room >= 2 ? 2 : 1},
        system);
    e.pp_comm_s = 2.0 * static_cast<double>(l.pp - 1) * static_cast<double>(l.virtual_stages) * p2p.time_s;
  }

  // This rank's parameters and gradients (the stage graph's parameter storages; gradients in
  // their own dtype), and what data parallelism moves.
  double parameter_bytes = 0, gradient_bytes = 0, state_bytes = 0;
  for (const Storage& st : g.storages()) {
    if (st.kind == StorageKind::parameter) parameter_bytes += static_cast<double>(st.size_bytes);
    if (st.kind == StorageKind::gradient) gradient_bytes += static_cast<double>(st.size_bytes);
    if (st.kind == StorageKind::optimizer_state) state_bytes += static_cast<double>(st.size_bytes);
  }
  if (l.dp > 1) {
    const int64_t dp_per_domain = std::max<int64_t>(1, dp_in);
    auto collective = [&](CollectiveKind kind, double bytes) {
      return estimate_collective({.kind = kind, .bytes = bytes, .ranks = l.dp,
                                  .ranks_per_domain = dp_per_domain}, system).time_s;
    };
    if (l.zero == 0) {
      const double t = collective(CollectiveKind::all_reduce, gradient_bytes);
      e.dp_comm_s = std::max(0.0, t - (l.overlap_grad_reduce ? r.backward_time_s : 0.0));
    } else {
      const double rs = collective(CollectiveKind::reduce_scatter, gradient_bytes);
      const double ag = collective(CollectiveKind::all_gather, parameter_bytes);
      e.dp_comm_s = std::max(0.0, rs - (l.overlap_grad_reduce ? r.backward_time_s : 0.0)) +
                    std::max(0.0, ag - (l.overlap_param_gather ? r.forward_time_s : 0.0));
    }
  }
  e.optimizer_s = r.optimizer_time_s / (l.zero >= 1 ? static_cast<double>(l.dp) : 1.0);
  e.step_s = e.compute_s + e.bubble_s + e.pp_comm_s + e.dp_comm_s + e.optimizer_s;

  const double tokens = static_cast<double>(l.global_batch) * static_cast<double>(b.seq);
  e.tokens_per_s = tokens / e.step_s;
  // The whole model's model FLOPs for one micro-batch on one TP x CP rank group, times the
  // ranks that split it and the micro-batches of every data-parallel replica.
  e.model_flops = whole.model_flops * static_cast<double>(l.tp * l.cp) *
                  static_cast<double>(m * l.dp);
  e.tflops_per_gpu = e.model_flops / e.step_s / static_cast<double>(l.gpus()) / 1e12;
  if (r.reference_peak_flops_per_s > 0) {
    e.mfu = e.tflops_per_gpu * 1e12 / r.reference_peak_flops_per_s;
  }

  // Memory: states sharded by ZeRO-1, activations of the micro-batches 1F1B keeps in flight.
  double in_flight = static_cast<double>(std::min(m, l.pp));
  if (l.virtual_stages > 1) {
    in_flight *= 1.0 + static_cast<double>(l.pp - 1) / static_cast<double>(l.pp * l.virtual_stages);
  }
  const MemoryProfile& mem = r.memory;
  e.memory_per_gpu_bytes = parameter_bytes + gradient_bytes +
                           state_bytes / (l.zero >= 1 ? static_cast<double>(l.dp) : 1.0) +
                           static_cast<double>(mem.peak_activation_bytes) * in_flight +
                           device.runtime_reserved_bytes;
  e.fits = e.memory_per_gpu_bytes <= device.memory_bytes;
  e.feasible = e.fits;
  if (!e.fits) {
    e.reason = "needs " + std::to_string(static_cast<int64_t>(e.memory_per_gpu_bytes / 1e9)) +
               " GB per GPU, more than the device's " +
               std::to_string(static_cast<int64_t>(device.memory_bytes / 1e9)) + " GB";
  }
  return e;
}

}  // namespace accelsim
