// `trainsim llm --simulate-job`: the whole 3-D job as a plan, simulated
// beside its closed form (sim/plan/transformer_plan.hpp).
#include <chrono>
#include <ostream>

#include "model/units.hpp"
#include "sim/des/engine.hpp"
#include "sim/plan/transformer_plan.hpp"
#include "tools/commands.hpp"

namespace trainsim {

void print_job_simulation(const TransformerConfig& c, const TransformerTraining& t, int64_t global_batch,
                          const GpuMachine& machine, const StepAssumptions& a, const TransformerStep& step,
                          std::ostream& out) {
  const auto started = std::chrono::steady_clock::now();
  // One iteration: it ends at a barrier of every worker, so each is the same.
  const TransformerJob job = transformer_job(c, t, global_batch, machine, a, /*iterations=*/1);
  const SimResult sim = simulate_plan(job.plan, job.cluster, SimOptions{});
  const double took_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  out << "\nthe whole job simulated (" << job.plan.workers.size() << " GPUs on " << job.cluster.machines << " "
      << machine.name << " machines, " << format_count(static_cast<double>(job.plan.ops.size())) << " ops, in "
      << format_seconds(took_s) << "): " << format_seconds(sim.iteration_s) << " an iteration, "
      << format_percent(sim.iteration_s / step.iteration_s - 1) << " from the closed form's "
      << format_seconds(step.iteration_s) << "\n";
}

}  // namespace trainsim
