#include <gtest/gtest.h>

#include "accelsim/error.h"
#include "accelsim/memory.h"
#include "testing/graph_builder.h"

namespace accelsim {
namespace {

using testing::add;
using testing::new_tensor;
using testing::view_of;

TEST(LivenessTest, ViewsAndInPlaceOpsKeepTheirBaseAlive) {
  // W: parameter [5,5] fp32 = 100 B; X: input [2,5] = 40 B -> resident 140 B.
  //   n0: A = mm(X, W)          allocates A (40 B)             live 180
  //   n1: v = view(A)           same storage                   live 180
  //   n2: r = relu_(v)          in place, same storage         live 180
  //   n3: C = add(r, X)         allocates C (40 B)             live 220  <- peak
  //   after n3: A dies (last touched by n3); C is a graph output and stays.
  Graph g;
  TensorId w = new_tensor(g, {5, 5}, DType::fp32, StorageKind::parameter);
  TensorId x = new_tensor(g, {2, 5}, DType::fp32, StorageKind::input);
  TensorId a = new_tensor(g, {2, 5});
  TensorId v = view_of(g, a, {10});
  TensorId r = view_of(g, a, {10});
  TensorId c = new_tensor(g, {2, 5});
  add(g, "mm", {x, w}, {a});
  add(g, "view", {a}, {v});
  add(g, "relu_", {v}, {r});
  add(g, "add", {r, x}, {c});
  g.add_output(c);

  const MemoryProfile m = compute_memory_profile(g);
  EXPECT_EQ(m.parameter_bytes, 100);
  EXPECT_EQ(m.input_bytes, 40);
  EXPECT_EQ(m.resident_bytes, 140);
  EXPECT_EQ(m.live_bytes, (std::vector<int64_t>{180, 180, 180, 220}));
  EXPECT_EQ(m.live_bytes_after, (std::vector<int64_t>{180, 180, 180, 180}));
  EXPECT_EQ(m.peak_bytes, 220);
  EXPECT_EQ(m.peak_activation_bytes, 80);
  EXPECT_EQ(m.peak_node, 3);
}

TEST(LivenessTest, TemporariesDieAfterTheirLastUse) {
  // A chain x -> t1 -> t2 -> t3 of 40 B tensors: at most two are live at once, so the peak
  // is resident (40) + 80 at n1, the first node to reach it.
  Graph g;
  TensorId x = new_tensor(g, {10}, DType::fp32, StorageKind::input);
  TensorId t1 = new_tensor(g, {10});
  TensorId t2 = new_tensor(g, {10});
  TensorId t3 = new_tensor(g, {10});
  add(g, "exp", {x}, {t1});
  add(g, "exp", {t1}, {t2});
  add(g, "exp", {t2}, {t3});
  g.add_output(t3);
  const MemoryProfile m = compute_memory_profile(g);
  EXPECT_EQ(m.live_bytes, (std::vector<int64_t>{80, 120, 120}));
  EXPECT_EQ(m.live_bytes_after, (std::vector<int64_t>{80, 80, 80}));
  EXPECT_EQ(m.peak_bytes, 120);
  EXPECT_EQ(m.peak_node, 1);
}

TEST(LivenessTest, RecordedReleasePointsKeepStoragesPastTheirLastUse) {
  // The same chain, but the program held t1 in a local variable until after n2 (released_after
  // = 2): under the recorded policy t1 stays live through n2; under last_use it does not.
  Graph g;
  TensorId x = new_tensor(g, {10}, DType::fp32, StorageKind::input);
  TensorMeta t1m{.shape = {10}, .strides = {1}, .dtype = DType::fp32};
  t1m.storage = g.add_storage({.size_bytes = 40, .released_after = 2});
  TensorId t1 = g.add_tensor(t1m);
  TensorId t2 = new_tensor(g, {10});
  TensorId t3 = new_tensor(g, {10});
  add(g, "exp", {x}, {t1});
  add(g, "exp", {t1}, {t2});
  add(g, "exp", {t2}, {t3});
  g.add_output(t3);
  const MemoryProfile recorded = compute_memory_profile(g, ReleasePolicy::recorded);
  EXPECT_EQ(recorded.live_bytes, (std::vector<int64_t>{80, 120, 160}));
  EXPECT_EQ(recorded.peak_bytes, 160);
  EXPECT_EQ(recorded.peak_node, 2);
  const MemoryProfile last_use = compute_memory_profile(g, ReleasePolicy::last_use);
  EXPECT_EQ(last_use.live_bytes, (std::vector<int64_t>{80, 120, 120}));
  EXPECT_THROW(g.add_storage({.size_bytes = 1, .released_after = -2}), ConfigError);
}

TEST(LivenessTest, UnusedResultIsFreedRightAway) {
  Graph g;
  TensorId x = new_tensor(g, {10}, DType::fp32, StorageKind::input);
  TensorId dead = new_tensor(g, {100});
  add(g, "exp", {x}, {dead});
  const MemoryProfile m = compute_memory_profile(g);
  EXPECT_EQ(m.live_bytes, (std::vector<int64_t>{440}));
  EXPECT_EQ(m.live_bytes_after, (std::vector<int64_t>{40}));
}

TEST(LivenessTest, EmptyGraphHoldsOnlyResidentMemory) {
  Graph g;
  new_tensor(g, {256}, DType::bf16, StorageKind::parameter);
  const MemoryProfile m = compute_memory_profile(g);
  EXPECT_EQ(m.peak_bytes, 512);
  EXPECT_EQ(m.peak_node, kNoNode);
}

TEST(LivenessTest, MemoryThatOverflows64BitsThrows) {
  // Two parameters of 2^62 bytes each fit one by one; together (2^63) they do not.
  Graph g;
  for (int i = 0; i < 2; ++i) g.add_storage({.size_bytes = int64_t{1} << 62, .kind = StorageKind::parameter});
  try {
    compute_memory_profile(g);
    FAIL() << "the resident bytes wrapped around";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "the graph's memory (the sum of its storages' bytes) overflows 64-bit byte counts");
  }
  // The same for activations live at once: two outputs of one node.
  Graph a;
  const StorageId x = a.add_storage({.size_bytes = 8, .kind = StorageKind::input});
  const StorageId y = a.add_storage({.size_bytes = int64_t{1} << 62});
  const StorageId z = a.add_storage({.size_bytes = int64_t{1} << 62});
  const TensorId tx = a.add_tensor({.shape = {1}, .dtype = DType::int64, .storage = x});
  const TensorId ty = a.add_tensor({.shape = {1}, .dtype = DType::int64, .storage = y});
  const TensorId tz = a.add_tensor({.shape = {1}, .dtype = DType::int64, .storage = z});
  a.add_node({.op = "split", .inputs = {tx}, .outputs = {ty, tz}});
  EXPECT_THROW(compute_memory_profile(a), ConfigError);
}

}  // namespace
}  // namespace accelsim
