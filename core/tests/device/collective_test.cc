// Collective times against alpha-beta values worked out by hand on a round-number system.
#include "accelsim/collective.h"

#include <gtest/gtest.h>

#include "accelsim/error.h"

namespace accelsim {
namespace {

// 8-GPU domains at 100 GB/s and 1 us per step; one 10 GB/s NIC per GPU at 5 us; no launch cost.
SystemSpec round_system() {
  SystemSpec s;
  s.id = "round";
  s.gpus_per_node = 8;
  s.scaleup_domain = 8;
  s.scaleup = {.bandwidth_bytes_per_s = 100e9, .latency_s = 1e-6, .efficiency = 1.0};
  s.nics_per_gpu = 1;
  s.scaleout = {.bandwidth_bytes_per_s = 10e9, .latency_s = 5e-6, .efficiency = 1.0};
  return s;
}

CollectiveEstimate run(CollectiveKind kind, double bytes, int64_t ranks,
                       CollectiveAlgorithm algo = CollectiveAlgorithm::automatic,
                       const SystemSpec& s = round_system()) {
  return estimate_collective({.kind = kind, .bytes = bytes, .ranks = ranks, .algorithm = algo}, s);
}

TEST(CollectiveTest, RingAndTreeAllReduceInsideADomain) {
  // Ring, 8 ranks, 1 GB: 2 * 7 * 1 us + 2 * 7/8 * 1 GB / 100 GB/s = 14 us + 17.5 ms.
  const CollectiveEstimate ring = run(CollectiveKind::all_reduce, 1e9, 8, CollectiveAlgorithm::ring);
  EXPECT_NEAR(ring.time_s, 14e-6 + 0.0175, 1e-12);
  EXPECT_NEAR(ring.busbw_bytes_per_s, 1e9 / ring.time_s * 14.0 / 8.0, 1e-3);
  // Tree: 2 * log2(8) * 1 us + the same bandwidth term; automatic takes it (fewer steps).
  const CollectiveEstimate best = run(CollectiveKind::all_reduce, 1e9, 8);
  EXPECT_EQ(best.algorithm, CollectiveAlgorithm::tree);
  EXPECT_NEAR(best.time_s, 6e-6 + 0.0175, 1e-12);
  // All-gather of a 1 GB output: 7 us + 7/8 * 10 ms.
  EXPECT_NEAR(run(CollectiveKind::all_gather, 1e9, 8, CollectiveAlgorithm::ring).time_s,
              7e-6 + 0.00875, 1e-12);
  // Send/recv of 1 GB: 1 us + 10 ms; one rank: nothing to do.
  EXPECT_NEAR(run(CollectiveKind::send_recv, 1e9, 2).time_s, 1e-6 + 0.01, 1e-12);
  EXPECT_EQ(run(CollectiveKind::all_reduce, 1e9, 1).time_s, 0.0);
}

TEST(CollectiveTest, NvlsReducesInTheSwitch) {
  // NVLS at 60% of 100 GB/s: 1 us + 1 GB / 60 GB/s = 16.67 ms, faster than the tree's 17.506.
  SystemSpec s = round_system();
  s.in_network_reduction = true;
  s.nvls_efficiency = 0.6;
  const CollectiveEstimate e = run(CollectiveKind::all_reduce, 1e9, 8, CollectiveAlgorithm::automatic, s);
  EXPECT_EQ(e.algorithm, CollectiveAlgorithm::nvls);
  EXPECT_NEAR(e.time_s, 1e-6 + 1e9 / 60e9, 1e-12);
  EXPECT_THROW(run(CollectiveKind::all_reduce, 1e9, 8, CollectiveAlgorithm::nvls), ConfigError);
  EXPECT_THROW(run(CollectiveKind::all_gather, 1e9, 8, CollectiveAlgorithm::nvls, s), ConfigError);
}

TEST(CollectiveTest, ALibraryTimesTheRingUnderItsProtocols) {
  // NCCL's tuner inside one domain, 8 ranks at 100 GB/s, a 10 us launch. Ring all-reduce: 14
  // steps; LL 6.6 + 14 x 0.6 = 15.0 us at a quarter of the bandwidth, LL128 14 + 14 x 1.9 =
  // 40.6 us at 0.92 of it, Simple 8.4 + 14 x 3.4 = 56.0 us at all of it; bytes 2 x 7/8 S.
  SystemSpec s = round_system();
  s.library = CollectiveLibrary::nccl;
  s.launch_s = 10e-6;
  const double ll = 15.0e-6 + 1.75 * 1024 / 25e9;
  const CollectiveEstimate small = run(CollectiveKind::all_reduce, 1024, 8, CollectiveAlgorithm::automatic, s);
  EXPECT_EQ(small.algorithm, CollectiveAlgorithm::ring);
  EXPECT_NEAR(small.time_s, ll + 10e-6, 1e-12);
  // 64 MiB: Simple wins, 56 us + 1.75 x 64 MiB / 100 GB/s = 1,230.4 us (LL128: 40.6 + 1,276.5).
  const double big = 64.0 * 1024 * 1024;
  EXPECT_NEAR(run(CollectiveKind::all_reduce, big, 8, CollectiveAlgorithm::automatic, s).time_s,
              56.0e-6 + 1.75 * big / 100e9 + 10e-6, 1e-12);
  // All-gather, 7 steps, LL at a third of the bandwidth: 6.6 + 7 x 0.6 = 10.8 us + 7/8 S / 33.3 GB/s.
  EXPECT_NEAR(run(CollectiveKind::all_gather, 1024, 8, CollectiveAlgorithm::automatic, s).time_s,
              10.8e-6 + 0.875 * 1024 / (100e9 / 3.0) + 10e-6, 1e-12);
  // NVLS (the switch reduces) costs 23 us fixed, then S / (0.6 x 100 GB/s): at 64 MiB 1,141.5 us.
  s.in_network_reduction = true;
  s.nvls_efficiency = 0.6;
  const CollectiveEstimate nvls = run(CollectiveKind::all_reduce, big, 8, CollectiveAlgorithm::automatic, s);
  EXPECT_EQ(nvls.algorithm, CollectiveAlgorithm::nvls);
  EXPECT_NEAR(nvls.time_s, 23e-6 + big / 60e9 + 10e-6, 1e-12);
  // RCCL: LL 12 + 14 x 0.8 = 23.2 us.
  s.in_network_reduction = false;
  s.library = CollectiveLibrary::rccl;
  EXPECT_NEAR(run(CollectiveKind::all_reduce, 1024, 8, CollectiveAlgorithm::automatic, s).time_s,
              23.2e-6 + 1.75 * 1024 / 25e9 + 10e-6, 1e-12);
  // Without a library the plain alpha-beta forms stand: 2 log2(8) x 1 us + the bytes.
  s.library = CollectiveLibrary::none;
  EXPECT_NEAR(run(CollectiveKind::all_reduce, 1024, 8, CollectiveAlgorithm::automatic, s).time_s,
              6e-6 + 1.75 * 1024 / 100e9 + 10e-6, 1e-12);
}

TEST(CollectiveTest, AnEngineOneShotAllReduceServesSmallMessages) {
  // A 6 us one-shot kernel at 37.6 GB/s up to 1 MiB, against NCCL's 25 us for a 64 KiB
  // all-reduce: 6 + 65,536 / 37.6e9 = 7.743 us, no launch added (the kernel's time is whole).
  SystemSpec s = round_system();
  s.library = CollectiveLibrary::nccl;
  s.launch_s = 10e-6;
  s.custom_allreduce_s = 6e-6;
  s.custom_allreduce_bytes_per_s = 37.6e9;
  s.custom_allreduce_max_bytes = 1024.0 * 1024.0;
  const CollectiveEstimate small = run(CollectiveKind::all_reduce, 65536, 8, CollectiveAlgorithm::automatic, s);
  EXPECT_EQ(small.algorithm, CollectiveAlgorithm::custom);
  EXPECT_NEAR(small.time_s, 6e-6 + 65536 / 37.6e9, 1e-12);
  // Above its limit the library runs it; all-gathers never take it.
  EXPECT_NE(run(CollectiveKind::all_reduce, 2.0 * 1024 * 1024, 8, CollectiveAlgorithm::automatic, s).algorithm,
            CollectiveAlgorithm::custom);
  EXPECT_NE(run(CollectiveKind::all_gather, 65536, 8, CollectiveAlgorithm::automatic, s).algorithm,
            CollectiveAlgorithm::custom);
  // A kernel with no bandwidth is refused.
  s.custom_allreduce_bytes_per_s = 0.0;
  EXPECT_THROW(s.validate(), ConfigError);
}

TEST(CollectiveTest, AllReduceAcrossDomains) {
  // 64 ranks in 8 domains, 1 GB. Hierarchical: ring all-reduce inside (14 us + 17.5 ms), then
  // the 125 MB shards across the 8 domains on each GPU's NIC, tree: 2 * 3 * 5 us + 2 * 7/8 *
  // 125 MB / 10 GB/s = 30 us + 21.875 ms, run one after the other.
  const CollectiveEstimate h =
      run(CollectiveKind::all_reduce, 1e9, 64, CollectiveAlgorithm::hierarchical);
  EXPECT_TRUE(h.crosses_domains);
  EXPECT_NEAR(h.time_s, (14e-6 + 0.0175) + (30e-6 + 0.021875), 1e-12);
  // NCCL's flat ring puts a channel on each of a domain's 8 NICs: it runs at min(100, 8 x 10)
  // = 80 GB/s, 2 * 63 * 5 us + 2 * 63/64 * 1 GB / 80 GB/s; the tree has 2 * log2(64) steps and
  // is what automatic picks, faster than the serial hierarchical form.
  EXPECT_NEAR(run(CollectiveKind::all_reduce, 1e9, 64, CollectiveAlgorithm::ring).time_s,
              2 * 63 * 5e-6 + 2 * 63.0 / 64 * 1e9 / 80e9, 1e-12);
  const CollectiveEstimate best = run(CollectiveKind::all_reduce, 1e9, 64);
  EXPECT_EQ(best.algorithm, CollectiveAlgorithm::tree);
  EXPECT_NEAR(best.time_s, 2 * 6 * 5e-6 + 2 * 63.0 / 64 * 1e9 / 80e9, 1e-12);
}

TEST(CollectiveTest, AllToAllAcrossDomainsUsesOneNicPerGpu) {
  // 16 ranks in 2 domains, 1 GB sent per rank: 8/16 of it leaves on the 10 GB/s NIC (50 ms),
  // 7/16 stays on the 100 GB/s fabric (4.375 ms, in parallel), plus 15 steps of 5 us.
  EXPECT_NEAR(run(CollectiveKind::all_to_all, 1e9, 16, CollectiveAlgorithm::hierarchical).time_s,
              0.05 + 15 * 5e-6, 1e-12);
}

TEST(CollectiveTest, PxnAllToAllRelaysOverNvlinkAndSendsOneMessagePerRemoteDomain) {
  // 64 ranks in 8 domains, 1 MB sent per rank. Direct: 63 network messages of 5 us and 56/64 of
  // the bytes on the 10 GB/s NIC: 315 + 87.5 = 402.5 us. PXN: the away share first crosses the
  // domain to the GPU on the destination's rail (7 steps of 1 us), then 7 aggregated network
  // messages (35 us); the NIC still carries 87.5 us, the fabric (56 + 7)/64 MB in 9.84 us beside
  // it: 35 + 7 + 87.5 = 129.5 us, and automatic takes it.
  EXPECT_NEAR(run(CollectiveKind::all_to_all, 1e6, 64, CollectiveAlgorithm::hierarchical).time_s,
              63 * 5e-6 + 1e6 * 56 / 64 / 10e9, 1e-12);
  const CollectiveEstimate pxn = run(CollectiveKind::all_to_all, 1e6, 64);
  EXPECT_EQ(pxn.algorithm, CollectiveAlgorithm::pxn);
  EXPECT_NEAR(pxn.time_s, 7 * 5e-6 + 7 * 1e-6 + 1e6 * 56 / 64 / 10e9, 1e-12);
  // Inside one domain there is nothing to relay: the direct exchange.
  EXPECT_NE(run(CollectiveKind::all_to_all, 1e6, 8).algorithm, CollectiveAlgorithm::pxn);
}

TEST(CollectiveTest, AMeshGivesASmallGroupItsShareOfTheLinks) {
  // A full mesh of 8 (xGMI): 2 of its GPUs reach each other over 1/7 of a GPU's 100 GB/s, so a
  // 1 GB all-reduce between them takes 2 * 1 us + 2 * 1/2 * 1 GB / (100/7 GB/s) = 70 ms.
  SystemSpec s = round_system();
  s.mesh = true;
  EXPECT_NEAR(run(CollectiveKind::all_reduce, 1e9, 2, CollectiveAlgorithm::ring, s).time_s,
              2e-6 + 1e9 / (100e9 / 7), 1e-12);
  // All 8: the whole bandwidth, as on a switch.
  EXPECT_NEAR(run(CollectiveKind::all_reduce, 1e9, 8, CollectiveAlgorithm::ring, s).time_s,
              14e-6 + 0.0175, 1e-12);
}

TEST(CollectiveTest, GroupsArePlacedInnermostFirst) {
  // An 8-GPU domain: TP 2 takes 2 (room 4), CP 2 takes 2 (room 2), EP 4 gets 2 of its 4 ranks
  // inside (room 1), DP 3 none; 1 GPU of room is left, so pipeline neighbours are in other domains.
  const auto [groups, room] =
      place_groups(round_system(), {{"tp", 2}, {"cp", 2}, {"ep", 4}, {"dp", 3}});
  ASSERT_EQ(groups.size(), 4u);
  EXPECT_EQ(groups[0].ranks_per_domain, 2);
  EXPECT_EQ(groups[1].ranks_per_domain, 2);
  EXPECT_EQ(groups[2].ranks_per_domain, 2);
  EXPECT_EQ(groups[3].ranks_per_domain, 1);
  EXPECT_EQ(room, 1);
  // TP 4 alone leaves room for 2 pipeline neighbours; TP 3 does not divide 8 and takes 3.
  EXPECT_EQ(place_groups(round_system(), {{"tp", 4}}).second, 2);
  EXPECT_EQ(place_groups(round_system(), {{"tp", 3}}).first[0].ranks_per_domain, 3);
  EXPECT_THROW(place_groups(round_system(), {{"tp", 0}}), ConfigError);
}

TEST(CollectiveTest, BusBandwidthFactorsAndBadQueries) {
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveKind::all_reduce, 8), 1.75);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveKind::all_gather, 8), 0.875);
  EXPECT_DOUBLE_EQ(busbw_factor(CollectiveKind::send_recv, 8), 1.0);
  EXPECT_THROW(estimate_collective({.bytes = 1e6, .ranks = 12, .ranks_per_domain = 8}, round_system()),
               ConfigError);
  EXPECT_THROW(estimate_collective({.bytes = 1e6, .ranks = 16, .ranks_per_domain = 16}, round_system()),
               ConfigError);
  SystemSpec island = round_system();
  island.nics_per_gpu = 0;
  EXPECT_THROW(run(CollectiveKind::all_reduce, 1e6, 16, CollectiveAlgorithm::automatic, island), ConfigError);
  island.scaleup.efficiency = 1.5;
  EXPECT_THROW(run(CollectiveKind::all_reduce, 1e6, 8, CollectiveAlgorithm::automatic, island), ConfigError);
}

TEST(CollectiveTest, ScaleUpBandwidthOfADesignSweep) {
  // Twice the link bandwidth: ring all-reduce of 1 GB on 8 ranks takes 14 us + 2 * 7/8 * 1 GB /
  // 200 GB/s = 14 us + 8.75 ms; the per-step latency is untouched.
  const SystemSpec fast = with_scaleup_bandwidth(round_system(), 200e9);
  EXPECT_DOUBLE_EQ(fast.scaleup.bandwidth_bytes_per_s, 200e9);
  EXPECT_NEAR(run(CollectiveKind::all_reduce, 1e9, 8, CollectiveAlgorithm::ring, fast).time_s,
              14e-6 + 0.00875, 1e-12);
  EXPECT_THROW(with_scaleup_bandwidth(round_system(), 0.0), ConfigError);
}

}  // namespace
}  // namespace accelsim
