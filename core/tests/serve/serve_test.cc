// Serving simulation: step times against whole-graph simulations, scheduler behaviour worked out
// by hand, the KV block manager's limits and preemption order, workload generation.
#include <gtest/gtest.h>

#include <cmath>

#include "accelsim/builder.h"
#include "accelsim/error.h"
#include "accelsim/serve.h"
#include "accelsim/simulate.h"
#include "testing/models.h"
#include "testing/round_device.h"
#include "testing/serve_devices.h"

namespace accelsim {
namespace {

ReplicaConfig replica() {
  ReplicaConfig r;
  r.simulate.cost.cuda_graphs = true;
  return r;
}

// The latency of the builder's whole graph for one step, simulated op by op.
double graph_latency(const ModelSpec& m, const DeviceSpec& d, Phase phase, int64_t batch, int64_t len) {
  BuildOptions b;
  b.phase = phase;
  b.batch = batch;
  if (phase == Phase::prefill) b.seq = len;
  else b.context = len;
  SimulateOptions o;
  o.cost.cuda_graphs = true;
  return simulate(build_graph(m, b), d, o).latency_s;
}

Workload same_requests(int64_t n, int32_t input, int32_t output) {
  Workload w;
  w.requests.resize(static_cast<size_t>(n));
  for (Request& r : w.requests) {
    r.input_len = input;
    r.output_len = output;
  }
  return w;
}

TEST(IterationModel, PrefillStepEqualsTheWholeGraph) {
  const ModelSpec m = testing::llama3_8b();
  const DeviceSpec d = testing::roomy_device();
  IterationModel costs(m, d, replica());
  // Body and head are linear in the layers: one prefill of 48 tokens (exact below the grid) costs
  // what the 32-layer graph costs op by op.
  StepBatch b;
  b.prefill = {{48, 0}};
  EXPECT_NEAR(costs.step_time(b).total_s(), graph_latency(m, d, Phase::prefill, 1, 48), 1e-9);
}

TEST(IterationModel, DecodeStepEqualsTheWholeGraph) {
  const ModelSpec m = testing::llama3_8b();
  const DeviceSpec d = testing::roomy_device();
  IterationModel costs(m, d, replica());
  StepBatch b;
  b.decode_seqs = 8;
  b.decode_context = 8 * 40;  // 40 cached tokens each
  // (The decode graph slices no last position for the head: a few ns apart in 15 ms.)
  EXPECT_NEAR(costs.step_time(b).total_s() / graph_latency(m, d, Phase::decode, 8, 40), 1.0, 1e-6);
}

TEST(IterationModel, DecodeStepOfALocalAndGlobalModelEqualsTheWholeGraph) {
  // Gemma 2 with a 16-token window: half its layers read 16 of the 41 tokens, the others all
  // of them; the step costs each kind of layer at its own attention.
  ModelSpec m = testing::gemma2_9b();
  m.sliding_window = 16;
  const DeviceSpec d = testing::roomy_device();
  IterationModel costs(m, d, replica());
  StepBatch b;
  b.decode_seqs = 8;
  b.decode_context = 8 * 40;
  EXPECT_NEAR(costs.step_time(b).total_s() / graph_latency(m, d, Phase::decode, 8, 40), 1.0, 1e-6);
}

TEST(IterationModel, DecodeKernelReadingKvPerQueryHeadReadsTheCacheOncePerQueryHead) {
  // Llama-3-8B: 32 query heads share 8 KV heads. A decode kernel of one block per query head (a
  // masked multi-head attention) reads each KV head's cache 4 times. 64 sequences at context 63
  // (exact, below the token grid; the step attends 63 cached tokens + 1): K and V of
  // 64 x 64 tokens x 32 layers x 8 heads x 128 x 2 bytes x 2 = 536,870,912 bytes, read 3 times more
  // at 1 TB/s, the kernel memory-bound on the round device (4 FLOPs per byte of cache).
  const ModelSpec m = testing::llama3_8b();
  const DeviceSpec d = testing::roomy_device();
  ReplicaConfig shared = replica(), per_head = replica();
  per_head.decode_kv_per_query_head = true;
  IterationModel grouped(m, d, shared), mmha(m, d, per_head);
  StepBatch b;
  b.decode_seqs = 64;
  b.decode_context = 64 * 63;
  const double cache_bytes = 64.0 * 64.0 * 32.0 * 8.0 * 128.0 * 2.0 * 2.0;
  EXPECT_NEAR(mmha.step_time(b).attention_s - grouped.step_time(b).attention_s, 3.0 * cache_bytes / 1e12, 1e-12);
  EXPECT_DOUBLE_EQ(mmha.step_time(b).body_s, grouped.step_time(b).body_s);
  // Prefill runs the context kernel, the same in both.
  StepBatch p;
  p.prefill = {{48, 0}};
  EXPECT_DOUBLE_EQ(mmha.step_time(p).total_s(), grouped.step_time(p).total_s());
  // A model without grouped heads reads its cache once either way.
  const ModelSpec mha = testing::small_gpt(2);
  IterationModel a(mha, d, shared), b2(mha, d, per_head);
  EXPECT_DOUBLE_EQ(a.step_time(b).total_s(), b2.step_time(b).total_s());
}

TEST(IterationModel, MoeBodyCountsDenseAndMoeLayers) {
  // DeepSeek-V3's 3 dense + 58 MoE layers: the profile's split matches the whole graph.
  const ModelSpec m = testing::deepseek_v3();
  const DeviceSpec d = testing::roomy_device();
  IterationModel costs(m, d, replica());
  StepBatch b;
  b.prefill = {{16, 0}};
  EXPECT_NEAR(costs.step_time(b).total_s() / graph_latency(m, d, Phase::prefill, 1, 16), 1.0, 1e-9);
}

TEST(IterationModel, KvCapacityIsWhatWeightsAndActivationsLeave) {
  const ModelSpec m = testing::llama3_8b();
  DeviceSpec d = testing::round_device();
  d.memory_bytes = 80e9;
  ReplicaConfig r = replica();
  IterationModel costs(m, d, r);
  const ReplicaMemory& mem = costs.memory();
  // Llama-3-8B: 8,030,261,248 bf16 parameters.
  EXPECT_DOUBLE_EQ(mem.weight_bytes, 2.0 * 8030261248.0);
  // K and V of one token: 2 x 32 layers x 8 KV heads x 128 x 2 bytes = 131,072 bytes.
  EXPECT_DOUBLE_EQ(mem.kv_bytes_per_token, 131072.0);
  EXPECT_DOUBLE_EQ(mem.usable_bytes, 0.9 * 80e9 - d.runtime_reserved_bytes);
  EXPECT_DOUBLE_EQ(mem.kv_bytes, mem.usable_bytes - mem.weight_bytes - mem.activation_bytes);
  EXPECT_EQ(mem.kv_blocks, static_cast<int64_t>(std::floor(mem.kv_bytes / (16 * 131072.0))));
}

TEST(Serve, SingleRequestTtftIsThePrefillTime) {
  const ModelSpec m = testing::llama3_8b();
  const DeviceSpec d = testing::roomy_device();
  IterationModel costs(m, d, replica());
  for (SchedulerKind k : {SchedulerKind::static_batch, SchedulerKind::orca, SchedulerKind::vllm, SchedulerKind::sarathi}) {
    ServeConfig c;
    c.scheduler.kind = k;
    const ServeResult r = simulate_serving(costs, same_requests(1, 40, 1), c);
    ASSERT_EQ(r.completed, 1);
    EXPECT_NEAR(r.ttft.p50, graph_latency(m, d, Phase::prefill, 1, 40), 1e-9) << static_cast<int>(k);
    EXPECT_NEAR(r.e2e.max, r.ttft.max, 1e-12);
  }
}

TEST(Serve, SteadyBatchDecodesAtTheAnalyticStepTime) {
  // Eight requests of 32 prompt and 4 output tokens arrive together: one prefill step of all
  // eight prompts, then three decode steps of the batch over 32, 33 and 34 cached tokens. Each
  // request's TPOT is the mean of those three steps, its TTFT the prefill step.
  const ModelSpec m = testing::llama3_8b();
  const DeviceSpec d = testing::roomy_device();
  IterationModel costs(m, d, replica());
  ServeConfig c;
  c.scheduler.kind = SchedulerKind::vllm;
  const ServeResult r = simulate_serving(costs, same_requests(8, 32, 4), c);
  ASSERT_EQ(r.completed, 8);
  const double prefill = graph_latency(m, d, Phase::prefill, 8, 32);
  const double decode = graph_latency(m, d, Phase::decode, 8, 32) + graph_latency(m, d, Phase::decode, 8, 33) +
                        graph_latency(m, d, Phase::decode, 8, 34);
  // The prefill step runs eight separate 32-token prompts (one attention each) where the graph runs
  // one batch of eight: the same FLOPs and bytes, eight kernels instead of one.
  EXPECT_NEAR(r.ttft.p50 / prefill, 1.0, 0.01);
  EXPECT_NEAR(r.tpot.p50 / (decode / 3.0), 1.0, 1e-6);
  EXPECT_NEAR(r.itl.mean / (decode / 3.0), 1.0, 1e-6);
  EXPECT_EQ(r.steps, 4);
  // Throughput: 8 x 4 output tokens over the makespan.
  EXPECT_NEAR(r.output_tokens_per_s, 32.0 / r.makespan_s, 1e-9);
  EXPECT_NEAR(r.makespan_s / (r.ttft.p50 + decode), 1.0, 1e-6);
}

TEST(Serve, StaticBatchKeepsFinishedRowsUntilTheLongestIsDone) {
  const ModelSpec m = testing::llama3_8b();
  const DeviceSpec d = testing::roomy_device();
  IterationModel costs(m, d, replica());
  Workload w = same_requests(2, 32, 2);
  w.requests[1].output_len = 3;
  ServeConfig c;
  c.scheduler.kind = SchedulerKind::static_batch;
  // A third request arriving at once waits for the batch of two (max_seqs 2) to finish.
  w.requests.push_back(w.requests[0]);
  c.scheduler.max_seqs = 2;
  const ServeResult r = simulate_serving(costs, w, c);
  ASSERT_EQ(r.completed, 3);
  // Batch 1: prefill (2 x 32), decode 2 rows over 32, decode 2 rows over 33 (one of them finished).
  StepBatch p;
  p.prefill = {{32, 0}, {32, 0}};
  const double prefill = costs.step_time(p).total_s();
  const double d1 = graph_latency(m, d, Phase::decode, 2, 32);
  const double d2 = graph_latency(m, d, Phase::decode, 2, 33);
  EXPECT_NEAR(r.request_e2e_s[0], prefill + d1, 1e-9);
  EXPECT_NEAR(r.request_e2e_s[1], prefill + d1 + d2, 1e-8);
  // The third starts when the first batch ends.
  EXPECT_NEAR(r.request_ttft_s[2], prefill + d1 + d2 + graph_latency(m, d, Phase::prefill, 1, 32), 1e-8);
}

// A device whose KV cache holds exactly `blocks` blocks of 16 tokens for the model.
DeviceSpec device_with_blocks(const ModelSpec& m, int64_t blocks) {
  return testing::device_with_blocks(m, blocks, replica());
}

ModelSpec tiny_model() {
  ModelSpec m = testing::llama3_8b();
  m.name = "tiny";
  m.num_layers = 2;
  m.hidden_size = 256;
  m.num_heads = 4;
  m.num_kv_heads = 2;
  m.head_dim = 64;
  m.ffn_size = 512;
  m.vocab_size = 1000;
  return m;
}

TEST(Serve, BlockManagerPreemptsTheLastAdmittedAndNeverOverAllocates) {
  const ModelSpec m = tiny_model();
  IterationModel costs(m, device_with_blocks(m, 10), replica());
  ASSERT_EQ(costs.memory().kv_blocks, 10);
  // Three requests of 48 prompt tokens (3 blocks each, 9 of 10) and 40 output tokens (88 tokens:
  // 6 blocks each at the end). Admitted A, B, C (the watermark is 0). Decoding, each needs a
  // fourth block at token 49: A takes the tenth, B finds none and C, admitted last, is preempted
  // (its 3 blocks freed), so B proceeds. Only when A finishes (6 blocks freed) does C come back,
  // recomputing its prompt and the token it had generated.
  ServeConfig c;
  c.scheduler.kind = SchedulerKind::vllm;
  c.scheduler.watermark = 0.0;
  c.record_steps = 1000;
  const ServeResult r = simulate_serving(costs, same_requests(3, 48, 40), c);
  ASSERT_EQ(r.completed, 3);
  EXPECT_GE(r.preemptions, 1);
  EXPECT_LE(r.kv_utilization_max, 1.0);
  for (const StepRecord& s : r.steps_recorded) EXPECT_LE(s.kv_utilization, 1.0);
  // A and B finish before C; C's first token came in the first step, before it was preempted.
  EXPECT_LT(r.request_e2e_s[0], r.request_e2e_s[2]);
  EXPECT_LT(r.request_e2e_s[1], r.request_e2e_s[2]);
  EXPECT_NEAR(r.request_ttft_s[0], r.request_ttft_s[2], 1e-12);
  // A request longer than the whole cache (10 blocks = 160 tokens) is rejected, not run.
  const ServeResult big = simulate_serving(costs, same_requests(1, 150, 20), c);
  EXPECT_EQ(big.rejected, 1);
  EXPECT_EQ(big.completed, 0);
}

TEST(Serve, OrcaReservesWholeRequestsAndNeverPreempts) {
  const ModelSpec m = tiny_model();
  IterationModel costs(m, device_with_blocks(m, 10), replica());
  // Each request reserves ceil(88 / 16) = 6 blocks: only one runs at a time.
  ServeConfig c;
  c.scheduler.kind = SchedulerKind::orca;
  const ServeResult r = simulate_serving(costs, same_requests(3, 48, 40), c);
  ASSERT_EQ(r.completed, 3);
  EXPECT_EQ(r.preemptions, 0);
  EXPECT_LT(r.request_e2e_s[0], r.request_ttft_s[1] + 1e-12);
  EXPECT_LT(r.request_e2e_s[1], r.request_ttft_s[2] + 1e-12);
}

TEST(Serve, TimelineBinsKeepTheQueuesMeanAndMost) {
  // Orca runs the three requests one after another (each reserves 6 of the 10 blocks): two wait
  // while A runs, one while B runs, none while C runs. The bins tile the run from the arrival to
  // the last completion; the queue's integral over them is 2 e2e(A) + (e2e(B) - e2e(A)), and the
  // most in any bin is 2, the run's most.
  const ModelSpec m = tiny_model();
  IterationModel costs(m, device_with_blocks(m, 10), replica());
  ServeConfig c;
  c.scheduler.kind = SchedulerKind::orca;
  c.timeline_bins = 8;
  const ServeResult r = simulate_serving(costs, same_requests(3, 48, 40), c);
  ASSERT_EQ(r.completed, 3);
  ASSERT_FALSE(r.timeline.empty());
  ASSERT_LE(r.timeline.size(), 8u);
  EXPECT_EQ(r.timeline.front().start_s, 0.0);
  EXPECT_NEAR(r.timeline.back().t_s, r.makespan_s, 1e-15);
  double integral = 0.0, most = 0.0, kv_most = 0.0;
  for (size_t i = 0; i < r.timeline.size(); ++i) {
    const TimelinePoint& p = r.timeline[i];
    if (i > 0) EXPECT_EQ(p.start_s, r.timeline[i - 1].t_s);
    EXPECT_GT(p.t_s, p.start_s);
    EXPECT_LE(p.waiting, p.waiting_max);
    EXPECT_LE(p.kv_utilization, p.kv_utilization_max + 1e-15);
    integral += p.waiting * (p.t_s - p.start_s);
    most = std::max(most, p.waiting_max);
    kv_most = std::max(kv_most, p.kv_utilization_max);
    // A bin wholly inside A's run has two waiting throughout.
    if (p.t_s < r.request_e2e_s[0]) EXPECT_EQ(p.waiting, 2.0);
  }
  const double a = r.request_e2e_s[0], b = r.request_e2e_s[1];
  EXPECT_NEAR(integral, 2 * a + (b - a), 1e-12 * r.makespan_s);
  EXPECT_EQ(most, 2.0);
  EXPECT_EQ(most, r.waiting_max);
  EXPECT_EQ(kv_most, r.kv_utilization_max);
  EXPECT_NEAR(integral / r.makespan_s, r.waiting_mean, 1e-12);
}

TEST(Serve, SarathiChunksPromptsToTheBudget) {
  // One 100-token prompt with a 32-token budget: chunks of 32, 32, 32 and 4 tokens, the first
  // token after the fourth.
  const ModelSpec m = testing::llama3_8b();
  const DeviceSpec d = testing::roomy_device();
  IterationModel costs(m, d, replica());
  ServeConfig c;
  c.scheduler.kind = SchedulerKind::sarathi;
  c.scheduler.chunk = 32;
  const ServeResult r = simulate_serving(costs, same_requests(1, 100, 1), c);
  double expect = 0.0;
  for (const auto& [n, cached] : std::vector<std::pair<int64_t, int64_t>>{{32, 0}, {32, 32}, {32, 64}, {4, 96}}) {
    StepBatch b;
    b.prefill = {{n, cached}};
    b.sampling = cached == 96 ? 1 : 0;
    expect += costs.step_time(b).total_s();
  }
  EXPECT_EQ(r.steps, 4);
  EXPECT_NEAR(r.ttft.p50, expect, 1e-12);
}

TEST(Serve, PrefixCacheSkipsCachedBlocks) {
  const ModelSpec m = testing::llama3_8b();
  const DeviceSpec d = testing::roomy_device();
  IterationModel costs(m, d, replica());
  // Two requests sharing their first 64-token block; the second arrives after the first is done
  // and computes only its last 16 tokens.
  Workload w = same_requests(2, 80, 1);
  w.requests[1].arrival_s = 1.0;
  w.hash_block_tokens = 64;
  w.hashes = {7, 7};
  w.requests[0].hash_begin = 0;
  w.requests[0].hash_end = 1;
  w.requests[1].hash_begin = 1;
  w.requests[1].hash_end = 2;
  ServeConfig c;
  c.scheduler.prefix_caching = true;
  const ServeResult r = simulate_serving(costs, w, c);
  StepBatch b;
  b.prefill = {{16, 64}};
  EXPECT_NEAR(r.request_ttft_s[1], costs.step_time(b).total_s(), 1e-12);
  EXPECT_NEAR(r.prefix_hit_rate, 64.0 / 160.0, 1e-12);
}

TEST(Serve, RoutersSpreadRequests) {
  const ModelSpec m = tiny_model();
  const DeviceSpec d = testing::roomy_device();
  IterationModel costs(m, d, replica());
  ServeConfig c;
  c.replicas = 2;
  // Two requests at once on two replicas run in parallel: both see a lone prefill.
  const ServeResult r = simulate_serving(costs, same_requests(2, 32, 1), c);
  EXPECT_NEAR(r.request_ttft_s[0], r.request_ttft_s[1], 1e-15);
  EXPECT_EQ(r.gpus, 2);
  c.router = RouterKind::least_outstanding;
  const ServeResult l = simulate_serving(costs, same_requests(2, 32, 1), c);
  EXPECT_NEAR(l.request_ttft_s[0], l.request_ttft_s[1], 1e-15);
}

TEST(Serve, CostPerMillionTokens) {
  const ModelSpec m = tiny_model();
  const DeviceSpec d = testing::roomy_device();
  IterationModel costs(m, d, replica());
  ServeConfig c;
  c.price_usd_per_gpu_hour = 2.0;
  const ServeResult r = simulate_serving(costs, same_requests(4, 32, 10), c);
  // 40 output tokens in makespan seconds on one $2/h GPU.
  EXPECT_NEAR(r.cost_per_million_output_tokens_usd, 2.0 * r.makespan_s / 3600.0 / 40e-6, 1e-9);
}

TEST(Serve, DisaggregatedRequestMovesItsCacheBetweenReplicas) {
  // One prefill and one decode replica, 10 GB/s between them: a 40-token prompt is prefilled
  // (first token), its 40 tokens x 131,072 bytes of K and V cross in 524 us, then the decode
  // replica runs the two remaining tokens over 40 and 41 cached tokens.
  const ModelSpec m = testing::llama3_8b();
  const DeviceSpec d = testing::roomy_device();
  IterationModel costs(m, d, replica());
  ServeConfig c;
  c.replicas = 2;
  c.prefill_replicas = 1;
  c.kv_transfer_bytes_per_s = 10e9;
  const ServeResult r = simulate_serving(costs, same_requests(1, 40, 3), c);
  ASSERT_EQ(r.completed, 1);
  const double prefill = graph_latency(m, d, Phase::prefill, 1, 40);
  EXPECT_NEAR(r.ttft.p50, prefill, 1e-9);
  const double transfer = 40 * 131072.0 / 10e9;
  const double decode = graph_latency(m, d, Phase::decode, 1, 40) + graph_latency(m, d, Phase::decode, 1, 41);
  EXPECT_NEAR(r.e2e.p50 / (prefill + transfer + decode), 1.0, 1e-6);
  c.kv_transfer_bytes_per_s = 0.0;
  EXPECT_THROW(simulate_serving(costs, same_requests(1, 40, 3), c), ConfigError);
}

TEST(Serve, FindMaxQpsBracketsTheSloRate) {
  const ModelSpec m = testing::llama3_8b();
  const DeviceSpec d = testing::roomy_device();
  IterationModel costs(m, d, replica());
  WorkloadSpec s;
  s.requests = 300;
  s.input = {.kind = LengthDistribution::fixed, .value = 256};
  s.output = {.kind = LengthDistribution::fixed, .value = 32};
  ServeConfig c;
  c.slo_ttft_s = 0.5;
  const MaxQpsResult found = find_max_qps(costs, s, c);
  ASSERT_GT(found.qps, 0.0);
  EXPECT_FALSE(found.unbounded);
  EXPECT_LE(found.at_max.ttft.p99, 0.5);
  // Half again the rate overloads the replica: the queue, and with it the p99 TTFT, grows.
  s.qps = 1.5 * found.qps;
  EXPECT_GT(simulate_serving(costs, generate_workload(s), c).ttft.p99, 0.5);
  EXPECT_DOUBLE_EQ(found.qps_per_replica, found.qps);  // one replica of one GPU
  EXPECT_DOUBLE_EQ(found.qps_per_gpu, found.qps);
  c.slo_ttft_s = 0.0;
  EXPECT_THROW(find_max_qps(costs, s, c), ConfigError);
  // 3 requests/s per replica: 9/s takes 3 replicas, 10/s four.
  MaxQpsResult three;
  three.qps_per_replica = 3.0;
  EXPECT_EQ(replicas_for_rate(three, 9.0), 3);
  EXPECT_EQ(replicas_for_rate(three, 10.0), 4);
}

TEST(Workload, PoissonRateAndSeed) {
  WorkloadSpec s;
  s.requests = 20000;
  s.qps = 5.0;
  s.input = {.kind = LengthDistribution::uniform, .min = 10, .max = 20};
  s.output = {.kind = LengthDistribution::fixed, .value = 7};
  s.seed = 42;
  const Workload a = generate_workload(s);
  const Workload b = generate_workload(s);
  ASSERT_EQ(a.requests.size(), 20000u);
  EXPECT_EQ(a.requests.back().arrival_s, b.requests.back().arrival_s);
  // 19,999 exponential gaps of mean 0.2 s: the sum's standard deviation is 0.2 sqrt(19999) = 28 s.
  EXPECT_NEAR(a.requests.back().arrival_s, 19999 * 0.2, 4 * 28.3);
  for (const Request& r : a.requests) {
    EXPECT_GE(r.input_len, 10);
    EXPECT_LE(r.input_len, 20);
    EXPECT_EQ(r.output_len, 7);
  }
  s.arrival = ArrivalProcess::constant;
  EXPECT_NEAR(generate_workload(s).requests[10].arrival_s, 2.0, 1e-12);
}

TEST(Workload, GammaBurstinessSetsTheGapsVariation) {
  WorkloadSpec s;
  s.requests = 50001;
  s.qps = 2.0;
  s.arrival = ArrivalProcess::gamma;
  s.burstiness = 3.0;
  s.input = {.kind = LengthDistribution::fixed, .value = 1};
  s.output = {.kind = LengthDistribution::fixed, .value = 1};
  const Workload w = generate_workload(s);
  double sum = 0, sq = 0;
  for (size_t i = 1; i < w.requests.size(); ++i) {
    const double g = w.requests[i].arrival_s - w.requests[i - 1].arrival_s;
    sum += g;
    sq += g * g;
  }
  const double n = 50000.0, mean = sum / n, cv = std::sqrt(sq / n - mean * mean) / mean;
  EXPECT_NEAR(mean, 0.5, 0.03);
  EXPECT_NEAR(cv, 3.0, 0.3);
}

TEST(Workload, LognormalFitAndTraceChecks) {
  const LengthSpec l = fit_lognormal({1, 10, 100});
  EXPECT_NEAR(l.mu, std::log(10.0), 1e-12);
  EXPECT_NEAR(l.sigma, std::log(10.0) * std::sqrt(2.0 / 3.0), 1e-12);
  EXPECT_EQ(l.min, 1);
  EXPECT_EQ(l.max, 100);
  WorkloadSpec s;
  // A trace at 0.5 requests/s (3 requests over 4 s) replayed at 2/s: times x 1/4, from 0.
  s.qps = 2.0;
  const Workload fast = workload_from_arrays({10.0, 12.0, 14.0}, {5, 5, 5}, {5, 5, 5}, {}, {}, 0, s, true);
  EXPECT_DOUBLE_EQ(fast.requests[1].arrival_s, 0.5);
  EXPECT_DOUBLE_EQ(fast.requests[2].arrival_s, 1.0);
  EXPECT_DOUBLE_EQ(workload_from_arrays({10.0, 12.0}, {5, 5}, {5, 5}, {}, {}, 0, s).requests[1].arrival_s, 12.0);
  EXPECT_THROW(workload_from_arrays({0.0, -1.0}, {5, 5}, {5, 5}, {}, {}, 0, s), ConfigError);
  EXPECT_THROW(workload_from_arrays({1.0, 0.5}, {5, 5}, {5, 5}, {}, {}, 0, s), ConfigError);
  EXPECT_THROW(workload_from_arrays({}, {5, 0}, {5, 5}, {}, {}, 0, s), ConfigError);
  try {
    workload_from_arrays({}, {5, 5, -3}, {5, 5, 5}, {}, {}, 0, s);
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("request 3"), std::string::npos);
  }
}

}  // namespace
}  // namespace accelsim
