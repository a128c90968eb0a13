// A training run end to end: the strategy's plan for a model on this
// machine's workers, executed for real on a dataset, then evaluated on its
// test set. `trainsim run` and `trainsim validate` are built on it.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "exec/checkpoint.hpp"
#include "exec/data/dataset.hpp"
#include "exec/interpreter.hpp"
#include "exec/optim/stale_momentum.hpp"
#include "model/layer.hpp"
#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "sim/cost/strategy_config.hpp"

namespace trainsim {

struct TrainingOptions {
  std::string strategy = "single";
  int64_t batch_size = 0;   // per device; 0 = the model's default
  int32_t iterations = 0;   // mini-batches; 0 = `epochs` epochs of the training set
  int32_t epochs = 1;
  uint64_t seed = 1;        // weights and shuffling
  SgdOptions sgd{0.05, 0.9, 0.0};
  // Called with each iteration as its batch is drawn (progress).
  std::function<void(int32_t iteration, int32_t iterations)> on_iteration;
  // When set and the strategy's gradients are stale (its prediction's
  // staleness > 0), called before training with the check of sgd.momentum
  // against that staleness (stale_momentum.hpp).
  std::function<void(const StaleMomentumCheck&)> on_stale_gradients;
  // Stops at the first NaN or infinite loss (LossDiverged, interpreter.hpp).
  bool stop_on_divergence = false;
  // Evaluates the final weights on the whole test set (TrainingResult::test_accuracy);
  // validate times training only and turns it off (10,000 images per run for fmnist-cnn).
  // Only where the result is complete (not in a shared run's other processes).
  bool evaluate = true;
  // A run shared by several processes (ExecOptions::make_transport and
  // local_endpoints): the transport joining them and this process's workers.
  std::function<std::unique_ptr<Transport>(int endpoints)> make_transport;
  std::vector<int32_t> local_endpoints;
  // Each worker's device (ExecOptions::make_device; the CPU's when unset).
  std::function<std::unique_ptr<Device>(int32_t worker)> make_device;
  // Times each compute op's work where its device runs it
  // (ExecOptions::time_device_work).
  bool time_device_work = false;
  // Every `checkpoint_every` iterations (> 0) the run drains its plan (the
  // next stretch starts from the state it left) and calls on_checkpoint with
  // what going on needs (its identity left for the caller to fill). A
  // synchronous strategy trains as without; a pipeline drains once more per
  // stretch. `resume`, when set, starts from such a checkpoint.
  int32_t checkpoint_every = 0;
  std::function<void(const Checkpoint&)> on_checkpoint;
  const Checkpoint* resume = nullptr;
};

struct IterationStats {
  double median_s = 0;  // median interval between iteration ends after warm-up (as the simulator)
  double min_s = 0;
  double max_s = 0;
  int32_t warmup = 0;
};

struct TrainingResult {
  Plan plan;                            // with checkpoints: the last stretch's
  ExecResult exec;                      // with checkpoints: timings of the last stretch, losses of every iteration
  Profile profile;                      // what the plan was generated from
  IterationStats iteration;
  double samples_per_s = 0;             // samples of the whole job per second, from iteration.median_s
  std::vector<double> train_loss;       // mean loss per epoch (partial last epoch included)
  double test_accuracy = 0;             // of the final weights, on the whole test set (NaN without evaluate)
  int32_t iterations_per_epoch = 0;
};

// A cluster describing `workers` CPU threads of this machine with nominal
// figures (for choosing partitions; `trainsim profile --device cpu` measures
// real ones). Given each worker's host (MPI ranks across machines, rank r
// worker r), its machines are those hosts where the workers fill them in
// order, the same number on each; otherwise, or without hosts, it is one
// machine.
Cluster nominal_cpu_cluster(int64_t workers, const std::vector<int>& host_of_worker = {});

// Trains `model` on `data` with the strategy on `cluster`'s devices, timing
// the plan from `profile` when given (else an analytic profile on the cluster).
TrainingResult train(const Model& model, const Dataset& data, const Cluster& cluster, StrategyConfig config,
                     const TrainingOptions& options, const Profile* profile = nullptr);

// Accuracy of `weights` with `statistics` on the test set, in batches, in
// evaluation mode (forward_eval: batch norm with its running statistics).
double test_accuracy(const Network& network, const Weights& weights, const Statistics& statistics,
                     const Dataset& data);

// Median, min and max interval per iteration between iteration ends, by the
// simulator's rule (steady_state): max(1, n/5) warm-up iterations left out at
// the start and as many at the end when there are enough, intervals over whole
// periods of `period` iterations (plan.iteration_period: a replicated stage
// ends its iterations in groups), after leaving out the last `drain`
// iterations (plan.drain_iterations: those that end in the plan's own drain).
IterationStats iteration_stats(const std::vector<double>& iteration_end_s, int32_t period = 1, int32_t drain = 0);

// trainsim.run/1 (docs/formats.md).
nlohmann::json training_to_json(const TrainingResult& r, const std::string& model, const std::string& devices,
                                const std::string& trace_path, uint64_t seed);

}  // namespace trainsim
