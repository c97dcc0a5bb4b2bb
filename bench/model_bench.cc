// Times build_graph + simulate for Llama-3.1-405B (meta-llama/Llama-3.1-405B config.json:
// hidden 16384, 126 layers, 128 heads, 8 KV heads, FFN 53248, vocab 128256) on one H100-like
// device: prefill (batch 1, seq 8192), one decode step (batch 1, context 8192) and one training
// step (batch 1, seq 8192: forward, backward, AdamW).
// Usage: model_bench [repetitions]. Targets: prefill < 10 ms, decode < 2 ms (the training step
// has none; it is recorded).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "accelsim/builder.h"
#include "accelsim/simulate.h"

using namespace accelsim;

namespace {

double best_ms(const ModelSpec& model, const BuildOptions& options, const DeviceSpec& device,
               int reps, size_t* nodes) {
  double best = 1e30;
  for (int i = 0; i < reps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const Graph g = build_graph(model, options);
    // The kernel cost model, as the command line uses by default.
    const SimulationResult r = simulate(g, device, {.cost_model = "kernel"});
    const auto t1 = std::chrono::steady_clock::now();
    *nodes = g.nodes().size();
    best = std::min(best, std::chrono::duration<double, std::milli>(t1 - t0).count());
    if (r.latency_s <= 0) std::abort();
  }
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? std::atoi(argv[1]) : 20;
  const ModelSpec llama405b{.name = "llama-3.1-405b", .hidden_size = 16384, .num_layers = 126,
                            .num_heads = 128, .num_kv_heads = 8, .head_dim = 128,
                            .ffn_size = 53248, .vocab_size = 128256,
                            .max_position_embeddings = 131072};
  const DeviceSpec h100{.id = "h100-like", .memory_bytes = 80.0 * (1 << 30),
                        .memory_bandwidth_bytes_per_s = 3.35e12, .fp32_flops_per_s = 66.9e12,
                        .bf16_matrix_flops_per_s = 989.4e12, .kernel_launch_overhead_s = 4e-6};
  size_t nodes = 0;
  const double prefill =
      best_ms(llama405b, {.phase = Phase::prefill, .batch = 1, .seq = 8192}, h100, reps, &nodes);
  std::printf("llama-3.1-405b prefill b1 s8192: build+simulate best %.3f ms (%zu ops); target < 10 ms\n",
              prefill, nodes);
  const double decode =
      best_ms(llama405b, {.phase = Phase::decode, .batch = 1, .context = 8192}, h100, reps, &nodes);
  std::printf("llama-3.1-405b decode b1 ctx8192: build+simulate best %.3f ms (%zu ops); target < 2 ms\n",
              decode, nodes);
  const double train =
      best_ms(llama405b, {.phase = Phase::train, .batch = 1, .seq = 8192}, h100, reps, &nodes);
  std::printf("llama-3.1-405b train step b1 s8192: build+simulate best %.3f ms (%zu ops)\n", train,
              nodes);
  return 0;
}
