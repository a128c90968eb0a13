// The data-parallel settings a strategy's own search chooses when none is
// given, shared by the cost models and their plan generators: dp-overlap's
// bucket size and pipesgd's segment count (sim/search/sync_size.hpp), cgdp's
// chunks (sim/search/chunk.hpp). Each records what it resolved.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "sim/cost/collective.hpp"
#include "sim/cost/data_parallel.hpp"
#include "sim/cost/strategy_config.hpp"

namespace trainsim {

// dp-overlap's key `bucket_bytes`: as given, else the bucket size with the
// least overlap_backward_end_s (sim/search/sync_size.hpp), recorded.
double resolve_bucket_bytes(const Profile& profile, const Cluster& cluster, int64_t workers,
                            CollectiveAlgorithm algorithm, StrategyConfig& config);

// pipesgd's keys width, compression, algorithm, warmup and `segments`: segments as
// given, else the S with the least iteration time (sim/search/sync_size.hpp),
// recorded.
PipeSgdSettings resolve_pipesgd_settings(const Profile& profile, const Cluster& cluster, StrategyConfig& config);

// cgdp's chunks: keys "chunks" (explicit ranges) or "chunk_size"
// (seed_chunk_layout), not both. With neither, the exact optimal chunking of
// the cgdp model on `workers` devices (sim/search/chunk.hpp), recorded as
// "chunks"; one worker synchronizes nothing and keeps chunk size 1.
struct CgdpChunks {
  std::vector<LayerRange> ranges;  // ascending, covering every layer
  std::string source;              // "given", "chunk_size K" or "exact optimum"
};
CgdpChunks resolve_cgdp_chunks(const Profile& profile, const Cluster& cluster, int64_t workers,
                               StrategyConfig& config);

}  // namespace trainsim
