// fit_channel: a channel's latency, bandwidth and token bucket from a
// ping-pong sweep of message sizes; fit_packing: a packing's fixed part and
// rate from two packings.
#include <gtest/gtest.h>

#include <stdexcept>
#include <vector>

#include "profiles/profiler/cluster_probe.hpp"

namespace trainsim {
namespace {

TEST(ChannelFit, LatencyIsTheSmallestMessageAndBandwidthTheLargeMessagesSlope) {
  // t(n) = 1e-5 s + n / 1e9 B/s. Smallest (4 B): 1e-5 + 4e-9 = 1.0004e-5 s.
  // Large messages are those >= 16e6/16 = 1e6 B: 1e6, 4e6, 16e6; on an exact
  // line the least-squares slope is 1e-9 s/B, so bandwidth 1e9 B/s. The 64 B
  // point lies far off the line (3e-5 s) but is not a large message.
  const std::vector<ChannelSample> sweep{
      {16e6, 1e-5 + 16e6 / 1e9}, {4, 1e-5 + 4 / 1e9}, {64, 3e-5}, {1e6, 1e-5 + 1e6 / 1e9}, {4e6, 1e-5 + 4e6 / 1e9}};
  const ChannelFit fit = fit_channel(sweep);
  EXPECT_NEAR(fit.latency_s, 1.0004e-5, 1e-15);
  EXPECT_NEAR(fit.bandwidth_bytes_per_s, 1e9, 1e9 * 1e-9);
  // No bucket: the line meets the axis at 1e-5 s, the smallest message's
  // 4 B below its time: (1.0004e-5 − 1e-5) s · 1e9 B/s = 4 B.
  EXPECT_NEAR(fit.burst_bytes, 4, 1e-6);
}

TEST(ChannelFit, ATokenBucketIsTheBytesTheLargeMessagesCrossAtOnce) {
  // A link of 1e8 B/s with a 1.25e5 B bucket, full as each message starts:
  // t(n) = 1.3e-5 s + (n − 1.25e5 B) / 1e8 B/s for the large messages. The
  // line meets the axis 1.25e-3 s below the latency: 1.25e5 B.
  const auto t = [](double n) { return 1.3e-5 + (n - 1.25e5) / 1e8; };
  const ChannelFit fit = fit_channel({{4, 1.3e-5}, {1e6, t(1e6)}, {4e6, t(4e6)}, {16e6, t(16e6)}});
  EXPECT_NEAR(fit.bandwidth_bytes_per_s, 1e8, 1e-3);
  EXPECT_NEAR(fit.burst_bytes, 1.25e5, 1e-3);
}

TEST(ChannelFit, FallsBackToLargestMessageRateWithoutTwoLargeSizes) {
  // One large size only (1e6 B at 2e-3 s; 4 B < 1e6/16): bandwidth 1e6 / 2e-3 = 5e8 B/s.
  const ChannelFit one = fit_channel({{4, 5e-6}, {1e6, 2e-3}});
  EXPECT_DOUBLE_EQ(one.latency_s, 5e-6);
  EXPECT_DOUBLE_EQ(one.bandwidth_bytes_per_s, 5e8);
  // A falling line (noise): slope < 0, so again largest / its time = 4e6 / 1e-3 = 4e9 B/s.
  const ChannelFit noisy = fit_channel({{1e6, 2e-3}, {4e6, 1e-3}});
  EXPECT_DOUBLE_EQ(noisy.bandwidth_bytes_per_s, 4e9);
}

TEST(PackingFit, TheLineThroughASmallPackingAndTheWholeGradients) {
  // 256 B in 20 us, 4 MB in 520 us: (4e6 - 256) B in 500 us, 7.999488e9 B/s;
  // the fixed part 520 us - 4e6 / that = 19.968 us, the whole exact.
  const ChannelFit fit = fit_packing({256, 20e-6}, {4e6, 520e-6});
  EXPECT_NEAR(fit.bandwidth_bytes_per_s, 7.999488e9, 1);
  EXPECT_NEAR(fit.latency_s, 19.968e-6, 1e-11);
  EXPECT_NEAR(fit.latency_s + 4e6 / fit.bandwidth_bytes_per_s, 520e-6, 1e-12);
  EXPECT_EQ(fit.burst_bytes, 0);
  // The whole no slower than the small one (noise): no fixed part, 4e6 / 15e-6.
  const ChannelFit noisy = fit_packing({256, 20e-6}, {4e6, 15e-6});
  EXPECT_EQ(noisy.latency_s, 0);
  EXPECT_DOUBLE_EQ(noisy.bandwidth_bytes_per_s, 4e6 / 15e-6);
  // A line crossing below the origin (the small one cheaper per byte than
  // the whole's rate): clamped, the whole's bytes over its time.
  const ChannelFit below = fit_packing({1e6, 1e-6}, {4e6, 1e-3});
  EXPECT_EQ(below.latency_s, 0);
  EXPECT_DOUBLE_EQ(below.bandwidth_bytes_per_s, 4e6 / 1e-3);
  EXPECT_THROW((void)fit_packing({4e6, 1e-3}, {256, 1e-6}), std::logic_error);
}

TEST(LibraryRingFit, TheRingThroughTwoTimedAllReducesLessTheirSync) {
  // 2 members, t_sync 10 us: 256 B in 40 us and 4e6 B in 1010 us leave 30
  // and 1000 us to 2α + n·β: β = 970 us / (4e6 − 256) B, 4,123,447,422.7
  // B/s; α = (1000 us − 4e6·β) / 2 = 14.968958 us; both reproduced.
  const CollectiveSpec::LibraryHops two = fit_library_ring(2, {256, 40e-6}, {4e6, 1010e-6}, 10e-6);
  EXPECT_NEAR(two.hop_bytes_per_s, 3999744.0 / 970e-6, 1);
  EXPECT_NEAR(two.hop_latency_s, 14.96895805e-6, 1e-13);
  EXPECT_NEAR(2 * two.hop_latency_s + 256 / two.hop_bytes_per_s + 10e-6, 40e-6, 1e-12);
  // 4 members: 6α + 1.5·n·β + t_sync reproduces both times.
  const CollectiveSpec::LibraryHops four = fit_library_ring(4, {256, 60e-6}, {8e6, 520e-6}, 20e-6);
  for (const auto& [bytes, seconds] : {std::pair{256.0, 60e-6}, std::pair{8e6, 520e-6}}) {
    EXPECT_NEAR(6 * four.hop_latency_s + 1.5 * bytes / four.hop_bytes_per_s + 20e-6, seconds, 1e-12) << bytes;
  }
  // The whole no slower than the small one: no fixed part, 1.5·8e6 B over
  // (15 − 10) us.
  const CollectiveSpec::LibraryHops flat = fit_library_ring(4, {256, 20e-6}, {8e6, 15e-6}, 10e-6);
  EXPECT_EQ(flat.hop_latency_s, 0);
  EXPECT_NEAR(flat.hop_bytes_per_s, 1.5 * 8e6 / 5e-6, 1);
  EXPECT_THROW((void)fit_library_ring(1, {256, 1e-6}, {4e6, 1e-3}, 0), std::logic_error);
  EXPECT_THROW((void)fit_library_ring(2, {4e6, 1e-3}, {256, 1e-6}, 0), std::logic_error);
}

}  // namespace
}  // namespace trainsim
