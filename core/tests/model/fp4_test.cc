// FP4 weights and GEMMs: the packed bytes and block scales of NVFP4 and MXFP4 weights, the GEMMs
// on the fp4 units (W4A4) or dequantized (W4A16), and the fp4 peak, all worked out by hand.
#include <gtest/gtest.h>

#include <string>

#include "accelsim/builder.h"
#include "accelsim/error.h"
#include "accelsim/op_catalog.h"
#include "accelsim/simulate.h"
#include "testing/models.h"
#include "testing/round_device.h"

namespace accelsim {
namespace {

int64_t parameter_bytes(const Graph& g) {
  int64_t bytes = 0;
  for (const Storage& s : g.storages()) {
    if (s.kind == StorageKind::parameter) bytes += s.size_bytes;
  }
  return bytes;
}

BuildOptions prefill(int64_t seq) {
  BuildOptions b;
  b.phase = Phase::prefill;
  b.seq = seq;
  return b;
}

// Llama-3-8B: 32 layers of 218,103,808 linear weights (q, o 4096 x 4096; k, v 1024 x 4096;
// gate, up 14336 x 4096; down 4096 x 14336), embedding and LM head 128,256 x 4,096 each, and
// 65 norms of 4,096, all bf16 but the layers' linears.
constexpr int64_t kLinear = 32LL * 218103808;
constexpr int64_t kOther = 2LL * (2 * 128256 * 4096 + 65 * 4096);

TEST(Fp4Weights, Nvfp4PacksTwoValuesPerByteWithAnFp8ScalePer16) {
  ModelSpec m = testing::llama3_8b();
  m.fp4_weights = Fp4Format::nvfp4;
  EXPECT_EQ(parameter_bytes(build_graph(m, prefill(16))), kLinear / 2 + kLinear / 16 + kOther);
}

TEST(Fp4Weights, Mxfp4PacksTwoValuesPerByteWithAnE8m0ScalePer32) {
  ModelSpec m = testing::llama3_8b();
  m.fp4_weights = Fp4Format::mxfp4;
  EXPECT_EQ(parameter_bytes(build_graph(m, prefill(16))), kLinear / 2 + kLinear / 32 + kOther);
}

TEST(Fp4Weights, Fp4GemmsRunOnTheFp4UnitsAndDequantizedOnesAtTheActivationDtype) {
  ModelSpec m = testing::llama3_8b();
  m.num_layers = 1;
  m.fp4_weights = Fp4Format::nvfp4;
  for (bool w4a4 : {true, false}) {
    BuildOptions b = prefill(512);
    b.fp4_gemms = w4a4;
    const Graph g = build_graph(m, b);
    double fp4_flops = 0.0, bf16_linear_flops = 0.0;
    int quantize = 0;
    for (const Node& n : g.nodes()) {
      const OpCount c = count_op(g, n);
      EXPECT_TRUE(c.known) << n.op;
      if (n.op == "accel_sim::fp4_quantize") ++quantize;
      if (c.compute_dtype == DType::fp4_e2m1) fp4_flops += c.flops;
      if (n.op == "accel_sim::fp4_weight_mm") bf16_linear_flops += c.flops;
    }
    // One layer's linears on 512 tokens: 2 x 512 x 218,103,808 FLOPs.
    const double linear_flops = 2.0 * 512 * 218103808;
    EXPECT_DOUBLE_EQ(w4a4 ? fp4_flops : bf16_linear_flops, linear_flops);
    EXPECT_DOUBLE_EQ(w4a4 ? bf16_linear_flops : fp4_flops, 0.0);
    // The inputs quantized once each: the normed input (q, k, v), the attention output (o),
    // the normed residual (gate, up) and the gated activation (down).
    EXPECT_EQ(quantize, w4a4 ? 4 : 0);
  }
}

TEST(Fp4Weights, AnFp4GemmRunsAtTheFp4Peak) {
  // The round device with 400 TFLOP/s of fp4: q_proj of 4,096 tokens (2 x 4096^3 FLOPs =
  // 137.4 GFLOP) is compute-bound under the roofline: 0.3436 ms, where bf16 takes 4x longer.
  DeviceSpec d = testing::round_device();
  d.memory_bytes = 80e9;
  d.fp4_matrix_flops_per_s = 400e12;
  ModelSpec m = testing::llama3_8b();
  m.num_layers = 1;
  m.fp4_weights = Fp4Format::nvfp4;
  BuildOptions b = prefill(4096);
  b.fp4_gemms = true;
  const Graph g = build_graph(m, b);
  SimulateOptions o;
  const SimulationResult r = simulate(g, d, o);
  bool found = false;
  for (const OpResult& op : r.ops) {
    const Node& n = g.node(op.node);
    if (n.op != "accel_sim::fp4_mm" || n.module_path.find("q_proj") == std::string::npos) continue;
    found = true;
    EXPECT_EQ(op.cost.peak_unit, "fp4_matrix");
    EXPECT_NEAR(op.cost.compute_time_s, 2.0 * 4096.0 * 4096.0 * 4096.0 / 400e12, 1e-12);
  }
  EXPECT_TRUE(found);
  // Without fp4 units the same GEMM falls back to the next unit, and says so.
  d.fp4_matrix_flops_per_s = 0;
  const PeakRate p = peak_rate(d, DType::fp4_e2m1, true, false);
  EXPECT_TRUE(p.fallback);
  EXPECT_DOUBLE_EQ(p.flops_per_s, 100e12);
}

TEST(Fp4Weights, RefusedWhereTheyCannotRun) {
  ModelSpec m = testing::llama3_8b();
  BuildOptions b = prefill(16);
  b.fp4_gemms = true;
  EXPECT_THROW(build_graph(m, b), ConfigError);  // fp4 GEMMs without fp4 weights
  m.fp4_weights = Fp4Format::mxfp4;
  b.fp4_gemms = false;
  b.fp8_gemms = true;
  EXPECT_THROW(build_graph(m, b), ConfigError);  // fp8 GEMMs over fp4 weights
  m.int4_group_size = 128;
  EXPECT_THROW(m.validate(), ConfigError);  // int4 and fp4 weights at once
  // No tensor holds fp4 values unpacked.
  Graph g;
  Storage s;
  s.size_bytes = 16;
  TensorMeta t;
  t.shape = {32};
  t.dtype = DType::fp4_e2m1;
  t.storage = g.add_storage(s);
  EXPECT_THROW(g.add_tensor(t), ConfigError);
}

}  // namespace
}  // namespace accelsim
