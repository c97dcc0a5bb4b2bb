// The serving planner: the cheapest deployment of a model that meets a request rate's SLOs.
//
//   ServePlanRequest q;            // the model, candidate engines (a device, its node, its kernels),
//   q.target_qps = 40;             // the workload, the SLOs and the space to search
//   ServePlanResult r = plan_serving(q);
//   r.layouts[0]                   // the best layout, then the others, ranked; r.pareto the front
//
// A layout is one engine (a device with the serving stack's kernels) x quantization x TP x PP x
// scheduler knobs (max sequences per batch, token budget per step) x aggregated or disaggregated
// prefill (P prefill and D decode replicas per unit). A unit is the smallest deployment of the
// layout: one replica, or P + D replicas. The search, for each layout:
//   1. memory: the replica's weights, activation reserve and KV cache on the device
//      (IterationModel); a layout whose KV cache cannot hold the longest request does not fit;
//   2. bounds that hold for any rate: p99 TTFT is at least the p99 prompt's prefill with the
//      engine to itself (plus its KV transfer when disaggregated), and p99 TPOT at least a
//      one-sequence decode step at the median prompt's context; a layout above either misses it;
//   3. an analytic screen (steady state; serve_plan.cc, analytic_rate): the rate per unit at the
//      largest decode batch whose step meets the TPOT target, with prefill work taken from the
//      same time; the layouts whose estimated GPUs (or tokens/s per GPU) are within
//      kScreenFactor of the best estimate, and the kScreenKeep best, go on (all of them when
//      `exhaustive`);
//   4. the discrete-event simulation: find_max_qps on one unit (serve.h) gives the highest rate a
//      unit sustains within the SLOs; units = ceil(target / that rate); a layout needing more GPUs
//      than the budget is over it;
//   5. the `verify` best layouts are simulated whole, at the target rate with all their units,
//      for the SLO attainment and percentiles the deployment reaches.
// Rates per unit scale to several units because the router splits the arrivals evenly (a
// round-robin split of a Poisson stream is smoother than the stream); step 5 checks it.
// The Pareto front: the simulated layouts not dominated in (output tokens/s per GPU, output
// tokens/s per user = 1 / mean TPOT), each at the highest rate it sustains within the SLOs.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "accelsim/device.h"
#include "accelsim/model.h"
#include "accelsim/serve.h"

namespace accelsim {

// How a layout stores and multiplies its weights and KV cache.
//   bf16  the model's own dtypes;
//   fp8   fp8 (e4m3) linear weights and GEMMs in the blocks (the embedding and LM head in the
//         model's dtype), fp8 KV cache: vLLM --quantization fp8 --kv-cache-dtype fp8,
//         TensorRT-LLM's FP8 checkpoints; on devices with an fp8 matrix rate only;
//   int4  AWQ/GPTQ 4-bit weights in groups of 128 (weight-only: GEMMs in the activation dtype),
//         the model's KV dtype;
//   nvfp4 NVFP4 weights and activations on the fp4 units (W4A4), fp8 KV cache: TensorRT-LLM's and
//         vLLM's NVFP4 checkpoints (TensorRT Model Optimizer) on Blackwell; NVIDIA parts with an
//         fp4 rate only (AMD's fp4 units take MX block scales);
//   mxfp4 MXFP4 weights and activations on the fp4 units (W4A4), fp8 KV cache: AMD Quark's MXFP4
//         models on MI355X, Blackwell's MXFP4 GEMMs; parts with an fp4 rate only.
enum class ServeQuantization : uint8_t { bf16, fp8, int4, nvfp4, mxfp4 };
std::string_view quantization_name(ServeQuantization q);
// Throws ConfigError naming the spelling and the known ones.
ServeQuantization parse_quantization(std::string_view name);
// The model as the quantization stores it, and the replica's build options (fp8 GEMMs).
ModelSpec quantized_model(const ModelSpec& model, ServeQuantization q);
// Empty when `device` runs `q`; otherwise why not.
std::string quantization_unsupported(const DeviceSpec& device, ServeQuantization q);

// One candidate engine: a device, the node a multi-GPU replica sits in, and what the serving
// stack runs there (kernels, CUDA graphs, decode attention, custom all-reduce, block size, memory
// share: ReplicaConfig) and its scheduler (kind, admission order, watermark: SchedulerConfig).
// The search sets tp, pp, build.fp8_gemms and max_batched_tokens of the replica, and max_seqs,
// max_batched_tokens and chunk of the scheduler.
struct ServePlanEngine {
  std::string label;   // how reports name it ("h100_sxm vllm")
  std::string stack;   // the serving stack's id ("" when none)
  DeviceSpec device;
  ReplicaConfig replica;
  SchedulerConfig scheduler;
};

struct ServePlanSpace {
  std::vector<int64_t> tp = {1, 2, 4, 8};
  std::vector<int64_t> pp = {1, 2, 4};
  // Attention data-parallel ranks with the experts split over them (ReplicaConfig::dp_attention):
  // tried for MoE models only, at tp = pp = 1 (1 is always tried).
  std::vector<int64_t> dp_attention = {1, 2, 4, 8};
  std::vector<ServeQuantization> quantizations = {ServeQuantization::bf16, ServeQuantization::fp8};
  std::vector<int64_t> max_seqs = {32, 64, 128, 256};
  // Token budget per step: the chunk of chunked prefill (sarathi, disaggregated prefill engines),
  // max_batched_tokens otherwise.
  std::vector<int64_t> token_budgets = {2048, 8192};
  bool aggregated = true;
  // Disaggregated units, {prefill, decode} replicas each (empty: none).
  std::vector<std::pair<int64_t, int64_t>> disaggregated = {{1, 1}, {1, 2}, {1, 3}, {2, 1}};
  // Without and with the engines' speculative decoding (ServePlanEngine::replica.speculative;
  // true needs it set): {false} searches without it.
  std::vector<bool> speculative = {false};
  int64_t max_gpus = 64;
};

enum class ServeObjective : uint8_t {
  gpus,        // fewest GPUs for the target rate (then the lowest price, then the most tokens/s per GPU)
  cost,        // the lowest price per hour for the target rate (every device needs a price)
  throughput,  // the most output tokens/s per GPU within the SLOs (no target rate)
};
std::string_view objective_name(ServeObjective o);

struct ServePlanRequest {
  ModelSpec model;
  std::vector<ServePlanEngine> engines;
  ServePlanSpace space;
  // Lengths, arrival process and seed of the requests; `requests` per simulated trial (its qps is
  // the search's).
  WorkloadSpec workload;
  double target_qps = 0.0;  // > 0 for the gpus and cost objectives; 0 for throughput
  double slo_ttft_s = 0.0;  // p99 targets; at least one must be set
  double slo_tpot_s = 0.0;
  ServeObjective objective = ServeObjective::gpus;
  int64_t verify = 5;        // best layouts simulated whole at the target rate
  bool exhaustive = false;   // simulate every layout that fits and meets the bounds (no screen)
  int threads = 0;           // 0: the hardware's
};

// A layout: engine index, quantization, parallelism, scheduler knobs and units.
struct ServeLayout {
  int64_t engine = 0;
  ServeQuantization quantization = ServeQuantization::bf16;
  int64_t tp = 1, pp = 1;
  int64_t max_seqs = 256;
  int64_t token_budget = 8192;
  int64_t dp_attention = 1;
  int64_t prefill_replicas = 0;  // 0: aggregated (a unit is one replica)
  int64_t decode_replicas = 1;
  bool speculative = false;      // with the engine's speculative decoding
  int64_t unit_replicas() const { return prefill_replicas + decode_replicas; }
  int64_t unit_gpus() const { return unit_replicas() * tp * pp * dp_attention; }
  bool disaggregated() const { return prefill_replicas > 0; }
};

enum class LayoutVerdict : uint8_t {
  best,                // ranked: meets the SLOs at the target within the budget
  feasible,            // ranked below the best
  invalid,             // the parallelism does not fit the model or the node (heads, layers, domain)
  unsupported,         // the device cannot run the quantization
  does_not_fit,        // no room for the KV cache of the longest request
  misses_ttft,         // even alone, the p99 prompt's prefill exceeds the TTFT target
  misses_tpot,         // even alone, a decode step exceeds the TPOT target
  misses_slo,          // simulated: no rate meets the SLOs (queueing, interference)
  over_budget,         // simulated: the target needs more GPUs than the budget
  screened_out,        // the analytic estimate is far from the best one's: not simulated
};
std::string_view verdict_name(LayoutVerdict v);

struct ServeLayoutResult {
  ServeLayout layout;
  LayoutVerdict verdict = LayoutVerdict::invalid;
  std::string reason;  // one line: why this verdict, with the figures behind it
  // Memory of one GPU (0 when the layout is invalid or unsupported).
  double weight_bytes_per_gpu = 0.0;
  double kv_bytes_per_gpu = 0.0;
  int64_t kv_blocks = 0;  // per engine
  // The bounds of step 2 and the analytic estimate of step 3 (0 where not reached).
  double ttft_floor_s = 0.0;
  double tpot_floor_s = 0.0;
  double estimated_qps_per_unit = 0.0;
  // The simulation (step 4): the highest rate one unit sustains within the SLOs.
  bool simulated = false;
  double qps_per_unit = 0.0;
  int64_t units = 0;  // for the target rate (1 without one)
  int64_t gpus = 0;
  double usd_per_hour = 0.0;  // gpus x the device's price (0: no price)
  // At the highest rate per unit: throughput and latency of one unit.
  double output_tokens_per_s_per_gpu = 0.0;
  double tokens_per_s_per_user = 0.0;  // 1 / mean TPOT
  Percentiles ttft, tpot;
  double cost_per_million_output_tokens_usd = 0.0;  // at the target rate (or the unit's highest)
  // The whole deployment at the target rate (step 5).
  bool verified = false;
  double slo_attainment = 0.0;
  double verified_ttft_p99_s = 0.0, verified_tpot_p99_s = 0.0;
  bool pareto = false;
};

template <typename F>
void for_each_figure(const ServeLayoutResult& r, F&& f) {
  f("weight_bytes_per_gpu", r.weight_bytes_per_gpu);
  f("kv_bytes_per_gpu", r.kv_bytes_per_gpu);
  f("ttft_floor_s", r.ttft_floor_s);
  f("tpot_floor_s", r.tpot_floor_s);
  f("estimated_qps_per_unit", r.estimated_qps_per_unit);
  f("qps_per_unit", r.qps_per_unit);
  f("usd_per_hour", r.usd_per_hour);
  f("output_tokens_per_s_per_gpu", r.output_tokens_per_s_per_gpu);
  f("tokens_per_s_per_user", r.tokens_per_s_per_user);
  f("cost_per_million_output_tokens_usd", r.cost_per_million_output_tokens_usd);
  f("slo_attainment", r.slo_attainment);
  f("verified_ttft_p99_s", r.verified_ttft_p99_s);
  f("verified_tpot_p99_s", r.verified_tpot_p99_s);
}

struct ServePlanResult {
  // Every layout considered: the ranked ones first (best first), then the rest by verdict.
  std::vector<ServeLayoutResult> layouts;
  std::vector<int64_t> pareto;  // indices into layouts, by output tokens/s per user
  int64_t ranked = 0;           // layouts[0, ranked) meet the SLOs within the budget
  int64_t simulated = 0;
  int64_t trials = 0;           // serving simulations run
  double mean_input_tokens = 0.0, mean_output_tokens = 0.0;  // of the workload's requests
};

// Throws ConfigError for a request it cannot answer: no engine, an empty space, no SLO, a target
// rate missing (gpus, cost) or given (throughput), a device without a price under cost, a
// workload whose requests do not fit the model's positions. `progress(done, total)` is called
// from the calling thread now and then. The answer does not depend on the threads.
ServePlanResult plan_serving(const ServePlanRequest& request,
                             const std::function<void(int64_t, int64_t)>& progress = {});

// The indices of the points not dominated in both coordinates (higher is better in each), by
// ascending x. A point equal to another in both is kept once (the first).
std::vector<int64_t> pareto_front(const std::vector<std::pair<double, double>>& points);

}  // namespace accelsim
