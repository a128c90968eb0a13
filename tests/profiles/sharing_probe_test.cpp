// measure_sharing_rates over threads joined by InProcessTransport, each
// calling it as an MPI rank would, and ring_kernel_share by hand.
#include "profiles/profiler/sharing_probe.hpp"

#include <gtest/gtest.h>

#include <atomic>
#include <stdexcept>
#include <vector>

#include "exec/transport/in_process.hpp"
#include "tests/profiles/quick_probe.hpp"

namespace trainsim {
namespace {

using testing_fixtures::quick_probe;

std::vector<SharingRates> probe_on_threads(int workers) {
  InProcessTransport transport(workers);
  std::vector<SharingRates> seen(static_cast<size_t>(workers));
  run_workers(transport, workers, [&](int self) {
    seen[static_cast<size_t>(self)] = measure_sharing_rates(transport, self, quick_probe());
  });
  return seen;
}

TEST(SharingProbe, WorkerZeroGetsBothRatesOfTheWorkersAndTheOthersNone) {
  const std::vector<SharingRates> seen = probe_on_threads(3);
  EXPECT_GE(seen[0].compute, kMinSharingRate);
  EXPECT_LE(seen[0].compute, 1.0);
  EXPECT_GE(seen[0].collective, kMinSharingRate);
  EXPECT_LE(seen[0].collective, 1.0);
  EXPECT_GT(seen[0].busy_s, 0);
  for (size_t w = 1; w < seen.size(); ++w) {
    EXPECT_EQ(seen[w].compute, 1.0);
    EXPECT_EQ(seen[w].collective, 1.0);
    EXPECT_EQ(seen[w].busy_s, 0.0);
  }
}

TEST(SharingProbe, OneWorkerHasNothingToShare) {
  const SharingRates r = probe_on_threads(1).at(0);
  EXPECT_EQ(r.compute, 1.0);
  EXPECT_EQ(r.collective, 1.0);
  EXPECT_EQ(r.busy_s, 0.0);
}

// A worker that fails before the probe: the others stop with the transport's
// abort (their compute threads too) instead of waiting for it.
TEST(SharingProbe, AWorkerThatFailsStopsTheOthers) {
  InProcessTransport transport(3);
  std::atomic<int> aborted{0};
  EXPECT_THROW(run_workers(transport, 3,
                           [&](int self) {
                             if (self == 2) throw std::runtime_error("worker 2 failed");
                             try {
                               measure_sharing_rates(transport, self, quick_probe());
                             } catch (const TransportAborted&) {
                               ++aborted;
                               throw;
                             }
                           }),
               std::runtime_error);
  EXPECT_EQ(aborted.load(), 2);
}

// 4 hosts of one worker each, 1e6 B in 10 ms: each host's link carries
// 2·3/4·1e6 = 1.5e6 B, 4 links at 0.5 ns of kernel per byte: 0.5e-9 · 4 ·
// 1.5e6 / 0.01 = 0.3 cores of 2, 0.15 of them.
TEST(SharingProbe, TheRingsKernelShareByHand) {
  EXPECT_NEAR(ring_kernel_share(0.5e-9, 4, 4, 1e6, 0.01, 2), 0.15, 1e-12);
  EXPECT_EQ(ring_kernel_share(0.5e-9, 1, 4, 1e6, 0.01, 2), 0.0);  // one host: no link crossed
  EXPECT_EQ(ring_kernel_share(0, 4, 4, 1e6, 0.01, 2), 0.0);
  EXPECT_EQ(ring_kernel_share(0.5e-9, 4, 4, 1e9, 0.01, 2), 1.0);  // at most every core
}

}  // namespace
}  // namespace trainsim
