// measure_transport_cluster over threads joined by InProcessTransport, each
// calling it as an MPI rank would: two hosts of two workers give a cluster
// of two machines with both links and the hop measured, the same on every
// worker; one worker per host leaves the hop to the inter link, and workers
// all on this computer share its cores; hosts of unequal sizes are refused
// on every worker.
#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <vector>

#include "exec/interpreter.hpp"
#include "exec/transport/in_process.hpp"
#include "model/error.hpp"
#include "profiles/profiler/cluster_probe.hpp"
#include "profiles/profiler/transport_probe.hpp"
#include "tests/profiles/quick_probe.hpp"

namespace trainsim {
namespace {

using testing_fixtures::quick_probe;

std::vector<Cluster> probe_on_threads(const std::vector<int>& host_of) {
  const int workers = static_cast<int>(host_of.size());
  InProcessTransport transport(workers);
  std::vector<Cluster> seen(static_cast<size_t>(workers));
  run_workers(transport, workers, [&](int self) {
    seen[static_cast<size_t>(self)] = measure_transport_cluster(transport, self, host_of, quick_probe());
  });
  return seen;
}

TEST(TransportProbe, TwoHostsOfTwoWorkersMeasureBothLinksAndTheHop) {
  const std::vector<Cluster> seen = probe_on_threads({0, 0, 1, 1});
  const Cluster& c = seen[0];
  EXPECT_EQ(c.machines, 2);
  EXPECT_EQ(c.devices_per_machine, 2);
  EXPECT_EQ(c.device.kind, "cpu");
  EXPECT_GT(c.device.peak_flops_per_s, 0);
  EXPECT_GT(c.intra_link.bandwidth_bytes_per_s, 0);
  EXPECT_GT(c.intra_link.latency_s, 0);
  EXPECT_GT(c.inter_link.bandwidth_bytes_per_s, 0);
  EXPECT_GT(c.inter_link.latency_s, 0);
  EXPECT_GT(c.collective.hop_bytes_per_s, 0);
  EXPECT_GT(c.collective.sync_s, 0);  // a barrier across the four workers' transport
  EXPECT_NE(c.description.find("barriers across every worker"), std::string::npos) << c.description;
  EXPECT_EQ(c.name, "cpu2x2-measured");
  for (const Cluster& other : seen) EXPECT_EQ(cluster_to_json(other), cluster_to_json(c));  // worker 0's, everywhere
}

TEST(TransportProbe, OneWorkerPerHostLeavesTheRingToTheInterLink) {
  const std::vector<Cluster> seen = probe_on_threads({0, 1, 2});
  const Cluster& c = seen[0];
  EXPECT_EQ(c.machines, 3);
  EXPECT_EQ(c.devices_per_machine, 1);
  EXPECT_EQ(c.collective.hop_bytes_per_s, 0);
  EXPECT_EQ(c.intra_link.bandwidth_bytes_per_s, c.inter_link.bandwidth_bytes_per_s);  // none inside a host
  EXPECT_GT(c.inter_link.bandwidth_bytes_per_s, 0);
  // Compute beside the AllReduce measured (sharing_probe.hpp), in (0, 1];
  // the AllReduce's rate beside it reported, and left to be derived.
  EXPECT_GT(c.device.compute_rate_while_communicating, 0);
  EXPECT_LE(c.device.compute_rate_while_communicating, 1);
  EXPECT_EQ(c.device.collective_rate_while_computing, 0);
  EXPECT_NE(c.description.find("AllReduce beside GEMMs that never pause"), std::string::npos) << c.description;
  // Every worker on this computer (one kernel boot id), as on emulated
  // hosts: the simulator shares its cores among them.
  EXPECT_EQ(c.shared_cores, usable_cores());
  EXPECT_GT(c.device.handoff_s, 0);  // timed by each worker in turn
}

TEST(TransportProbe, HostsOfUnequalSizesAreRefusedOnEveryWorker) {
  InProcessTransport transport(3);
  std::mutex mu;
  std::vector<std::string> errors;
  run_workers(transport, 3, [&](int self) {
    try {
      measure_transport_cluster(transport, self, {0, 0, 1}, quick_probe());
    } catch (const InputError& e) {
      std::lock_guard lock(mu);
      errors.push_back(e.what());
    }
  });
  ASSERT_EQ(errors.size(), 3u);
  EXPECT_NE(errors[0].find("as many ranks on every host"), std::string::npos) << errors[0];
}

}  // namespace
}  // namespace trainsim
