// The job the settings harnesses price: eight layers (one of them a sparse
// embedding, for Parallax) on two machines of two devices, so every strategy,
// link and server placement has something to do.
#pragma once

#include <string>

#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"

namespace trainsim::fuzz {

inline Profile small_profile() {
  Profile p;
  p.model = "fuzz-chain";
  p.device = {"test device", "gpu"};
  p.batch_size = 32;
  p.source = "test";
  std::string previous = "input";
  for (int i = 0; i < 8; ++i) {
    LayerProfile l;
    l.name = "l" + std::to_string(i);
    l.inputs = {previous};
    l.forward_s = 1e-3 * (1 + i % 3);
    l.backward_s = 2 * l.forward_s;
    l.param_bytes = 1e6 * (1 + i % 2);
    l.activation_bytes = 4e6 / (1 + i);
    l.sparse = i == 0;
    l.sparsity = i == 0 ? 0.05 : 1.0;
    p.layers.push_back(l);
    previous = l.name;
  }
  return p;
}

inline Cluster small_cluster() {
  Cluster c = load_cluster("titanxp-4node-10gbe");
  c.machines = 2;
  c.devices_per_machine = 2;
  return c;
}

}  // namespace trainsim::fuzz
