// The lending device keeping what a worker trains where its networks
// compute (exec/tensor/kept_training.hpp, a DeviceStore), over the CPU
// stand-in of tests/exec/buffered_cpu_network.hpp: micro-batches and ranges
// add into one sum per gradient, the update steps the device's copy of the
// weights and velocity, and the host sees them only where it reads them.
#include "exec/tensor/kept_training.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "exec/optim/sgd.hpp"
#include "tests/exec/buffered_cpu_network.hpp"
#include "tests/exec/mlp_calls.hpp"

namespace trainsim {
namespace {

using buffered::BufferCounts;
using buffered::BufferedCpuNetwork;
using buffered::CountingStore;
using buffered::MlpCalls;
using strategy_runs::case_named;
using strategy_runs::RunSpec;

// A lending device over the CPU stand-in network, with a counting store.
std::unique_ptr<Device> lending_with_store(BufferCounts& counts) {
  return make_lending_device(
      [&counts](const Network& n, int64_t batch, const HeldLayers& held) {
        return std::make_unique<BufferedCpuNetwork>(n, batch, counts, nullptr, &held);
      },
      std::make_shared<CountingStore>(counts));
}

// What crosses to the host: with the updates on the device, nothing but
// the run's weights at the end (one wait per worker) where only the update
// reads the gradients, however many micro-batches or ranges add into them,
// and one wait per AllReduce bucket more in data parallelism. A network
// loads a layer from the host only the first time: after a step, from the
// weights the device keeps.
TEST(LendingDeviceCalls, TheHostSeesGradientsAndWeightsOnlyWhereItReadsThem) {
  for (const std::string name : {"single", "gpipe", "one_f_one_b", "dp_ring", "dp_overlap"}) {
    SCOPED_TRACE(name);
    const RunSpec& spec = case_named(name);
    BufferCounts::Totals t;
    buffered::expect_lending_trains_as_the_cpu(spec, &t);
    EXPECT_EQ(t.waits, t.all_reduces + t.workers);
    EXPECT_GT(t.steps, 0);
    EXPECT_GT(t.kept_loads, 0);
    EXPECT_EQ(t.host_reloads, 0);
  }
}

// A sparse table steps on the device too (text-bag's 50,000 x 64): only
// the rows its gradient lists go up, made distinct on the host as Sgd's
// lazy step makes them, and no network reloads the table from the host
// after a step (before, the host stepped it and every network loaded all
// of it again). Bit for bit as the CPU: `single` alone, and Parallax's ar
// mode, whose workers step the rows gathered around the ring.
TEST(LendingDeviceCalls, ASparseTableStepsItsRowsOnTheDevice) {
  const RunSpec single{.strategy = "single", .sgd = strategy_runs::kMomentum, .text = true};
  for (const RunSpec& spec : {single, case_named("parallax_ar")}) {
    SCOPED_TRACE(spec.strategy);
    BufferCounts::Totals t;
    buffered::expect_lending_trains_as_the_cpu(spec, &t);
    EXPECT_EQ(t.row_steps, t.updates);  // one table stepped per update
    EXPECT_GT(t.kept_loads, 0);
    EXPECT_EQ(t.host_reloads, 0);
  }
}

// A step refused midway (here a table's gradient of rows wider than the
// table, found after a dense layer before it was readied) leaves nothing
// kept of it: the weights and velocity the host's earlier step left come
// back as they were, and the next step takes them up from there and steps
// as the host.
TEST(KeptTraining, AStepRefusedMidwayLeavesTheHostsValuesToTakeUp) {
  const auto gradients = [](int64_t width) {
    Gradients grads(2);
    grads[0].emplace_back().dense = Tensor({2, 3}, 0.25f);
    ParamGrad& table = grads[1].emplace_back();
    table.sparse = true;
    table.rows = {1, 3};
    table.row_values = Tensor({2, width}, 2.0f);
    return grads;
  };
  // A dense layer, then a table of 4 rows of 2; a first step on the host.
  Weights weights{{Tensor({2, 3}, 0.5f)}, {Tensor({4, 2}, 1.0f)}};
  Sgd sgd(strategy_runs::kMomentum);
  sgd.step(weights, gradients(2), 0, 1);
  const Weights host_weights = weights, host_velocity = sgd.velocity();
  BufferCounts counts;
  KeptTraining kept(std::make_shared<CountingStore>(counts));
  Gradients wrong = gradients(3);
  EXPECT_THROW(kept.step(sgd, weights, wrong, 0, 1), InternalError);
  kept.weights_to_host(weights, 0, 1, &sgd, nullptr);  // nothing kept: nothing comes back
  EXPECT_EQ(counts.waits, 0);
  for (size_t l = 0; l < weights.size(); ++l) {
    EXPECT_EQ(weights[l][0].data, host_weights[l][0].data) << "layer " << l;
    EXPECT_EQ(sgd.velocity()[l][0].data, host_velocity[l][0].data) << "layer " << l;
  }
  // Then a second step, as the host's.
  Gradients grads = gradients(2);
  ASSERT_TRUE(kept.step(sgd, weights, grads, 0, 1));
  kept.weights_to_host(weights, 0, 1, &sgd, nullptr);
  Weights host = host_weights;
  Sgd host_sgd(strategy_runs::kMomentum);
  host_sgd.set_velocity(host_velocity);
  host_sgd.step(host, gradients(2), 0, 1);
  for (size_t l = 0; l < host.size(); ++l) {
    EXPECT_EQ(weights[l][0].data, host[l][0].data) << "layer " << l;
    EXPECT_EQ(sgd.velocity()[l][0].data, host_sgd.velocity()[l][0].data) << "layer " << l;
  }
}

// PipeDream's stashed weight versions stay where the device keeps the
// weights: a stash is a copy there, with no wait, and a later pass reading
// it loads from that copy; the host sees the weights only at the run's end.
TEST(LendingDeviceCalls, AStashedWeightVersionStaysOnTheDevice) {
  for (const std::string name : {"pipedream", "pipedream_sync"}) {
    SCOPED_TRACE(name);
    BufferCounts::Totals t;
    buffered::expect_lending_trains_as_the_cpu(case_named(name), &t);
    EXPECT_EQ(t.waits, t.all_reduces + t.workers);
    EXPECT_GT(t.copies, 0);
    EXPECT_GT(t.kept_loads, 0);
    EXPECT_EQ(t.host_reloads, 0);
  }
}

// SpecTrain on the device (dualpipe): its smoothed gradient follows the
// gradients there, the weights step there, and each forward's and
// backward's prediction of the weights is made there; the host sees the
// weights only at the run's end.
TEST(LendingDeviceCalls, SpecTrainPredictsOnTheDevice) {
  BufferCounts::Totals t;
  buffered::expect_lending_trains_as_the_cpu(case_named("dualpipe_spectrain"), &t);
  EXPECT_EQ(t.waits, t.all_reduces + t.workers);
  EXPECT_GT(t.steps, 0);
  EXPECT_EQ(t.smooths, t.steps);  // one per parameter stepped
  EXPECT_GT(t.predictions, 0);
}

// A loss the device returns unknown (a GPU's, still being computed) is
// read once its worker has queued the forward of its next iteration's
// first micro-batch after it, and the last iteration's at the run's end:
// the host never waits for a loss while it could be queuing work.
TEST(LendingDeviceCalls, ALossIsReadOnceTheNextIterationIsQueued) {
  for (const std::string name : {"single", "gpipe", "one_f_one_b"}) {
    SCOPED_TRACE(name);
    BufferCounts counts;
    RunSpec spec = case_named(name);
    spec.make_device = [&](int32_t) {
      return make_lending_device(
          [&](const Network& n, int64_t batch, const HeldLayers& held) {
            return std::make_unique<BufferedCpuNetwork>(n, batch, counts, nullptr, &held);
          },
          std::make_shared<CountingStore>(counts));
    };
    const strategy_runs::StrategyRun run = strategy_runs::run(spec);
    EXPECT_EQ(run.result.loss_per_iteration, strategy_runs::run(case_named(name)).result.loss_per_iteration);
    const int64_t per_iteration = counts.losses / spec.iterations;  // the last stage's micro-batches
    ASSERT_EQ(counts.losses, per_iteration * spec.iterations);
    ASSERT_EQ(static_cast<int64_t>(counts.computed_when_read.size()), counts.losses);
    for (int64_t j = 0; j < counts.losses; ++j) {
      const int64_t next = j / per_iteration + 1;
      EXPECT_EQ(counts.computed_when_read[static_cast<size_t>(j)],
                next < spec.iterations ? next * per_iteration + 1 : counts.losses)
          << "loss " << j;
    }
  }
}

// A run's state taken where the devices keep the weights and the velocity
// (or SpecTrain's smoothed gradient, at momentum 0) (a checkpoint's), then
// resumed on new devices: it trains as the CPU's run stopped and resumed
// at the same iteration, bit for bit, and, where the strategy is
// synchronous, as a run never stopped.
TEST(LendingDeviceCalls, AStateTakenFromTheDeviceResumesAsTheCpusDoes) {
  const RunSpec batchnorm{.strategy = "single", .sgd = {0.1, 0.9, 0.0}, .make_model = strategy_runs::batchnorm_mlp};
  for (const RunSpec& whole_run : {case_named("single"), case_named("dp_ring"), case_named("gpipe"),
                                   case_named("dualpipe_spectrain"), batchnorm}) {
    SCOPED_TRACE(whole_run.strategy);
    BufferCounts counts;
    RunSpec spec = whole_run;
    const bool spectrain = !spec.settings.empty() && spec.settings.front().first == "spectrain";
    ASSERT_TRUE(spec.sgd.momentum > 0 || spectrain);
    spec.iterations = 3;
    spec.make_device = [&](int32_t) {
      return make_lending_device(
          [&](const Network& n, int64_t batch, const HeldLayers& held) {
            return std::make_unique<BufferedCpuNetwork>(n, batch, counts, nullptr, &held);
          },
          std::make_shared<CountingStore>(counts));
    };
    const Plan plan = strategy_runs::plan_of(spec);
    const strategy_runs::StrategyRun first = strategy_runs::execute(spec, plan, 0, nullptr, true);
    const RunState state = first.result.state;
    const strategy_runs::StrategyRun second = strategy_runs::execute(spec, plan, 3, &state, true);
    std::vector<double> losses = first.result.loss_per_iteration;
    losses.insert(losses.end(), second.result.loss_per_iteration.begin(), second.result.loss_per_iteration.end());
    // The CPU's run in the same two parts (dualpipe drains at a plan's end,
    // so its two halves are not a run of six).
    RunSpec on_cpu = spec;
    on_cpu.make_device = nullptr;
    const strategy_runs::StrategyRun cpu_first = strategy_runs::execute(on_cpu, plan, 0, nullptr, true);
    const strategy_runs::StrategyRun cpu_second =
        strategy_runs::execute(on_cpu, plan, 3, &cpu_first.result.state, true);
    std::vector<double> cpu_losses = cpu_first.result.loss_per_iteration;
    cpu_losses.insert(cpu_losses.end(), cpu_second.result.loss_per_iteration.begin(),
                      cpu_second.result.loss_per_iteration.end());
    EXPECT_EQ(losses, cpu_losses);
    EXPECT_EQ(strategy_runs::largest_weight_gap(second.result.weights, cpu_second.result.weights), 0.0);
    EXPECT_EQ(strategy_runs::largest_weight_gap(second.result.statistics, cpu_second.result.statistics), 0.0);
    if (!spectrain) {
      RunSpec whole = whole_run;
      whole.iterations = 6;
      EXPECT_EQ(losses, strategy_runs::run(whole).result.loss_per_iteration);
    }
    EXPECT_GT(counts.steps, 0);
    if (spectrain) {
      EXPECT_GT(counts.smooths, 0);
    }
  }
}

// Batch normalization's running statistics fold on the device after each
// forward, nothing of them coming back until the run's end (or a state's):
// they end bit for bit as the CPU's, and a run resumed from a state taken
// there goes on as one never stopped.
TEST(LendingDeviceCalls, RunningStatisticsFoldOnTheDevice) {
  const std::vector<RunSpec> specs = {
      {.strategy = "single", .sgd = {0.1, 0.9, 0.0}, .make_model = strategy_runs::batchnorm_mlp},
      {.strategy = "gpipe",
       .settings = {{"microbatches", "2"}, {"stages", "0-1,2-4"}},
       .sgd = {0.1, 0.9, 0.0},
       .make_model = strategy_runs::batchnorm_mlp}};
  for (const RunSpec& spec : specs) {
    SCOPED_TRACE(spec.strategy);
    BufferCounts::Totals t;
    buffered::expect_lending_trains_as_the_cpu(spec, &t);
    EXPECT_EQ(t.statistics_back, 0);
    EXPECT_GT(t.folds, 0);
    EXPECT_LE(t.waits, 2 * t.workers);  // each worker's weights and statistics, at the end
  }
}

// By hand: a step on the device leaves the host's weights there, which the
// host's SGD refuses; brought back, they and the velocity are the host
// step's bit for bit, and the next step takes them up from the host again.
TEST(LendingDeviceCalls, AStepOnTheDeviceComesBackAsTheHostsStep) {
  BufferCounts counts;
  Network network = build_network(build_zoo_model("fmnist-mlp"));
  std::unique_ptr<Device> device = lending_with_store(counts);
  Weights host = init_weights(network, strategy_runs::kWeightSeed);
  Weights kept = host;
  const SgdOptions options{0.1, 0.9, 1e-4};
  Sgd host_sgd(options), kept_sgd(options);
  for (int32_t it = 0; it < 2; ++it) {
    Gradients g = zero_gradients(network, host);
    for (size_t l = 0; l < g.size(); ++l) {
      for (ParamGrad& p : g[l]) {
        for (size_t i = 0; i < p.dense.data.size(); ++i) p.dense.data[i] = 0.01f * static_cast<float>((i + l + it) % 7);
      }
    }
    Gradients g_kept = g;
    host_sgd.step(host, g, 0, 6);
    device->step(kept_sgd, kept, g_kept, 0, 6);
    ASSERT_NE(kept[1][0].resident, nullptr);
    EXPECT_TRUE(kept[1][0].data.empty());
    Gradients again = g;
    EXPECT_THROW(kept_sgd.step(kept, again, 0, 6), std::logic_error);
  }
  EXPECT_EQ(counts.steps, 2 * 6);          // fc1, fc2, fc3: weights and bias, twice
  EXPECT_EQ(counts.from_host, 2 * 6 + 6);  // the gradients each step, the weights at the first
  device->weights_to_host(kept, 0, 6, &kept_sgd);
  EXPECT_EQ(counts.waits, 1);
  EXPECT_EQ(kept[1][0].resident, nullptr);
  for (size_t l = 0; l < host.size(); ++l) {
    for (size_t p = 0; p < host[l].size(); ++p) {
      EXPECT_EQ(kept[l][p].data, host[l][p].data) << "layer " << l;
      EXPECT_EQ(kept_sgd.velocity()[l][p].data, host_sgd.velocity()[l][p].data) << "layer " << l;
    }
  }
  Gradients g = zero_gradients(network, kept);
  device->step(kept_sgd, kept, g, 0, 6);
  EXPECT_EQ(counts.from_host, 2 * 6 + 6 + 3 * 6);  // weights, gradient and velocity taken up again
}

// By hand: two micro-batches' backwards add into one sum kept on the
// device; the host refuses the set until it is brought back, on one wait,
// bit for bit the CPU's sum.
TEST(LendingDeviceCalls, MicroBatchesSumOnTheDeviceAndComeBackOnce) {
  BufferCounts counts;
  Network network = build_network(build_zoo_model("fmnist-mlp"));
  Weights weights = init_weights(network, strategy_runs::kWeightSeed);
  std::unique_ptr<Device> device = lending_with_store(counts);
  Gradients reference = zero_gradients(network, weights);
  Gradients grads = zero_gradients(network, weights);
  for (int32_t mb = 0; mb < 2; ++mb) {
    Tensor x;
    std::vector<int32_t> labels;
    strategy_runs::synthetic_batch(mb, 8, x, labels);
    std::vector<LayerCache> cpu_caches, caches;
    Tensor logits = forward_range(network, weights, 0, 6, x, cpu_caches);
    Tensor dlogits;
    softmax_cross_entropy(logits, labels, &dlogits);
    backward_range(network, weights, 0, 6, std::move(dlogits), cpu_caches, reference);
    Tensor kept_dlogits;
    device->forward_loss(network, weights, 1, PassId{0, mb}, 0, 6, x, caches, labels, 1.0f, kept_dlogits);
    device->backward(network, weights, 1, PassId{0, mb}, 0, 6, std::move(kept_dlogits), caches, grads);
  }
  EXPECT_EQ(counts.waits, 0);
  ASSERT_NE(grads[1][0].kept, nullptr);  // fc1's weight
  EXPECT_THROW(flatten_gradients(grads, 0, 6), std::logic_error);
  const Gradients copy = grads;  // shares the kept sums
  device->gradients_to_host(grads, 0, 6);
  EXPECT_EQ(counts.waits, 1);
  EXPECT_EQ(counts.sums_back, counts.zeros);
  EXPECT_EQ(flatten_gradients(grads, 0, 6), flatten_gradients(reference, 0, 6));
  Gradients again = copy;  // its sums were taken
  EXPECT_THROW(device->gradients_to_host(again, 0, 6), std::logic_error);
  device->gradients_to_host(grads, 0, 6);  // nothing kept: no wait
  EXPECT_EQ(counts.waits, 1);
  clear_gradients(again, 0, 6);  // a kept sum let go reads as zero
  EXPECT_EQ(again[1][0].kept, nullptr);
  for (const float v : flatten_gradients(again, 0, 6)) ASSERT_EQ(v, 0.0f);
}

// A parameter server on a device keeping the gradient sums (dp-ps with
// server=device, seed 003 §2.3): each update adds the other worker's
// gradient into the server's sums on the device and takes their mean
// there, bit for bit as the CPU; only the sender's sums come to the host
// (for its message), where the server's came down too, were added and
// scaled there, and went up again.
TEST(LendingDeviceCalls, AServersReceivedGradientsAddOnTheDevice) {
  const Network network = build_network(build_zoo_model("fmnist-mlp"));
  int64_t params = 0;
  for (const auto& layer : network.layers) params += static_cast<int64_t>(layer->param_shapes().size());
  for (const int32_t workers : {2, 3}) {  // one sender and a mean of 1/2; two and 1/3
    SCOPED_TRACE(workers);
    RunSpec spec = case_named("dp_ps_device");
    spec.per_machine = workers;
    BufferCounts::Totals t;
    buffered::expect_lending_trains_as_the_cpu(spec, &t);
    ASSERT_EQ(t.workers, workers);
    EXPECT_EQ(t.sums_added, spec.iterations * params * workers);       // each sender's gradient added, then the mean
    EXPECT_EQ(t.sums_back, spec.iterations * params * (workers - 1));  // the senders' alone
  }
}

// A host's AllReduce or accumulation coming back (a ring on the host, CGDP's
// copy back) goes up as the device's sums, where the update reads them,
// the host's values zero, and comes back as it went; a range holding a
// sparse gradient stays the host's unless only the dense ones are given.
TEST(LendingDeviceCalls, AHostsSumComesBackAsTheDevicesSums) {
  BufferCounts counts;
  for (const bool text : {false, true}) {
    SCOPED_TRACE(text ? "text-bag" : "fmnist-mlp");
    Network network = build_network(build_zoo_model(text ? "text-bag" : "fmnist-mlp"));
    Weights weights = init_weights(network, strategy_runs::kWeightSeed);
    std::unique_ptr<Device> device = lending_with_store(counts);
    Gradients grads = zero_gradients(network, weights);
    const auto last = static_cast<int64_t>(grads.size()) - 1;
    std::vector<float> flat(static_cast<size_t>(flat_gradient_size(grads, 0, last)));
    for (size_t i = 0; i < flat.size(); ++i) flat[i] = 0.001f * static_cast<float>(i % 997) - 0.4f;
    const bool sparse = text;  // text-bag's table
    EXPECT_EQ(device->take_flat_gradients(flat, grads, 0, last, /*dense_only=*/false), !sparse);
    if (sparse) {
      for (const LayerGrads& layer : grads) {
        for (const ParamGrad& g : layer) EXPECT_EQ(g.kept, nullptr);
      }
      ASSERT_TRUE(device->take_flat_gradients(flat, grads, 0, last, /*dense_only=*/true));
    }
    int64_t kept = 0;
    for (const LayerGrads& layer : grads) {
      for (const ParamGrad& g : layer) {
        kept += g.kept != nullptr;
        if (!g.sparse) {
          EXPECT_FALSE(any_nonzero(g.dense.data));
        }
      }
    }
    EXPECT_GT(kept, 0);
    EXPECT_THROW(flatten_gradients(grads, 0, last), std::logic_error);
    device->gradients_to_host(grads, 0, last);
    EXPECT_EQ(flatten_gradients(grads, 0, last), flat);
  }
}

// Without a store the gradients are added on the host by each backward.
TEST(LendingDeviceCalls, WithoutAStoreBackwardsAddIntoTheHostsGradients) {
  MlpCalls m;
  std::vector<LayerCache> caches;
  Tensor dlogits;
  m.device->forward_loss(m.network, m.weights, 1, PassId{0, 0}, 0, 6, m.x, caches, m.labels, 1.0f, dlogits);
  Gradients grads = zero_gradients(m.network, m.weights);
  m.device->backward(m.network, m.weights, 1, PassId{0, 0}, 0, 6, std::move(dlogits), caches, grads);
  EXPECT_EQ(grads[1][0].kept, nullptr);
  EXPECT_EQ(m.counts.zeros, 0);
  float largest = 0;
  for (const float v : flatten_gradients(grads, 0, 6)) largest = std::max(largest, std::abs(v));
  EXPECT_GT(largest, 0.0f);
}

}  // namespace
}  // namespace trainsim
