// What the MPI tests of the interpreter share: a strategy's plan for one
// device per rank, its run on rank 0's threads or across the ranks, the
// comparison of two runs, and lending devices over the CPU stand-in of a
// GPU's network and store.
#pragma once

#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "exec/interpreter.hpp"
#include "exec/mpi/mpi_transport.hpp"
#include "model/error.hpp"
#include "tests/exec/buffered_cpu_network.hpp"
#include "tests/exec/strategy_runs.hpp"

namespace trainsim::mpi_runs {

using buffered::BufferCounts;
using buffered::BufferedCpuNetwork;
using buffered::CountingStore;
using strategy_runs::kWeightSeed;
using strategy_runs::largest_weight_gap;
using strategy_runs::synthetic_batch;

constexpr int64_t kBatch = 8;

inline int world_size() {
  int size = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  return size;
}

inline int world_rank() {
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  return rank;
}

// The plan of `strategy` (with `settings`) for fmnist-mlp (or `model`) on
// one device per rank, all on one machine or `per_machine` on each, 4 iterations.
inline Plan plan_for(const std::string& strategy, const std::vector<std::pair<std::string, std::string>>& settings = {},
                     int per_machine = 0, const std::string& model_name = "fmnist-mlp") {
  Cluster cluster = load_cluster("p40x4-pcie3");
  cluster.devices_per_machine = per_machine > 0 ? per_machine : world_size();
  cluster.machines = world_size() / static_cast<int>(cluster.devices_per_machine);
  const Model model = build_zoo_model(model_name);
  StrategyConfig config;
  for (const auto& [key, value] : settings) config.set(key, value, "--set " + key);
  return generate_plan(find_strategy(strategy, "--strategy"), analytic_profile(model, kBatch, cluster), cluster, config,
                       4);
}

// Runs `plan` on rank 0's threads or across the ranks; given `resume`, from
// that state, its iteration 0 being batch `first_iteration`; with `library`,
// the ranks' library AllReduce by it (MpiTransport::sum_library_by);
// time_device_work: ExecOptions's.
inline ExecResult run(const Plan& plan, bool shared, bool keep_state = false, const RunState* resume = nullptr,
                      int32_t first_iteration = 0, bool text = false,
                      std::function<std::unique_ptr<Device>(int32_t)> make_device = nullptr,
                      std::shared_ptr<LibraryMember> library = nullptr, bool time_device_work = false) {
  const Network network = build_network(build_zoo_model(text ? "text-bag" : "fmnist-mlp"));
  ExecOptions options;
  options.make_device = std::move(make_device);
  options.time_device_work = time_device_work;
  options.batch_size = kBatch;
  options.sgd = {0.1, 0.9, 0.0};
  options.recv_timeout_s = 60;
  options.keep_state = keep_state;
  options.resume = resume;
  if (shared) {
    options.local_endpoints = {world_rank()};
    options.make_transport = [library](int endpoints) {
      auto transport = std::make_unique<MpiTransport>();
      TRAINSIM_CHECK(transport->workers() == endpoints, "run the MPI tests with one rank per worker");
      if (library != nullptr) transport->sum_library_by(library);
      return transport;
    };
  }
  const BatchSource batches = text ? strategy_runs::text_batches() : whole_batches(synthetic_batch);
  const BatchSource shifted = [&](int32_t iteration, int64_t rows, RowRange range, Tensor* x, std::vector<int32_t>* y) {
    batches(iteration + first_iteration, rows, range, x, y);
  };
  return execute_plan(plan, network, init_weights(network, kWeightSeed), shifted, options);
}

// Every iteration's loss and the final weights within 1e-5 of `reference`'s.
inline void expect_trains_alike(const ExecResult& run, const ExecResult& reference) {
  ASSERT_EQ(run.loss_per_iteration.size(), reference.loss_per_iteration.size());
  for (size_t i = 0; i < reference.loss_per_iteration.size(); ++i) {
    EXPECT_NEAR(run.loss_per_iteration[i], reference.loss_per_iteration[i],
                1e-5 * std::max(1.0, std::abs(reference.loss_per_iteration[i])))
        << "iteration " << i;
  }
  EXPECT_LE(largest_weight_gap(run.weights, reference.weights), 1e-5);
}

// GPU-like workers across ranks (cuda:0xN under mpirun): lending devices
// over the CPU stand-in of a GPU's network and store, a store per process,
// all of one memory. A boundary to a worker of another process goes
// through the hosts unless the transport passes it between the devices
// (Transport::passes_kept).
inline std::function<std::unique_ptr<Device>(int32_t)> lending_devices(BufferCounts& counts) {
  return [&counts, store = std::make_shared<CountingStore>(counts)](int32_t) {
    return make_lending_device(
        [&counts](const Network& network, int64_t batch, const HeldLayers& held) {
          return std::make_unique<BufferedCpuNetwork>(network, batch, counts, nullptr, &held);
        },
        store, /*shared_memory=*/0);
  };
}

}  // namespace trainsim::mpi_runs
