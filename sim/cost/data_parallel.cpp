// Shared data-parallel cost-model pieces; see data_parallel.hpp.
#include "sim/cost/data_parallel.hpp"

#include <algorithm>

#include "model/error.hpp"
#include "sim/cost/common.hpp"

namespace trainsim {

Prediction data_parallel_prediction(const std::string& strategy, const Profile& profile, int64_t workers,
                                    double compute_s, double exposed_comm_s) {
  TRAINSIM_CHECK(workers >= 1, "data parallel needs at least one worker");
  Prediction p;
  p.strategy = strategy;
  p.workers = workers;
  p.iteration_s = compute_s + exposed_comm_s;
  p.samples_per_iteration = static_cast<double>(workers * profile.batch_size);
  p.breakdown.compute_s = compute_s;
  p.breakdown.exposed_comm_s = exposed_comm_s;
  const int64_t last = static_cast<int64_t>(profile.layers.size()) - 1;
  p.memory.assign(static_cast<size_t>(workers), replica_memory(profile, 0, last, 1.0));
  return p;
}

CollectiveAlgorithm read_collective_algorithm(StrategyConfig& config) {
  const std::string name = config.get_choice("algorithm", "ring", collective_algorithm_names());
  return parse_collective_algorithm(name, "--set algorithm");
}

std::vector<GradientGroup> group_gradients_by_bytes(const Profile& profile, double group_bytes) {
  TRAINSIM_CHECK(group_bytes > 0, "gradient groups need a positive size");
  std::vector<GradientGroup> groups;
  GradientGroup open;
  double backward_s = 0;
  for (int64_t i = static_cast<int64_t>(profile.layers.size()) - 1; i >= 0; --i) {
    const LayerProfile& layer = profile.layers[static_cast<size_t>(i)];
    backward_s += layer.backward_s;
    if (layer.param_bytes <= 0) continue;
    if (open.bytes == 0) open.last = i;
    open.first = i;
    open.bytes += layer.param_bytes;
    open.ready_s = backward_s;
    if (open.bytes >= group_bytes) {
      groups.push_back(open);
      open = GradientGroup{};
    }
  }
  if (open.bytes > 0) groups.push_back(open);
  return groups;
}

double flow_shop_end_s(const std::vector<double>& ready_s, const std::vector<std::vector<double>>& stage_s) {
  TRAINSIM_CHECK(ready_s.size() == stage_s.size(), "flow shop: one ready time per job");
  std::vector<double> free_s;  // when each resource finishes its latest job
  double end_s = 0;
  for (size_t j = 0; j < ready_s.size(); ++j) {
    if (free_s.empty()) free_s.assign(stage_s[j].size(), 0.0);
    TRAINSIM_CHECK(stage_s[j].size() == free_s.size(), "flow shop: every job passes every resource");
    end_s = ready_s[j];
    for (size_t k = 0; k < free_s.size(); ++k) {
      end_s = std::max(end_s, free_s[k]) + stage_s[j][k];
      free_s[k] = end_s;
    }
  }
  return end_s;
}

std::vector<int64_t> workers_per_machine(const Cluster& cluster, int64_t workers) {
  TRAINSIM_CHECK(workers >= 1 && workers <= device_count(cluster), "workers must fit the cluster");
  std::vector<int64_t> counts;
  for (int64_t left = workers; left > 0; left -= cluster.devices_per_machine) {
    counts.push_back(std::min(left, cluster.devices_per_machine));
  }
  return counts;
}

}  // namespace trainsim
