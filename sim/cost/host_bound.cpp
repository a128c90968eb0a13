// price_host_per_op (host_bound.hpp).
#include "sim/cost/host_bound.hpp"

#include <algorithm>
#include <string>
#include <vector>

#include "model/units.hpp"

namespace trainsim {

void price_host_per_op(const Plan& plan, const Cluster& cluster, Prediction& prediction) {
  const DeviceSpec::HostPerOp& host = cluster.device.host_per_op;
  if (!host.any() || plan.iterations <= 0) return;
  std::vector<double> host_s(plan.workers.size(), 0.0);  // worker -> its host's time on its compute ops
  for (const Op& op : plan.ops) {
    if (op.worker >= 0) host_s[static_cast<size_t>(op.worker)] += op_host_s(host, op);
  }
  // docs/equations.md §12: T ≥ max_w Σ_{compute ops o of w} h(o) / iterations.
  const double bound_s =
      host_s.empty() ? 0.0 : *std::max_element(host_s.begin(), host_s.end()) / static_cast<double>(plan.iterations);
  if (!(bound_s > prediction.iteration_s * (1 + 1e-9))) return;  // not past the model's own (its rounding aside)
  prediction.breakdown.compute_s += bound_s - prediction.iteration_s;
  prediction.iteration_s = bound_s;
  prediction.samples_per_s = prediction.samples_per_iteration / bound_s;
  prediction.notes.push_back("priced at the host's time per compute op (host_per_op): a worker's host takes " +
                             format_seconds(bound_s) + " an iteration");
}

}  // namespace trainsim
