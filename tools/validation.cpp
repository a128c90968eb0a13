// The validation loop; see validation.hpp.
#include "tools/validation.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <sstream>
#include <tuple>

#include "exec/cuda/cuda_device.hpp"
#include "model/error.hpp"
#include "model/units.hpp"
#include "profiles/profiler/cluster_probe.hpp"
#include "profiles/profiler/cuda_profiler.hpp"
#include "profiles/profiler/profiler.hpp"
#include "profiles/profiler/spread.hpp"
#include "profiles/profiler/timing.hpp"
#include "sim/cost/driver.hpp"
#include "sim/cost/strategies.hpp"
#include "tools/options.hpp"

namespace trainsim {
namespace {

// An entry of --strategies: its strategy id, and the settings after its colons.
std::pair<std::string, std::vector<Setting>> read_entry(const std::string& entry) {
  const size_t colon = entry.find(':');
  std::vector<Setting> settings;
  for (size_t at = colon; at != std::string::npos;) {
    const size_t next = entry.find(':', at + 1);
    settings.push_back(parse_setting(entry.substr(at + 1, next - at - 1), "--strategies " + entry));
    at = next;
  }
  return {entry.substr(0, colon), settings};
}

// One strategy's runs, one per round; `skipped` says why it did not run.
struct StrategyRuns {
  const StrategyInfo* strategy = nullptr;
  std::string label;        // the entry as asked: the id, or id:key=value:...
  StrategyConfig settings;  // the entry's settings, for its first run
  std::string skipped;
  std::vector<TrainingResult> runs;
  std::vector<double> probes_s;  // the capacity probe before each run
};

std::vector<double> rounds_s(const StrategyRuns& s) {
  std::vector<double> out;
  for (const TrainingResult& run : s.runs) out.push_back(run.iteration.median_s);
  return out;
}

// Whether a strategy's measurement is as sure as asked: its interval within
// the target at the confidence asked.
bool settled(const StrategyRuns& s, const ValidationOptions& o) {
  const MedianInterval m = median_interval(rounds_s(s), o.confidence);
  return m.coverage >= o.confidence && m.relative_half_width <= o.target_uncertainty;
}

std::string percent_text(double fraction) {
  char text[32];
  std::snprintf(text, sizeof text, "%.3g%%", 100 * fraction);
  return text;
}

// The settings of a strategy's first run (its defaults resolved from the
// first round's profile), so every later run and the prediction price one
// plan whatever the later profiles would choose.
StrategyConfig first_run_settings(const StrategyRuns& s) {
  if (s.runs.empty()) return s.settings;
  return StrategyConfig::from_resolved(s.runs.front().plan.config, s.label + "'s first run");
}

// One run of a strategy: the plan train() executes on this round's profile
// and the measured cluster.
void run_once(const Model& model, const Dataset& data, const Profile& profile, const Cluster& cluster,
              const ValidationOptions& options, StrategyRuns& s) {
  TrainingOptions training;
  training.strategy = s.strategy->id;
  training.batch_size = profile.batch_size;
  training.iterations = options.iterations;
  training.seed = options.seed;
  training.evaluate = false;  // timed, not scored
  if (options.gpu) {
    training.make_device = [&model, gpu = *options.gpu](int32_t worker) {
      return make_cuda_device(model, gpu.each.empty() ? gpu.index : gpu.each.at(static_cast<size_t>(worker)),
                              gpu.precision, gpu_worker_budget(GpuDevice{gpu.index, gpu.workers, gpu.each}, worker));
    };
    training.make_transport = options.gpu->make_transport;
    training.time_device_work = true;  // the compute ops' kernels for the op comparison
  }
  if (options.ranks.rank >= 0) {
    training.local_endpoints = {options.ranks.rank};
    training.make_transport = options.ranks.make_transport;
  }
  try {
    s.runs.push_back(train(model, data, cluster, first_run_settings(s), training, &profile));
  } catch (const InputError& e) {
    s.skipped = e.what();  // a strategy the executor does not run, or that does not fit these workers
  } catch (const std::exception& e) {
    // Across ranks the others would wait for this rank's messages: the
    // validation stops (ValidationRanks::fail) rather than hang.
    if (options.ranks.fail) options.ranks.fail(s.label + " failed while running: " + e.what());
    s.skipped = std::string("failed while running: ") + e.what();  // the other strategies still report
  }
}

// A strategy's validation from its runs: the plan simulated and predicted,
// the measurement the median over rounds, the op comparison from the
// representative round.
StrategyValidation compare_strategy(const Validation& v, const StrategyRuns& s, const ValidationOptions& o) {
  StrategyValidation out;
  out.strategy = s.label;
  if (!s.skipped.empty() || s.runs.empty()) {
    out.skipped = s.skipped.empty() ? "not run" : s.skipped;
    return out;
  }
  out.measured_min_s = s.runs.front().iteration.min_s;
  out.measured_max_s = s.runs.front().iteration.max_s;
  for (const TrainingResult& run : s.runs) {
    out.measured_rounds_s.push_back(run.iteration.median_s);
    out.measured_min_s = std::min(out.measured_min_s, run.iteration.min_s);
    out.measured_max_s = std::max(out.measured_max_s, run.iteration.max_s);
  }
  out.measured_s = median_s(out.measured_rounds_s);
  out.probe_rounds_s = s.probes_s;
  out.interval = median_interval(out.measured_rounds_s, o.confidence);
  const TrainingResult& run = s.runs[representative_round(out.measured_rounds_s)];
  out.config = run.plan.config;
  // The plan that ran, timed from the median profile: same settings, same
  // ops. Layers timed with as many threads busy as the plan has workers: a
  // plan of one worker from the profiles taken alone.
  const bool alone = run.plan.workers.size() == 1 && !v.alone_round_profiles.empty();
  const Profile& median = alone ? v.alone_profile : v.profile;
  const StrategyConfig config = first_run_settings(s);
  const PricedPlan priced = price_plan(*s.strategy, median, v.cluster, config, run.plan.iterations);
  const Plan& plan = priced.plan;
  const Prediction& analytic = priced.analytic;
  const SimResult& sim = priced.simulated;
  TRAINSIM_CHECK(plan.ops.size() == run.plan.ops.size(), "the predicted plan is not the plan that ran");
  out.predicted_analytic_s = analytic.iteration_s;
  out.predicted_simulated_s = sim.iteration_s;
  const std::vector<Profile>& round_profiles = alone ? v.alone_round_profiles : v.round_profiles;
  for (size_t r = 0; r < round_profiles.size(); ++r) {
    const Cluster& cluster = v.round_clusters.at(r);
    const Plan round_plan = generate_plan(*s.strategy, round_profiles[r], cluster, config, run.plan.iterations);
    out.predicted_rounds_s.push_back(simulate_plan(round_plan, cluster, SimOptions{}).iteration_s);
  }
  out.prediction_spread = prediction_spread(out.predicted_rounds_s);
  out.uncertainty = combined_uncertainty(out.interval, out.prediction_spread);
  out.error_analytic = relative_error(out.predicted_analytic_s, out.measured_s);
  out.error_simulated = relative_error(out.predicted_simulated_s, out.measured_s);
  out.verdict =
      judge_error(out.predicted_simulated_s, out.interval, out.prediction_spread, o.target_uncertainty, o.confidence);
  out.ops = compare_ops(plan, sim.timings, run.exec.timings, run.iteration.warmup);
  out.device_busy = device_busy_share(plan, run.exec.timings, run.iteration.warmup, run.iteration.median_s);
  out.predicted_memory_bytes = peak_memory_bytes(analytic);
  for (const TrainingResult& r : s.runs) {
    for (const Device::MemoryUse& m : r.exec.memory) {
      out.measured_memory_bytes = std::max(out.measured_memory_bytes, m.peak_bytes);
    }
  }
  out.simulated_trace = chrome_trace(plan, sim);
  out.measured_trace = exec_chrome_trace(run.plan, run.exec);
  return out;
}

}  // namespace

std::string error_percent(double fraction, bool sign) {
  if (!std::isfinite(fraction)) return "?";
  char text[32];
  std::snprintf(text, sizeof text, sign ? "%+.1f%%" : "%.1f%%", 100.0 * fraction);
  return text;
}

PricedPlan price_plan(const StrategyInfo& strategy, const Profile& profile, const Cluster& cluster,
                      const StrategyConfig& config, int32_t iterations) {
  PricedPlan out{generate_plan(strategy, profile, cluster, config, iterations),
                 predict_strategy(strategy, profile, cluster, config),
                 {}};
  price_plan_bounds(out.plan, cluster, out.analytic);
  out.simulated = simulate_plan(out.plan, cluster, SimOptions{});
  return out;
}

size_t representative_round(const std::vector<double>& rounds_s) {
  TRAINSIM_CHECK(!rounds_s.empty(), "at least one round");
  const double median = median_s(rounds_s);
  size_t best = 0;
  for (size_t i = 1; i < rounds_s.size(); ++i) {
    if (std::abs(rounds_s[i] - median) < std::abs(rounds_s[best] - median)) best = i;
  }
  return best;
}

namespace {

// The comparison of the rounds in `v`: the median profile and cluster, the
// probes' interval and each strategy's comparison (where `leads`).
void conclude(Validation& v, const std::vector<StrategyRuns>& runs, const ValidationOptions& options, bool leads,
              double start_s) {
  v.profile = median_profile(v.round_profiles);
  v.cluster = median_cluster(v.round_clusters);
  if (!v.alone_round_profiles.empty()) v.alone_profile = median_profile(v.alone_round_profiles);
  v.probe = median_interval(v.probe_s, options.confidence);
  v.results.clear();
  if (leads) {  // rank 0 holds every run's gathered result
    for (const StrategyRuns& s : runs) v.results.push_back(compare_strategy(v, s, options));
  }
  v.elapsed_s = now_s() - start_s;
}

}  // namespace

Validation validate(const Model& model, const Dataset& data, int64_t workers, const ValidationOptions& options) {
  if (options.iterations < 3) {
    throw InputError("--iterations", std::to_string(options.iterations), "at least 3 (warm-up is left out)");
  }
  if (options.rounds < 1) throw InputError("--rounds", std::to_string(options.rounds), "at least 1");
  std::vector<StrategyRuns> runs;
  for (const std::string& entry : options.strategies.empty() ? parse_validated_strategies("all") : options.strategies) {
    StrategyRuns s;
    const auto [id, settings] = read_entry(entry);
    s.strategy = &find_strategy(id, "--strategies");
    s.label = entry;
    for (const Setting& setting : settings) s.settings.set(setting.key, setting.value, setting.where);
    runs.push_back(std::move(s));
  }
  const int32_t rounds = options.rounds;
  const int32_t max_rounds = std::max(rounds, options.max_rounds);
  const int32_t profiling_steps = workers > 1 && !options.gpu ? 3 : 2;  // profiles and the probe, per round
  int32_t total = rounds * (static_cast<int32_t>(runs.size()) + profiling_steps) + 1;
  int32_t done = 0;
  const auto report = [&](const std::string& what) {
    if (options.progress) options.progress(what, done++, total);
  };
  Validation v;
  v.workers = workers;
  const double start_s = now_s();
  const int64_t batch = options.batch_size > 0 ? options.batch_size : model.default_batch;
  MeasureOptions measure;
  measure.repeats = options.profile_repeats;
  measure.concurrent = workers;
  measure.seed = options.seed;
  measure.source = &data.train_x;  // the batches the runs draw, so the gather and the touched rows match
  MeasureOptions alone = measure;
  alone.concurrent = 1;
  // Round after round rather than strategy after strategy: a disturbance of
  // the machine lasting a few seconds then falls on one run of several
  // strategies, and each strategy's median over rounds leaves it out. Each of
  // the first `rounds` rounds profiles the layers first, and the prediction
  // reads the median of these profiles, so one profile taken in a disturbance
  // moves nothing either. Later rounds run only the strategies whose
  // measurement is not yet as sure as asked. Each profiling round also
  // probes the channels, collectives and memory after its profiles, and the
  // prediction reads each rate's median over these probes (memory-bound
  // rates move with the machine's other tenants as much as the layers do).
  // A capacity probe before every run records how much of the machine it had.
  //
  // Across ranks every rank profiles with one thread, all at once, and plans
  // from rank 0's profile; what to run next is rank 0's decision.
  const ValidationRanks& ranks = options.ranks;
  const bool shared = ranks.rank >= 0;
  const bool leads = ranks.rank <= 0;
  if (shared) measure.concurrent = 1;
  const auto rank0_profile = [&](const Profile& mine) {
    return shared ? profile_from_json(nlohmann::json::parse(ranks.from_rank0(profile_to_json(mine).dump())),
                                      "rank 0's profile")
                  : mine;
  };
  std::vector<Profile>& profiles = v.round_profiles;
  for (int32_t round = 0; round < max_rounds; ++round) {
    std::vector<StrategyRuns*> todo;
    for (StrategyRuns& s : runs) {
      if (s.skipped.empty() && (round < rounds || !settled(s, options))) todo.push_back(&s);
    }
    if (round >= rounds) {
      std::string stop;
      if (todo.empty()) {
        stop = "every strategy within " + percent_text(options.target_uncertainty) + " after " +
               std::to_string(round) + " rounds";
      } else if (options.budget_s > 0 && now_s() - start_s >= options.budget_s) {
        stop = "the time budget of " + format_seconds(options.budget_s) + " was spent after " +
               std::to_string(round) + " rounds";
      }
      if (shared) {  // rank 0's measurements decide: its stop, or the strategies it runs again
        std::string which;
        for (const StrategyRuns* s : todo) which += std::to_string(s - runs.data()) + " ";
        const nlohmann::json decided =
            nlohmann::json::parse(ranks.from_rank0(nlohmann::json{{"stop", stop}, {"todo", which}}.dump()));
        stop = decided.at("stop").get<std::string>();
        todo.clear();
        std::istringstream in(decided.at("todo").get<std::string>());
        for (size_t i = 0; in >> i;) todo.push_back(&runs.at(i));
      }
      if (!stop.empty()) {
        v.stopped = stop;
        break;
      }
      total += static_cast<int32_t>(todo.size());
    }
    const std::string of_round = " (round " + std::to_string(round + 1) + ")";
    try {
      if (round < rounds && options.gpu) {
        report("profiling " + model.name + " on the GPU" + of_round);
        MeasureOptions on_gpu = measure;
        on_gpu.concurrent = 1;  // alone: the cluster says what sharing the GPU leaves each worker
        const ValidationGpu& gpu = *options.gpu;
        profiles.push_back(measure_cuda_profile(model, batch, gpu.index, on_gpu, gpu.precision));
        report("probing the GPU" + std::string(gpu.each.empty() ? "" : "s") + of_round);
        v.round_clusters.push_back(
            gpu.each.empty() ? measure_cuda_workers_cluster(model, batch, gpu.index, workers, on_gpu, gpu.precision)
                             : measure_cuda_gpus_cluster(model, batch, gpu.each, on_gpu, gpu.precision));
      } else if (round < rounds) {
        report("profiling " + model.name + of_round);
        profiles.push_back(rank0_profile(measure_profile(model, batch, measure)));
        if (workers > 1) {
          report("profiling " + model.name + " on one thread" + of_round);
          v.alone_round_profiles.push_back(rank0_profile(leads ? measure_profile(model, batch, alone) : Profile{}));
        }
        report("probing the channels" + of_round);
        const ClusterProbeOptions probe = probe_options_for(profiles.back());
        v.round_clusters.push_back(shared ? ranks.measure_cluster(profiles.back())
                                          : measure_cpu_cluster(workers, probe));
      }
    } catch (const std::exception& e) {
      // A later round whose profile or probe fails (an error of the GPU's,
      // say) ends the rounds there, those done standing; across ranks every
      // rank must see it, so there it ends the validation.
      if (shared || round == 0) throw;
      profiles.resize(static_cast<size_t>(round));
      v.round_clusters.resize(static_cast<size_t>(round));
      if (v.alone_round_profiles.size() > static_cast<size_t>(round)) {
        v.alone_round_profiles.resize(static_cast<size_t>(round));
      }
      v.stopped = "round " + std::to_string(round + 1) + "'s profiling failed (" + e.what() + ") after " +
                  std::to_string(round) + " rounds";
      break;
    }
    for (StrategyRuns* s : todo) {
      report(s->label + of_round);
      const double probe_s = capacity_probe_s(shared ? 1 : workers);
      v.probe_s.push_back(probe_s);
      const size_t before = s->runs.size();
      run_once(model, data, profiles.back(), v.round_clusters.back(), options, *s);
      if (shared) {  // a strategy rank 0 could not run is not run
        s->skipped = ranks.from_rank0(s->skipped);
        if (!s->skipped.empty() && s->runs.size() > before) s->runs.pop_back();
      }
      if (s->runs.size() > before) s->probes_s.push_back(probe_s);
    }
    v.rounds = round + 1;
    if (options.on_round && leads && round + 1 < max_rounds) {
      Validation so_far = v;
      so_far.stopped = std::to_string(round + 1) + " rounds so far, of at most " + std::to_string(max_rounds);
      conclude(so_far, runs, options, leads, start_s);
      options.on_round(so_far);
    }
  }
  if (v.stopped.empty()) {
    v.stopped = max_rounds > rounds ? "the most rounds asked (" + std::to_string(max_rounds) + ") ran"
                                    : std::to_string(rounds) + " rounds, as asked";
  }
  conclude(v, runs, options, leads, start_s);
  report("done");
  return v;
}

std::vector<std::string> parse_validated_strategies(const std::string& text) {
  std::vector<std::string> entries;
  const auto add = [&entries](const std::string& entry) {
    if (std::find(entries.begin(), entries.end(), entry) == entries.end()) entries.push_back(entry);
  };
  std::stringstream stream(text);
  for (std::string entry; std::getline(stream, entry, ',');) {
    if (entry.empty()) continue;
    if (entry == "all") {
      for (const StrategyInfo& s : strategy_registry()) add(s.id);
      continue;
    }
    find_strategy(read_entry(entry).first, "--strategies");
    add(entry);
  }
  if (entries.empty()) throw InputError("--strategies", "is empty", "all, or strategy ids separated by commas");
  return entries;
}

double prediction_spread(const std::vector<double>& predictions_s) {
  if (predictions_s.size() < 2) return 0;
  const auto [least, most] = std::minmax_element(predictions_s.begin(), predictions_s.end());
  const double median = median_s(predictions_s);
  return median > 0 ? 0.5 * (*most - *least) / median : std::numeric_limits<double>::infinity();
}

double combined_uncertainty(const MedianInterval& measured, double prediction_spread) {
  return std::hypot(measured.relative_half_width, prediction_spread);
}

std::string judge_error(double predicted_s, const MedianInterval& measured, double prediction_spread, double target,
                        double confidence) {
  if (measured.coverage < confidence || !(combined_uncertainty(measured, prediction_spread) <= target)) {
    return "too noisy to judge";
  }
  const double slack_s = predicted_s * prediction_spread;
  return predicted_s >= measured.low - slack_s && predicted_s <= measured.high + slack_s ? "within noise"
                                                                                         : "beyond noise";
}

double median_abs_error(const Validation& v, bool simulated, bool judged_only) {
  std::vector<double> errors;
  for (const StrategyValidation& r : v.results) {
    if (!r.skipped.empty() || (judged_only && r.verdict == "too noisy to judge")) continue;
    errors.push_back(std::abs(simulated ? r.error_simulated : r.error_analytic));
  }
  return median_s(errors);
}

}  // namespace trainsim
