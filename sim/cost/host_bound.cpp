// price_host_per_op (host_bound.hpp).
#include "sim/cost/host_bound.hpp"

#include <algorithm>
#include <vector>

namespace trainsim {

bool prices_host_per_op(const Cluster& cluster) {
  // As the simulator: none where workers share a computer's cores (CPU threads).
  return cluster.device.host_per_op.any() && (cluster.shared_devices > 0 || cluster.shared_cores <= 0);
}

void price_host_per_op(const Plan& plan, const Cluster& cluster, Prediction& prediction) {
  const DeviceSpec::HostPerOp& host = cluster.device.host_per_op;
  if (!prices_host_per_op(cluster) || plan.iterations <= 0) return;
  std::vector<double> host_s(plan.workers.size(), 0.0);  // worker -> its host's time on its compute ops
  for (const Op& op : plan.ops) {
    if (op.worker >= 0) host_s[static_cast<size_t>(op.worker)] += op_host_s(host, op);
  }
  // docs/equations.md §12: T ≥ max_w Σ_{compute ops o of w} h(o) / iterations.
  const double bound_s =
      host_s.empty() ? 0.0 : *std::max_element(host_s.begin(), host_s.end()) / static_cast<double>(plan.iterations);
  raise_to_bound(prediction, bound_s, "priced at the host's time per compute op (host_per_op): a worker's host");
}

}  // namespace trainsim
