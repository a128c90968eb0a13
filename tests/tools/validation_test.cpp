// `trainsim validate`: the op-by-op comparison on hand-made timings, and the
// whole loop (profile, predict, run, compare) on a small model.
#include "tools/validation.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "exec/data/synthetic_text.hpp"
#include "exec/training.hpp"
#include "model/error.hpp"
#include "profiles/cluster.hpp"
#include "profiles/profiler/cluster_probe.hpp"
#include "model/zoo/zoo.hpp"
#include "profiles/analytic_profiler.hpp"
#include "profiles/profiler/profiler.hpp"
#include "sim/cost/strategies.hpp"
#include "sim/des/engine.hpp"
#include "tests/profiles/quick_probe.hpp"
#include "tests/tools/cli_fixtures.hpp"

namespace trainsim {
namespace {

using testing_fixtures::run_cli;

Plan two_worker_ring_plan(int32_t iterations) {
  const Model model = build_zoo_model("fmnist-mlp");
  const Cluster cluster = nominal_cpu_cluster(2);
  const Profile profile = analytic_profile(model, 16, cluster);
  StrategyConfig config;
  return generate_plan(find_strategy("dp-ring", "test"), profile, cluster, config, iterations);
}

TEST(CompareOps, GroupsByWorkerKindAndLayersAndTakesMediansAfterWarmup) {
  const Plan plan = two_worker_ring_plan(5);
  // Every op: simulated 1 ms. Measured: 2 ms in iteration 2, 4 ms in 1 and 3,
  // 100 ms in the warm-up iterations 0 and 4 (left out).
  std::vector<OpTiming> simulated(plan.ops.size());
  std::vector<ExecOpTiming> measured(plan.ops.size());
  for (size_t id = 0; id < plan.ops.size(); ++id) {
    const Op& op = plan.ops[id];
    simulated[id] = {0, 1'000'000};
    const double start_s = op.iteration * 1.0 + (is_collective(op.kind) ? 0.0 : 0.5);
    const double length_s = op.iteration == 2 ? 2e-3 : (op.iteration == 0 || op.iteration == 4) ? 0.1 : 4e-3;
    measured[id] = {start_s, start_s + length_s};
  }
  const std::vector<OpGroupComparison> groups = compare_ops(plan, simulated, measured, 1);
  ASSERT_FALSE(groups.empty());
  int64_t forwards = 0;
  for (const OpGroupComparison& g : groups) {
    EXPECT_EQ(g.count, 3) << g.kind;  // iterations 1, 2, 3
    EXPECT_NEAR(g.simulated_s, 1e-3, 1e-12);
    EXPECT_NEAR(g.measured_s, 4e-3, 1e-12) << g.kind;  // median of {4, 2, 4} ms
    EXPECT_NEAR(g.error, (1e-3 - 4e-3) / 4e-3, 1e-9);  // -75%
    if (g.kind == "forward") ++forwards;
  }
  EXPECT_GE(forwards, 2);  // one group per worker at least
}

TEST(CompareOps, CollectiveCountsFromItsLastMembersStart) {
  const Plan plan = two_worker_ring_plan(3);
  std::vector<OpTiming> simulated(plan.ops.size(), OpTiming{0, 1000});
  std::vector<ExecOpTiming> measured(plan.ops.size(), ExecOpTiming{0.0, 1e-3});
  // Worker 0 reaches each AllReduce at 10 ms, worker 1 at 14 ms; both leave
  // at 20 ms: the collective took 6 ms, worker 0 idled 4 ms before it.
  int64_t collectives = 0;
  for (size_t id = 0; id < plan.ops.size(); ++id) {
    if (plan.ops[id].kind != OpKind::kAllReduce) continue;
    measured[id] = {plan.ops[id].worker == 0 ? 10e-3 : 14e-3, 20e-3};
    ++collectives;
  }
  ASSERT_EQ(collectives, 6);  // 2 workers x 3 iterations
  for (const OpGroupComparison& g : compare_ops(plan, simulated, measured, 0)) {
    if (g.kind == "allreduce") {
      EXPECT_NEAR(g.measured_s, 6e-3, 1e-12) << "worker " << g.worker;
    }
  }
}

// On GPU workers a compute op has two parts, as the simulator times it:
// the host's (its start to its end) and its kernels' (where the device
// timed them); it lasts from its start until both have ended. Forwards
// queued from 0 to 1 ms whose kernels end at 5 ms: 5 ms; backwards 10 ms
// on the host over kernels ending at 2 ms: 10 ms; ops without device times
// their host's 10 ms.
TEST(CompareOps, AComputeOpLastsUntilItsHostPartAndItsTimedWorkHaveEnded) {
  const Plan plan = two_worker_ring_plan(3);
  std::vector<OpTiming> simulated(plan.ops.size(), OpTiming{0, 1000});
  std::vector<ExecOpTiming> measured(plan.ops.size(), ExecOpTiming{0.0, 10e-3});
  for (size_t id = 0; id < plan.ops.size(); ++id) {
    if (plan.ops[id].kind == OpKind::kForward) {
      measured[id].end_s = 1e-3;
      measured[id].device_start_s = 2e-3;
      measured[id].device_end_s = 5e-3;
    }
    if (plan.ops[id].kind == OpKind::kBackward) measured[id].device_start_s = 0, measured[id].device_end_s = 2e-3;
  }
  int64_t forwards = 0;
  int64_t backwards = 0;
  for (const OpGroupComparison& g : compare_ops(plan, simulated, measured, 0)) {
    forwards += g.kind == "forward";
    backwards += g.kind == "backward";
    EXPECT_NEAR(g.measured_s, g.kind == "forward" ? 5e-3 : 10e-3, 1e-12) << g.kind;
  }
  EXPECT_EQ(forwards, 2);
  EXPECT_EQ(backwards, 2);
}

// Per worker and iteration after warm-up, its compute ops' timed work
// over the iteration, the median over iterations, then over workers: with
// warm-up 1 of 5 iterations, iterations 1-3 count; worker 0's forward and
// backward take 2.5, 2 and 3 ms each (a median of 5 ms an iteration),
// worker 1's 1.5 ms each (3 ms), in 10 ms iterations: 40%. The warm-up
// iterations' 100 ms are left out. Without device times, none.
TEST(DeviceBusyShare, IsTheTimedWorkOverTheIterationMedianOverIterationsAndWorkers) {
  const Plan plan = two_worker_ring_plan(5);
  std::vector<ExecOpTiming> measured(plan.ops.size(), ExecOpTiming{0.0, 1e-3});
  EXPECT_TRUE(std::isnan(device_busy_share(plan, measured, 1, 10e-3)));
  int64_t timed = 0;
  for (size_t id = 0; id < plan.ops.size(); ++id) {
    const Op& op = plan.ops[id];
    if (op.kind != OpKind::kForward && op.kind != OpKind::kBackward) continue;
    const double worker0[] = {0.1, 2.5e-3, 2e-3, 3e-3, 0.1};
    const double seconds = op.worker == 0 ? worker0[op.iteration] : op.iteration % 4 == 0 ? 0.1 : 1.5e-3;
    measured[id].device_start_s = op.iteration * 10e-3;
    measured[id].device_end_s = op.iteration * 10e-3 + seconds;
    ++timed;
  }
  ASSERT_EQ(timed, 2 * 2 * 5);  // a forward and a backward per worker and iteration
  EXPECT_NEAR(device_busy_share(plan, measured, 1, 10e-3), 0.4, 1e-12);
}

TEST(RepresentativeRound, IsTheRoundNearestTheMedian) {
  EXPECT_EQ(representative_round({5e-3}), 0u);
  EXPECT_EQ(representative_round({9e-3, 4e-3, 4.2e-3}), 2u);  // the median 4.2 ms itself
  EXPECT_EQ(representative_round({2.0, 9.0, 1.0, 3.0}), 0u);  // median 2.5 s: 2 and 3 tie, the first wins
  EXPECT_EQ(representative_round({8e-3, 4e-3, 4.3e-3, 4.4e-3}), 2u);  // median 4.35 ms
}

TEST(ValidateCli, MeasuresEachStrategyAsTheMedianOverRounds) {
  const auto r = run_cli({"validate", "--model", "fmnist-mlp", "--devices", "cpu:2", "--strategies", "single,gpipe",
                          "--iterations", "5", "--rounds", "3", "--max-rounds", "3", "--repeats", "2", "--batch", "16", "--json", "-",
                          "--quiet"});
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["rounds"], 3);
  for (const nlohmann::json& result : j["results"]) {
    EXPECT_TRUE(result["device_busy"].is_null()) << "CPU workers' work is their ops'";
    EXPECT_GT(result["predicted_memory_bytes"].get<double>(), 0.0);
    EXPECT_TRUE(result["measured_memory_bytes"].is_null()) << "CPU workers do not count their memory";
  }
  ASSERT_EQ(j["results"].size(), 2u);
  for (const nlohmann::json& s : j["results"]) {
    ASSERT_FALSE(s.contains("skipped")) << s.dump();
    std::vector<double> rounds = s["measured_rounds_s"].get<std::vector<double>>();
    ASSERT_EQ(rounds.size(), 3u) << s["strategy"];
    for (double round_s : rounds) {
      EXPECT_LE(s["measured_min_s"].get<double>(), round_s);
      EXPECT_GE(s["measured_max_s"].get<double>(), round_s);
    }
    std::sort(rounds.begin(), rounds.end());
    EXPECT_EQ(s["measured_s"].get<double>(), rounds[1]) << s["strategy"];
  }
}

// A validation small enough for a unit test: batch 16, 4 iterations per
// run, exactly `rounds` rounds, 2 timed repeats per layer.
ValidationOptions small_validation(int32_t rounds) {
  ValidationOptions options;
  options.batch_size = 16;
  options.iterations = 4;
  options.rounds = rounds;
  options.max_rounds = rounds;
  options.profile_repeats = 2;
  return options;
}

TEST(Validate, PredictsTheFirstRunsPlanFromTheMedianOfTheRoundsProfiles) {
  const Model model = build_zoo_model("text-bag");
  const Dataset data = make_synthetic_text(kTextVocabulary, kTextTokensPerSample, kTextClasses, 256, 16, 1);
  ValidationOptions options;
  options.batch_size = 16;
  options.iterations = 4;
  options.rounds = 3;
  options.profile_repeats = 2;
  options.strategies = {"gpipe"};
  const Validation v = validate(model, data, 2, options);
  ASSERT_EQ(v.round_profiles.size(), 3u);
  EXPECT_EQ(profile_to_json(v.profile), profile_to_json(median_profile(v.round_profiles)));
  // Each profiling round probes the machine too; the prediction reads the medians.
  ASSERT_EQ(v.round_clusters.size(), 3u);
  EXPECT_EQ(cluster_to_json(v.cluster), cluster_to_json(median_cluster(v.round_clusters)));
  ASSERT_EQ(v.results.size(), 1u);
  const StrategyValidation& r = v.results.front();
  ASSERT_TRUE(r.skipped.empty()) << r.skipped;
  const Plan plan = generate_plan(find_strategy("gpipe", "test"), v.profile, v.cluster,
                                  StrategyConfig::from_resolved(r.config, "test"), options.iterations);
  EXPECT_DOUBLE_EQ(r.predicted_simulated_s, simulate_plan(plan, v.cluster, SimOptions{}).iteration_s);
}

TEST(Validate, PredictsAOneWorkerPlanFromTheLayersTimedAlone) {
  // Two workers: each round profiles with both threads busy and with one;
  // single (one worker) is priced from the median of the one-thread
  // profiles, gpipe (two) from the two-thread ones.
  const Model model = build_zoo_model("text-bag");
  const Dataset data = make_synthetic_text(kTextVocabulary, kTextTokensPerSample, kTextClasses, 256, 16, 1);
  ValidationOptions options = small_validation(2);
  options.strategies = {"single", "gpipe"};
  const Validation v = validate(model, data, 2, options);
  ASSERT_EQ(v.alone_round_profiles.size(), 2u);
  EXPECT_EQ(profile_to_json(v.alone_profile), profile_to_json(median_profile(v.alone_round_profiles)));
  ASSERT_EQ(v.results.size(), 2u);
  for (const StrategyValidation& r : v.results) {
    ASSERT_TRUE(r.skipped.empty()) << r.skipped;
    const bool one_worker = r.strategy == "single";
    const Profile& profile = one_worker ? v.alone_profile : v.profile;
    const Plan plan = generate_plan(find_strategy(r.strategy, "test"), profile, v.cluster,
                                    StrategyConfig::from_resolved(r.config, "test"), options.iterations);
    EXPECT_DOUBLE_EQ(r.predicted_simulated_s, simulate_plan(plan, v.cluster, SimOptions{}).iteration_s) << r.strategy;
    ASSERT_EQ(r.predicted_rounds_s.size(), 2u);
    const auto& rounds = one_worker ? v.alone_round_profiles : v.round_profiles;
    const Plan first = generate_plan(find_strategy(r.strategy, "test"), rounds.front(), v.round_clusters.front(),
                                     StrategyConfig::from_resolved(r.config, "test"), options.iterations);
    EXPECT_DOUBLE_EQ(r.predicted_rounds_s.front(),
                     simulate_plan(first, v.round_clusters.front(), SimOptions{}).iteration_s);
  }
  // One worker in all: nothing to profile apart.
  options.strategies = {"single"};
  EXPECT_TRUE(validate(model, data, 1, options).alone_round_profiles.empty());
}

// A round whose profiling fails after the first (an error of the GPU's,
// say) ends the rounds there: the validation stands on those done and says
// why; in the first round there is nothing to stand on.
TEST(Validate, ALaterRoundsFailedProfilingEndsTheRoundsKeepingThoseDone) {
  const Model model = build_zoo_model("text-bag");
  const Dataset data = make_synthetic_text(kTextVocabulary, kTextTokensPerSample, kTextClasses, 256, 16, 1);
  ValidationOptions options = small_validation(3);
  options.strategies = {"single", "gpipe"};
  const auto failing_in = [](const std::string& round) {
    return [round](const std::string& what, int32_t, int32_t) {
      if (what.rfind("profiling", 0) == 0 && what.find(round) != std::string::npos) {
        throw std::runtime_error("the GPU fell off the bus");
      }
    };
  };
  options.progress = failing_in("(round 3)");
  const Validation v = validate(model, data, 2, options);
  EXPECT_EQ(v.rounds, 2);
  EXPECT_EQ(v.round_profiles.size(), 2u);
  EXPECT_EQ(v.alone_round_profiles.size(), 2u);
  EXPECT_EQ(v.round_clusters.size(), 2u);
  EXPECT_NE(v.stopped.find("round 3's profiling failed (the GPU fell off the bus) after 2 rounds"), std::string::npos)
      << v.stopped;
  ASSERT_EQ(v.results.size(), 2u);
  for (const StrategyValidation& r : v.results) {
    ASSERT_TRUE(r.skipped.empty()) << r.skipped;
    EXPECT_EQ(r.measured_rounds_s.size(), 2u) << r.strategy;
  }
  options.progress = failing_in("(round 1)");
  EXPECT_THROW(validate(model, data, 2, options), std::runtime_error);
}

TEST(Validate, RunsAStrategyWithSettingsOfItsOwnBesideItsDefaults) {
  // pipesgd with and without quant8: two entries, two plans, labelled as asked.
  EXPECT_EQ(parse_validated_strategies("pipesgd,pipesgd:compression=quant8,pipesgd"),
            (std::vector<std::string>{"pipesgd", "pipesgd:compression=quant8"}));
  const std::vector<std::string> all = parse_validated_strategies("all,pipesgd:compression=quant8,single");
  EXPECT_EQ(all.size(), strategy_registry().size() + 1);
  EXPECT_EQ(all.back(), "pipesgd:compression=quant8");
  EXPECT_THROW(parse_validated_strategies("pipesgd:quant8"), InputError);
  EXPECT_THROW(parse_validated_strategies("nosuch:compression=quant8"), InputError);
  const Model model = build_zoo_model("text-bag");
  const Dataset data = make_synthetic_text(kTextVocabulary, kTextTokensPerSample, kTextClasses, 256, 16, 1);
  ValidationOptions options = small_validation(1);
  options.strategies = parse_validated_strategies("pipesgd,pipesgd:compression=quant8:width=1");
  const Validation v = validate(model, data, 2, options);
  ASSERT_EQ(v.results.size(), 2u);
  EXPECT_EQ(v.results[0].strategy, "pipesgd");
  EXPECT_EQ(v.results[1].strategy, "pipesgd:compression=quant8:width=1");
  for (const StrategyValidation& r : v.results) ASSERT_TRUE(r.skipped.empty()) << r.skipped;
  EXPECT_EQ(v.results[0].config.at("compression"), "none");
  EXPECT_EQ(v.results[1].config.at("compression"), "quant8");
  EXPECT_EQ(v.results[1].config.at("width"), 1);
  EXPECT_EQ(v.results[0].config.at("width"), 2);
}

TEST(Validate, ARunFailingOnARankEndsTheValidationThroughFail) {
  // Across ranks a failed run would leave the others waiting for its
  // messages: validate hands the reason to ValidationRanks::fail (which
  // ends the MPI job) instead of going on to the next strategy.
  const Model model = build_zoo_model("text-bag");
  const Dataset data = make_synthetic_text(kTextVocabulary, kTextTokensPerSample, kTextClasses, 256, 16, 1);
  ValidationOptions options = small_validation(1);
  options.strategies = {"single"};
  options.ranks.rank = 0;
  options.ranks.from_rank0 = [](const std::string& text) { return text; };
  options.ranks.measure_cluster = [](const Profile&) { return measure_cpu_cluster(1, testing_fixtures::quick_probe()); };
  options.ranks.make_transport = [](int) -> std::unique_ptr<Transport> {
    throw std::runtime_error("the link went down");
  };
  std::string why;
  options.ranks.fail = [&why](const std::string& reason) {
    why = reason;
    throw std::runtime_error("the job ends");
  };
  EXPECT_THROW(validate(model, data, 1, options), std::runtime_error);
  EXPECT_EQ(why, "single failed while running: the link went down");
}

TEST(ValidateCli, PredictsRunsAndComparesEachStrategy) {
  const auto r = run_cli({"validate", "--model", "fmnist-mlp", "--devices", "cpu:2", "--strategies",
                          "single,dp-ring", "--iterations", "6", "--rounds", "1", "--max-rounds", "1", "--repeats", "2", "--batch", "16", "--json", "-",
                          "--quiet"});
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["format"], "trainsim.validation/1");
  EXPECT_EQ(j["batch_size"], 16);
  ASSERT_EQ(j["results"].size(), 2u);
  std::vector<double> abs_errors;
  for (const nlohmann::json& s : j["results"]) {
    ASSERT_FALSE(s.contains("skipped")) << s.dump();
    const double measured = s["measured_s"].get<double>();
    const double simulated = s["predicted_simulated_s"].get<double>();
    ASSERT_GT(measured, 0);
    ASSERT_GT(simulated, 0);
    EXPECT_GT(s["predicted_analytic_s"].get<double>(), 0);
    EXPECT_NEAR(s["error_simulated"].get<double>(), (simulated - measured) / measured, 1e-12);
    bool has_forward = false;
    for (const nlohmann::json& g : s["ops"]) has_forward |= g["kind"] == "forward";
    EXPECT_TRUE(has_forward) << s["strategy"];
    abs_errors.push_back(std::abs(s["error_simulated"].get<double>()));
  }
  // The median of two is their mean.
  EXPECT_NEAR(j["median_abs_error_simulated"].get<double>(), 0.5 * (abs_errors[0] + abs_errors[1]), 1e-12);
}

TEST(JudgeError, SaysWithinNoiseBeyondNoiseOrTooNoisy) {
  MedianInterval m;
  m.median = 1.0, m.low = 0.98, m.high = 1.02, m.coverage = 0.9375, m.relative_half_width = 0.02;
  EXPECT_EQ(judge_error(1.01, m, 0, 0.03, 0.9), "within noise");
  EXPECT_EQ(judge_error(0.98, m, 0, 0.03, 0.9), "within noise");
  EXPECT_EQ(judge_error(1.05, m, 0, 0.03, 0.9), "beyond noise");
  EXPECT_EQ(judge_error(0.90, m, 0, 0.03, 0.9), "beyond noise");
  EXPECT_EQ(judge_error(1.01, m, 0, 0.01, 0.9), "too noisy to judge");  // wider than the target
  m.coverage = 0.75;                                                    // three rounds only
  EXPECT_EQ(judge_error(1.01, m, 0, 0.03, 0.9), "too noisy to judge");
}

TEST(JudgeError, ThePredictionsSpreadWidensTheIntervalAndAddsToTheUncertainty) {
  // Measured 1.0 in [0.99, 1.01]; predictions from the rounds' profiles 1.03,
  // 1.05 and 1.07: spread (1.07 - 1.03) / 2 / 1.05 = 1.905%. Combined with the
  // measurement's 1%: sqrt(1% ^ 2 + 1.905% ^ 2) = 2.151%.
  MedianInterval m;
  m.median = 1.0, m.low = 0.99, m.high = 1.01, m.coverage = 0.9375, m.relative_half_width = 0.01;
  const double spread = prediction_spread({1.05, 1.03, 1.07});
  EXPECT_NEAR(spread, 0.02 / 1.05, 1e-12);
  EXPECT_NEAR(combined_uncertainty(m, spread), std::hypot(0.01, 0.02 / 1.05), 1e-12);
  // 1.03 is 0.02 above the interval; it may move 1.03 · 1.905% = 0.0196 down: beyond.
  EXPECT_EQ(judge_error(1.03, m, spread, 0.03, 0.9), "beyond noise");
  // 1.029 may move 0.0196 down to 1.0094: within.
  EXPECT_EQ(judge_error(1.029, m, spread, 0.03, 0.9), "within noise");
  EXPECT_EQ(judge_error(1.0, m, spread, 0.02, 0.9), "too noisy to judge");  // 2.15% combined > 2%
  EXPECT_EQ(prediction_spread({1.2}), 0);
}

TEST(Validate, RunsMoreRoundsOnlyOfStrategiesNotYetSettled) {
  const Model model = build_zoo_model("text-bag");
  const Dataset data = make_synthetic_text(kTextVocabulary, kTextTokensPerSample, kTextClasses, 256, 16, 1);
  ValidationOptions options;
  options.batch_size = 16;
  options.iterations = 4;
  options.profile_repeats = 2;
  options.strategies = {"single", "dp-ring"};
  options.rounds = 2;
  options.max_rounds = 4;
  // No target can be met: every strategy runs every round up to the most.
  options.target_uncertainty = 1e-12;
  // After each round but the last, the validation so far (what --json keeps
  // of a run cut short).
  std::vector<Validation> so_far;
  options.on_round = [&](const Validation& partial) { so_far.push_back(partial); };
  Validation v = validate(model, data, 2, options);
  ASSERT_EQ(so_far.size(), 3u);
  for (size_t i = 0; i < so_far.size(); ++i) {
    const Validation& p = so_far[i];
    EXPECT_EQ(p.rounds, static_cast<int32_t>(i) + 1);
    EXPECT_EQ(p.stopped, std::to_string(i + 1) + " rounds so far, of at most 4");
    ASSERT_EQ(p.results.size(), 2u);
    for (const StrategyValidation& r : p.results) {
      EXPECT_EQ(r.measured_rounds_s.size(), i + 1);
      EXPECT_GT(r.measured_s, 0);
      EXPECT_GT(r.predicted_simulated_s, 0);
    }
  }
  EXPECT_EQ(so_far[0].results[0].measured_rounds_s,
            std::vector<double>(v.results[0].measured_rounds_s.begin(), v.results[0].measured_rounds_s.begin() + 1));
  EXPECT_EQ(v.rounds, 4);
  EXPECT_EQ(v.round_profiles.size(), 2u);  // extra rounds do not profile
  EXPECT_EQ(v.stopped, "the most rounds asked (4) ran");
  EXPECT_EQ(v.probe_s.size(), 8u);
  for (const StrategyValidation& r : v.results) {
    ASSERT_TRUE(r.skipped.empty()) << r.skipped;
    EXPECT_EQ(r.measured_rounds_s.size(), 4u);
    EXPECT_EQ(r.probe_rounds_s.size(), 4u);
    EXPECT_EQ(r.interval.samples, 4);
    EXPECT_EQ(r.verdict, "too noisy to judge");
  }
  // Any spread is within a target of a million percent once [min, max]
  // covers 90%: five rounds (2^-4 = 6.25% outside), so no round runs past
  // the fifth.
  options.rounds = 1;
  options.max_rounds = 8;
  options.target_uncertainty = 1e4;
  v = validate(model, data, 2, options);
  EXPECT_EQ(v.rounds, 5);
  EXPECT_EQ(v.stopped, "every strategy within 1e+06% after 5 rounds");
  // A spent budget stops it after the rounds asked.
  options.rounds = 1;
  options.max_rounds = 8;
  options.target_uncertainty = 1e-12;
  options.budget_s = 1e-9;
  v = validate(model, data, 2, options);
  EXPECT_EQ(v.rounds, 1);
  EXPECT_NE(v.stopped.find("time budget"), std::string::npos) << v.stopped;
}

TEST(ValidateCli, ReportsEachStrategysUncertaintyAndVerdict) {
  const auto r = run_cli({"validate", "--model", "fmnist-mlp", "--devices", "cpu:2", "--strategies", "single",
                          "--iterations", "4", "--rounds", "5", "--max-rounds", "5", "--repeats", "2", "--batch",
                          "16", "--json", "-", "--quiet"});
  ASSERT_EQ(r.status, 0) << r.err;
  const nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["probe_s"].size(), 5u);
  ASSERT_FALSE(j["machine_variability"].is_null());
  const nlohmann::json& s = j["results"][0];
  EXPECT_NEAR(s["coverage"].get<double>(), 30.0 / 32, 1e-12);
  std::vector<double> rounds = s["measured_rounds_s"].get<std::vector<double>>();
  std::sort(rounds.begin(), rounds.end());
  EXPECT_EQ(s["measured_low_s"].get<double>(), rounds.front());
  EXPECT_EQ(s["measured_high_s"].get<double>(), rounds.back());
  const double measurement = std::max(rounds[2] - rounds[0], rounds[4] - rounds[2]) / rounds[2];
  EXPECT_NEAR(s["measurement_uncertainty"].get<double>(), measurement, 1e-12);
  // The plan simulated from each of the five rounds' profiles.
  std::vector<double> predicted = s["predicted_rounds_s"].get<std::vector<double>>();
  ASSERT_EQ(predicted.size(), 5u);
  std::sort(predicted.begin(), predicted.end());
  const double spread = 0.5 * (predicted.back() - predicted.front()) / predicted[2];
  EXPECT_NEAR(s["prediction_spread"].get<double>(), spread, 1e-12);
  EXPECT_NEAR(s["uncertainty"].get<double>(), std::hypot(measurement, spread), 1e-12);
  const std::string verdict = s["verdict"];
  EXPECT_TRUE(verdict == "within noise" || verdict == "beyond noise" || verdict == "too noisy to judge") << verdict;
  const auto table = run_cli({"validate", "--model", "fmnist-mlp", "--devices", "cpu:2", "--strategies", "single",
                              "--iterations", "4", "--rounds", "1", "--max-rounds", "1", "--repeats", "2", "--batch",
                              "16", "--worst-ops", "0"});
  ASSERT_EQ(table.status, 0) << table.err;
  // One round has no interval: the strategy is not judged, and it says so.
  EXPECT_NE(table.out.find("too noisy to judge"), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("the machine was too disturbed to judge 1 of 1 strategies"), std::string::npos)
      << table.out;
  EXPECT_EQ(table.out.find("host per compute op"), std::string::npos) << table.out;  // CPU threads: none priced
}

TEST(ValidateCli, BadInputIsAnInputError) {
  auto r = run_cli({"validate", "--model", "fmnist-mlp", "--devices", "gpu:2", "--quiet"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--devices"), std::string::npos) << r.err;
  r = run_cli({"validate", "--model", "fmnist-mlp", "--strategies", "dp-nothing", "--quiet"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--strategies"), std::string::npos) << r.err;
  r = run_cli({"validate", "--model", "fmnist-mlp", "--rounds", "0", "--quiet"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--rounds"), std::string::npos) << r.err;
  r = run_cli({"validate", "--model", "fmnist-mlp", "--rounds", "6", "--max-rounds", "5", "--quiet"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--max-rounds"), std::string::npos) << r.err;
  r = run_cli({"validate", "--quiet"});
  EXPECT_EQ(r.status, 2);
  EXPECT_NE(r.err.find("--model"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace trainsim
