// Small hand-checkable profiles and clusters for the cost-model tests.
#pragma once

#include <string>
#include <vector>

#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"

namespace trainsim::testing_fixtures {

inline LayerProfile layer(std::string name, std::vector<std::string> inputs, double forward_s, double backward_s,
                          double param_bytes, double activation_bytes) {
  LayerProfile l;
  l.name = std::move(name);
  l.inputs = std::move(inputs);
  l.forward_s = forward_s;
  l.backward_s = backward_s;
  l.param_bytes = param_bytes;
  l.activation_bytes = activation_bytes;
  return l;
}

// Two layers at batch 32: fwd 1, 2 ms; bwd 2, 4 ms; params 1, 2 MB;
// activations 4, 8 MB.
inline Profile two_layer_profile() {
  Profile p;
  p.model = "two-layer";
  p.device = {"test device", "gpu"};
  p.batch_size = 32;
  p.source = "test";
  p.layers.push_back(layer("a", {"input"}, 1e-3, 2e-3, 1e6, 4e6));
  p.layers.push_back(layer("b", {"a"}, 2e-3, 4e-3, 2e6, 8e6));
  return p;
}

// A chain of `n` layers with the given per-layer times and sizes.
inline Profile chain_profile(int n, double forward_s, double backward_s, double param_bytes,
                             double activation_bytes, int64_t batch = 32) {
  Profile p;
  p.model = "chain";
  p.device = {"test device", "gpu"};
  p.batch_size = batch;
  p.source = "test";
  std::string previous = "input";
  for (int i = 0; i < n; ++i) {
    const std::string name = "l" + std::to_string(i);
    p.layers.push_back(layer(name, {previous}, forward_s, backward_s, param_bytes, activation_bytes));
    previous = name;
  }
  return p;
}

// Round numbers: links 10 GB/s and 10 us inside a machine, 1 GB/s and 50 us
// between machines; device memory bandwidth 100 GB/s; collective reduction at
// 50 GB/s and 20 us per call; host link 10 GB/s, host reduction 20 GB/s.
inline Cluster simple_cluster(int64_t machines, int64_t devices_per_machine) {
  Cluster c;
  c.name = "test-cluster";
  c.machines = machines;
  c.devices_per_machine = devices_per_machine;
  c.device = {"test device", "gpu", 16e9, 10e12, 100e9};
  c.intra_link = {10e9, 10e-6};
  c.inter_link = {1e9, 50e-6};
  c.host = {10e9, 10e-6, 20e9, 8, 20e-6};
  c.collective = {50e9, 20e-6};
  return c;
}

}  // namespace trainsim::testing_fixtures
