// The workload text of ASTRA-sim 1.0 and SimAI (workload_export.hpp).
#include "profiles/workload_export.hpp"

#include <cmath>
#include <sstream>

#include "model/error.hpp"

namespace trainsim {
namespace {

// Nanoseconds, at least 1: the simulators treat 0 as no step at all.
long long ns(double seconds) { return std::max<long long>(1, std::llround(seconds * 1e9)); }

std::string field_name(const std::string& name) {
  std::string out = name;
  for (char& c : out) {
    if (c == ' ' || c == '\t') c = '_';
  }
  return out;
}

}  // namespace

WorkloadFormat parse_workload_format(const std::string& text, const std::string& where) {
  if (text == "astra-sim") return WorkloadFormat::kAstraSim;
  if (text == "simai") return WorkloadFormat::kSimAi;
  throw InputError(where, "'" + text + "'", "astra-sim (ASTRA-sim 1.0's text) or simai");
}

std::string workload_text(const Profile& profile, int64_t workers, WorkloadFormat format) {
  std::ostringstream out;
  out << "DATA";
  if (format == WorkloadFormat::kSimAi) {
    out << " model_parallel_NPU_group: 1 ep: 1 pp: 1 ga: 1 all_gpus: " << workers
        << " checkpoints: 0 checkpoint_initiates: 0";
  }
  out << "\n" << profile.layers.size() << "\n";
  for (const LayerProfile& l : profile.layers) {
    const double input = l.backward_input_s.value_or(l.backward_s / 2);
    const double weights = l.backward_weight_s.value_or(l.backward_s - input);
    const auto bytes = std::llround(l.param_bytes);
    out << field_name(l.name) << "\t-1\t" << ns(l.forward_s) << "\tNONE\t0\t" << ns(input) << "\tNONE\t0\t"
        << ns(weights) << "\t" << (bytes > 0 ? "ALLREDUCE" : "NONE") << "\t" << bytes << "\t"
        << ns(l.update_s.value_or(0)) << "\n";
  }
  return out.str();
}

}  // namespace trainsim
