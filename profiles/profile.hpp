// Per-layer profiles (`trainsim.profile/1`, docs/formats.md): what one device
// measured, estimated or imported for each layer at one batch size. The cost
// models and the simulator read only this, never the model graph.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace trainsim {

struct LayerProfile {
  std::string name;                   // layer name, unique
  std::vector<std::string> inputs;    // earlier layers, or "input"
  double forward_s = 0;               // forward time of the whole batch
  double backward_s = 0;              // backward time (input + weight gradients)
  double param_bytes = 0;             // weights and biases, e.g. 4 × count for fp32
  double activation_bytes = 0;        // this layer's output for the whole batch
  bool sparse = false;                // gradient touches only some rows
  double sparsity = 1.0;              // fraction of rows touched per iteration (1 = dense)
  // Fractions of rows the batches of 2, 4, 8, ... workers touch together,
  // where measured: real text repeats its common words across batches, so
  // they overlap more than independent draws would.
  std::vector<double> union_sparsity;
  std::optional<double> backward_input_s;   // split of backward_s, when measured
  std::optional<double> backward_weight_s;
  std::optional<double> workspace_bytes;    // scratch memory while running
  std::optional<double> flops;              // forward FLOPs of the batch
  std::optional<double> update_s;           // optimizer step of the layer's weights, when measured
  // The batch-independent part of forward_s / backward_s, when measured: a
  // fraction f of the batch takes fixed + (total − fixed)·f (scaled_s).
  std::optional<double> forward_fixed_s;
  std::optional<double> backward_fixed_s;
};

struct ProfileDevice {
  std::string name;  // "Tesla P40"
  std::string kind;  // "gpu" or "cpu"
};

struct Profile {
  std::string model;        // "vgg16"
  ProfileDevice device;
  int64_t batch_size = 1;   // samples per batch the times were taken at
  std::string dtype = "fp32";
  std::string source;       // "measured", "analytic", "imported:pipedream", "paper:<ref>"
  std::vector<LayerProfile> layers;  // topological order
};

// The number formats a profile may be measured in (its `dtype`).
inline const std::vector<std::string> kKnownDtypes = {"fp32", "fp16", "bf16", "tf32", "fp64", "fp8", "int8"};

// The fraction of a layer's rows `workers` workers' batches touch together:
// sparsity for one, union_sparsity at 2, 4, 8, ... interpolated linearly in
// log2(workers) between them; beyond the last measured (or without any) as
// independent draws, 1 − (1 − f)^(workers / its workers). 1 for a dense layer.
double touched_fraction(const LayerProfile& layer, int64_t workers);

// Checks every field: dtype known, names unique, inputs earlier, times and bytes finite
// and >= 0, sparsity in (0, 1], union_sparsity non-decreasing from it within
// (0, 1]; InputError naming `where` otherwise.
void validate_profile(const Profile& profile, const std::string& where);

nlohmann::json profile_to_json(const Profile& profile);
Profile profile_from_json(const nlohmann::json& doc, const std::string& where);

Profile read_profile_file(const std::string& path);
void write_profile_file(const std::string& path, const Profile& profile);

// Sums over the whole profile.
double total_forward_s(const Profile& profile);
double total_backward_s(const Profile& profile);
double total_param_bytes(const Profile& profile);

}  // namespace trainsim
