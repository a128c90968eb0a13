// `trainsim validate`: profiles this machine, predicts each strategy from that
// profile (the analytic cost model and the simulator, on the very plan that is
// then executed), trains for real with the plan interpreter, and compares:
// per strategy the iteration time, per op group the durations of the two
// traces.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "exec/cuda/cuda_network.hpp"
#include "exec/data/dataset.hpp"
#include "exec/training.hpp"
#include "model/layer.hpp"
#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "profiles/profiler/spread.hpp"
#include "sim/cost/strategies.hpp"
#include "sim/des/engine.hpp"

namespace trainsim {

// A validation shared by the ranks of an MPI job, one worker each: every
// rank runs the same loop, and these make the ranks agree on what it
// measured and decided. rank < 0: one process, every worker a thread.
struct ValidationRanks {
  int rank = -1;
  // Collective: rank 0's text on every rank (the others wait asleep).
  std::function<std::string(const std::string&)> from_rank0;
  // Collective: the links, hosts and compute rates of the ranks, measured
  // by all of them together; the same cluster on every rank.
  std::function<Cluster(const Profile&)> measure_cluster;
  // The transport of a plan of `endpoints` workers, for this
  // rank (none where the plan has fewer endpoints: it sits the run out).
  std::function<std::unique_ptr<Transport>(int endpoints)> make_transport;
  // A run failed on this rank (not a plan it refuses, which every rank
  // refuses alike): ends every rank with one line saying why; does not return.
  std::function<void(const std::string& why)> fail;
};

// Workers as virtual devices of one GPU (`--devices cuda:GxW`), or with a
// GPU each (`--devices cuda:G,H,...`: `each`, worker w on each[w]).
struct ValidationGpu {
  int index = 0;
  CudaPrecision precision = CudaPrecision::fast;
  std::vector<int> each;
  // With a GPU each, the runs' transports (gpu_each_transports, made once
  // for every run); null: the in-process transport's.
  std::function<std::unique_ptr<Transport>(int endpoints)> make_transport;
  int64_t workers = 1;  // sharing GPU `index` (cuda:GxW), each with a W-th of its memory
};

struct Validation;

struct ValidationOptions {
  int64_t batch_size = 0;          // per device; 0 = the model's default
  int32_t iterations = 40;         // trained per strategy and round; warm-up as the simulator's rule
  int32_t rounds = 5;              // at least this many rounds, each running every strategy once and
                                   // profiling the layers; a strategy's measurement is the median over
                                   // its rounds, so one disturbed run moves nothing
  int32_t max_rounds = 0;          // more rounds, of the strategies still too uncertain, up to this
                                   // many (0 = rounds: no more)
  double target_uncertainty = 0.03;  // a strategy is settled once its interval's half-width is within
                                     // this fraction of its median
  double confidence = 0.9;         // of the intervals (order statistics of the rounds)
  double budget_s = 0;             // no further round starts after this many seconds (0 = no limit)
  int64_t profile_repeats = 100;   // timed runs per layer when profiling (long enough that a
                                   // passing disturbance of a shared machine moves no median)
  uint64_t seed = 1;
  // Entries of parse_validated_strategies; empty: every registered strategy.
  std::vector<std::string> strategies;
  // Called before each step: (what, steps done, steps in all).
  std::function<void(const std::string& what, int32_t done, int32_t total)> progress;
  // Called after each round but the last (on rank 0 alone across ranks)
  // with the validation of the rounds so far, as the last round's return
  // would give it (`stopped` saying the rounds go on): what a run cut short
  // keeps.
  std::function<void(const Validation& so_far)> on_round;
  // Across the ranks of an MPI job: each rank profiles with one thread (all
  // at once) and rank 0's profile is the one every rank plans from; the
  // profile of one worker alone is rank 0's with the others asleep; rank 0
  // decides which strategies run again, and only rank 0's result holds the
  // comparison (the other ranks' results are empty).
  ValidationRanks ranks;
  // Set: the workers share this GPU. Each profiling round then profiles
  // the layers on it (measure_cuda_profile: alone, so no profile on one
  // thread), measures it as the workers' cluster
  // (measure_cuda_workers_cluster: the simulator shares it among them),
  // and every run computes on it (make_cuda_device). With a GPU each, the
  // layers are profiled on the first, the cluster is the GPUs'
  // (measure_cuda_gpus_cluster), and each worker computes on its own, the
  // runs' transport NCCL's (gpu_each_transports).
  std::optional<ValidationGpu> gpu;
};

// Ops of one worker, stream, kind and layer range (all iterations after
// warm-up): the medians of their simulated and measured durations.
struct OpGroupComparison {
  std::string kind;    // "forward", "all_reduce", ...
  std::string stream;  // "compute", "send", ...
  int32_t worker = 0;
  int32_t first_layer = -1;
  int32_t last_layer = -1;
  int64_t count = 0;
  double simulated_s = 0;
  double measured_s = 0;
  double error = 0;    // (simulated - measured) / measured; 0 when measured is 0
};

struct StrategyValidation {
  std::string strategy;
  nlohmann::json config;
  std::string skipped;               // why it was not run, or failed (empty when it ran)
  double predicted_analytic_s = 0;
  double predicted_simulated_s = 0;
  double measured_s = 0;             // median over rounds of each run's median iteration after warm-up
  double measured_min_s = 0;         // over all rounds' iterations after warm-up
  double measured_max_s = 0;
  std::vector<double> measured_rounds_s;  // each round's median iteration, in the order run
  std::vector<double> probe_rounds_s;     // the capacity probe just before each of those runs
  MedianInterval interval;           // of measured_s, from measured_rounds_s
  // The plan simulated from each round's profile, and their spread
  // (prediction_spread): how much the prediction moves with the profile.
  std::vector<double> predicted_rounds_s;
  double prediction_spread = 0;
  double uncertainty = 0;            // combined_uncertainty of the measurement and the prediction
  // "beyond noise": the error is larger than the measurement's and the
  // prediction's uncertainty; "within noise": it is not; "too noisy to
  // judge": the combined uncertainty stayed above the target (or the
  // interval's coverage below the confidence asked).
  std::string verdict;
  double error_analytic = 0;         // (predicted - measured) / measured: positive = predicted slower
  double error_simulated = 0;
  std::vector<OpGroupComparison> ops;  // of the round whose median is nearest measured_s
  // On GPU workers, device_busy_share of that round; NaN elsewhere.
  double device_busy = std::numeric_limits<double>::quiet_NaN();
  // The analytic prediction's memory of its fullest device, and the most
  // any worker's device held in any round (Device::memory_use: GPU workers;
  // -1 where the devices do not count it).
  double predicted_memory_bytes = 0;
  int64_t measured_memory_bytes = -1;
  nlohmann::json simulated_trace;    // Chrome traces of the same plan (measured: that round)
  nlohmann::json measured_trace;
};

struct Validation {
  double elapsed_s = 0;
  std::string stopped;  // why no more rounds ran
  std::vector<double> probe_s;  // every capacity probe, in order (one before each run)
  MedianInterval probe;         // their median's interval: the machine's variability while it ran
  Profile profile;   // each layer's median over the rounds' profiles: what the predictions read
  std::vector<Profile> round_profiles;  // each round's, in order (round r's runs were planned from it)
  // The same with one thread measuring (workers > 1 only): a plan of one
  // worker runs with the other cores idle, and is priced from these.
  Profile alone_profile;
  std::vector<Profile> alone_round_profiles;
  Cluster cluster;   // each measured rate's median over the rounds' probes: what the predictions read
  std::vector<Cluster> round_clusters;  // each profiling round's probe, after its profiles (round r's runs used it)
  int64_t workers = 0;
  int32_t rounds = 0;
  std::vector<StrategyValidation> results;
};

// (predicted - measured) / measured: positive = predicted slower; 0 for a
// measurement of 0.
double relative_error(double predicted, double measured);

// An error or another fraction as validate prints it: "+4.3%" (`sign`) or
// "4.3%", one decimal; "?" where it is not finite.
std::string error_percent(double fraction, bool sign = true);

// A strategy's plan of `iterations` with `config`'s settings, priced from
// `profile` and `cluster` as validate prices the plan that ran: by the
// cost model (bounded by a shared device's work and each GPU worker's host,
// docs/equations.md §11-12) and by the simulator.
struct PricedPlan {
  Plan plan;
  Prediction analytic;
  SimResult simulated;
};
PricedPlan price_plan(const StrategyInfo& strategy, const Profile& profile, const Cluster& cluster,
                      const StrategyConfig& config, int32_t iterations);

// Groups the ops of iterations [warmup, iterations - warmup) and compares
// their median durations. `simulated` and `measured` hold one timing per plan
// op. A measured collective counts from its last member's start, as the
// simulator starts it. Groups come in the plan's op order.
std::vector<OpGroupComparison> compare_ops(const Plan& plan, const std::vector<OpTiming>& simulated,
                                           const std::vector<ExecOpTiming>& measured, int32_t warmup);

// For GPU workers, whose compute ops' work their devices timed
// (ExecOpTiming::device_start_s): per worker, the median over iterations
// [warmup, iterations - warmup) of that work's seconds in the iteration,
// over `iteration_s`; the median over the workers. How much of an iteration
// a worker's ops' work spans on the GPU (a worker's ops run there one after
// another, so their spans do not overlap; a span holds the GPU's waits for
// the host inside the op), outside which the GPU waited for the host to
// queue work or for other workers. NaN where no op was timed so.
double device_busy_share(const Plan& plan, const std::vector<ExecOpTiming>& measured, int32_t warmup,
                         double iteration_s);

// The round a strategy's op comparison and measured trace come from: the one
// whose median iteration is nearest the median over rounds (the first of a
// tie). `rounds_s` holds one median per round and is not empty.
size_t representative_round(const std::vector<double>& rounds_s);

// The whole loop on `workers` CPU threads of this machine (or on the ranks
// of `options.ranks`, one worker each, or on `options.gpu`): `options.rounds`
// rounds, each of which profiles the layers and then runs every strategy once
// (the channels are probed once, in the first). A strategy's later runs and
// its predictions keep the settings its first run resolved (partition,
// chunks, buckets), and the predictions time that plan from the median
// profile.
Validation validate(const Model& model, const Dataset& data, int64_t workers, const ValidationOptions& options);

// The strategies to validate from entries separated by commas, each "all"
// (every registered strategy) or a strategy id with settings of its own after colons
// (pipesgd:compression=quant8, parallax:mode=ps:local_aggregation=false);
// an entry's label in the results is the entry itself. InputError for an
// unknown id or a setting not key=value.
std::vector<std::string> parse_validated_strategies(const std::string& text);

// Median |error_simulated| and |error_analytic| over the strategies run
// (only those judged, not "too noisy to judge", with `judged_only`).
double median_abs_error(const Validation& v, bool simulated, bool judged_only = false);

// The prediction's own spread: half the range of `predictions_s` (one per
// round's profile) relative to their median; 0 with fewer than two.
double prediction_spread(const std::vector<double>& predictions_s);

// The uncertainty of an error: the measurement's relative half-width and
// the prediction's spread, added in quadrature (independent).
double combined_uncertainty(const MedianInterval& measured, double prediction_spread);

// The verdict on an error given the measurement's interval and the
// prediction's spread: "too noisy to judge" when their combined uncertainty
// is above `target` or the interval's coverage below `confidence`, else
// "within noise" when the prediction falls inside the interval widened by
// its spread (predicted_s · prediction_spread each way), else "beyond noise".
std::string judge_error(double predicted_s, const MedianInterval& measured, double prediction_spread, double target,
                        double confidence);

// trainsim.validation/1: model, devices, batch_size, iterations, cluster,
// rounds, results (strategy, config, measured_s, measured_rounds_s,
// predicted_*_s, error_*, ops or skipped), and the medians.
nlohmann::json validation_to_json(const Validation& v, const std::string& model, const std::string& devices,
                                  int32_t iterations);

}  // namespace trainsim
