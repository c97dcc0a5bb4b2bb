#include "accelsim/graph.h"

#include <gtest/gtest.h>

#include "accelsim/error.h"
#include "testing/graph_builder.h"

namespace accelsim {
namespace {

using testing::add;
using testing::new_tensor;

TEST(DTypeTest, SizesMatchPyTorch) {
  EXPECT_EQ(size_bytes(DType::fp32), 4);
  EXPECT_EQ(size_bytes(DType::bf16), 2);
  EXPECT_EQ(size_bytes(DType::fp8_e4m3), 1);
  EXPECT_EQ(size_bytes(DType::int64), 8);
  EXPECT_EQ(size_bytes(DType::boolean), 1);
  EXPECT_EQ(size_bytes(DType::complex64), 8);
}

TEST(DTypeTest, ParsesFileSpellingsAndRejectsUnknown) {
  EXPECT_EQ(parse_dtype("bf16"), DType::bf16);
  EXPECT_EQ(parse_dtype("bool"), DType::boolean);
  EXPECT_EQ(dtype_name(DType::fp8_e5m2), "fp8_e5m2");
  EXPECT_THROW(parse_dtype("float"), ConfigError);
}

TEST(TensorMetaTest, AccessedBytesCountBroadcastDimensionsOnce) {
  // A [4, 8] fp32 tensor expanded from a [1, 8] row: stride 0 on dim 0 -> 8 elements read.
  TensorMeta t{.shape = {4, 8}, .strides = {0, 1}, .dtype = DType::fp32};
  EXPECT_EQ(t.numel(), 32);
  EXPECT_EQ(t.logical_bytes(), 128);
  EXPECT_EQ(t.accessed_bytes(), 32);
  TensorMeta scalar{.shape = {}, .strides = {}, .dtype = DType::bf16};
  EXPECT_EQ(scalar.numel(), 1);
  EXPECT_EQ(scalar.accessed_bytes(), 2);
}

TEST(TensorMetaTest, ByteCountsThatOverflow64BitsThrow) {
  // [2^31, 2^31] bf16: 2^62 elements fit, 2^63 bytes do not.
  const TensorMeta big{.shape = {int64_t{1} << 31, int64_t{1} << 31}, .dtype = DType::bf16, .name = "big"};
  EXPECT_EQ(big.numel(), int64_t{1} << 62);
  try {
    (void)big.logical_bytes();
    FAIL() << "logical_bytes wrapped around";
  } catch (const ConfigError& e) {
    EXPECT_STREQ(e.what(), "tensor 'big' [2147483648, 2147483648] of bf16: its element count x bytes "
                           "overflows 64-bit byte counts");
  }
  EXPECT_THROW((void)big.accessed_bytes(), ConfigError);
  const TensorMeta huge{.shape = {int64_t{1} << 32, int64_t{1} << 32}, .dtype = DType::int8};
  EXPECT_THROW((void)huge.numel(), ConfigError);
  // An empty tensor has no elements, whatever its other dimensions.
  const TensorMeta empty{.shape = {int64_t{1} << 40, int64_t{1} << 40, 0}, .dtype = DType::fp32};
  EXPECT_EQ(empty.numel(), 0);
  EXPECT_EQ(empty.logical_bytes(), 0);
  EXPECT_EQ(empty.accessed_bytes(), 0);
  // A graph does not take a tensor whose bytes it cannot count.
  Graph g;
  const StorageId s = g.add_storage({.size_bytes = 0});
  TensorMeta t = big;
  t.storage = s;
  EXPECT_THROW(g.add_tensor(t), ConfigError);
}

TEST(GraphTest, RejectsReferencesToUnknownIds) {
  Graph g;
  EXPECT_THROW(g.add_tensor({.shape = {2}, .storage = 0}), ConfigError);
  TensorId x = new_tensor(g, {2});
  EXPECT_THROW(add(g, "relu", {x}, {7}), ConfigError);
  EXPECT_THROW(add(g, "relu", {-1}, {x}), ConfigError);
  EXPECT_THROW(g.add_output(3), ConfigError);
  EXPECT_THROW(g.add_storage({.size_bytes = -1}), ConfigError);
  EXPECT_THROW(g.add_tensor({.shape = {2, 2}, .strides = {1}, .storage = 0}), ConfigError);
}

TEST(GraphTest, ProducersMapEachTensorToTheNodeThatMadeIt) {
  Graph g;
  TensorId x = new_tensor(g, {2}, DType::fp32, StorageKind::input);
  TensorId y = new_tensor(g, {2});
  TensorId z = new_tensor(g, {2});
  add(g, "relu", {x}, {y});
  add(g, "neg", {y}, {z});
  const std::vector<NodeId> p = g.producers();
  EXPECT_EQ(p[x], kNoNode);
  EXPECT_EQ(p[y], 0);
  EXPECT_EQ(p[z], 1);
}

TEST(NodeTest, TypedAttributeLookups) {
  Node n{.op = "sum",
         .attrs = {{"dim", std::vector<int64_t>{-1}},
                   {"keepdim", true},
                   {"scale", 0.5},
                   {"groups", int64_t{2}}}};
  EXPECT_EQ(n.attr_ints("dim"), std::vector<int64_t>{-1});
  EXPECT_TRUE(n.attr_bool("keepdim", false));
  EXPECT_DOUBLE_EQ(n.attr_double("scale", 1.0), 0.5);
  EXPECT_DOUBLE_EQ(n.attr_double("groups", 1.0), 2.0);
  EXPECT_EQ(n.attr_int("absent", 7), 7);
  EXPECT_EQ(n.attr_ints("groups"), std::vector<int64_t>{2});
  EXPECT_THROW(n.attr_int("dim", 0), ConfigError);
}

}  // namespace
}  // namespace accelsim
