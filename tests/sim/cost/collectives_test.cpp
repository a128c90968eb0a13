// The α-β-γ collective costs of docs/equations.md §2, each against a hand-computed
// case, and the link a group of devices gets on a cluster.
#include <gtest/gtest.h>

#include "model/error.hpp"
#include "profiles/cluster.hpp"
#include "sim/cost/collective.hpp"
#include "tests/sim/cost/fixtures.hpp"

namespace trainsim {
namespace {

// α = 10 us, β = 1 ns/B (1 GB/s), γ = 0.1 ns/B (10 GB/s); n = 1 MB. Then
// α = 1e-5, nβ = 1e-3, nγ = 1e-4 seconds.
constexpr LinkParams kLink{1e-5, 1e-9, 1e-10};
constexpr double kBytes = 1e6;

TEST(Collectives, RingAllReduceMatchesFormula) {
  // p = 4: 2·3·1e-5 + 2·(3/4)·1e-3 + (3/4)·1e-4 = 6e-5 + 1.5e-3 + 7.5e-5 = 1.635e-3.
  EXPECT_NEAR(allreduce_ring_s(kBytes, 4, kLink), 1.635e-3, 1e-15);
  // p = 5: 2·4·1e-5 + 2·(4/5)·1e-3 + (4/5)·1e-4 = 8e-5 + 1.6e-3 + 8e-5 = 1.76e-3.
  EXPECT_NEAR(allreduce_ring_s(kBytes, 5, kLink), 1.76e-3, 1e-15);
}

TEST(Collectives, RecursiveDoublingMatchesFormula) {
  // p = 4: lg 4 = 2 rounds of α + nβ + nγ = 2·(1e-5 + 1e-3 + 1e-4) = 2.22e-3.
  EXPECT_NEAR(allreduce_recursive_doubling_s(kBytes, 4, kLink), 2.22e-3, 1e-15);
  // p = 6 folds onto p' = 4: 2.22e-3, plus α + nβ + nγ = 1.11e-3 before and
  // α + nβ = 1.01e-3 after: 4.34e-3.
  EXPECT_NEAR(allreduce_recursive_doubling_s(kBytes, 6, kLink), 4.34e-3, 1e-15);
}

TEST(Collectives, RabenseifnerMatchesFormula) {
  // p = 4: 2·2·1e-5 + 2·(3/4)·1e-3 + (3/4)·1e-4 = 4e-5 + 1.5e-3 + 7.5e-5 = 1.615e-3.
  EXPECT_NEAR(allreduce_rabenseifner_s(kBytes, 4, kLink), 1.615e-3, 1e-15);
  // p = 6: the p' = 4 core 1.615e-3 + 1.11e-3 before + 1.01e-3 after = 3.735e-3.
  EXPECT_NEAR(allreduce_rabenseifner_s(kBytes, 6, kLink), 3.735e-3, 1e-15);
}

TEST(Collectives, RingEqualsRabenseifnersBandwidthTerm) {
  // With α = 0 both are 2((p-1)/p)nβ + ((p-1)/p)nγ for p a power of two.
  const LinkParams no_latency{0, 1e-9, 1e-10};
  for (int64_t p : {2, 4, 8, 16}) {
    EXPECT_NEAR(allreduce_ring_s(kBytes, p, no_latency), allreduce_rabenseifner_s(kBytes, p, no_latency), 1e-15)
        << "p = " << p;
  }
  // With latency, Rabenseifner pays 2 lg p·α against the ring's 2(p-1)α:
  // p = 8: 6α against 14α, a difference of 8α = 8e-5.
  EXPECT_NEAR(allreduce_ring_s(kBytes, 8, kLink) - allreduce_rabenseifner_s(kBytes, 8, kLink), 8e-5, 1e-15);
}

TEST(Collectives, BinomialTreeReduceAndBroadcastMatchFormula) {
  // Reduce, p = 4: 2·(α + nβ + nγ) = 2.22e-3; p = 5 needs ⌈lg 5⌉ = 3 rounds: 3.33e-3.
  EXPECT_NEAR(reduce_tree_s(kBytes, 4, kLink), 2.22e-3, 1e-15);
  EXPECT_NEAR(reduce_tree_s(kBytes, 5, kLink), 3.33e-3, 1e-15);
  // Broadcast, p = 4: 2·(α + nβ) = 2.02e-3; p = 5: 3·1.01e-3 = 3.03e-3.
  EXPECT_NEAR(broadcast_tree_s(kBytes, 4, kLink), 2.02e-3, 1e-15);
  EXPECT_NEAR(broadcast_tree_s(kBytes, 5, kLink), 3.03e-3, 1e-15);
  // The tree AllReduce is the two: 2.22e-3 + 2.02e-3 = 4.24e-3 at p = 4.
  EXPECT_NEAR(allreduce_s(CollectiveAlgorithm::kBinomialTree, kBytes, 4, kLink), 4.24e-3, 1e-15);
}

TEST(Collectives, ScatterGatherFamilyMatchesFormula) {
  // Broadcast by scatter + ring allgather, p = 4: (2 + 3)·1e-5 + 2·(3/4)·1e-3 = 1.55e-3.
  EXPECT_NEAR(broadcast_scatter_allgather_s(kBytes, 4, kLink), 1.55e-3, 1e-15);
  // Ring allgather of 1 MB in total, p = 4: 3·1e-5 + (3/4)·1e-3 = 7.8e-4.
  EXPECT_NEAR(allgather_ring_s(kBytes, 4, kLink), 7.8e-4, 1e-15);
  // Pairwise reduce-scatter, p = 4: 3·1e-5 + (3/4)·1e-3 + (3/4)·1e-4 = 8.55e-4.
  EXPECT_NEAR(reduce_scatter_pairwise_s(kBytes, 4, kLink), 8.55e-4, 1e-15);
}

TEST(Collectives, OneProcessCostsNothing) {
  for (CollectiveAlgorithm a : {CollectiveAlgorithm::kRing, CollectiveAlgorithm::kRecursiveDoubling,
                                CollectiveAlgorithm::kRabenseifner, CollectiveAlgorithm::kBinomialTree}) {
    EXPECT_EQ(allreduce_s(a, kBytes, 1, kLink), 0.0) << collective_algorithm_name(a);
  }
  EXPECT_EQ(reduce_tree_s(kBytes, 1, kLink), 0.0);
  EXPECT_EQ(broadcast_tree_s(kBytes, 1, kLink), 0.0);
  EXPECT_EQ(broadcast_scatter_allgather_s(kBytes, 1, kLink), 0.0);
  EXPECT_EQ(allgather_ring_s(kBytes, 1, kLink), 0.0);
  EXPECT_EQ(reduce_scatter_pairwise_s(kBytes, 1, kLink), 0.0);
}

TEST(Collectives, DispatchReachesEachAlgorithm) {
  EXPECT_EQ(allreduce_s(CollectiveAlgorithm::kRing, kBytes, 6, kLink), allreduce_ring_s(kBytes, 6, kLink));
  EXPECT_EQ(allreduce_s(CollectiveAlgorithm::kRecursiveDoubling, kBytes, 6, kLink),
            allreduce_recursive_doubling_s(kBytes, 6, kLink));
  EXPECT_EQ(allreduce_s(CollectiveAlgorithm::kRabenseifner, kBytes, 6, kLink),
            allreduce_rabenseifner_s(kBytes, 6, kLink));
}

// algorithm=mpi, the MPI library's own AllReduce, is priced as the ring
// (docs/equations.md §2): 2·(p−1)·α + 2·(p−1)/p·n·β + (p−1)/p·n·γ.
TEST(Collectives, TheLibraryAllReduceIsPricedAsTheRing) {
  const double expected = 2 * 5 * kLink.alpha_s + 2.0 * 5 / 6 * kBytes * kLink.beta_s_per_byte +
                          5.0 / 6 * kBytes * kLink.gamma_s_per_byte;
  EXPECT_NEAR(allreduce_s(CollectiveAlgorithm::kLibrary, kBytes, 6, kLink), expected, 1e-12 * expected);
  EXPECT_EQ(parse_collective_algorithm("mpi", "--set algorithm"), CollectiveAlgorithm::kLibrary);
}

TEST(Collectives, NamesRoundTripAndUnknownNameIsAnInputError) {
  for (const std::string& name : collective_algorithm_names()) {
    EXPECT_EQ(collective_algorithm_name(parse_collective_algorithm(name, "--set algorithm")), name);
  }
  EXPECT_EQ(parse_collective_algorithm("tree", "x"), CollectiveAlgorithm::kBinomialTree);
  EXPECT_THROW(parse_collective_algorithm("butterfly", "--set algorithm"), InputError);
}

TEST(Collectives, PowerOfTwoHelpers) {
  EXPECT_EQ(floor_power_of_two(1), 1);
  EXPECT_EQ(floor_power_of_two(6), 4);
  EXPECT_EQ(floor_power_of_two(8), 8);
  EXPECT_EQ(ceil_log2(1), 0);
  EXPECT_EQ(ceil_log2(5), 3);
  EXPECT_EQ(ceil_log2(8), 3);
}

TEST(CollectiveLink, GroupOnOneMachineUsesTheIntraLink) {
  // simple_cluster: intra 10 GB/s and 10 us; collective reduction 50 GB/s.
  const Cluster cluster = testing_fixtures::simple_cluster(2, 4);
  const LinkParams link = collective_link(cluster, 4);
  EXPECT_DOUBLE_EQ(link.alpha_s, 10e-6);
  EXPECT_DOUBLE_EQ(link.beta_s_per_byte, 1 / 10e9);
  EXPECT_DOUBLE_EQ(link.gamma_s_per_byte, 1 / 50e9);
}

TEST(CollectiveLink, GroupAcrossMachinesTakesTheSlowerBandwidthAndLargerLatency) {
  // simple_cluster: inter 1 GB/s and 50 us, slower on both counts.
  const Cluster cluster = testing_fixtures::simple_cluster(2, 4);
  const LinkParams link = collective_link(cluster, 5);
  EXPECT_DOUBLE_EQ(link.alpha_s, 50e-6);
  EXPECT_DOUBLE_EQ(link.beta_s_per_byte, 1 / 1e9);
  // A network faster than the machine's own link but with more latency: the
  // bandwidth comes from the intra link, the latency from the inter link.
  Cluster mixed = cluster;
  mixed.inter_link = {50e9, 20e-6};
  const LinkParams slowest = collective_link(mixed, 8);
  EXPECT_DOUBLE_EQ(slowest.alpha_s, 20e-6);
  EXPECT_DOUBLE_EQ(slowest.beta_s_per_byte, 1 / 10e9);
}

TEST(CollectiveLink, AMeasuredHopRateReplacesTheIntraBandwidth) {
  // A hop of every member at once measured at 4 GB/s (the intra link's 10
  // GB/s measured one message at a time): β = 1/4e9 inside the machine, and
  // across machines still the slower of the hop and the 1 GB/s network.
  Cluster cluster = testing_fixtures::simple_cluster(2, 4);
  cluster.collective.hop_bytes_per_s = 4e9;
  EXPECT_DOUBLE_EQ(collective_link(cluster, 4).beta_s_per_byte, 1 / 4e9);
  EXPECT_DOUBLE_EQ(collective_link(cluster, 4).alpha_s, 10e-6);
  EXPECT_DOUBLE_EQ(collective_link(cluster, 5).beta_s_per_byte, 1 / 1e9);
  cluster.inter_link = {50e9, 20e-6};
  EXPECT_DOUBLE_EQ(collective_link(cluster, 8).beta_s_per_byte, 1 / 4e9);
  // Ring AllReduce of 8 MB on 4 members (docs/equations.md §2):
  // 6(α + 2 MB β) + 3 · 2 MB γ = 6(10 us + 500 us) + 6 MB / 50 GB/s = 3060 us + 120 us.
  EXPECT_NEAR(allreduce_s(CollectiveAlgorithm::kRing, 8e6, 4, collective_link(cluster, 4)), 3180e-6, 1e-12);
  // The file keeps it; absent, it is 0 and the link's bandwidth stands.
  const Cluster back = cluster_from_json(cluster_to_json(cluster), "round trip");
  EXPECT_DOUBLE_EQ(back.collective.hop_bytes_per_s, 4e9);
  cluster.collective.hop_bytes_per_s = 0;
  EXPECT_FALSE(cluster_to_json(cluster)["collective"].contains("hop_bytes_per_s"));
  EXPECT_FALSE(cluster_to_json(cluster)["collective"].contains("hop_latency_s"));
  EXPECT_FALSE(back.collective.hop_latency_s.has_value());
}

TEST(CollectiveLink, AMeasuredHopLatencyReplacesTheIntraLatency) {
  // Hops through the host after 40 us where a message between the workers
  // (device to device) takes 10 us: α = 40 us inside the machine; across
  // machines the higher of it and the network's 20 us, then 60 us.
  Cluster cluster = testing_fixtures::simple_cluster(2, 4);
  cluster.collective.hop_latency_s = 40e-6;
  EXPECT_DOUBLE_EQ(collective_link(cluster, 4).alpha_s, 40e-6);
  EXPECT_DOUBLE_EQ(collective_link(cluster, 4).beta_s_per_byte, 1 / 10e9);
  cluster.inter_link = {50e9, 20e-6};
  EXPECT_DOUBLE_EQ(collective_link(cluster, 8).alpha_s, 40e-6);
  cluster.inter_link = {50e9, 60e-6};
  EXPECT_DOUBLE_EQ(collective_link(cluster, 8).alpha_s, 60e-6);
  // Ring AllReduce of 8 MB on 4 members (docs/equations.md §2):
  // 6(α + 2 MB β) + 3 · 2 MB γ = 6(40 us + 200 us) + 6 MB / 50 GB/s = 1440 us + 120 us.
  EXPECT_NEAR(allreduce_s(CollectiveAlgorithm::kRing, 8e6, 4, collective_link(cluster, 4)), 1560e-6, 1e-12);
  // The file keeps it, 0 included (a hop of no fixed cost).
  cluster.collective.hop_latency_s = 0.0;
  const Cluster back = cluster_from_json(cluster_to_json(cluster), "round trip");
  ASSERT_TRUE(back.collective.hop_latency_s.has_value());
  EXPECT_DOUBLE_EQ(*back.collective.hop_latency_s, 0.0);
  EXPECT_DOUBLE_EQ(collective_link(back, 4).alpha_s, 0.0);
}

constexpr auto kRing = CollectiveAlgorithm::kRing;

TEST(Collectives, CallOverheadIsTsyncPlusMeasuredPacking) {
  // t_sync 20 us; packing 3 MB at 10 GB/s = 300 us: 320 us on 4 members;
  // t_sync alone on one member (nothing is reduced) and where the cluster
  // gives no packing rate (collectives read the tensors in place).
  Cluster cluster = testing_fixtures::simple_cluster(1, 4);
  EXPECT_NEAR(collective_call_overhead_s(cluster, 3e6, 4, kRing, false), 20e-6, 1e-15);
  cluster.collective.pack_bytes_per_s = 10e9;
  EXPECT_NEAR(collective_call_overhead_s(cluster, 3e6, 4, kRing, false), 320e-6, 1e-15);
  EXPECT_NEAR(collective_call_overhead_s(cluster, 3e6, 1, kRing, false), 20e-6, 1e-15);
  // A packing's fixed part, 15 us a call: 335 us, still t_sync alone on one member.
  cluster.collective.pack_latency_s = 15e-6;
  EXPECT_NEAR(collective_call_overhead_s(cluster, 3e6, 4, kRing, false), 335e-6, 1e-15);
  EXPECT_NEAR(collective_call_overhead_s(cluster, 3e6, 1, kRing, false), 20e-6, 1e-15);
}

TEST(Collectives, TheLibraryPricedByItsOwnHopsPacksNothing) {
  // t_sync 20 us, packing 15 us + 3 MB at 10 GB/s: 335 us. NCCL's AllReduce
  // sums each GPU's kept gradients in place, its copies inside its measured
  // hops: t_sync alone inside a machine; packed where the group crosses
  // machines (priced on the slower link, as the host's), and for any
  // library without measured hops (MPI_Allreduce of the host's values).
  Cluster cluster = testing_fixtures::simple_cluster(1, 4);
  cluster.collective.pack_bytes_per_s = 10e9;
  cluster.collective.pack_latency_s = 15e-6;
  constexpr auto kLibrary = CollectiveAlgorithm::kLibrary;
  EXPECT_NEAR(collective_call_overhead_s(cluster, 3e6, 4, kLibrary, false), 335e-6, 1e-15);
  cluster.collective.library = CollectiveSpec::LibraryHops{40e9, 5e-6};
  EXPECT_NEAR(collective_call_overhead_s(cluster, 3e6, 4, kLibrary, false), 20e-6, 1e-15);
  EXPECT_NEAR(collective_call_overhead_s(cluster, 3e6, 4, kLibrary, true), 335e-6, 1e-15);
  EXPECT_NEAR(collective_call_overhead_s(cluster, 3e6, 4, kRing, false), 335e-6, 1e-15);
}

TEST(Collectives, TheLibrarysOwnHopsPriceItsAllReduceInsideAMachine) {
  // NCCL's measured hops, 5 us and 40 GB/s, no γ: a 1 MB AllReduce on 4
  // members is 6·5 us + 2·(3/4)·1e6 / 40e9 = 30 + 37.5 = 67.5 us. The other
  // algorithms keep the cluster's hops, and so does the library where the
  // group crosses machines (its measured hops are one machine's GPUs).
  Cluster cluster = testing_fixtures::simple_cluster(1, 4);
  cluster.collective.library = CollectiveSpec::LibraryHops{40e9, 5e-6};
  const LinkParams library = collective_link(cluster, 4, CollectiveAlgorithm::kLibrary);
  EXPECT_EQ(library.alpha_s, 5e-6);
  EXPECT_EQ(library.beta_s_per_byte, 1 / 40e9);
  EXPECT_EQ(library.gamma_s_per_byte, 0.0);
  EXPECT_NEAR(allreduce_s(CollectiveAlgorithm::kLibrary, 1e6, 4, library), 67.5e-6, 1e-15);
  const LinkParams ring = collective_link(cluster, 4, CollectiveAlgorithm::kRing);
  EXPECT_EQ(ring.alpha_s, cluster.intra_link.latency_s);
  EXPECT_EQ(ring.gamma_s_per_byte, 1 / cluster.collective.reduce_bytes_per_s);
  Cluster two = testing_fixtures::simple_cluster(2, 2);
  two.collective.library = cluster.collective.library;
  const LinkParams across = collective_link(two, 4, CollectiveAlgorithm::kLibrary);
  EXPECT_EQ(across.alpha_s, collective_link(two, 4, CollectiveAlgorithm::kRing).alpha_s);
  EXPECT_GT(across.gamma_s_per_byte, 0.0);
}

TEST(Collectives, TheRingsCodecEncodesPChunksAndDecodes2PMinus1) {
  // 4 members, 4 MB of float32: chunks of 1 MB; quant8 encodes at 1 GB/s
  // and decodes at 2 GB/s: 4·1e-3 + 7·0.5e-3 = 7.5 ms. Free without rates,
  // for "none" and for one member.
  Cluster cluster = testing_fixtures::simple_cluster(1, 4);
  EXPECT_EQ(ring_codec_s(cluster, "quant8", 4e6, 4), 0.0);
  cluster.collective.quant8 = {1e9, 2e9};
  EXPECT_NEAR(ring_codec_s(cluster, "quant8", 4e6, 4), 7.5e-3, 1e-15);
  EXPECT_EQ(ring_codec_s(cluster, "trunc16", 4e6, 4), 0.0);  // its own rates: none given
  EXPECT_EQ(ring_codec_s(cluster, "none", 4e6, 4), 0.0);
  EXPECT_EQ(ring_codec_s(cluster, "quant8", 4e6, 1), 0.0);
}

TEST(Collectives, BarrierIsOneGlobalSynchronization) {
  EXPECT_EQ(barrier_s(4, 20e-6), 20e-6);
  EXPECT_EQ(barrier_s(1, 20e-6), 0.0);
}

}  // namespace
}  // namespace trainsim
