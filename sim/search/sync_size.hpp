// How much gradient to send at once, for the data-parallel strategies whose
// cost model has that knob besides cgdp's chunks (sim/search/chunk.hpp):
// dp-overlap's bucket size and pipesgd's segment count. Each sweeps its one
// parameter through the strategy's own cost function.
#pragma once

#include <cstdint>
#include <vector>

#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "sim/cost/collective.hpp"
#include "sim/cost/data_parallel.hpp"

namespace trainsim {

// Bucket sizes tried for dp-overlap: 25 MB (PyTorch DDP's default) first,
// then powers of two from 64 KiB up to the first one holding every gradient.
std::vector<double> bucket_size_candidates(const Profile& profile);

// The candidate with the least overlap_backward_end_s; ties keep the earlier
// candidate (25 MB, then the smaller size). kDefaultBucketBytes when there is
// nothing to communicate. O(C·N) for C candidates and N layers.
double best_bucket_bytes(const Profile& profile, const Cluster& cluster, int64_t workers,
                         CollectiveAlgorithm algorithm);

// The segment count S in 1..min(layers with parameters, 256) with the least
// pipesgd iteration time (compute + exposed communication) for `settings`
// (its `segments` ignored); ties keep the smaller S, so S = 1 (the paper's
// sequential communication) wins whenever segmenting gains nothing.
int64_t best_pipesgd_segments(const Profile& profile, const Cluster& cluster, PipeSgdSettings settings);

}  // namespace trainsim
