#include "profiles/cluster.hpp"
namespace trainsim { const std::vector<Cluster>& cluster_presets() { static const std::vector<Cluster> p; return p; } }
