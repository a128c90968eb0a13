// Importer for PipeDream's per-layer profiles (`graph.txt`, written by its
// profiler and read by its partitioner; format in
// tests/data/pipedream/README.md) into a trainsim profile.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "profiles/profile.hpp"

namespace trainsim {

// Reads the graph at `path`: one layer per node (name = node id, times ms →
// s, activation_size summed when a list, parameter_size), in topological
// order (Kahn; ready nodes taken in the order of their lines). `Input*`
// nodes become the profile's "input"; other nodes without predecessors keep
// empty inputs (e.g. GNMT's "hidden" state). The model is the parent folder's
// name, the source "imported:pipedream", the device unknown.
//
// batch_size: used as given; if absent, inferred from the single Input node's
// activation_size as A / (4·3·H·W) for H = W in 224, 299, 331, 32 (first exact
// fit). InputError "path:line N" on malformed lines, missing or non-numeric or
// negative fields, unknown nodes in edges, cycles; InputError naming the path
// for an empty graph or a batch that cannot be inferred (pass --batch).
Profile import_pipedream_graph(const std::string& path, std::optional<int64_t> batch_size);

}  // namespace trainsim
