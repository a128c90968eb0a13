// The plan interpreter across processes: every strategy's plan for as many
// devices as there are ranks, each rank running its worker over the MPI
// transport (ExecOptions::local_endpoints), against the same plan run by
// rank 0 alone with its workers as threads: the same losses, weights and
// op count, gathered to rank 0. A plan whose ops share memory across
// workers is refused on every rank, with the reason.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "exec/interpreter.hpp"
#include "exec/mpi/mpi_transport.hpp"
#include "model/error.hpp"
#include "tests/exec/buffered_cpu_network.hpp"
#include "tests/exec/strategy_runs.hpp"
#include "tests/mpi/mpi_runs.hpp"

namespace trainsim {
namespace {

using buffered::BufferCounts;
using mpi_runs::expect_trains_alike;
using mpi_runs::kBatch;
using mpi_runs::lending_devices;
using mpi_runs::plan_for;
using mpi_runs::run;
using mpi_runs::world_rank;
using mpi_runs::world_size;
using strategy_runs::kWeightSeed;
using strategy_runs::largest_weight_gap;
using strategy_runs::synthetic_batch;

// The ranks' timings on one clock (align_timings): a receive from another
// worker ends after its send began, and every member's part of an
// AllReduce after every member's began (within 50 us of clock reads),
// whichever rank ran it.
void expect_causal(const Plan& plan, const std::vector<ExecOpTiming>& timings) {
  constexpr double kSlack = 50e-6;
  std::map<std::tuple<int32_t, int32_t, int32_t, int32_t>, std::pair<double, double>> collectives;
  for (size_t id = 0; id < plan.ops.size(); ++id) {
    const Op& op = plan.ops[id];
    const ExecOpTiming& t = timings[id];
    for (OpId dep : op.deps) {
      const Op& before = plan.ops[static_cast<size_t>(dep)];
      if (op.kind != OpKind::kRecv || before.kind != OpKind::kSend || before.worker == op.worker) continue;
      EXPECT_GE(t.end_s + kSlack, timings[static_cast<size_t>(dep)].start_s)
          << op_kind_name(op.kind) << " of worker " << op.worker << " (iteration " << op.iteration
          << ") ended before the " << op_kind_name(before.kind) << " of worker " << before.worker << " began";
    }
    if (op.kind != OpKind::kAllReduce) continue;
    auto [it, fresh] =
        collectives.try_emplace({op.group, op.iteration, op.first_layer, op.last_layer}, std::pair{t.start_s, t.end_s});
    it->second = {std::max(it->second.first, t.start_s), std::min(it->second.second, t.end_s)};
  }
  for (const auto& [key, span] : collectives) {
    EXPECT_LE(span.first, span.second + kSlack)
        << "an AllReduce of iteration " << std::get<1>(key) << " ended on one rank before it began on another";
  }
}

class AcrossProcesses : public testing::TestWithParam<std::string> {};

TEST_P(AcrossProcesses, TrainsAsTheWorkersDoAsThreadsOfOneProcess) {
  const Plan plan = plan_for(GetParam());
  ASSERT_EQ(plan.workers.size(), static_cast<size_t>(world_size()));
  ExecResult alone;
  if (world_rank() == 0) alone = run(plan, false);
  const ExecResult shared = run(plan, true);
  EXPECT_EQ(shared.complete, world_rank() == 0);
  if (world_rank() != 0) return;
  expect_trains_alike(shared, alone);
  // Every op ran and was timed, on whichever rank, on one clock.
  for (size_t id = 0; id < plan.ops.size(); ++id) {
    EXPECT_GE(shared.timings[id].end_s, shared.timings[id].start_s) << "op " << id;
    EXPECT_GT(shared.timings[id].end_s, 0.0) << "op " << id << " never ran";
  }
  expect_causal(plan, shared.timings);
  // Each rank's sends reached rank 0's account of the traffic: the bytes
  // the plan moves (the starting barrier's messages are empty).
  for (int w = 0; w < world_size(); ++w) {
    EXPECT_EQ(shared.traffic.sent_bytes(w), alone.traffic.sent_bytes(w)) << "worker " << w;
  }
}

INSTANTIATE_TEST_SUITE_P(Strategies, AcrossProcesses,
                         testing::Values("dp-ps", "dp-ring", "dp-overlap", "pipesgd", "pipedream", "pipedream-sync",
                                         "dualpipe", "gpipe", "1f1b", "dsp", "parallax"),
                         [](const testing::TestParamInfo<std::string>& param) {
                           std::string name = param.param;
                           for (char& c : name) c = c == '-' ? '_' : c;
                           return name;
                         });

// algorithm=mpi: the MPI library's own AllReduce over every rank trains as
// the project's ring does with the workers as threads (sums in another
// order: the losses within 1e-5); the threads' transport refuses it.
TEST(AcrossProcesses, TheLibraryAllReduceTrainsAsTheRing) {
  for (const std::string strategy : {"dp-ring", "dp-overlap"}) {
    SCOPED_TRACE(strategy);
    ExecResult ring;
    if (world_rank() == 0) ring = run(plan_for(strategy), false);
    const Plan library = plan_for(strategy, {{"algorithm", "mpi"}});
    const ExecResult shared = run(library, true);
    if (world_rank() == 0) {
      expect_trains_alike(shared, ring);
      try {
        run(library, false);
        ADD_FAILURE() << "algorithm=mpi ran on threads";
      } catch (const InputError& e) {
        EXPECT_NE(std::string(e.what()).find("MPI processes"), std::string::npos) << e.what();
      }
    }
  }
}

// Checkpoints across processes: rank 0 gathers every worker's state, and
// completes it (dp-ps's client takes the server worker's weights), and
// each rank gets its own back; a second stretch resumed from it trains as
// the same two stretches on rank 0's threads.
TEST(AcrossProcesses, ASecondStretchResumesAsOnThreads) {
  for (const std::string strategy : {"dp-ps", "gpipe", "pipedream"}) {
    SCOPED_TRACE(strategy);
    const Plan plan = plan_for(strategy);
    ExecResult first_alone, second_alone;
    if (world_rank() == 0) {
      first_alone = run(plan, false, true);
      second_alone = run(plan, false, true, &first_alone.state, 4);
    }
    const ExecResult first = run(plan, true, true);
    ASSERT_EQ(first.state.endpoints.size(), plan.workers.size());
    const ExecResult second = run(plan, true, true, &first.state, 4);
    // Each rank holds its own worker's completed state, as the threads' run has it.
    std::vector<float> mine;
    for (const LayerParams& layer : first.state.endpoints[static_cast<size_t>(world_rank())].weights) {
      for (const Tensor& t : layer) mine.insert(mine.end(), t.data.begin(), t.data.end());
    }
    std::vector<float> all(mine.size() * static_cast<size_t>(world_size()));
    MPI_Gather(mine.data(), static_cast<int>(mine.size()), MPI_FLOAT, all.data(), static_cast<int>(mine.size()),
               MPI_FLOAT, 0, MPI_COMM_WORLD);
    if (world_rank() != 0) continue;
    for (int w = 0; w < world_size(); ++w) {
      std::vector<float> alone;
      for (const LayerParams& layer : first_alone.state.endpoints[static_cast<size_t>(w)].weights) {
        for (const Tensor& t : layer) alone.insert(alone.end(), t.data.begin(), t.data.end());
      }
      ASSERT_EQ(alone.size(), mine.size());
      double gap = 0;
      for (size_t i = 0; i < alone.size(); ++i) {
        gap = std::max(gap, static_cast<double>(std::fabs(alone[i] - all[static_cast<size_t>(w) * mine.size() + i])));
      }
      EXPECT_LE(gap, 1e-5) << "worker " << w << "'s state";
    }
    expect_trains_alike(second, second_alone);
  }
}

TEST(AcrossProcesses, RanksBeyondThePlansEndpointsSitTheRunOut) {
  // `single`'s plan has one worker: rank 0 runs it as alone, the others
  // join the transport's split and return at once, without losses.
  const Plan plan = plan_for("single");
  ASSERT_EQ(plan.workers.size(), 1u);
  ExecOptions options;
  options.batch_size = kBatch;
  options.sgd = {0.1, 0.9, 0.0};
  options.local_endpoints = {world_rank()};
  int transports = 0;
  options.make_transport = [&transports](int endpoints) {
    ++transports;
    return MpiTransport::for_endpoints(endpoints);
  };
  const Network network = build_network(build_zoo_model("fmnist-mlp"));
  const ExecResult shared =
      execute_plan(plan, network, init_weights(network, kWeightSeed), whole_batches(synthetic_batch), options);
  EXPECT_EQ(transports, 1);
  ASSERT_EQ(shared.loss_per_iteration.size(), 4u);
  if (world_rank() == 0) {
    EXPECT_TRUE(shared.complete);
    expect_trains_alike(shared, run(plan, false));
  } else {
    EXPECT_FALSE(shared.complete);
    EXPECT_TRUE(std::isnan(shared.loss_per_iteration[0]));
  }
}

// A rank makes the devices of its own workers only: a GPU device made for
// another rank's worker would take up that GPU (or fail on a host without
// it) in this process.
TEST(AcrossProcesses, EachRankMakesTheDeviceOfItsOwnWorkerOnly) {
  const Plan plan = plan_for("dp-ring");
  ExecOptions options;
  options.batch_size = kBatch;
  options.sgd = {0.1, 0.9, 0.0};
  options.recv_timeout_s = 60;
  options.local_endpoints = {world_rank()};
  options.make_transport = [](int endpoints) { return MpiTransport::for_endpoints(endpoints); };
  std::vector<int32_t> made;
  options.make_device = [&made](int32_t worker) {
    made.push_back(worker);
    return std::make_unique<EigenCpuDevice>();
  };
  const Network network = build_network(build_zoo_model("fmnist-mlp"));
  const ExecResult shared =
      execute_plan(plan, network, init_weights(network, kWeightSeed), whole_batches(synthetic_batch), options);
  EXPECT_EQ(made, std::vector<int32_t>{world_rank()});
  if (world_rank() == 0) expect_trains_alike(shared, run(plan, false));
}

TEST(AcrossProcesses, LendingDevicesOfOneMemoryTrainAsTheCpusThreads) {
  for (const std::string strategy : {"dp-ring", "gpipe", "pipedream"}) {
    SCOPED_TRACE(strategy);
    const Plan plan = plan_for(strategy);
    ExecResult alone;
    if (world_rank() == 0) alone = run(plan, false);
    BufferCounts counts;
    const ExecResult shared = run(plan, true, false, nullptr, 0, false, lending_devices(counts));
    if (world_rank() == 0) expect_trains_alike(shared, alone);
  }
}

// A library AllReduce by MPI's own that also sums the arrays a rank's
// device keeps where they are, as NCCL's member on the rank's GPU: here
// the CPU stand-in's, side by side, on a communicator of its own.
class KeptSummingMember final : public LibraryMember {
 public:
  KeptSummingMember(MPI_Comm comm, int& host_sums, int& kept_sums)
      : comm_(comm), host_sums_(host_sums), kept_sums_(kept_sums) {}
  bool all_reduce(std::span<float> data, const Share&, const std::function<bool()>&) override {
    ++host_sums_;
    MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_FLOAT, MPI_SUM, comm_);
    return true;
  }
  bool sums_kept() const override { return true; }
  bool all_reduce_kept(std::span<KeptValues* const> arrays, int64_t floats, float scale, const Share&,
                       const std::function<bool()>&) override {
    ++kept_sums_;
    std::vector<float> flat;
    for (KeptValues* a : arrays) {
      const std::vector<float>& values = buffered::kept_values(*a).data;
      flat.insert(flat.end(), values.begin(), values.end());
    }
    EXPECT_EQ(static_cast<int64_t>(flat.size()), floats);
    MPI_Allreduce(MPI_IN_PLACE, flat.data(), static_cast<int>(flat.size()), MPI_FLOAT, MPI_SUM, comm_);
    size_t at = 0;
    for (KeptValues* a : arrays) {
      for (float& v : buffered::kept_values(*a).data) v = flat[at++] * scale;
    }
    return true;
  }

 private:
  MPI_Comm comm_;
  int& host_sums_;
  int& kept_sums_;
};

// GPU workers under mpirun with NCCL's AllReduce (a rank per GPU): each
// AllReduce sums the gradients where the rank's device keeps them, none
// coming to the host, and the run trains as the CPU's threads do.
TEST(AcrossProcesses, ALibraryThatSumsKeptArraysLeavesTheGradientsOnTheDevices) {
  const Plan plan = plan_for("dp-ring", {{"algorithm", "mpi"}});
  ExecResult threads;
  if (world_rank() == 0) threads = run(plan_for("dp-ring"), false);
  MPI_Comm comm = MPI_COMM_NULL;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  int host_sums = 0, kept_sums = 0;
  BufferCounts counts;
  const ExecResult shared = run(plan, true, false, nullptr, 0, false, lending_devices(counts),
                                std::make_shared<KeptSummingMember>(comm, host_sums, kept_sums));
  MPI_Comm_free(&comm);
  int64_t mine = 0;
  for (const Op& op : plan.ops) mine += op.kind == OpKind::kAllReduce && op.worker == world_rank() ? 1 : 0;
  ASSERT_GT(mine, 0);
  EXPECT_EQ(kept_sums, mine);
  EXPECT_EQ(host_sums, 0);
  EXPECT_EQ(counts.sums_back, 0);
  EXPECT_GT(counts.steps, 0);
  if (world_rank() == 0) expect_trains_alike(shared, threads);
}

TEST(AcrossProcessesRefused, APlanOfMoreEndpointsThanRanks) {
  try {
    MpiTransport::for_endpoints(world_size() + 1);
    ADD_FAILURE() << "a transport of more endpoints than ranks";
  } catch (const InputError& e) {
    EXPECT_NE(std::string(e.what()).find("ranks"), std::string::npos) << e.what();
  }
}

TEST(AcrossProcesses, CgdpsHostMemoryIsItsHostWorkersProcess) {
  // One machine of every rank: the workers' copies and the sum come and go
  // as messages to rank 0, which holds the host; a machine per rank: the
  // hosts' AllReduce alone. Both train as on threads, and as dp-ring.
  for (const int per_machine : {world_size(), 1}) {
    SCOPED_TRACE("workers per machine: " + std::to_string(per_machine));
    const Plan plan = plan_for("cgdp", {{"chunk_size", "1"}}, per_machine);
    ExecResult alone, ring;
    if (world_rank() == 0) {
      alone = run(plan, false);
      ring = run(plan_for("dp-ring"), false);
    }
    const ExecResult shared = run(plan, true);
    if (world_rank() != 0) continue;
    expect_trains_alike(shared, alone);
    expect_trains_alike(shared, ring);
  }
}

TEST(AcrossProcesses, ParallaxsServersAreInTheirMachinesFirstWorkers) {
  // text-bag: one machine of every rank (the workers' copies to rank 0's
  // host and the values back come as messages), and a machine per rank
  // (each owning a third of the table's rows and of the dense variables:
  // pushes and pulls between machines, from the workers or summed on the
  // hosts). Each trains as on threads.
  for (const int per_machine : {world_size(), 1}) {
    for (const auto& [mode, aggregation] : std::vector<std::pair<std::string, std::string>>{
             {"hybrid", "true"}, {"hybrid", "false"}, {"ps", "true"}, {"ps", "false"}}) {
      SCOPED_TRACE(mode + ", local_aggregation=" + aggregation + ", workers per machine: " +
                   std::to_string(per_machine));
      const Plan plan = plan_for("parallax", {{"mode", mode}, {"local_aggregation", aggregation}}, per_machine,
                                 "text-bag");
      ASSERT_FALSE(plan.servers.empty());
      ExecResult alone;
      if (world_rank() == 0) alone = run(plan, false, false, nullptr, 0, true);
      const ExecResult shared = run(plan, true, false, nullptr, 0, true);
      if (world_rank() != 0) continue;
      expect_trains_alike(shared, alone);
    }
  }
}

TEST(AcrossProcesses, ParallaxsServersSpreadOverProcessesResumeAsOnThreads) {
  // A checkpoint gathers each served variable's shares from the processes
  // of its machines' servers into rank 0, and sends every server's process
  // the whole back: a second stretch resumed from it trains as the same two
  // stretches on rank 0's threads.
  for (const std::string mode : {"ps", "hybrid"}) {
    SCOPED_TRACE(mode);
    const Plan plan = plan_for("parallax", {{"mode", mode}}, 1, "text-bag");
    ASSERT_FALSE(plan.servers.empty());
    ExecResult first_alone, second_alone;
    if (world_rank() == 0) {
      first_alone = run(plan, false, true, nullptr, 0, true);
      second_alone = run(plan, false, true, &first_alone.state, 4, true);
    }
    const ExecResult first = run(plan, true, true, nullptr, 0, true);
    const ExecResult second = run(plan, true, true, &first.state, 4, true);
    if (world_rank() != 0) continue;
    ASSERT_EQ(first.state.endpoints.size(), first_alone.state.endpoints.size());
    for (size_t e = plan.workers.size(); e < first.state.endpoints.size(); ++e) {
      EXPECT_LE(largest_weight_gap(first.state.endpoints[e].weights, first_alone.state.endpoints[e].weights), 1e-5)
          << "served variable " << e - plan.workers.size();
      EXPECT_LE(largest_weight_gap(first.state.endpoints[e].velocity, first_alone.state.endpoints[e].velocity), 1e-5)
          << "served variable " << e - plan.workers.size();
    }
    expect_trains_alike(second, second_alone);
  }
}

}  // namespace
}  // namespace trainsim
