// fit_channel: a channel's latency, bandwidth and token bucket from a
// ping-pong sweep of message sizes.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace trainsim
