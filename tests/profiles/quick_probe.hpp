// Cluster-probe options small enough for unit tests: a few repeats of small
// products, messages and buffers (the figures are checked for shape and
// sign, not value).
#pragma once

#include "profiles/profiler/cluster_probe.hpp"

namespace trainsim::testing_fixtures {

inline ClusterProbeOptions quick_probe() {
  ClusterProbeOptions o;
  o.repeats = 3;
  o.warmups = 1;
  o.gemm_size = 96;
  o.update_bytes = 4 << 20;
  o.max_message_bytes = 1 << 20;
  o.reduce_bytes = 1 << 20;
  o.barrier_repeats = 20;
  o.handoff_repeats = 20;
  o.sharing_repeats = 3;
  return o;
}

}  // namespace trainsim::testing_fixtures
