// `trainsim validate`: profiles this machine, predicts every strategy from the
// profile (analytic and simulated), trains each for real on CPU threads (or
// one MPI process per worker: --launcher mpi, or under mpirun), and
// prints how far the predictions were from the measurements, with the op
// groups the simulator got most wrong (trainsim.validation/1).
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <stdexcept>

#include "analysis/table.hpp"
#include "exec/data/fashion_mnist.hpp"
#include "exec/data/fortunes_text.hpp"
#include "model/error.hpp"
#include "model/units.hpp"
#include "profiles/profiler/cluster_probe.hpp"
#include "profiles/profiler/transport_probe.hpp"
#include "sim/cost/driver.hpp"
#include "tools/commands.hpp"
#include "tools/mpi_launch.hpp"
#include "tools/progress.hpp"
#include "tools/validation.hpp"
#include "tools/validation_replay.hpp"

#if defined(TRAINSIM_WITH_MPI)
#include "exec/mpi/mpi_transport.hpp"
#endif

namespace trainsim {
namespace {

struct ValidateCliOptions {
  std::string model;
  std::string devices = "cpu:2";
  std::string precision = "fp32";
  std::string strategies = "all";
  std::string dataset;
  std::string data_dir;  // empty: kFashionMnistDir
  int64_t batch = 0;
  int32_t iterations = 40;
  int32_t rounds = 5;
  int32_t max_rounds = 0;  // 0: the larger of 15 and --rounds
  double target_percent = 3;
  double budget_s = 600;
  int64_t repeats = 100;
  uint64_t seed = 1;
  std::string json;
  std::string trace_dir;
  std::string profile_out;
  std::string cluster_out;
  int32_t worst_ops = 3;
  bool quiet = false;
  LaunchOptions launch;
  ReplayOptions replay;  // --replay FILE: that validation priced again
};

// The command line of each rank --launcher mpi starts: these options, with
// progress reported as lines.
std::vector<std::string> rank_arguments(const ValidateCliOptions& o) {
  std::vector<std::string> a{"validate", "--model", o.model, "--devices", o.devices, "--strategies", o.strategies};
  const auto add = [&a](const char* flag, const std::string& value) {
    if (!value.empty()) a.insert(a.end(), {flag, value});
  };
  add("--dataset", o.dataset);
  add("--data-dir", o.data_dir);
  if (o.batch > 0) add("--batch", std::to_string(o.batch));
  add("--iterations", std::to_string(o.iterations));
  add("--rounds", std::to_string(o.rounds));
  if (o.max_rounds > 0) add("--max-rounds", std::to_string(o.max_rounds));
  add("--target-uncertainty", format_number(o.target_percent));
  add("--budget", format_number(o.budget_s));
  add("--repeats", std::to_string(o.repeats));
  add("--seed", std::to_string(o.seed));
  add("--json", o.json);
  add("--trace-dir", o.trace_dir);
  add("--profile-out", o.profile_out);
  add("--cluster-out", o.cluster_out);
  add("--worst-ops", std::to_string(o.worst_ops));
  a.push_back("--progress-lines");
  if (o.quiet) a.push_back("--quiet");
  return a;
}

// Under mpirun: the ranks agree through MPI, measure the cluster across
// their links and hosts, and train over the MPI transport. `session` holds
// MPI for the command: finalized when it returns, left unfinalized by an
// error, so a rank failing alone ends the job (MpiSession).
ValidationRanks mpi_ranks([[maybe_unused]] const ValidateCliOptions& o, [[maybe_unused]] int64_t workers,
                          [[maybe_unused]] std::shared_ptr<void>& session_holder) {
#if defined(TRAINSIM_WITH_MPI)
  auto held = std::make_shared<MpiSession>(nullptr, nullptr);
  session_holder = held;
  const MpiSession& session = *held;
  if (session.size() != workers) {
    throw InputError("--devices", "is " + o.devices + " under mpirun with " + std::to_string(session.size()) + " ranks",
                     "cpu:" + std::to_string(session.size()) + ", one worker per rank");
  }
  ValidationRanks ranks;
  ranks.rank = session.rank();
  ranks.from_rank0 = [](const std::string& text) { return mpi_broadcast_text(text); };
  ranks.measure_cluster = [rank = session.rank()](const Profile& profile) {
    const std::vector<int> host_of = mpi_host_of_ranks();
    MpiTransport transport;
    const Cluster measured = measure_transport_cluster(transport, rank, host_of, probe_options_for(profile));
    return cluster_from_json(nlohmann::json::parse(mpi_broadcast_text(cluster_to_json(measured).dump())),
                             "rank 0's cluster");
  };
  ranks.make_transport = [](int endpoints) { return MpiTransport::for_endpoints(endpoints); };
  ranks.fail = [rank = session.rank()](const std::string& why) {
    std::cerr << "trainsim: failed: rank " << rank << ": " << why << std::endl;
    mpi_abort_job(1);
  };
  return ranks;
#else
  throw InputError("mpirun", "started trainsim, which was built without MPI",
                   "a build with TRAINSIM_WITH_MPI (libopenmpi-dev installed)");
#endif
}

// A relative half-width as a percentage, and the interval's coverage when
// below the 90% asked by default.
std::string uncertainty_text(double relative_half_width, const MedianInterval& m) {
  if (!std::isfinite(relative_half_width)) return "?";
  char text[48];
  std::snprintf(text, sizeof text, "%.1f%%", 100.0 * relative_half_width);
  std::string out = text;
  if (m.coverage < 0.9) {
    std::snprintf(text, sizeof text, " (at %.0f%%)", 100.0 * m.coverage);
    out += text;
  }
  return out;
}

// With devices that count their memory (GPU workers), two more columns:
// the analytic prediction's fullest device and the most a worker held.
TextTable result_table(const Validation& v) {
  const bool memory = std::any_of(v.results.begin(), v.results.end(),
                                  [](const StrategyValidation& r) { return r.measured_memory_bytes >= 0; });
  TextTable t;
  t.header = {"strategy", "analytic", "simulated", "measured", "±", "rounds", "error analytic", "error simulated",
              "verdict"};
  t.right_aligned = {false, true, true, true, true, true, true, true, false};
  if (memory) {
    t.header.insert(t.header.end(), {"memory predicted", "memory held"});
    t.right_aligned.insert(t.right_aligned.end(), {true, true});
  }
  for (const StrategyValidation& r : v.results) {
    if (!r.skipped.empty()) continue;
    t.rows.push_back({r.strategy, format_seconds(r.predicted_analytic_s), format_seconds(r.predicted_simulated_s),
                      format_seconds(r.measured_s), uncertainty_text(r.uncertainty, r.interval),
                      std::to_string(r.measured_rounds_s.size()), error_percent(r.error_analytic),
                      error_percent(r.error_simulated), r.verdict});
    if (memory) {
      t.rows.back().push_back(format_bytes(r.predicted_memory_bytes));
      t.rows.back().push_back(r.measured_memory_bytes >= 0 ? format_bytes(static_cast<double>(r.measured_memory_bytes))
                                                           : "?");
    }
  }
  return t;
}

// The op groups whose simulated time is furthest from the measured, weighted
// by the time they take (a 50% error on a 1 µs op matters less than 10% on a
// 10 ms one).
void print_worst_ops(std::ostream& out, const StrategyValidation& r, int32_t count) {
  std::vector<const OpGroupComparison*> groups;
  for (const OpGroupComparison& g : r.ops) groups.push_back(&g);
  std::sort(groups.begin(), groups.end(), [](const auto* a, const auto* b) {
    return std::abs(a->simulated_s - a->measured_s) * static_cast<double>(a->count) >
           std::abs(b->simulated_s - b->measured_s) * static_cast<double>(b->count);
  });
  for (int32_t i = 0; i < count && i < static_cast<int32_t>(groups.size()); ++i) {
    const OpGroupComparison& g = *groups[static_cast<size_t>(i)];
    out << "    worker " << g.worker << " " << g.kind;
    if (g.first_layer >= 0) out << " layers " << g.first_layer << "-" << g.last_layer;
    out << ": simulated " << format_seconds(g.simulated_s) << ", measured " << format_seconds(g.measured_s) << " ("
        << error_percent(g.error) << ", " << g.count << " ops)\n";
  }
}

// The capacity probe's spread over the run, and a plain statement when the
// machine moved more than the target or left strategies unjudged.
void print_machine_noise(std::ostream& out, const Validation& v, double target) {
  int64_t run = 0, unjudged = 0;
  for (const StrategyValidation& r : v.results) {
    if (!r.skipped.empty()) continue;
    ++run;
    unjudged += r.verdict == "too noisy to judge";
  }
  out << "machine: capacity probe " << format_seconds(v.probe.median) << " (" << v.probe_s.size() << " probes, ± "
      << uncertainty_text(v.probe.relative_half_width, v.probe) << ", range " << format_seconds(v.probe.samples > 0 ? *std::min_element(v.probe_s.begin(), v.probe_s.end()) : 0)
      << " to " << format_seconds(v.probe.samples > 0 ? *std::max_element(v.probe_s.begin(), v.probe_s.end()) : 0)
      << ")\n";
  if (v.cluster.device.host_per_op.any()) {  // GPU workers: what the simulation priced beside their kernels
    out << "a GPU worker's host per compute op (the single plan through the executor, the rounds' median): "
        << host_per_op_text(v.cluster.device.host_per_op) << "\n";
  }
  if (unjudged > 0) {
    out << "the machine was too disturbed to judge " << unjudged << " of " << run
        << " strategies: their rounds, or the predictions from the rounds' profiles, spread more than ±"
        << error_percent(target, false) << "; run again on a quieter machine, or with more --max-rounds or --budget\n";
  }
}

void write_traces(const std::string& dir, const Validation& v) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw InputError("--trace-dir", "cannot create " + dir + ": " + ec.message(), "a writable directory");
  for (const StrategyValidation& r : v.results) {
    if (!r.skipped.empty()) continue;
    std::ostringstream unused;
    write_text_output(dir + "/" + r.strategy + "-simulated.json", r.simulated_trace.dump() + "\n", unused, "--trace-dir");
    write_text_output(dir + "/" + r.strategy + "-measured.json", r.measured_trace.dump() + "\n", unused, "--trace-dir");
  }
}

void run_validate(const ValidateCliOptions& o, CommandContext& ctx) {
  if (replays(o.replay, o.json, o.quiet, ctx)) return;
  if (o.model.empty()) throw InputError("--model", "is missing", "a zoo model to validate on");
  check_launch_options(o.launch);
  const Model model = load_model(o.model, "--model");
  const WorkerDevices devices = parse_worker_devices(o.devices);
  const int64_t workers = devices.workers;
  const CudaPrecision precision = parse_gpu_precision(o.precision, devices.gpu.has_value());
  if (devices.gpu) {  // before the data loads
    if (o.launch.launcher == "mpi" || under_mpirun()) {
      throw InputError("--devices", "is " + o.devices + " across MPI processes",
                       "GPU workers in one process (no --launcher mpi, not under mpirun), or cpu:N");
    }
    check_cuda_device(model, devices.gpu->index, "--devices");
    for (const int gpu : devices.gpu->each) check_cuda_device(model, gpu, "--devices");
  }
  if ((o.launch.launcher == "mpi" || under_mpirun()) && workers < 2) {  // the ranks measure the links between them
    throw InputError("--devices",
                     "is " + o.devices + " across MPI processes: one rank, with no link to another to measure",
                     "cpu:2 or more, or one process: no --launcher mpi, not under mpirun");
  }
  if (o.max_rounds > 0 && o.max_rounds < o.rounds) {
    throw InputError("--max-rounds", std::to_string(o.max_rounds) + " is below --rounds " + std::to_string(o.rounds),
                     "at least as many rounds as --rounds");
  }
  if (o.launch.launcher == "mpi") {
    // Checked once here: every rank would refuse them alike, amid mpirun's banners.
    parse_validated_strategies(o.strategies);
    return launch_ranks(o.launch, workers, rank_arguments(o), ctx, "validating", o.quiet);
  }
  const Dataset data = load_dataset(o.dataset, model, o.data_dir);
  ValidationOptions options;
  std::shared_ptr<void> mpi;  // MPI for the command under mpirun (mpi_ranks)
  if (under_mpirun()) options.ranks = mpi_ranks(o, workers, mpi);
  const bool reports = options.ranks.rank <= 0;
  if (const std::string note = under_mpirun() ? bound_rank_note(workers) : ""; reports && !note.empty()) {
    ctx.err << note << "\n" << std::flush;
  }
  options.batch_size = o.batch;
  options.iterations = o.iterations;
  options.rounds = o.rounds;
  options.max_rounds = o.max_rounds > 0 ? o.max_rounds : std::max(15, o.rounds);
  options.target_uncertainty = o.target_percent / 100;
  options.budget_s = o.budget_s;
  options.profile_repeats = o.repeats;
  options.seed = o.seed;
  options.strategies = parse_validated_strategies(o.strategies);
  if (devices.gpu) {
    const std::vector<int>& each = devices.gpu->each;
    options.gpu = ValidationGpu{devices.gpu->index, precision, each, each.empty() ? nullptr : gpu_each_transports(each),
                                devices.gpu->workers};
  }
  ProgressBar bar(ctx.err, "validating", !o.quiet && reports && !o.launch.progress_lines);
  options.progress = [&](const std::string&, int32_t done, int32_t total) {
    bar.update(done, total);
    if (o.launch.progress_lines && reports) ctx.err << progress_line(done, total) << '\n' << std::flush;
  };
  // The measured profile and cluster, what the predictions read: after each
  // round to a file, at the end to standard output too.
  const auto is_file = [](const std::string& path) { return !path.empty() && path != "-"; };
  const auto write_measured = [&](const Validation& so_far, bool last) {
    if (is_file(o.profile_out) || (last && !o.profile_out.empty())) {
      write_text_output(o.profile_out, profile_to_json(so_far.profile).dump(2) + "\n", ctx.out, "--profile-out");
    }
    if (is_file(o.cluster_out) || (last && !o.cluster_out.empty())) {
      write_text_output(o.cluster_out, cluster_to_json(so_far.cluster).dump(2) + "\n", ctx.out, "--cluster-out");
    }
  };
  const bool json_file = is_file(o.json);
  if (json_file || is_file(o.profile_out) || is_file(o.cluster_out)) {  // a run cut short keeps the rounds it finished
    options.on_round = [&](const Validation& so_far) {
      write_measured(so_far, false);
      if (json_file) {
        write_text_output(o.json, validation_to_json(so_far, model.name, o.devices, o.iterations).dump(2) + "\n",
                          ctx.out, "--json");
      }
    };
  }
  const Validation v = validate(model, data, workers, options);
  bar.finish();
  if (!reports) return;  // rank 0 holds the comparison and writes it

  write_measured(v, true);
  if (!o.trace_dir.empty()) write_traces(o.trace_dir, v);
  if (!o.json.empty()) {
    write_text_output(o.json, validation_to_json(v, model.name, o.devices, o.iterations).dump(2) + "\n", ctx.out,
                      "--json");
  }
  // A strategy that failed while running (a GPU's error, a lost link),
  // not one the executor refused: the others are compared, and the command fails.
  const auto broke = std::count_if(v.results.begin(), v.results.end(), [](const StrategyValidation& r) {
    return r.skipped.starts_with("failed while running");
  });
  const auto fail_if_broke = [&] {
    if (broke > 0) {
      throw std::runtime_error(std::to_string(broke) + " of " + std::to_string(v.results.size()) +
                               " strategies failed while running (the others compared; the lines above or the "
                               "JSON's skipped say why)");
    }
  };
  if (o.quiet || o.json == "-") return fail_if_broke();
  ctx.out << model.name << " on " << o.devices << ", batch " << v.profile.batch_size << " per device, "
          << o.iterations << " iterations per strategy and round; " << v.rounds << " rounds (" << v.stopped << ") in "
          << format_seconds(v.elapsed_s) << "\n"
          << "measured: median over a strategy's rounds; ±: the half-width of its 90% interval (order statistics) "
             "and the prediction's spread over the rounds' profiles, in quadrature; "
             "error = (predicted - measured) / measured\n";
  print_aligned(ctx.out, result_table(v));
  ctx.out << "median |error|: simulated " << error_percent(median_abs_error(v, true), false) << ", analytic "
          << error_percent(median_abs_error(v, false), false) << "; simulated over the strategies judged "
          << error_percent(median_abs_error(v, true, true), false) << "\n";
  print_machine_noise(ctx.out, v, o.target_percent / 100);
  if (o.worst_ops > 0 && o.devices.rfind("cuda", 0) == 0) {
    // The interpreter times an op around its handler, which on the GPU
    // device queues the kernels; the device times a compute op's kernels
    // with CUDA events (ExecOptions::time_device_work).
    ctx.out << "op groups on GPU workers: a forward's, backward's or recompute's measured time runs from its "
               "start on the host until both its host part and its work on the GPU (CUDA events: to its last "
               "kernel's end) have ended, the two parts the simulator times (device.host_per_op); any other op's "
               "the host's\n";
  }
  for (const StrategyValidation& r : v.results) {
    if (!r.skipped.empty()) {
      ctx.out << r.strategy << ": not run: " << r.skipped << "\n";
    } else if (o.worst_ops > 0) {
      ctx.out << r.strategy << ", op groups furthest from the measurement:\n";
      print_worst_ops(ctx.out, r, o.worst_ops);
      if (!std::isnan(r.device_busy)) {
        ctx.out << "    each GPU worker's ops' work on the GPU spans " << error_percent(r.device_busy, false)
                << " of an iteration (median over the workers; outside it the GPU waited for the host or other "
                   "workers)\n";
      }
    }
  }
  fail_if_broke();
}

}  // namespace

void add_validate_command(CLI::App& app, CommandContext& ctx) {
  auto o = std::make_shared<ValidateCliOptions>();
  CLI::App* cmd = app.add_subcommand(
      "validate", "Profile this machine, predict every strategy, run each for real and compare");
  cmd->add_option("--model", o->model, "Zoo model id or model JSON file (of layers the CPU executor has kernels for)");
  cmd->add_option("--devices", o->devices,
                  "cpu:N, N worker threads (with --launcher mpi or under mpirun, N ranks); or cuda:GxW, W workers "
                  "sharing GPU G (cuda, cuda:G: one); or cuda:G,H,..., a worker on each GPU")
      ->capture_default_str();
  cmd->add_option("--precision", o->precision,
                  "GPU workers' products: fp32, tf32 or bf16 (tensor cores; fp32 sums and storage), profiled and run "
                  "alike")
      ->capture_default_str();
  cmd->add_option("--strategies", o->strategies,
                  "Strategies separated by commas, each 'all' or an id with settings of its own after colons "
                  "(all,pipesgd:compression=quant8)")->capture_default_str();
  cmd->add_option("--dataset", o->dataset, kDatasetHelp);
  cmd->add_option("--data-dir", o->data_dir,
                  "Folder holding Fashion-MNIST's IDX files (default: " + std::string(kFashionMnistDir) +
                      ") or the fortune files (default: " + std::string(kFortunesDir) + ")");
  cmd->add_option("--batch", o->batch, "Per-device batch size (default: the model's)")->check(CLI::PositiveNumber);
  cmd->add_option("--iterations", o->iterations, "Iterations trained per strategy and round")
      ->check(CLI::Range(3, 1'000'000))
      ->capture_default_str();
  cmd->add_option("--rounds", o->rounds,
                  "Rounds at least: each profiles the layers and runs every strategy once, in turns; a "
                  "strategy's measurement is the median over its rounds")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  cmd->add_option("--max-rounds", o->max_rounds,
                  "More rounds, of the strategies whose 90% interval is still wider than the target, up to this many "
                  "(default: 15, or --rounds if more)")
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--target-uncertainty", o->target_percent,
                  "Percent: a strategy is settled once its interval's half-width is within this much of its median")
      ->check(CLI::Range(0.01, 100.0))
      ->capture_default_str();
  cmd->add_option("--budget", o->budget_s, "Seconds after which no further round starts (0: no limit)")
      ->check(CLI::Range(0.0, 1e6))
      ->capture_default_str();
  cmd->add_option("--repeats", o->repeats, "Timed runs per layer when profiling")
      ->check(CLI::Range(1, 100'000))
      ->capture_default_str();
  cmd->add_option("--seed", o->seed, "Seed of the weights, the inputs and the shuffling")
      ->check(seed_check())
      ->capture_default_str();
  cmd->add_option("--json", o->json,
                  "Write trainsim.validation/1 here ('-' for standard output); a file is rewritten after each round");
  cmd->add_option("--trace-dir", o->trace_dir, "Write each strategy's simulated and measured Chrome traces here");
  cmd->add_option("--profile-out", o->profile_out,
                  "Write the measured profile here (each layer's median over the rounds; rewritten after each round)");
  cmd->add_option("--cluster-out", o->cluster_out,
                  "Write the measured cluster here (each rate's median over the rounds; rewritten after each round)");
  cmd->add_option("--worst-ops", o->worst_ops, "Op groups listed per strategy, furthest from the measurement first")
      ->check(CLI::Range(0, 1000))
      ->capture_default_str();
  cmd->add_flag("--quiet", o->quiet, "No progress bar and no table");
  add_launch_options(*cmd, o->launch);
  add_replay_options(*cmd, o->replay);
  cmd->footer(
      "Examples:\n  trainsim validate --model fmnist-mlp --devices cpu:2 --json validation.json --trace-dir traces\n"
      "  trainsim validate --model fmnist-mlp --devices cpu:4 --launcher mpi --emulated lab   (one process per "
      "worker, on the hosts of `trainsim cluster emulate up --name lab`)\n"
      "  trainsim validate --replay validation.json --profile p.json --cluster c.json   (a validation written with "
      "--profile-out p.json --cluster-out c.json, priced again: nothing runs)\n"
      "Strategies the executor does not run are listed as not run, with the reason.");
  cmd->callback([&ctx, o, cmd] {
    note_run_options(*cmd, o->replay);
    ctx.action = [&ctx, o] { run_validate(*o, ctx); };
  });
}

}  // namespace trainsim
