// Megatron-LM's 1F1B and interleaved 1F1B schedules, against timelines worked out by hand.
//
// The hand timelines use forward 1 s and backward 2 s per micro-batch and chunk (unequal, so
// that a forward run where a backward belongs, or the reverse, shows), and follow the pass order
// of schedules.py: a pass starts at max(its stage is free, its input has arrived).
#include "accelsim/pipeline.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "accelsim/error.h"

namespace accelsim {
namespace {

constexpr PipelineWork F = PipelineWork::forward;
constexpr PipelineWork B = PipelineWork::backward;

struct Pass {
  PipelineWork work;
  int64_t chunk, micro_batch;
  double start_s, end_s;
};

std::vector<PipelineEvent> on_stage(const PipelineSchedule& s, int64_t stage) {
  std::vector<PipelineEvent> out;
  for (const PipelineEvent& e : s.events) {
    if (e.stage == stage && e.work != PipelineWork::send) out.push_back(e);
  }
  return out;
}

void expect_timeline(const PipelineSchedule& s, int64_t stage, const std::vector<Pass>& want) {
  const std::vector<PipelineEvent> got = on_stage(s, stage);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE("stage " + std::to_string(stage) + ", pass " + std::to_string(i));
    EXPECT_EQ(got[i].work, want[i].work);
    EXPECT_EQ(got[i].chunk, want[i].chunk);
    EXPECT_EQ(got[i].micro_batch, want[i].micro_batch);
    EXPECT_DOUBLE_EQ(got[i].start_s, want[i].start_s);
    EXPECT_DOUBLE_EQ(got[i].end_s, want[i].end_s);
  }
}

TEST(PipelineTest, OneFOneBTwoStagesFourMicroBatchesByHand) {
  // pp 2, m 4. Stage 0 warms up with 1 forward, stage 1 with none:
  //   stage 1: F0 [1,2] B0 [2,4] F1 [4,5] B1 [5,7] F2 [7,8] B2 [8,10] F3 [10,11] B3 [11,13]
  //   stage 0: F0 [0,1] F1 [1,2] B0 waits for stage 1's B0 (4) ... B3 waits for 13.
  const PipelineSchedule s = schedule_pipeline(2, 1, 4, 1.0, 2.0, 0.0);
  expect_timeline(s, 0, {{F, 0, 0, 0, 1}, {F, 0, 1, 1, 2}, {B, 0, 0, 4, 6}, {F, 0, 2, 6, 7},
                         {B, 0, 1, 7, 9}, {F, 0, 3, 9, 10}, {B, 0, 2, 10, 12}, {B, 0, 3, 13, 15}});
  expect_timeline(s, 1, {{F, 0, 0, 1, 2}, {B, 0, 0, 2, 4}, {F, 0, 1, 4, 5}, {B, 0, 1, 5, 7},
                         {F, 0, 2, 7, 8}, {B, 0, 2, 8, 10}, {F, 0, 3, 10, 11}, {B, 0, 3, 11, 13}});
  // (m + pp - 1)(f + b) = 5 x 3; bubble (pp - 1)(f + b) = 3.
  EXPECT_DOUBLE_EQ(s.makespan_s, 15.0);
  EXPECT_DOUBLE_EQ(s.bubble_s, 3.0);
  EXPECT_EQ(s.events.size(), 16u);  // no sends when p2p_s is 0
}

TEST(PipelineTest, OneFOneBMakespanIsMicroBatchesPlusStagesMinusOne) {
  // Narayanan et al. 2021, section 2.2.1: (m + p - 1)(tf + tb) without communication.
  for (auto [pp, m] : {std::pair<int64_t, int64_t>{4, 8}, {4, 1}, {3, 2}, {8, 16}}) {
    const PipelineSchedule s = schedule_pipeline(pp, 1, m, 1.0, 2.0, 0.0);
    EXPECT_DOUBLE_EQ(s.makespan_s, static_cast<double>(m + pp - 1) * 3.0) << pp << " " << m;
    EXPECT_DOUBLE_EQ(s.bubble_s, static_cast<double>(pp - 1) * 3.0) << pp << " " << m;
  }
}

TEST(PipelineTest, OneStageHasNoBubble) {
  const PipelineSchedule s = schedule_pipeline(1, 1, 5, 1.0, 2.0, 0.5);
  EXPECT_DOUBLE_EQ(s.makespan_s, 15.0);  // m (f + b)
  EXPECT_DOUBLE_EQ(s.bubble_s, 0.0);
  EXPECT_EQ(s.events.size(), 10u);  // nothing to send to oneself
  // Chunks on one stage hand over without a send either: 3 chunks x 4 micro-batches x 3 s.
  EXPECT_DOUBLE_EQ(schedule_pipeline(1, 3, 4, 1.0, 2.0, 0.5).makespan_s, 36.0);
}

TEST(PipelineTest, OneFOneBSendsAddFillAndDrain) {
  // pp 2, m 2, p2p 0.5:
  //   stage 0: F0 [0,1] F1 [1,2]; sends [1,1.5] [2,2.5]
  //   stage 1: F0 [1.5,2.5] B0 [2.5,4.5] (send [4.5,5]) F1 [4.5,5.5] B1 [5.5,7.5] (send [7.5,8])
  //   stage 0: B0 [5,7] B1 [8,10].
  // m (f + b) + (pp - 1)(f + b) + 2 (pp - 1) p2p = 6 + 3 + 1.
  const PipelineSchedule s = schedule_pipeline(2, 1, 2, 1.0, 2.0, 0.5);
  expect_timeline(s, 0, {{F, 0, 0, 0, 1}, {F, 0, 1, 1, 2}, {B, 0, 0, 5, 7}, {B, 0, 1, 8, 10}});
  expect_timeline(s, 1, {{F, 0, 0, 1.5, 2.5}, {B, 0, 0, 2.5, 4.5}, {F, 0, 1, 4.5, 5.5},
                         {B, 0, 1, 5.5, 7.5}});
  EXPECT_DOUBLE_EQ(s.makespan_s, 10.0);
  EXPECT_DOUBLE_EQ(s.bubble_s, 4.0);
  std::vector<std::tuple<int64_t, int64_t, PipelineWork, int64_t, double, double>> sends;
  for (const PipelineEvent& e : s.events) {
    if (e.work == PipelineWork::send) {
      sends.emplace_back(e.stage, e.to_stage, e.payload, e.micro_batch, e.start_s, e.end_s);
    }
  }
  using T = decltype(sends)::value_type;
  EXPECT_EQ(sends, (std::vector<T>{{0, 1, F, 0, 1.0, 1.5}, {0, 1, F, 1, 2.0, 2.5},
                                   {1, 0, B, 0, 4.5, 5.0}, {1, 0, B, 1, 7.5, 8.0}}));
}

TEST(PipelineTest, InterleavedTwoStagesTwoChunksFourMicroBatchesByHand) {
  // pp 2, v 2, m 4: model stages j = chunk x 2 + stage. Forward pass k runs chunk (k mod 4) / 2
  // on micro-batch (k / 4) 2 + k mod 2: c0m0 c0m1 c1m0 c1m1 c0m2 c0m3 c1m2 c1m3; backwards run
  // c1m0 c1m1 c0m0 c0m1 c1m2 c1m3 c0m2 c0m3. Warm-up: stage 0 (2-0-1) 2 + (2-1) 2 = 4 forwards,
  // stage 1 2 forwards.
  const PipelineSchedule s = schedule_pipeline(2, 2, 4, 1.0, 2.0, 0.0);
  expect_timeline(s, 0, {{F, 0, 0, 0, 1},   {F, 0, 1, 1, 2},   {F, 1, 0, 2, 3},   {F, 1, 1, 3, 4},
                         {F, 0, 2, 4, 5},   {B, 1, 0, 6, 8},   {F, 0, 3, 8, 9},   {B, 1, 1, 9, 11},
                         {F, 1, 2, 11, 12}, {B, 0, 0, 12, 14}, {F, 1, 3, 14, 15}, {B, 0, 1, 15, 17},
                         {B, 1, 2, 18, 20}, {B, 1, 3, 21, 23}, {B, 0, 2, 23, 25}, {B, 0, 3, 25, 27}});
  expect_timeline(s, 1, {{F, 0, 0, 1, 2},   {F, 0, 1, 2, 3},   {F, 1, 0, 3, 4},   {B, 1, 0, 4, 6},
                         {F, 1, 1, 6, 7},   {B, 1, 1, 7, 9},   {F, 0, 2, 9, 10},  {B, 0, 0, 10, 12},
                         {F, 0, 3, 12, 13}, {B, 0, 1, 13, 15}, {F, 1, 2, 15, 16}, {B, 1, 2, 16, 18},
                         {F, 1, 3, 18, 19}, {B, 1, 3, 19, 21}, {B, 0, 2, 21, 23}, {B, 0, 3, 23, 25}});
  // Busy m v (f + b) = 24; bubble (pp - 1)/v x (v f + v b) = 3 (Narayanan et al. 2021, 2.2.2).
  EXPECT_DOUBLE_EQ(s.makespan_s, 27.0);
  EXPECT_DOUBLE_EQ(s.bubble_s, 3.0);
}

TEST(PipelineTest, InterleavedWithAsManyMicroBatchesAsStagesRunsAllForwardsFirst) {
  // pp 2, v 2, m 2 = pp: every stage runs its 4 forwards, then its 4 backwards. With p2p 0.5
  // every hop between model stages crosses stages, 3 hops each way on the critical path:
  //   stage 0: F c0m0 [0,1] c0m1 [1,2] c1m0 [3,4] c1m1 [4,5]   B c1m0 [9,11] c1m1 [11,13]
  //            B c0m0 [14,16] c0m1 [16,18]
  //   stage 1: F c0m0 [1.5,2.5] c0m1 [2.5,3.5] c1m0 [4.5,5.5] c1m1 [5.5,6.5]
  //            B c1m0 [6.5,8.5] c1m1 [8.5,10.5] c0m0 [11.5,13.5] c0m1 [13.5,15.5]
  const PipelineSchedule s = schedule_pipeline(2, 2, 2, 1.0, 2.0, 0.5);
  expect_timeline(s, 0, {{F, 0, 0, 0, 1}, {F, 0, 1, 1, 2}, {F, 1, 0, 3, 4}, {F, 1, 1, 4, 5},
                         {B, 1, 0, 9, 11}, {B, 1, 1, 11, 13}, {B, 0, 0, 14, 16}, {B, 0, 1, 16, 18}});
  expect_timeline(s, 1, {{F, 0, 0, 1.5, 2.5}, {F, 0, 1, 2.5, 3.5}, {F, 1, 0, 4.5, 5.5},
                         {F, 1, 1, 5.5, 6.5}, {B, 1, 0, 6.5, 8.5}, {B, 1, 1, 8.5, 10.5},
                         {B, 0, 0, 11.5, 13.5}, {B, 0, 1, 13.5, 15.5}});
  EXPECT_DOUBLE_EQ(s.makespan_s, 18.0);  // 12 busy + 3 bubble + 6 x 0.5 sends
  EXPECT_DOUBLE_EQ(s.bubble_s, 6.0);
  // Sends: m (pp v - 1) forward and as many backward.
  int sends = 0;
  for (const PipelineEvent& e : s.events) sends += e.work == PipelineWork::send;
  EXPECT_EQ(sends, 12);
  EXPECT_DOUBLE_EQ(schedule_pipeline(2, 2, 2, 1.0, 2.0, 0.0).makespan_s, 15.0);
}

TEST(PipelineTest, InterleavedBubbleIsStagesMinusOneChunkPasses) {
  // (pp - 1)/v x (v f + v b) = (pp - 1)(f + b) with f, b per chunk.
  for (auto [pp, v, m] : {std::tuple<int64_t, int64_t, int64_t>{4, 2, 8}, {4, 3, 12}, {2, 4, 6}}) {
    const PipelineSchedule s = schedule_pipeline(pp, v, m, 1.5, 1.5, 0.0);
    EXPECT_DOUBLE_EQ(s.bubble_s, static_cast<double>(pp - 1) * 3.0) << pp << " " << v << " " << m;
    EXPECT_DOUBLE_EQ(s.makespan_s, static_cast<double>(m * v + pp - 1) * 3.0);
  }
}

TEST(PipelineTest, EveryStageRunsEveryPassOnceInOrderAndAfterItsInput) {
  const int64_t pp = 4, v = 3, m = 8;
  const double f = 1.0, b = 2.0, p2p = 0.3;
  const PipelineSchedule s = schedule_pipeline(pp, v, m, f, b, p2p);
  std::map<std::tuple<PipelineWork, int64_t, int64_t>, PipelineEvent> pass;  // (work, j, i)
  std::map<std::tuple<int64_t, int64_t, PipelineWork, int64_t, int64_t>, PipelineEvent> sent;
  std::vector<double> stage_end(pp, 0.0);
  std::map<std::pair<int64_t, int64_t>, double> link_end;
  double last_end = 0.0;
  for (const PipelineEvent& e : s.events) {
    last_end = std::max(last_end, e.end_s);
    if (e.work == PipelineWork::send) {
      EXPECT_NEAR(e.end_s - e.start_s, p2p, 1e-9);
      double& free = link_end[{e.stage, e.to_stage}];
      EXPECT_GE(e.start_s, free - 1e-12);  // one message at a time on a link
      free = e.end_s;
      sent[{e.stage, e.chunk, e.payload, e.micro_batch, e.to_stage}] = e;
      continue;
    }
    EXPECT_NEAR(e.end_s - e.start_s, e.work == F ? f : b, 1e-9);
    EXPECT_GE(e.start_s, stage_end[e.stage] - 1e-12);  // passes on a stage never overlap
    stage_end[e.stage] = e.end_s;
    const auto [it, fresh] = pass.insert({{e.work, e.chunk * pp + e.stage, e.micro_batch}, e});
    EXPECT_TRUE(fresh);
  }
  EXPECT_EQ(pass.size(), static_cast<size_t>(2 * pp * v * m));  // m v forwards, m v backwards each
  EXPECT_EQ(sent.size(), static_cast<size_t>(2 * m * (pp * v - 1)));
  EXPECT_DOUBLE_EQ(s.makespan_s, last_end);
  EXPECT_NEAR(s.bubble_s, s.makespan_s - static_cast<double>(m * v) * (f + b), 1e-9);
  for (const auto& [key, e] : pass) {
    const auto [work, j, i] = key;
    if (work == F && j > 0) {
      const PipelineEvent& producer = pass.at({F, j - 1, i});
      const PipelineEvent& send = sent.at({producer.stage, producer.chunk, F, i, e.stage});
      EXPECT_GE(send.start_s, producer.end_s - 1e-12);
      EXPECT_GE(e.start_s, send.end_s - 1e-12);
    } else if (work == B && j == pp * v - 1) {
      EXPECT_GE(e.start_s, pass.at({F, j, i}).end_s - 1e-12);
    } else if (work == B) {
      const PipelineEvent& producer = pass.at({B, j + 1, i});
      const PipelineEvent& send = sent.at({producer.stage, producer.chunk, B, i, e.stage});
      EXPECT_GE(send.start_s, producer.end_s - 1e-12);
      EXPECT_GE(e.start_s, send.end_s - 1e-12);
    }
  }
}

TEST(PipelineTest, RejectsWhatMegatronRejects) {
  EXPECT_THROW(schedule_pipeline(2, 2, 3, 1.0, 2.0, 0.0), ConfigError);  // m not a multiple of pp
  EXPECT_NO_THROW(schedule_pipeline(2, 1, 3, 1.0, 2.0, 0.0));           // fine without chunks
  EXPECT_THROW(schedule_pipeline(0, 1, 4, 1.0, 2.0, 0.0), ConfigError);
  EXPECT_THROW(schedule_pipeline(2, 1, 0, 1.0, 2.0, 0.0), ConfigError);
  EXPECT_THROW(schedule_pipeline(2, 1, 4, -1.0, 2.0, 0.0), ConfigError);
}

}  // namespace
}  // namespace accelsim
