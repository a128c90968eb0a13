// `pipedream-sync` plan: PipeDream's 1F1B as seed 000 ran it (§3.1, Figure
// 6a). Every worker keeps the 1F1B order of `pipedream`, but time is cut into
// units closed by a barrier of all workers: in each unit a worker runs at most
// one task, one whose input arrived in an earlier unit, and the barrier waits
// for the unit's transfers to land. In steady state a mini-batch costs two
// units (docs/equations.md §5).
#include <climits>
#include <numeric>
#include <vector>

#include "model/error.hpp"
#include "sim/cost/pipeline_settings.hpp"
#include "sim/cost/stages.hpp"
#include "sim/plan/generators.hpp"
#include "sim/plan/pipeline_plan.hpp"

namespace trainsim {
namespace {

// Where every worker stands: its 1F1B program, the unit each task of every
// stage ran in, and the rounds of gradient updates per stage.
struct Schedule {
  std::vector<int32_t> stage_of;                   // per worker
  std::vector<std::vector<PipelineTask>> program;  // per worker
  std::vector<size_t> next;                        // per worker: next task
  std::vector<std::vector<int32_t>> forward_unit;  // [stage][iteration]: unit it ran in, INT_MAX if not yet
  std::vector<std::vector<int32_t>> backward_unit;
  std::vector<std::vector<int32_t>> round_left;  // [stage][round]: backwards still to run
  std::vector<int32_t> version;                  // per stage: rounds applied
  std::vector<std::vector<int32_t>> stashed;     // [stage][iteration]: version its forward read
  std::vector<int32_t> last_iteration;           // per worker: mini-batch of its latest task
};

Schedule start_schedule(const PipelinePlanWriter& w) {
  Schedule s;
  const int32_t n = w.iterations();
  for (int32_t k = 0; k < w.stage_count(); ++k) {
    for (int32_t j = 0; j < w.replicas(k); ++j) {
      s.stage_of.push_back(k);
      s.program.push_back(one_f_one_b_program(w.pipeline(), k, j, n));
    }
    s.round_left.push_back(replica_rounds(n, w.replicas(k)));
  }
  s.next.assign(s.program.size(), 0);
  s.forward_unit.assign(static_cast<size_t>(w.stage_count()), std::vector<int32_t>(static_cast<size_t>(n), INT_MAX));
  s.backward_unit = s.forward_unit;
  s.stashed = s.forward_unit;
  s.version.assign(static_cast<size_t>(w.stage_count()), 0);
  s.last_iteration.assign(s.program.size(), 0);
  return s;
}

// A task may run in `unit` once its input was produced in an earlier unit.
bool ready(const Schedule& s, const PipelinePlanWriter& w, int32_t stage, const PipelineTask& task, int32_t unit) {
  if (task.forward) return stage == 0 || s.forward_unit[stage - 1][task.iteration] < unit;
  return stage + 1 == w.stage_count() || s.backward_unit[stage + 1][task.iteration] < unit;
}

// Runs the next task of every worker whose input is ready; returns the stages
// whose round of backwards completed in this unit.
std::vector<int32_t> run_tasks(Schedule& s, PipelinePlanWriter& w, int32_t unit) {
  std::vector<int32_t> rounds_done;
  for (int32_t worker = 0; worker < static_cast<int32_t>(s.program.size()); ++worker) {
    if (s.next[worker] == s.program[worker].size()) continue;
    const int32_t k = s.stage_of[worker];
    const PipelineTask task = s.program[worker][s.next[worker]];
    if (!ready(s, w, k, task, unit)) continue;
    ++s.next[worker];
    s.last_iteration[worker] = task.iteration;
    if (task.forward) {
      w.forward(k, task.iteration, 0, s.version[k]);
      s.forward_unit[k][task.iteration] = unit;
      s.stashed[k][task.iteration] = s.version[k];
    } else {
      w.op(w.backward(k, task.iteration, 0, s.stashed[k][task.iteration])).weights = WeightPolicy::kStashed;
      s.backward_unit[k][task.iteration] = unit;
      if (--s.round_left[k][task.iteration / w.replicas(k)] == 0) rounds_done.push_back(k);
    }
  }
  return rounds_done;
}

// The update of a stage whose round completed: every replica joins the
// AllReduce of the round's gradients (a replicated stage), then updates.
void update_stage(Schedule& s, PipelinePlanWriter& w, int32_t stage) {
  for (int32_t j = 0; j < w.replicas(stage); ++j) {
    const int32_t worker = w.replica_worker(stage, j);
    w.synchronised_update(worker, s.last_iteration[worker], s.version[stage]);
  }
  ++s.version[stage];
}

}  // namespace

Plan plan_pipedream_sync(const Profile& profile, const Cluster& cluster, StrategyConfig& config, int32_t iterations) {
  std::vector<std::string> notes;
  const Pipeline pipe = resolve_pipeline(profile, cluster, config, notes, kPipedreamSyncPartition);
  PipelinePlanWriter w("pipedream-sync", profile, pipe, iterations);
  const std::vector<DeviceMemory> memory = weight_stashing_memory(profile, pipe);  // as `pipedream`
  for (int32_t worker = 0; worker < static_cast<int32_t>(pipe.devices); ++worker) {
    w.worker(worker).static_bytes = static_bytes(memory[worker]);
  }
  Schedule s = start_schedule(w);
  size_t tasks = 0;
  for (const auto& program : s.program) tasks += program.size();
  size_t done = 0;
  for (int32_t unit = 0; done < tasks; ++unit) {
    const size_t before = std::accumulate(s.next.begin(), s.next.end(), size_t{0});
    for (int32_t k : run_tasks(s, w, unit)) update_stage(s, w, k);
    done = std::accumulate(s.next.begin(), s.next.end(), size_t{0});
    TRAINSIM_CHECK(done > before, "pipedream-sync: no task could run in a unit");
    for (int32_t worker = 0; worker < static_cast<int32_t>(s.program.size()); ++worker) {
      w.barrier(worker, s.last_iteration[worker], w.take_sends(worker));
    }
  }
  return std::move(w).build();
}

}  // namespace trainsim
