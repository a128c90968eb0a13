// Shared by the partition search's tests: the objective of one partition as
// partition.hpp states it, from the pipeline build_pipeline places (one
// machine: every link is the intra link), written out per schedule.
#pragma once

#include <algorithm>
#include <cstdint>

#include "sim/cost/stages.hpp"
#include "sim/search/partition.hpp"

namespace trainsim::testing_fixtures {

inline double partition_objective_s(const Pipeline& pipe, PartitionObjective objective, int64_t batch) {
  double worst = 0;
  const int64_t k_count = pipe.stage_count();
  for (int64_t k = 0; k < k_count; ++k) {
    const PipelineStage& s = pipe.stages[k];
    double stage = std::max(s.compute_s(), s.weight_sync_s) / static_cast<double>(s.replicas);
    if (objective == PartitionObjective::kDsp && k + 1 < k_count) stage += s.forward_s;
    worst = std::max(worst, stage);
  }
  for (const StageBoundary& b : pipe.boundaries) {
    worst = std::max(worst, objective == PartitionObjective::kDualPipe ? transfer_s(b.bytes, b.link) : b.comm_s);
  }
  if (objective == PartitionObjective::kGPipe) {
    const double m = static_cast<double>(std::min<int64_t>(4 * k_count, batch));
    worst *= (m + static_cast<double>(k_count) - 1) / m;
  }
  return worst;
}

}  // namespace trainsim::testing_fixtures
