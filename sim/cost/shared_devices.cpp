// price_shared_devices (shared_devices.hpp).
#include "sim/cost/shared_devices.hpp"

#include <algorithm>
#include <map>

namespace trainsim {

void price_shared_devices(const Plan& plan, const Cluster& cluster, Prediction& prediction) {
  if (cluster.shared_devices <= 0 || plan.iterations <= 0) return;
  std::map<int64_t, double> work_s;    // physical device -> its workers' compute
  std::map<int64_t, int64_t> workers;  // physical device -> its workers
  for (const PlanWorker& w : plan.workers) ++workers[physical_device_of(cluster, w.device)];
  for (const Op& op : plan.ops) {
    if (op.stream != StreamKind::kCompute || op.worker < 0) continue;
    work_s[physical_device_of(cluster, plan.workers[static_cast<size_t>(op.worker)].device)] += op.work_s;
  }
  // docs/equations.md §11: T ≥ max_d Σ_{w on d} C_w / (n_d · r(n_d)).
  double bound_s = 0;
  for (const auto& [device, seconds] : work_s) {
    const auto n = static_cast<double>(workers[device]);
    const double capacity = n * shared_device_rate(cluster, workers[device]);
    bound_s = std::max(bound_s, seconds / static_cast<double>(plan.iterations) / capacity);
  }
  raise_to_bound(prediction, bound_s, "priced at the shared device's capacity (shared_devices): its workers' compute");
}

}  // namespace trainsim
