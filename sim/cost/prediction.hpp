// Prediction: what a cost model (or, later, the simulator) says of one
// strategy on one profile and cluster (`trainsim.prediction/1`).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace trainsim {

// Where a device's wall time goes during one iteration. The prediction's
// breakdown is the average over the devices used, so it sums to iteration_s.
struct Breakdown {
  double compute_s = 0;         // forward, backward, recompute, update, compression
  double exposed_comm_s = 0;    // communication the device waits on with nothing to overlap it
  double idle_transfer_s = 0;   // idle, waiting for a transfer from a peer (pipeline inputs, halos)
  double idle_imbalance_s = 0;  // idle because another device is slower (pipeline bubbles, stragglers)

  double total_s() const { return compute_s + exposed_comm_s + idle_transfer_s + idle_imbalance_s; }
};

// Memory one device holds at its peak, by purpose.
struct DeviceMemory {
  double weights_bytes = 0;      // the current weights of the layers it holds
  double gradients_bytes = 0;    // their gradients (or buckets/chunks in flight)
  double optimizer_bytes = 0;    // optimizer state (momentum: one copy of the weights)
  double activations_bytes = 0;  // activations kept for backward, all mini/micro-batches in flight
  double stashed_bytes = 0;      // extra weight versions (weight stashing, DSP, SpecTrain)

  double total_bytes() const {
    return weights_bytes + gradients_bytes + optimizer_bytes + activations_bytes + stashed_bytes;
  }
};

struct Prediction {
  std::string strategy;             // strategy id, "dp-ring"
  std::string method = "analytic";  // "analytic" or "simulated"
  nlohmann::json config = nlohmann::json::object();  // resolved settings, defaults included
  int64_t workers = 1;              // devices the strategy uses
  double iteration_s = 0;           // one iteration: every worker's step (data parallel) or one
                                    // mini-batch through the pipeline in steady state
  double samples_per_iteration = 0; // training samples the whole job consumes per iteration
  double samples_per_s = 0;         // samples_per_iteration / iteration_s
  double speedup_vs_single = 0;     // against `single` on one device at the same per-device batch
  Breakdown breakdown;              // averaged over devices
  std::vector<DeviceMemory> memory; // one per device used
  int64_t staleness = 0;            // largest weight-version lag of a gradient, in iterations
  std::vector<std::string> notes;   // choices the model made (default partition, ...)
};

// The breakdown component that takes the most time: "compute", "exposed_comm",
// "idle_transfer" or "idle_imbalance".
std::string dominant_cost(const Breakdown& breakdown);

// Largest per-device memory total.
double peak_memory_bytes(const Prediction& prediction);

// A lower bound on the iteration from outside the cost model (a shared
// device's work, a GPU worker's host): where `bound_s` passes
// prediction.iteration_s (its rounding aside), the prediction takes it, the
// excess counted as compute and samples_per_s following, and `why` followed
// by the bound (" takes T an iteration") goes to its notes.
void raise_to_bound(Prediction& prediction, double bound_s, const std::string& why);

nlohmann::json prediction_to_json(const Prediction& prediction);

}  // namespace trainsim
