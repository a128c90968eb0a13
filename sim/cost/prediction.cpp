// Prediction helpers and JSON form.
#include "sim/cost/prediction.hpp"

#include <algorithm>
#include <string>

#include "model/units.hpp"

namespace trainsim {

std::string dominant_cost(const Breakdown& b) {
  const std::pair<double, const char*> parts[] = {{b.compute_s, "compute"},
                                                  {b.exposed_comm_s, "exposed_comm"},
                                                  {b.idle_transfer_s, "idle_transfer"},
                                                  {b.idle_imbalance_s, "idle_imbalance"}};
  return std::max_element(std::begin(parts), std::end(parts),
                          [](const auto& x, const auto& y) { return x.first < y.first; })
      ->second;
}

double peak_memory_bytes(const Prediction& p) {
  double peak = 0;
  for (const DeviceMemory& m : p.memory) peak = std::max(peak, m.total_bytes());
  return peak;
}

void raise_to_bound(Prediction& p, double bound_s, const std::string& why) {
  if (!(bound_s > p.iteration_s * (1 + 1e-9))) return;  // not past the model's own (its rounding aside)
  p.breakdown.compute_s += bound_s - p.iteration_s;
  p.iteration_s = bound_s;
  p.samples_per_s = p.samples_per_iteration / bound_s;
  p.notes.push_back(why + " takes " + format_seconds(bound_s) + " an iteration");
}

nlohmann::json prediction_to_json(const Prediction& p) {
  nlohmann::json memory = nlohmann::json::array();
  nlohmann::json memory_detail = nlohmann::json::array();
  for (const DeviceMemory& m : p.memory) {
    memory.push_back(m.total_bytes());
    memory_detail.push_back({{"weights", m.weights_bytes},
                             {"gradients", m.gradients_bytes},
                             {"optimizer", m.optimizer_bytes},
                             {"activations", m.activations_bytes},
                             {"stashed", m.stashed_bytes}});
  }
  return {{"strategy", p.strategy},
          {"method", p.method},
          {"config", p.config},
          {"workers", p.workers},
          {"iteration_s", p.iteration_s},
          {"samples_per_iteration", p.samples_per_iteration},
          {"samples_per_s", p.samples_per_s},
          {"speedup_vs_single", p.speedup_vs_single},
          {"breakdown_s",
           {{"compute", p.breakdown.compute_s},
            {"exposed_comm", p.breakdown.exposed_comm_s},
            {"idle_transfer", p.breakdown.idle_transfer_s},
            {"idle_imbalance", p.breakdown.idle_imbalance_s}}},
          {"dominant", dominant_cost(p.breakdown)},
          {"memory_bytes_per_device", memory},
          {"memory_breakdown_bytes", memory_detail},
          {"staleness", p.staleness},
          {"notes", p.notes}};
}

}  // namespace trainsim
