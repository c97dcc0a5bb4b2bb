// Llama 4 Scout: its parameters, chunked and global attention in prefill and decode, worked out
// by hand from the config (testing/models.h, llama4_scout).
#include <gtest/gtest.h>

#include "accelsim/builder.h"
#include "accelsim/op_catalog.h"
#include "testing/models.h"

namespace accelsim {
namespace {

TEST(Llama4, ParametersAreTheConfigsCount) {
  // A layer: q, o 5120 x 5120; k, v 5120 x 1024 (62,914,560); router 16 x 5120; 16 experts and
  // the shared one of 3 x 5120 x 8192 each (17 x 125,829,120); two norms of 5120:
  // 2,202,101,760. 48 of them, the untied embedding and head (2 x 202,048 x 5,120) and the
  // final norm: 107,769,861,120, as transformers' Llama4ForCausalLM counts it.
  EXPECT_EQ(parameter_count(testing::llama4_scout()), 107769861120LL);
  EXPECT_EQ(48LL * 2202101760 + 2LL * 202048 * 5120 + 5120, 107769861120LL);
}

double attention_flops(const Graph& g) {
  double flops = 0.0;
  for (const Node& n : g.nodes()) {
    if (n.op == "accel_sim::attention") flops += count_op(g, n).flops;
  }
  return flops;
}

TEST(Llama4, ChunkedLayersAttendWithinTheirChunkAndNopeLayersToEverything) {
  // A prefill of 16,384 tokens: a chunked layer's two chunks see 2 x 8192 x 8193 / 2 =
  // 67,117,056 score pairs; a NoPE layer 16384 x 16385 / 2 = 134,225,920. Each pair costs
  // 2 x (128 + 128) FLOPs in each of 40 heads; 36 chunked layers, 12 NoPE ones.
  const Graph g = build_graph(testing::llama4_scout(), BuildOptions{.phase = Phase::prefill, .seq = 16384});
  EXPECT_DOUBLE_EQ(attention_flops(g), 20480.0 * (36 * 67117056.0 + 12 * 134225920.0));
}

TEST(Llama4, DecodeReadsOnlyItsChunk) {
  // Decoding token 10,001: a chunked layer's query sees its chunk, 10000 mod 8192 + 1 = 1,809
  // keys, and reads only their K and V; a NoPE layer sees all 10,001.
  const Graph g = build_graph(testing::llama4_scout(), BuildOptions{.phase = Phase::decode, .batch = 1, .context = 10000});
  EXPECT_DOUBLE_EQ(attention_flops(g), 20480.0 * (36 * 1809.0 + 12 * 10001.0));
  for (const Node& n : g.nodes()) {
    if (n.op != "accel_sim::attention" || n.attr_int("chunk_size", 0) == 0) continue;
    // K and V of 1,809 tokens x 8 heads x 128 x 2 bytes each, and the query and output rows.
    const OpCount c = count_op(g, n);
    const double kv = 2.0 * 1809 * 8 * 128 * 2;
    const double q = 40.0 * 128 * 2;
    EXPECT_DOUBLE_EQ(c.bytes_read, kv + q);
    break;
  }
}

}  // namespace
}  // namespace accelsim
