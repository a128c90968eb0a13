// The plan interpreter trains for real: synchronous data parallel on N
// workers equals `single` with N times the batch, GPipe equals `single` with
// the whole mini-batch, and the asynchronous pipelines start from the same
// first loss.
#include "exec/interpreter.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <span>
#include <vector>

#include "exec/tensor/device.hpp"
#include "exec/transport/in_process.hpp"
#include "model/zoo/zoo.hpp"
#include "profiles/analytic_profiler.hpp"
#include "sim/cost/strategies.hpp"
#include "tests/exec/cpu_device_wrapper.hpp"
#include "tests/exec/strategy_runs.hpp"

namespace trainsim {
namespace {

constexpr int64_t kBatch = 8;  // per device
constexpr int32_t kIterations = 5;

// A deterministic global batch: pixel values from a hash of (iteration, row,
// element), labels (3·iteration + row) mod 10.
void synthetic_batch(int32_t iteration, int64_t rows, Tensor& x, std::vector<int32_t>& y) {
  x = Tensor({rows, 1, 28, 28});
  y.resize(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    y[static_cast<size_t>(r)] = static_cast<int32_t>((3 * iteration + r) % 10);
    for (int64_t e = 0; e < 784; ++e) {
      const uint64_t h = (static_cast<uint64_t>(iteration) * 1000003u + static_cast<uint64_t>(r) * 7919u +
                          static_cast<uint64_t>(e) * 104729u + static_cast<uint64_t>(y[static_cast<size_t>(r)]) * 31u) %
                         1000u;
      x.data[static_cast<size_t>(r * 784 + e)] = static_cast<float>(h) / 1000.0f - 0.5f;
    }
  }
}

using strategy_runs::two_devices;

struct TrainingRun {
  Plan plan;
  ExecResult result;
};

TrainingRun run(const std::string& strategy, int64_t batch, std::vector<std::pair<std::string, std::string>> settings,
                const std::function<void(ExecOptions&)>& adjust = {}, const Cluster& cluster = two_devices()) {
  const Model model = build_zoo_model("fmnist-mlp");
  const Network network = build_network(model);
  const Weights initial = init_weights(network, 7);
  const Profile profile = analytic_profile(model, batch, cluster);
  StrategyConfig config;
  for (const auto& [key, value] : settings) config.set(key, value, "--set " + key);
  TrainingRun r;
  r.plan = generate_plan(find_strategy(strategy, "--strategy"), profile, cluster, config, kIterations);
  ExecOptions options;
  options.batch_size = batch;
  options.sgd = {0.1, 0.9, 0.0};
  options.recv_timeout_s = 30;
  if (adjust) adjust(options);
  const BatchSource batches = whole_batches(synthetic_batch);
  r.result = execute_plan(r.plan, network, initial, batches, options);
  return r;
}

using strategy_runs::largest_weight_gap;

void expect_same_training(const TrainingRun& reference, const TrainingRun& other, const std::string& what) {
  strategy_runs::expect_same_training(reference.result, other.result, what);
}

TEST(Interpreter, SynchronousDataParallelEqualsSingleWithTheWholeBatch) {
  const TrainingRun single = run("single", 2 * kBatch, {});
  // Training moves: the loss of the last iteration differs from the first.
  EXPECT_NE(single.result.loss_per_iteration.front(), single.result.loss_per_iteration.back());
  expect_same_training(single, run("dp-ring", kBatch, {}), "dp-ring");
  expect_same_training(single, run("dp-ring", kBatch, {{"algorithm", "tree"}}), "dp-ring tree");
  expect_same_training(single, run("dp-overlap", kBatch, {{"bucket_bytes", "64KiB"}}), "dp-overlap");
  expect_same_training(single, run("dp-ps", kBatch, {}), "dp-ps");
  expect_same_training(single, run("cgdp", kBatch, {{"chunk_size", "1"}}), "cgdp");
}

TEST(Interpreter, CgdpAcrossMachinesEqualsSingleWithTheWholeBatch) {
  // Two machines of two: each host sums its two workers' chunks, the hosts
  // all-reduce the sums, and every worker copies the mean of all four back.
  Cluster two_by_two = two_devices();
  two_by_two.machines = 2;
  const TrainingRun single = run("single", 4 * kBatch, {});
  const TrainingRun cgdp = run("cgdp", kBatch, {{"chunk_size", "1"}}, {}, two_by_two);
  ASSERT_EQ(cgdp.plan.workers.size(), 4u);
  expect_same_training(single, cgdp, "cgdp on 2 machines x 2");
  two_by_two.devices_per_machine = 1;  // two machines of one: the hosts' AllReduce alone
  expect_same_training(run("single", 2 * kBatch, {}), run("cgdp", kBatch, {{"chunk_size", "1"}}, {}, two_by_two),
                       "cgdp on 2 machines x 1");
}

TEST(Interpreter, DenseExchangesOfASparseTableEqualSingleWithTheWholeBatch) {
  // text-bag's 50,000 x 64 table made dense for the AllReduce (dp-ring,
  // dp-overlap), the server push (dp-ps) and the host's sum (cgdp). Without
  // momentum the dense step of the summed table equals the lazy sparse step
  // of single's (sgd_test), so each equals single with twice the batch.
  const auto text = [](const std::string& strategy, int64_t batch,
                       std::vector<std::pair<std::string, std::string>> settings) {
    return strategy_runs::run({.strategy = strategy, .batch = batch, .settings = std::move(settings),
                               .iterations = kIterations, .sgd = {0.1, 0.0, 0.0}, .text = true});
  };
  const strategy_runs::StrategyRun single = text("single", 2 * kBatch, {});
  EXPECT_NE(single.result.loss_per_iteration.front(), single.result.loss_per_iteration.back());
  strategy_runs::expect_same_training(single.result, text("dp-ring", kBatch, {}).result, "dp-ring");
  strategy_runs::expect_same_training(single.result, text("dp-overlap", kBatch, {{"bucket_bytes", "64KiB"}}).result,
                                      "dp-overlap");
  strategy_runs::expect_same_training(single.result, text("dp-ps", kBatch, {{"server", "device"}}).result,
                                      "dp-ps on a device");
  strategy_runs::expect_same_training(single.result, text("dp-ps", kBatch, {{"server", "host"}}).result,
                                      "dp-ps on the host");
  strategy_runs::expect_same_training(single.result, text("cgdp", kBatch, {{"chunk_size", "1"}}).result, "cgdp");
}

TEST(Interpreter, GpipeEqualsSingleWithTheWholeMiniBatch) {
  const TrainingRun single = run("single", kBatch, {});
  expect_same_training(single, run("gpipe", kBatch, {{"microbatches", "4"}}), "gpipe, 4 micro-batches");
  expect_same_training(single, run("gpipe", kBatch, {{"microbatches", "1"}}), "gpipe, 1 micro-batch");
}

// 1F1B with a flush: the micro-batches in another order, the same sums.
TEST(Interpreter, OneFOneBEqualsSingleWithTheWholeMiniBatch) {
  const TrainingRun single = run("single", kBatch, {});
  expect_same_training(single, run("1f1b", kBatch, {{"microbatches", "4"}}), "1f1b, 4 micro-batches");
  expect_same_training(single, run("1f1b", kBatch, {{"microbatches", "8"}}), "1f1b, 8 micro-batches of one sample");
  expect_same_training(single, run("1f1b", kBatch, {{"microbatches", "4"}, {"chunks", "2"}}),
                       "1f1b interleaved, two chunks a device");
}

TEST(Interpreter, PipedreamStartsLikeSingleThenTrainsOnStashedWeights) {
  const TrainingRun single = run("single", kBatch, {});
  const TrainingRun pipedream = run("pipedream", kBatch, {{"replicate", "false"}});
  // The first mini-batch meets the initial weights on both stages.
  EXPECT_NEAR(pipedream.result.loss_per_iteration[0], single.result.loss_per_iteration[0], 1e-5);
  // Mini-batch 1 enters stage 0 before mini-batch 0's update there: staleness
  // makes the runs differ afterwards.
  EXPECT_GT(largest_weight_gap(single.result.weights, pipedream.result.weights), 1e-6);
  for (double loss : pipedream.result.loss_per_iteration) EXPECT_TRUE(std::isfinite(loss));
}

TEST(Interpreter, RecordsEveryOpAndMovesTheActivationsBetweenStages) {
  const TrainingRun gpipe = run("gpipe", kBatch, {{"microbatches", "2"}});
  for (size_t id = 0; id < gpipe.plan.ops.size(); ++id) {
    EXPECT_LE(gpipe.result.timings[id].start_s, gpipe.result.timings[id].end_s);
    for (OpId dep : gpipe.plan.ops[id].deps) {
      EXPECT_LE(gpipe.result.timings[static_cast<size_t>(dep)].end_s, gpipe.result.timings[id].start_s) << id;
    }
  }
  // Each send carries what the plan says it does: the activations of one
  // micro-batch (and its gradient back) at the stage boundary.
  int64_t planned_bytes = 0;
  for (const Op& op : gpipe.plan.ops) {
    if (op.kind == OpKind::kSend) planned_bytes += static_cast<int64_t>(op.bytes);
  }
  int64_t moved_bytes = 0;
  for (int w = 0; w < 2; ++w) moved_bytes += gpipe.result.traffic.sent_bytes(w);
  EXPECT_EQ(moved_bytes, planned_bytes);
  const nlohmann::json trace = exec_chrome_trace(gpipe.plan, gpipe.result);
  EXPECT_TRUE(trace.contains("traceEvents"));
}

TEST(Interpreter, RunsOnTheTransportItIsGiven) {
  // A backend plugs in through ExecOptions::make_transport: the run moves
  // its data through the transport made there, and trains bit for bit as on
  // the default in-process one.
  const TrainingRun reference = run("gpipe", kBatch, {{"microbatches", "2"}});
  std::vector<int> made;  // endpoints of each transport made
  const TrainingRun given = run("gpipe", kBatch, {{"microbatches", "2"}}, [&made](ExecOptions& options) {
    options.make_transport = [&made](int endpoints) -> std::unique_ptr<Transport> {
      made.push_back(endpoints);
      return std::make_unique<InProcessTransport>(endpoints, 30.0);
    };
  });
  ASSERT_EQ(made.size(), 1u);
  EXPECT_EQ(made[0], static_cast<int>(given.plan.workers.size() + given.plan.servers.size()));
  EXPECT_EQ(given.result.loss_per_iteration, reference.result.loss_per_iteration);
  EXPECT_EQ(largest_weight_gap(given.result.weights, reference.result.weights), 0.0);
  EXPECT_EQ(given.result.traffic.pair_bytes, reference.result.traffic.pair_bytes);
  EXPECT_GT(given.result.traffic.sent_bytes(0), 0);
}

// Counts the forwards it runs, and those through the loss, then runs them on the CPU.
class CountingDevice final : public CpuDeviceWrapper {
 public:
  CountingDevice(int64_t& forwards, int64_t& with_loss) : forwards_(forwards), with_loss_(with_loss) {}
  Tensor forward(const Network& network, const Weights& weights, WeightsGeneration generation, PassId pass,
                 int64_t first, int64_t last, Tensor x, std::vector<LayerCache>& caches) override {
    ++forwards_;
    return CpuDeviceWrapper::forward(network, weights, generation, pass, first, last, std::move(x), caches);
  }
  PendingLoss forward_loss(const Network& network, const Weights& weights, WeightsGeneration generation, PassId pass,
                           int64_t first, int64_t last, Tensor x, std::vector<LayerCache>& caches,
                           std::span<const int32_t> labels, float dlogits_scale, Tensor& dlogits) override {
    ++with_loss_;
    return CpuDeviceWrapper::forward_loss(network, weights, generation, pass, first, last, std::move(x), caches, labels,
                                          dlogits_scale, dlogits);
  }

 private:
  int64_t& forwards_;   // touched by its worker's compute thread only
  int64_t& with_loss_;  // likewise
};

TEST(Interpreter, ComputesOnTheDevicesItIsGiven) {
  const TrainingRun reference = run("gpipe", kBatch, {{"microbatches", "2"}});
  std::vector<int32_t> made;         // the worker of each device made
  std::vector<int64_t> forwards(2);  // per worker
  std::vector<int64_t> with_loss(2);
  const TrainingRun given = run("gpipe", kBatch, {{"microbatches", "2"}}, [&](ExecOptions& options) {
    options.make_device = [&](int32_t worker) -> std::unique_ptr<Device> {
      made.push_back(worker);
      const auto w = static_cast<size_t>(worker);
      return std::make_unique<CountingDevice>(forwards.at(w), with_loss.at(w));
    };
  });
  EXPECT_EQ(made, (std::vector<int32_t>{0, 1}));
  // Every forward runs on the device; those of the model's last layer
  // through forward_loss, which the device may compute where the logits are.
  std::vector<int64_t> planned(2), planned_loss(2);
  const auto last_layer = static_cast<int32_t>(build_zoo_model("fmnist-mlp").layers.size()) - 1;
  for (const Op& op : given.plan.ops) {
    if (op.kind != OpKind::kForward && op.kind != OpKind::kRecompute) continue;
    ++planned[static_cast<size_t>(op.worker)];
    if (op.last_layer == last_layer) ++planned_loss[static_cast<size_t>(op.worker)];
  }
  EXPECT_EQ(forwards, planned);
  EXPECT_EQ(with_loss, planned_loss);
  EXPECT_EQ(planned_loss, (std::vector<int64_t>{0, 10}));  // 5 iterations of 2 micro-batches on the last stage
  EXPECT_EQ(given.result.loss_per_iteration, reference.result.loss_per_iteration);
  EXPECT_EQ(largest_weight_gap(given.result.weights, reference.result.weights), 0.0);
}

TEST(Interpreter, StopsAtTheFirstLossThatDiverges) {
  const auto huge_step = [](bool stop) {
    return [stop](ExecOptions& options) {
      options.sgd = {1e30, 0.9, 0.0};
      options.stop_on_divergence = stop;
    };
  };
  // Without the stop the run trains on to its end on NaN or infinite losses.
  const TrainingRun on = run("single", kBatch, {}, huge_step(false));
  ASSERT_EQ(on.result.loss_per_iteration.size(), static_cast<size_t>(kIterations));
  EXPECT_TRUE(std::isfinite(on.result.loss_per_iteration[0]));
  EXPECT_FALSE(std::isfinite(on.result.loss_per_iteration[1]));
  // With it, iteration 0's finite loss passes and the first update's step of
  // 1e30 makes iteration 1's loss the one that stops the run.
  for (const std::string strategy : {"single", "dp-ring", "pipedream"}) {
    try {
      run(strategy, kBatch, {}, huge_step(true));
      ADD_FAILURE() << strategy << " trained on";
    } catch (const LossDiverged& e) {
      // pipedream's first iterations run on stashed, older weights.
      if (strategy != "pipedream") {
        EXPECT_EQ(e.iteration, 1) << strategy;
      }
      EXPECT_GE(e.iteration, 1) << strategy;
      EXPECT_LT(e.iteration, kIterations) << strategy;
      EXPECT_FALSE(std::isfinite(e.loss)) << strategy;
      EXPECT_NE(std::string(e.what()).find("diverged at iteration " + std::to_string(e.iteration)), std::string::npos);
    }
  }
}

// Returns each loss unknown, as a GPU still computing it, the one of
// iteration `nan_at` read as NaN; records the iteration of each read and
// how many losses were computed by then.
class DeferringDevice final : public CpuDeviceWrapper {
 public:
  DeferringDevice(int32_t nan_at, std::vector<int32_t>& read, std::vector<int32_t>& computed_then)
      : nan_at_(nan_at), read_(read), computed_then_(computed_then) {}
  PendingLoss forward_loss(const Network& network, const Weights& weights, WeightsGeneration generation, PassId pass,
                           int64_t first, int64_t last, Tensor x, std::vector<LayerCache>& caches,
                           std::span<const int32_t> labels, float dlogits_scale, Tensor& dlogits) override {
    const double value = CpuDeviceWrapper::forward_loss(network, weights, generation, pass, first, last, std::move(x),
                                                        caches, labels, dlogits_scale, dlogits)
                             .read();
    ++computed_;
    return PendingLoss([this, value, iteration = pass.iteration] {
      read_.push_back(iteration);
      computed_then_.push_back(computed_);
      return iteration == nan_at_ ? std::numeric_limits<double>::quiet_NaN() : value;
    });
  }

 private:
  int32_t nan_at_;
  int32_t computed_ = 0;
  // Touched by its worker's compute thread, then by the run's end.
  std::vector<int32_t>& read_;
  std::vector<int32_t>& computed_then_;
};

// A loss the device has not computed yet is read once the worker's next
// iteration has queued its forward, and the last iteration's at the run's
// end: the run stops at the loss that diverged, however late it is read.
TEST(Interpreter, StopsAtADivergedLossItReadsLater) {
  const TrainingRun reference = run("single", kBatch, {});
  for (const int32_t nan_at : {-1, 2, kIterations - 1}) {
    SCOPED_TRACE(nan_at);
    std::vector<int32_t> read, computed_then;
    const auto deferring = [&](bool stop) {
      return [&, nan_at, stop](ExecOptions& options) {
        options.stop_on_divergence = stop;
        options.make_device = [&, nan_at](int32_t) {
          return std::make_unique<DeferringDevice>(nan_at, read, computed_then);
        };
      };
    };
    const TrainingRun on = run("single", kBatch, {}, deferring(false));
    // Each loss read once, in order, after the next iteration's was computed.
    EXPECT_EQ(read, (std::vector<int32_t>{0, 1, 2, 3, 4}));
    EXPECT_EQ(computed_then, (std::vector<int32_t>{2, 3, 4, 5, 5}));
    for (int32_t i = 0; i < kIterations; ++i) {
      const double loss = on.result.loss_per_iteration.at(static_cast<size_t>(i));
      if (i == nan_at) {
        EXPECT_TRUE(std::isnan(loss));
      } else {
        EXPECT_EQ(loss, reference.result.loss_per_iteration[static_cast<size_t>(i)]) << "iteration " << i;
      }
    }
    read.clear();
    computed_then.clear();
    try {
      run("single", kBatch, {}, deferring(true));
      EXPECT_EQ(nan_at, -1) << "trained on";
    } catch (const LossDiverged& e) {
      EXPECT_EQ(e.iteration, nan_at);
      // Read as the next iteration's forward was queued (none after the last).
      ASSERT_EQ(read.size(), static_cast<size_t>(nan_at + 1));
      EXPECT_EQ(computed_then.back(), std::min(nan_at + 2, kIterations));
    }
  }
}

}  // namespace
}  // namespace trainsim
