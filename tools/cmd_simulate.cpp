// `trainsim simulate`: one strategy's plan timed by the discrete-event
// simulator: iteration time, per-worker breakdown, peak memory, and
// optionally the plan, a Chrome trace and a JSON summary.
#include <memory>

#include "analysis/table.hpp"
#include "model/error.hpp"
#include "model/units.hpp"
#include "sim/chakra/chakra.hpp"
#include "sim/cost/driver.hpp"
#include "sim/cost/strategies.hpp"
#include "sim/des/engine.hpp"
#include "sim/plan/plan.hpp"
#include "sim/plan/transformer_plan.hpp"
#include "tools/llm_commands.hpp"

namespace trainsim {
namespace {

// The most ops --trace and --dump-plan write: each op becomes a JSON object
// held whole before it is written, about 2 kB an op (480,000 ops peak at
// 1 GB; docs/simulator.md "Limits").
constexpr size_t kMaxWrittenOps = 500'000;

struct SimulateOptions {
  std::string profile;
  std::string model;
  int64_t batch = 0;
  std::string cluster;
  std::string strategy;
  std::vector<std::string> settings;
  int32_t iterations = 20;
  std::string straggler;
  double jitter = 0;
  uint64_t seed = 1;
  std::string trace;
  std::string json;
  std::string dump_plan;
  bool quiet = false;
  int64_t gpus = 0, global_batch = 0;  // a transformer's job
  std::string export_chakra, import_chakra;
};

// --export-chakra DIR: the plan as one Chakra ET a worker.
void export_chakra(const SimulateOptions& o, const Plan& plan, CommandContext& ctx) {
  if (o.export_chakra.empty()) return;
  const int files = write_chakra_plan(plan, o.export_chakra);
  if (!o.quiet && o.json != "-" && o.trace != "-" && o.dump_plan != "-") {
    ctx.out << "wrote " << files << " Chakra execution traces: " << o.export_chakra << "/trainsim.{0.." << files - 1
            << "}.et\n";
  }
}

TextTable worker_table(const Plan& plan, const SimResult& r) {
  TextTable t;
  t.header = {"worker", "compute", "exposed comm", "idle transfer", "idle imbalance", "peak memory"};
  t.right_aligned = {true, true, true, true, true, true};
  const double scale = r.window_s > 0 ? r.iteration_s / r.window_s : 0.0;  // per iteration
  for (size_t w = 0; w < r.workers.size(); ++w) {
    const Breakdown& b = r.workers[w].breakdown;
    t.rows.push_back({std::to_string(w) + " (device " + std::to_string(plan.workers[w].device) + ")",
                      format_seconds(b.compute_s * scale), format_seconds(b.exposed_comm_s * scale),
                      format_seconds(b.idle_transfer_s * scale), format_seconds(b.idle_imbalance_s * scale),
                      format_bytes(r.workers[w].peak_memory_bytes)});
  }
  return t;
}

nlohmann::json summary_json(const Plan& plan, const SimResult& r, const SimOptions& options,
                            const Prediction& analytic, const std::string& model, const std::string& cluster) {
  nlohmann::json workers = nlohmann::json::array();
  for (const WorkerResult& w : r.workers) {
    workers.push_back({{"breakdown_s",
                        {{"compute", w.breakdown.compute_s},
                         {"exposed_comm", w.breakdown.exposed_comm_s},
                         {"idle_transfer", w.breakdown.idle_transfer_s},
                         {"idle_imbalance", w.breakdown.idle_imbalance_s}}},
                       {"peak_memory_bytes", w.peak_memory_bytes}});
  }
  return {{"format", "trainsim.simulation/1"},
          {"model", model},
          {"cluster", cluster},
          {"strategy", plan.strategy},
          {"config", plan.config},
          {"iterations", plan.iterations},
          {"warmup_iterations", r.warmup_iterations},
          {"seed", r.seed},
          {"straggler", {{"probability", options.straggler_probability}, {"slowdown", options.straggler_slowdown}}},
          {"jitter", options.jitter},
          {"iteration_s", r.iteration_s},
          {"iteration_min_s", r.iteration_min_s},
          {"iteration_max_s", r.iteration_max_s},
          {"samples_per_s", plan.samples_per_iteration / r.iteration_s},
          {"window_s", r.window_s},
          {"makespan_s", r.makespan_s},
          {"ops", plan.ops.size()},
          {"events", r.events},
          {"analytic_iteration_s", analytic.iteration_s},
          {"workers", std::move(workers)}};
}

// A transformer's whole job (every GPU) for one iteration, beside its closed
// form; per pipeline stage, its first GPU's time.
void run_transformer_simulate(const SimulateOptions& o, CommandContext& ctx) {
  if (!o.strategy.empty()) {
    throw InputError("--strategy", "with a transformer --model",
                     "its training as --set keys (tp, pp, dp, micro_batch, interleave, recompute, "
                     "sequence_parallel, flash_attention, zero, schedule=1f1b|zb-h1)");
  }
  if (o.global_batch < 1) throw InputError("--global-batch", "is missing", "the sequences an iteration trains");
  const TransformerConfig& c = find_transformer_config(o.model, "--model");
  const GpuMachine& machine = find_gpu_machine(o.cluster, "--cluster");
  const TransformerTraining t = training_from_settings(o.settings, o.gpus);
  TransformerStep step;
  TransformerJob job;
  try {
    step = transformer_step(c, t, o.global_batch, machine);
    job = transformer_job(c, t, o.global_batch, machine, {}, /*iterations=*/1);
  } catch (const InputError& e) {
    rethrow_as_setting(e);
  }
  for (const auto& [flag, path] : {std::pair{"--trace", &o.trace}, std::pair{"--dump-plan", &o.dump_plan}}) {
    if (!path->empty() && job.plan.ops.size() > kMaxWrittenOps) {
      throw InputError(flag, "the job's plan holds " + std::to_string(job.plan.ops.size()) + " ops",
                       "at most " + std::to_string(kMaxWrittenOps) + " ops to write: fewer GPUs or micro-batches");
    }
  }
  if (!o.dump_plan.empty()) {
    write_text_output(o.dump_plan, plan_to_json(job.plan).dump(1) + "\n", ctx.out, "--dump-plan");
  }
  export_chakra(o, job.plan, ctx);
  const SimResult result = simulate_plan(job.plan, job.cluster, SimOptions{});
  if (!o.trace.empty()) write_text_output(o.trace, chrome_trace(job.plan, result).dump() + "\n", ctx.out, "--trace");
  if (!o.json.empty()) {
    nlohmann::json j = summary_json(job.plan, result, SimOptions{}, Prediction{}, c.name, machine.name);
    j["analytic_iteration_s"] = step.iteration_s;
    j["training"] = training_json(t);
    j["gpus"] = job.plan.workers.size();
    j["global_batch"] = o.global_batch;
    write_text_output(o.json, j.dump(2) + "\n", ctx.out, "--json");
  }
  if (o.quiet || o.json == "-" || o.trace == "-" || o.dump_plan == "-") return;
  ctx.out << c.name << " on " << job.plan.workers.size() << " GPUs of " << job.cluster.machines << " " << machine.name
          << " machines, " << o.global_batch
          << " sequences an iteration: " << format_count(static_cast<double>(job.plan.ops.size()))
          << " ops, one iteration\n"
          << "iteration " << format_seconds(result.iteration_s) << " simulated; closed form "
          << format_seconds(step.iteration_s) << " (" << format_percent(result.iteration_s / step.iteration_s - 1)
          << ")\n\nper pipeline stage, its first GPU (tensor and data-parallel rank 0):\n";
  TextTable table = worker_table(job.plan, result);
  TextTable stages;
  stages.header = table.header;
  stages.header[0] = "stage (worker)";
  stages.right_aligned = table.right_aligned;
  for (int64_t k = 0; k < t.pipeline; ++k) {  // Megatron's rank order: worker (k·d + e)·t + q
    const auto w = static_cast<size_t>(k * t.data * t.tensor);
    stages.rows.push_back(table.rows[w]);
    stages.rows.back()[0] = std::to_string(k) + " (" + std::to_string(w) + ")";
  }
  print_aligned(ctx.out, stages);
}

// --import-chakra PREFIX: a plan exported as Chakra ETs, simulated on --cluster.
void run_chakra_simulate(const SimulateOptions& o, CommandContext& ctx) {
  for (const auto& [given, flag] :
       {std::pair{!o.model.empty(), "--model"}, std::pair{!o.profile.empty(), "--profile"},
        std::pair{!o.strategy.empty(), "--strategy"}, std::pair{!o.settings.empty(), "--set"}}) {
    if (given) throw InputError(flag, "given with --import-chakra", "the plan the traces hold, and --cluster");
  }
  const Cluster cluster = load_cluster(o.cluster, "--cluster");
  const Plan plan = read_chakra_plan(o.import_chakra);
  if (device_count(cluster) < static_cast<int64_t>(plan.workers.size())) {
    throw InputError("--cluster", cluster.name + " has " + std::to_string(device_count(cluster)) + " devices",
                     "at least the traces' " + std::to_string(plan.workers.size()) + " workers");
  }
  const SimOptions options = parse_sim_options(o.straggler, o.jitter, o.seed);
  const SimResult result = simulate_plan(plan, cluster, options);
  if (!o.trace.empty()) write_text_output(o.trace, chrome_trace(plan, result).dump() + "\n", ctx.out, "--trace");
  if (!o.json.empty()) {
    write_text_output(o.json, summary_json(plan, result, options, Prediction{}, "", cluster.name).dump(2) + "\n",
                      ctx.out, "--json");
  }
  if (o.quiet || o.json == "-" || o.trace == "-") return;
  ctx.out << plan.strategy << " from " << o.import_chakra << ".*.et on " << cluster.name << ": " << plan.ops.size()
          << " ops, " << plan.iterations << " iterations\niteration " << format_seconds(result.iteration_s)
          << " median\n\nper iteration, by worker:\n";
  print_aligned(ctx.out, worker_table(plan, result));
}

void run_simulate(const SimulateOptions& o, CommandContext& ctx) {
  if (!o.import_chakra.empty()) return run_chakra_simulate(o, ctx);
  if (is_transformer_config(o.model)) return run_transformer_simulate(o, ctx);
  refuse_job_size_without_transformer(o.gpus, o.global_batch);
  if (o.strategy.empty()) throw InputError("--strategy", "is missing", "a strategy id (see trainsim predict --help)");
  const Cluster cluster = load_cluster(o.cluster, "--cluster");
  const Profile profile = resolve_profile_input(o.profile, o.model, o.batch, cluster);
  const StrategyInfo& strategy = find_strategy(o.strategy, "--strategy");
  StrategyConfig config;
  for (const std::string& text : o.settings) {
    const Setting s = parse_setting(text, "--set");
    config.set(s.key, s.value, s.where);
  }
  const SimOptions options = parse_sim_options(o.straggler, o.jitter, o.seed);
  const Plan plan = generate_plan(strategy, profile, cluster, config, o.iterations);
  for (const auto& [flag, path] : {std::pair{"--trace", &o.trace}, std::pair{"--dump-plan", &o.dump_plan}}) {
    if (!path->empty() && plan.ops.size() > kMaxWrittenOps) {
      throw InputError(flag, "the plan holds " + std::to_string(plan.ops.size()) + " ops",
                       "at most " + std::to_string(kMaxWrittenOps) + " ops to write: fewer --iterations");
    }
  }
  if (!o.dump_plan.empty()) write_text_output(o.dump_plan, plan_to_json(plan).dump(1) + "\n", ctx.out, "--dump-plan");
  export_chakra(o, plan, ctx);
  const SimResult result = simulate_plan(plan, cluster, options);
  const Prediction analytic = predict_bounded(strategy, profile, cluster, config);  // predict's analytic row
  if (!o.trace.empty()) write_text_output(o.trace, chrome_trace(plan, result).dump() + "\n", ctx.out, "--trace");
  if (!o.json.empty()) {
    write_text_output(o.json, summary_json(plan, result, options, analytic, profile.model, cluster.name).dump(2) + "\n",
                      ctx.out, "--json");
  }
  if (o.quiet || o.json == "-" || o.trace == "-" || o.dump_plan == "-") return;
  ctx.out << plan.strategy << " on " << profile.model << ", batch " << profile.batch_size << ", " << cluster.name
          << ": " << plan.ops.size() << " ops, " << plan.iterations << " iterations (" << result.warmup_iterations
          << " warm-up), seed " << result.seed << "\n"
          << "iteration " << format_seconds(result.iteration_s) << " median (min "
          << format_seconds(result.iteration_min_s) << ", max " << format_seconds(result.iteration_max_s) << "), "
          << format_count(plan.samples_per_iteration / result.iteration_s) << " samples/s; analytic model "
          << format_seconds(analytic.iteration_s) << "\n\nper iteration, by worker:\n";
  print_aligned(ctx.out, worker_table(plan, result));
}

}  // namespace

void add_simulate_command(CLI::App& app, CommandContext& ctx) {
  auto o = std::make_shared<SimulateOptions>();
  CLI::App* cmd = app.add_subcommand("simulate", "Time one strategy's plan with the discrete-event simulator");
  cmd->add_option("--profile", o->profile, "Per-layer profile (trainsim.profile/1 JSON)");
  cmd->add_option("--model", o->model,
                  "Zoo model id or model JSON file, profiled analytically on the cluster; or a transformer "
                  "configuration (trainsim llm --list), its whole job on --cluster dgx-a100 or dgx-h100");
  cmd->add_option("--batch", o->batch, "Per-device batch size with --model (default: the model's)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--cluster", o->cluster, "Cluster preset or cluster JSON file")->required();
  cmd->add_option("--strategy", o->strategy,
                  "Strategy id (see trainsim predict --help); not with a transformer or --import-chakra");
  cmd->add_option("--set", o->settings,
                  "Strategy setting key=value (repeatable); a transformer's: tp, pp, dp, micro_batch, interleave, "
                  "recompute, sequence_parallel, flash_attention, zero, schedule");
  add_job_size_options(cmd, o->gpus, o->global_batch);
  cmd->add_option("--iterations", o->iterations, "Mini-batches the plan trains (at most 100000)")
      ->check(CLI::PositiveNumber)  // at most kMaxPlanIterations: generate_plan says so
      ->capture_default_str();
  cmd->add_option("--straggler", o->straggler, "PROB:SLOWDOWN: each compute op slowed by SLOWDOWN with PROB");
  cmd->add_option("--jitter", o->jitter, "Relative standard deviation of compute times")
      ->check(CLI::Range(0.0, 10.0));
  cmd->add_option("--seed", o->seed, "Seed of every random draw")->check(seed_check())->capture_default_str();
  cmd->add_option("--trace", o->trace, "Write a Chrome trace (Perfetto, chrome://tracing) here");
  cmd->add_option("--json", o->json, "Write the trainsim.simulation/1 summary here ('-' for standard output)");
  cmd->add_option("--dump-plan", o->dump_plan, "Write the plan (trainsim.plan/1 JSON) here");
  cmd->add_option("--export-chakra", o->export_chakra,
                  "Also write the plan as MLCommons Chakra execution traces, DIR/trainsim.W.et a worker (ASTRA-sim "
                  "runs them)");
  cmd->add_option("--import-chakra", o->import_chakra,
                  "Simulate the plan of Chakra traces trainsim exported: PREFIX for PREFIX.0.et, PREFIX.1.et, ...");
  cmd->add_flag("--quiet", o->quiet, "Print no summary");
  cmd->footer(
      "\nExamples:\n  trainsim simulate --model vgg16 --batch 64 --cluster p40x4-pcie3 --strategy gpipe --trace "
      "t.json\n"
      "  trainsim simulate --model gpt3-175b --cluster dgx-a100 --gpus 1024 --global-batch 1536 \\\n"
      "      --set tp=4 --set pp=8 --set micro_batch=2 --set interleave=4 --set sequence_parallel=true \\\n"
      "      --set flash_attention=true\n");
  cmd->callback([&ctx, o] { ctx.action = [&ctx, o] { run_simulate(*o, ctx); }; });
}

}  // namespace trainsim
