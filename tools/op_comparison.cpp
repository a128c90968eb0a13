// validate's op by op comparison (validation.hpp): the measured ops
// grouped as the simulated, and how busy the GPU workers' kernels kept them.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <vector>

#include "model/error.hpp"
#include "profiles/profiler/timing.hpp"
#include "tools/validation.hpp"

namespace trainsim {
namespace {

// Whether the op's work was timed where its device ran it.
bool device_timed(const ExecOpTiming& t) { return !std::isnan(t.device_start_s) && !std::isnan(t.device_end_s); }

// Measured durations of the ops. A collective's starts when its last member
// arrives, as in the simulator (the k-th of a kind a member issues on a group
// joins the other members' k-th): a member's earlier wait is idle, not the
// collective's cost. A compute op whose work its device timed (a GPU's
// kernels) lasts from its start on the host until both its host part and
// that work have ended, as the simulator times it (DeviceSpec::host_per_op;
// without it, the host's part is what the simulation leaves out).
std::vector<double> measured_durations_s(const Plan& plan, const std::vector<ExecOpTiming>& measured) {
  using Instance = std::tuple<int32_t, int, int64_t>;  // group, kind, k-th
  std::map<std::tuple<int32_t, int, int32_t>, int64_t> issued;
  std::map<Instance, double> last_start_s;
  std::vector<Instance> instance_of(plan.ops.size());
  for (size_t id = 0; id < plan.ops.size(); ++id) {
    const Op& op = plan.ops[id];
    if (!is_collective(op.kind)) continue;
    const int64_t k = issued[{op.group, static_cast<int>(op.kind), op.worker}]++;
    instance_of[id] = {op.group, static_cast<int>(op.kind), k};
    double& start_s = last_start_s.try_emplace(instance_of[id], measured[id].start_s).first->second;
    start_s = std::max(start_s, measured[id].start_s);
  }
  std::vector<double> durations_s(plan.ops.size());
  for (size_t id = 0; id < plan.ops.size(); ++id) {
    const ExecOpTiming& t = measured[id];
    if (device_timed(t)) {  // until its host part and its work where its device ran it have ended
      durations_s[id] = std::max(0.0, std::max(t.end_s, t.device_end_s) - t.start_s);
      continue;
    }
    const double start_s = is_collective(plan.ops[id].kind) ? last_start_s[instance_of[id]] : t.start_s;
    durations_s[id] = std::max(0.0, t.end_s - start_s);
  }
  return durations_s;
}

}  // namespace

double relative_error(double predicted, double measured) {
  return measured > 0 ? (predicted - measured) / measured : 0.0;
}

std::vector<OpGroupComparison> compare_ops(const Plan& plan, const std::vector<OpTiming>& simulated,
                                           const std::vector<ExecOpTiming>& measured, int32_t warmup) {
  TRAINSIM_CHECK(simulated.size() == plan.ops.size() && measured.size() == plan.ops.size(),
                 "one simulated and one measured timing per op");
  using GroupKey = std::tuple<int32_t, int, int, int32_t, int32_t>;  // worker, stream, kind, layers
  std::map<GroupKey, size_t> index;
  std::vector<OpGroupComparison> groups;
  std::vector<std::vector<double>> sim_s;
  std::vector<std::vector<double>> real_s;
  const std::vector<double> measured_s = measured_durations_s(plan, measured);
  const int32_t last = plan.iterations - warmup;  // exclusive; everything when there is no warm-up
  for (size_t id = 0; id < plan.ops.size(); ++id) {
    const Op& op = plan.ops[id];
    if (op.iteration < warmup || op.iteration >= std::max(last, warmup + 1)) continue;
    const GroupKey key{op.worker, static_cast<int>(op.stream), static_cast<int>(op.kind), op.first_layer,
                       op.last_layer};
    auto [it, added] = index.emplace(key, groups.size());
    if (added) {
      OpGroupComparison g;
      g.kind = op_kind_name(op.kind);
      g.stream = stream_kind_name(op.stream);
      g.worker = op.worker;
      g.first_layer = op.first_layer;
      g.last_layer = op.last_layer;
      groups.push_back(g);
      sim_s.emplace_back();
      real_s.emplace_back();
    }
    sim_s[it->second].push_back(static_cast<double>(simulated[id].end_ns - simulated[id].start_ns) * 1e-9);
    real_s[it->second].push_back(measured_s[id]);
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    groups[g].count = static_cast<int64_t>(sim_s[g].size());
    groups[g].simulated_s = median_s(sim_s[g]);
    groups[g].measured_s = median_s(real_s[g]);
    groups[g].error = relative_error(groups[g].simulated_s, groups[g].measured_s);
  }
  return groups;
}

double device_busy_share(const Plan& plan, const std::vector<ExecOpTiming>& measured, int32_t warmup,
                         double iteration_s) {
  TRAINSIM_CHECK(measured.size() == plan.ops.size(), "one measured timing per op");
  std::map<std::pair<int32_t, int32_t>, double> busy_s;  // (worker, iteration)
  const int32_t last = plan.iterations - warmup;         // exclusive, as compare_ops
  for (size_t id = 0; id < plan.ops.size(); ++id) {
    const Op& op = plan.ops[id];
    if (!device_timed(measured[id]) || op.iteration < warmup || op.iteration >= std::max(last, warmup + 1)) continue;
    busy_s[{op.worker, op.iteration}] += std::max(0.0, measured[id].device_end_s - measured[id].device_start_s);
  }
  if (busy_s.empty() || iteration_s <= 0) return std::numeric_limits<double>::quiet_NaN();
  std::map<int32_t, std::vector<double>> per_worker;
  for (const auto& [key, seconds] : busy_s) per_worker[key.first].push_back(seconds);
  std::vector<double> shares;
  for (const auto& [worker, seconds] : per_worker) shares.push_back(median_s(seconds) / iteration_s);
  return median_s(shares);
}

}  // namespace trainsim
