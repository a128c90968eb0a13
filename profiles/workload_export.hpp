// A profile's data-parallel training as the per-layer workload text that
// ASTRA-sim 1.0 and SimAI read (docs/formats.md, "Workload text"): a header
// line (the parallelism; SimAI's adds its group sizes), the layer count,
// then a line a layer of twelve tab-separated fields: name, -1 (no
// dependency), the forward's compute time, its collective and bytes (NONE
// 0), the input gradient's time, NONE 0, the weight gradient's time, an
// ALLREDUCE of the layer's parameter bytes (NONE 0 without parameters), and
// the weights' update time. Times in nanoseconds; a backward not split into
// its input and weight gradients is split in halves.
#pragma once

#include <cstdint>
#include <string>

#include "profiles/profile.hpp"

namespace trainsim {

enum class WorkloadFormat { kAstraSim, kSimAi };

// InputError naming `where` for a format that is not astra-sim or simai.
WorkloadFormat parse_workload_format(const std::string& text, const std::string& where);

std::string workload_text(const Profile& profile, int64_t workers, WorkloadFormat format);

}  // namespace trainsim
