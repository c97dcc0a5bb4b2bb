// Gemma 2 (google/gemma-2-9b): weights, KV cache, the windowed layers' attention and the
// soft-capping ops, worked out by hand from the config (testing/models.h, gemma2_9b).
#include <gtest/gtest.h>

#include "accelsim/builder.h"
#include "accelsim/op_catalog.h"
#include "testing/models.h"

namespace accelsim {
namespace {

TEST(Gemma2, WeightsAreTheReportsCounts) {
  // Gemma Team 2024 (arXiv 2408.00118) Table 1: 8,324,201,984 non-embedding parameters; the
  // tied embedding 256,000 x 3,584 = 917,504,000. Per layer: q, o 3584 x 4096; k, v 3584 x
  // 2048; gate, up, down 3584 x 14336; four norms of 3584: 198,195,200; x 42 + the final norm.
  const Graph g = build_graph(testing::gemma2_9b(), BuildOptions{.phase = Phase::prefill, .seq = 16});
  int64_t bytes = 0;
  for (const Storage& s : g.storages()) {
    if (s.kind == StorageKind::parameter) bytes += s.size_bytes;
  }
  EXPECT_EQ(42LL * 198195200 + 3584, 8324201984LL);
  EXPECT_EQ(bytes, 2LL * (8324201984LL + 917504000LL));
  EXPECT_EQ(parameter_count(testing::gemma2_9b()), 8324201984LL + 917504000LL);
}

TEST(Gemma2, KvCacheIsEveryLayersHeads) {
  // 42 layers x (K and V) x 8 heads x 256 x 2 bytes = 344,064 bytes a token.
  EXPECT_EQ(kv_cache_bytes(testing::gemma2_9b(), 1, 1000), 344064LL * 1000);
}

TEST(Gemma2, TheEvenLayersAttendThroughTheirWindow) {
  // A prefill of 8,192 tokens: a full causal layer sees 8192 x 8193 / 2 = 33,558,528 score
  // pairs; a windowed one 4096 x 4097 / 2 + 4096 x 4096 = 25,167,872. Each pair costs
  // 2 x (256 + 256) FLOPs in each of 16 heads; 21 layers of each kind.
  const Graph g = build_graph(testing::gemma2_9b(), BuildOptions{.phase = Phase::prefill, .seq = 8192});
  double flops = 0.0;
  int softcapped = 0, tanh = 0;
  for (const Node& n : g.nodes()) {
    const OpCount c = count_op(g, n);
    if (n.op == "accel_sim::attention") {
      flops += c.flops;
      softcapped += c.attention.softcap ? 1 : 0;
    }
    if (n.op == "tanh") ++tanh;
  }
  EXPECT_DOUBLE_EQ(flops, 16384.0 * 21 * (33558528.0 + 25167872.0));
  EXPECT_EQ(softcapped, 42);  // the scores' cap runs inside the fused kernel
  EXPECT_EQ(tanh, 1);         // the logits' cap: div, tanh, mul over the LM head's output
}

TEST(Gemma2, ADecodeStepReadsItsWindowOfTheCache) {
  // Decoding token 8,001: a windowed layer reads the K and V of its last 4,096 tokens (8 heads of
  // 256, 2 bytes), a global one all 8,001; both read the query (16 heads of 256).
  const Graph g = build_graph(testing::gemma2_9b(), BuildOptions{.phase = Phase::decode, .batch = 1, .context = 8000});
  double windowed = 0.0, global = 0.0;
  for (const Node& n : g.nodes()) {
    if (n.op != "accel_sim::attention") continue;
    (n.attr_int("window_size", 0) > 0 ? windowed : global) = count_op(g, n).bytes_read;
  }
  EXPECT_DOUBLE_EQ(windowed, 2.0 * 4096 * 8 * 256 * 2 + 16 * 256 * 2);
  EXPECT_DOUBLE_EQ(global, 2.0 * 8001 * 8 * 256 * 2 + 16 * 256 * 2);
}

}  // namespace
}  // namespace accelsim
