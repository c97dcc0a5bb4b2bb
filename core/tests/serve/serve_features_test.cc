// Serving features beyond the plain engine, worked out by hand: speculative decoding, prompts
// sharing a prefix, attention data parallelism with expert parallelism, and the host-memory tier
// of the KV cache.
#include <gtest/gtest.h>

#include <string>

#include "accelsim/error.h"
#include "accelsim/serve.h"
#include "testing/models.h"
#include "testing/round_device.h"
#include "testing/serve_devices.h"

namespace accelsim {
namespace {

// Speculative decoding (serve.h, SpeculativeConfig), worked out by hand.
ReplicaConfig eagle_replica(int64_t k, double acceptance) {
  ReplicaConfig r;
  r.simulate.cost.cuda_graphs = true;
  r.speculative.kind = SpeculativeKind::eagle;
  r.speculative.tokens = k;
  r.speculative.acceptance = acceptance;
  return r;
}

TEST(Speculative, ExpectedTokensPerStepAreLeviathansSeries) {
  SpeculativeConfig s;
  EXPECT_DOUBLE_EQ(s.expected_tokens(), 1.0);  // off
  s.kind = SpeculativeKind::eagle;
  s.tokens = 3;
  s.acceptance = 0.8;
  EXPECT_NEAR(s.expected_tokens(), (1 - 0.4096) / 0.2, 1e-12);  // 2.952
  s.acceptance = 0.0;
  EXPECT_DOUBLE_EQ(s.expected_tokens(), 1.0);
  s.acceptance = 1.0;
  EXPECT_DOUBLE_EQ(s.expected_tokens(), 4.0);
}

TEST(Speculative, AnEagleHeadHoldsOneLayerAndItsProjection) {
  // Llama-3-8B: one layer's 218,103,808 linear weights and 2 norms of 4,096, and the head's
  // 2 x 4096 x 4096 projection: 251,666,432 parameters, 503,332,864 bytes in bf16; one more
  // layer of K and V per token: 131,072 / 32 = 4,096 bytes.
  IterationModel plain(testing::llama3_8b(), testing::roomy_device(), ReplicaConfig{});
  IterationModel eagle(testing::llama3_8b(), testing::roomy_device(), eagle_replica(3, 0.8));
  EXPECT_DOUBLE_EQ(eagle.memory().draft_weight_bytes, 503332864.0);
  EXPECT_DOUBLE_EQ(eagle.memory().weight_bytes - plain.memory().weight_bytes, 503332864.0);
  EXPECT_DOUBLE_EQ(plain.memory().kv_bytes_per_token, 131072.0);
  EXPECT_DOUBLE_EQ(eagle.memory().kv_bytes_per_token, 131072.0 + 4096.0);
}

TEST(Speculative, AStepVerifiesKPlusOneTokensAndDraftsK) {
  IterationModel m(testing::llama3_8b(), testing::roomy_device(), eagle_replica(3, 0.8));
  const StepTime t = m.step_time({{}, 8, 8 * 40, 8});
  // 8 sequences verify 4 tokens each and sample each of them; the head drafts 3 tokens, each a
  // layer's share of the body, one layer of decode attention and the LM head over 8 rows.
  EXPECT_DOUBLE_EQ(t.body_s, m.body_time(32));
  EXPECT_DOUBLE_EQ(t.head_s, m.head_time(32));
  EXPECT_DOUBLE_EQ(t.attention_s, m.verify_attention_time(8, 8 * 40, 4));
  EXPECT_NEAR(t.draft_s, 3.0 * (m.body_time(8) / 32 + m.decode_attention_time(8, 8 * 40) / 32 + m.head_time(8)), 1e-15);
}

TEST(Speculative, ALoneRequestTakesTheStepsItsAcceptedShareMakes) {
  // 300 tokens after the first at 2.952 a step: floor(101 x 2.952) = 298 < 300 <= floor(102 x
  // 2.952) = 301, so 102 decode steps after the one prefill step.
  IterationModel m(testing::llama3_8b(), testing::roomy_device(), eagle_replica(3, 0.8));
  Workload w;
  w.requests.resize(1);
  w.requests[0].input_len = 100;
  w.requests[0].output_len = 301;
  const ServeResult r = simulate_serving(m, w, ServeConfig{});
  EXPECT_EQ(r.completed, 1);
  EXPECT_EQ(r.steps, 103);
}

TEST(Speculative, RefusedWhereItCannotRun) {
  ReplicaConfig r = eagle_replica(3, 0.8);
  r.speculative.kind = SpeculativeKind::mtp;  // Llama has no multi-token-prediction module
  EXPECT_THROW(IterationModel(testing::llama3_8b(), testing::roomy_device(), r), ConfigError);
  r.speculative.kind = SpeculativeKind::draft_model;  // without its draft
  EXPECT_THROW(IterationModel(testing::llama3_8b(), testing::roomy_device(), r), ConfigError);
  r = eagle_replica(3, 1.5);
  EXPECT_THROW(IterationModel(testing::llama3_8b(), testing::roomy_device(), r), ConfigError);
  r = eagle_replica(3, 0.8);
  r.pp = 2;
  r.system = testing::round_system();
  EXPECT_THROW(IterationModel(testing::llama3_8b(), testing::roomy_device(), r), ConfigError);
}


TEST(SharedPrefix, PromptsShareTheirLeadingBlocksAndTheCacheServesThem) {
  // Prompts of 1,000 tokens with half shared: 500 tokens, cut to 31 whole blocks of 16 (496
  // tokens) hashed alike in every request; the other 31 of the 62 whole blocks are each
  // request's own.
  WorkloadSpec spec;
  spec.requests = 2;
  spec.qps = 0.01;  // far apart: the first is done before the second arrives
  spec.arrival = ArrivalProcess::constant;
  spec.input.value = 1000;
  spec.output.value = 10;
  spec.shared_prefix = 0.5;
  const Workload w = generate_workload(spec);
  ASSERT_EQ(w.hash_block_tokens, 16);
  const Request &a = w.requests[0], &b = w.requests[1];
  ASSERT_EQ(a.hash_end - a.hash_begin, 62);
  for (int64_t i = 0; i < 62; ++i) {
    const bool same = w.hashes[static_cast<size_t>(a.hash_begin + i)] == w.hashes[static_cast<size_t>(b.hash_begin + i)];
    EXPECT_EQ(same, i < 31) << i;
  }
  // The second request finds the 496 shared tokens cached: 496 of the 2,000 prompt tokens.
  ReplicaConfig r;
  r.simulate.cost.cuda_graphs = true;
  IterationModel m(testing::llama3_8b(), testing::roomy_device(), r);
  ServeConfig c;
  c.scheduler.prefix_caching = true;
  const ServeResult out = simulate_serving(m, w, c);
  EXPECT_DOUBLE_EQ(out.prefix_hit_rate, 496.0 / 2000.0);
  spec.shared_prefix = 1.0;
  EXPECT_THROW(generate_workload(spec), ConfigError);
}


ReplicaConfig dp_replica(int64_t dp) {
  ReplicaConfig r;
  r.simulate.cost.cuda_graphs = true;
  r.dp_attention = dp;
  r.system = testing::round_system();
  return r;
}

TEST(AttentionDataParallel, EachGpuHoldsTheAttentionAndItsShareOfTheExperts) {
  // Mixtral-8x7B over 4 attention-DP GPUs: each holds every layer's attention (q, o 4096 x 4096;
  // k, v 1024 x 4096: 41,943,040), router (8 x 4096) and norms (2 x 4096), 2 of the 8 experts
  // (2 x 3 x 4096 x 14336 = 352,321,536), and the untied embedding and head (2 x 32,000 x 4,096)
  // and final norm: 32 x 394,305,536 + 262,144,000 + 4,096 = 12,879,925,248 parameters, 2 bytes
  // each.
  IterationModel m(testing::mixtral_8x7b(), testing::roomy_device(), dp_replica(4));
  EXPECT_DOUBLE_EQ(m.memory().weight_bytes, 2.0 * 12879925248.0);
  EXPECT_EQ(m.gpus(), 4);
  EXPECT_EQ(m.gpus_per_engine(), 1);
}

TEST(AttentionDataParallel, EveryRankRunsItsOwnBatch) {
  // Four requests at once on one replica of 4 attention-DP ranks: one each, prefilled side by
  // side: the four first tokens come at the same time, one step each.
  IterationModel m(testing::mixtral_8x7b(), testing::roomy_device(), dp_replica(4));
  Workload w;
  w.requests.resize(4);
  for (Request& r : w.requests) {
    r.input_len = 64;
    r.output_len = 1;
  }
  const ServeResult r = simulate_serving(m, w, ServeConfig{});
  EXPECT_EQ(r.steps, 4);
  EXPECT_EQ(r.gpus, 4);
  EXPECT_DOUBLE_EQ(r.ttft.max, r.ttft.p50);
}

TEST(AttentionDataParallel, RefusedWhereItDoesNotApply) {
  EXPECT_THROW(IterationModel(testing::llama3_8b(), testing::roomy_device(), dp_replica(4)), ConfigError);  // dense
  ReplicaConfig r = dp_replica(4);
  r.tp = 2;
  EXPECT_THROW(IterationModel(testing::mixtral_8x7b(), testing::roomy_device(), r), ConfigError);
  r = dp_replica(16);  // over the 8-GPU domain
  EXPECT_THROW(IterationModel(testing::mixtral_8x7b(), testing::roomy_device(), r), ConfigError);
  try {  // 8 experts over 3 GPUs: the expert-parallel degree is what does not divide them
    IterationModel(testing::mixtral_8x7b(), testing::roomy_device(), dp_replica(3));
    ADD_FAILURE() << "8 experts split over 3 GPUs";
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("num_experts (8) is not divisible by the expert-parallel degree 3"),
              std::string::npos)
        << e.what();
  }
}


TEST(HostKvTier, AnEvictedPrefixComesBackOverTheHostLink) {
  // A 2-layer GPT (K and V of 2 x 2 layers x 8 heads x 32 x 2 bytes = 2,048 bytes a token) with a
  // GPU cache of 100 blocks of 16 tokens. A (1,024 prompt tokens, prefix blocks 0..63) is evicted
  // by B (1,568 tokens: 99 blocks with its output token, all the cache less its 1% watermark);
  // C repeats A's prompt.
  const ModelSpec m = testing::small_gpt(2);
  ReplicaConfig r;
  r.simulate.cost.cuda_graphs = true;
  r.max_batched_tokens = 2048;
  const DeviceSpec d = testing::device_with_blocks(m, 100, r);
  Workload w;
  w.hash_block_tokens = 16;
  auto add = [&](int32_t prompt, int64_t first_hash, double at) {
    Request q;
    q.arrival_s = at;
    q.input_len = prompt;
    q.output_len = 1;
    q.hash_begin = static_cast<int64_t>(w.hashes.size());
    for (int64_t b = 0; b < prompt / 16; ++b) w.hashes.push_back(first_hash + b);
    q.hash_end = static_cast<int64_t>(w.hashes.size());
    w.requests.push_back(q);
  };
  add(1024, 0, 0.0);
  add(1568, 1000, 10.0);
  add(1024, 0, 20.0);
  ServeConfig c;
  c.scheduler.prefix_caching = true;
  {
    IterationModel gpu_only(m, d, r);
    ASSERT_DOUBLE_EQ(gpu_only.memory().kv_bytes_per_token, 2048.0);
    ASSERT_EQ(gpu_only.memory().kv_blocks, 100);
    EXPECT_DOUBLE_EQ(simulate_serving(gpu_only, w, c).prefix_hit_rate, 0.0);  // A's blocks are gone
  }
  // With 200 blocks of host memory at 1 GB/s: C finds all 64 of A's blocks there, loads them
  // (1,024 tokens x 2,048 bytes at 1 GB/s = 2.097152 ms) and computes its last token only:
  // 1,023 of the 3,616 prompt tokens served from the cache. (A's last block, the only one B left
  // on the GPU, is the least recently used there and makes room for the first load.)
  r.host_kv_bytes = 200.0 * 16 * 2048;
  r.host_link_bytes_per_s = 1e9;
  IterationModel tiered(m, d, r);
  EXPECT_EQ(tiered.memory().host_kv_blocks, 200);
  const ServeResult out = simulate_serving(tiered, w, c);
  EXPECT_DOUBLE_EQ(out.prefix_hit_rate, 1023.0 / 3616.0);
  StepBatch step;
  step.prefill = {{1, 1023}};
  step.host_loaded_tokens = 1024;
  const StepTime t = tiered.step_time(step);
  EXPECT_DOUBLE_EQ(t.host_load_s, 1024.0 * 2048 / 1e9);
  EXPECT_NEAR(out.request_ttft_s[2], t.total_s(), 1e-12);
}

}  // namespace
}  // namespace accelsim
