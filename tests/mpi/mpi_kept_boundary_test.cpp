// Boundaries passed between the ranks' devices without the hosts
// (Transport::pass_kept, take_kept), as NCCL's send and receive pass them
// between the ranks' GPUs: here a member whose messages, like NCCL's, carry
// no tags (each rank's n-th send to a rank meets that rank's n-th receive
// from it), over the CPU stand-in's store. The transport keeps each
// sender's order, whatever order the receiver takes them in, and pipelines
// across the ranks train as on the CPU's threads with no boundary brought
// to a host.
#include <gtest/gtest.h>
#include <mpi.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <list>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "exec/mpi/mpi_transport.hpp"
#include "exec/tensor/range_network.hpp"
#include "tests/exec/buffered_cpu_network.hpp"
#include "tests/exec/plan_counts.hpp"
#include "tests/mpi/mpi_runs.hpp"

namespace trainsim {
namespace {

using buffered::BufferCounts;
using buffered::CountingStore;
using buffered::kept_values;
using mpi_runs::world_rank;
using mpi_runs::world_size;

// A member passing kept arrays over MPI on a communicator of its own, every
// message with one tag, so a receive takes the sender's next message
// whichever array the transport meant: a receive out of the sender's order
// gets another array (of another size: the test fails). The library
// AllReduce is MPI's on the host.
class UntaggedPassingMember final : public LibraryMember {
 public:
  UntaggedPassingMember() { MPI_Comm_dup(MPI_COMM_WORLD, &comm_); }
  ~UntaggedPassingMember() override {
    for (auto& [request, buffer] : in_flight_) MPI_Wait(&request, MPI_STATUS_IGNORE);
    MPI_Comm_free(&comm_);
  }

  bool all_reduce(std::span<float> data, const Share&, const std::function<bool()>&) override {
    MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(data.size()), MPI_FLOAT, MPI_SUM, comm_);
    return true;
  }
  bool passes_kept() const override { return true; }
  // As NCCL's member: those not opened before, together on every rank (a
  // rank finding others new than rank 0 would wait here alone).
  bool open_paths(std::span<const std::pair<int, int>> directions, const Share& share,
                  const std::function<bool()>&) override {
    const std::vector<std::pair<int, int>> fresh = paths_.fresh(directions);
    if (fresh.empty()) return true;
    std::string mine;
    for (const auto& [from, to] : fresh) mine += std::to_string(from) + ">" + std::to_string(to) + " ";
    EXPECT_EQ(share(mine), mine) << "rank " << world_rank() << " opened other paths than rank 0";
    opened.insert(opened.end(), fresh.begin(), fresh.end());
    return true;
  }
  bool send_kept(int to, KeptValues& values, int64_t floats, const std::function<bool()>&) override {
    const std::vector<float>& data = kept_values(values).data;
    EXPECT_EQ(static_cast<int64_t>(data.size()), floats);
    auto& [request, buffer] = in_flight_.emplace_back(MPI_REQUEST_NULL, data);
    MPI_Isend(buffer.data(), static_cast<int>(buffer.size()), MPI_FLOAT, to, 0, comm_, &request);
    ++sends;
    return true;
  }
  bool recv_kept(int from, KeptValues& into, int64_t floats, const std::function<bool()>&) override {
    MPI_Status status;
    MPI_Probe(from, 0, comm_, &status);
    int count = 0;
    MPI_Get_count(&status, MPI_FLOAT, &count);
    EXPECT_EQ(count, floats) << "a receive met another array than its own: out of the sender's order";
    std::vector<float> data(static_cast<size_t>(count));
    MPI_Recv(data.data(), count, MPI_FLOAT, from, 0, comm_, MPI_STATUS_IGNORE);
    data.resize(static_cast<size_t>(floats));
    kept_values(into).data = std::move(data);
    ++receives;
    return true;
  }

  std::vector<std::pair<int, int>> opened;
  int64_t sends = 0;
  int64_t receives = 0;

 private:
  MPI_Comm comm_ = MPI_COMM_NULL;
  OpenedPaths paths_;
  std::list<std::pair<MPI_Request, std::vector<float>>> in_flight_;
};

// Rank 0 passes arrays of 3, 5 and 7 values (tags 10, 11, 12) to rank 1,
// which takes the last first: each arrives whole under its own tag.
TEST(MpiTransportKept, ArraysArriveUnderTheirTagsInWhateverOrderTheyAreTaken) {
  ASSERT_GE(world_size(), 2);
  auto member = std::make_shared<UntaggedPassingMember>();
  BufferCounts counts;
  auto store = std::make_shared<CountingStore>(counts, /*memory=*/0);
  int64_t made = 0;
  {
    MpiTransport t;
    EXPECT_FALSE(t.passes_kept(0, 1));
    t.sum_library_by(member);
    EXPECT_TRUE(t.passes_kept(0, 1));
    t.open_kept_paths({{0, 1}});
    EXPECT_EQ(member->opened, (std::vector<std::pair<int, int>>{{0, 1}}));
    const std::vector<int64_t> tags = {10, 11, 12};
    if (world_rank() == 0) {
      for (size_t k = 0; k < tags.size(); ++k) {
        std::vector<float> values(3 + 2 * k);
        for (size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(tags[k] * 100 + i);
        const ExportedBoundary array{store, store->from_host(values), 0};
        t.pass_kept(0, 1, tags[k], array, static_cast<int64_t>(values.size()));
      }
      // The bytes counted; the messages are the caller's (the op's own, sent with the tag).
      EXPECT_EQ(t.traffic().pair_bytes[0][1], (3 + 5 + 7) * 4);
      EXPECT_EQ(t.traffic().pair_messages[0][1], 0);
    } else if (world_rank() == 1) {
      const MakeKept make = [&](int64_t floats) {
        ++made;
        return std::make_shared<ExportedBoundary>(ExportedBoundary{store, store->uninitialized(floats), 0});
      };
      for (const size_t k : {2, 0, 1}) {
        const PassedKept passed = t.take_kept(1, 0, tags[k], make);
        ASSERT_NE(passed.array, nullptr);
        EXPECT_EQ(passed.floats, static_cast<int64_t>(3 + 2 * k));
        const std::vector<float>& got = kept_values(*passed.array->values).data;
        ASSERT_EQ(static_cast<int64_t>(got.size()), passed.floats);
        for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], static_cast<float>(tags[k] * 100 + i)) << k;
      }
      EXPECT_EQ(made, 3);  // all three received while the first take waited for tag 12
      EXPECT_EQ(member->receives, 3);
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

TEST(MpiTransportKept, WithoutAMemberThatPassesArraysNothingIsPassed) {
  MpiTransport t;
  EXPECT_FALSE(t.passes_kept(0, 1));
  t.open_kept_paths({{0, 1}});  // a no-op: no collective to wait in
  BufferCounts counts;
  auto store = std::make_shared<CountingStore>(counts, 0);
  const ExportedBoundary array{store, store->zeros(2), 0};
  if (world_rank() == 0) {
    EXPECT_THROW(t.pass_kept(0, 1, 5, array, 2), std::logic_error);
  }
  MPI_Barrier(MPI_COMM_WORLD);
}

// Pipelines across the ranks on lending devices of GPU-like memory, each
// rank's own, with the member passing their boundaries: the same losses
// and weights as the CPU's threads; every boundary a rank sends goes into
// an array of its store and through the member, none to the host, and
// every one it receives is read from the array it came into; the traffic
// counted is that of the run through the hosts; each rank's compute ops'
// work, timed by its device, comes to rank 0 within the ops.
TEST(AcrossProcesses, BoundariesPassBetweenTheRanksDevicesWithoutTheHosts) {
  for (const std::string strategy : {"gpipe", "1f1b", "pipedream"}) {
    SCOPED_TRACE(strategy);
    const Plan plan = mpi_runs::plan_for(strategy);
    ExecResult threads;
    if (world_rank() == 0) threads = mpi_runs::run(plan, false);
    auto member = std::make_shared<UntaggedPassingMember>();
    BufferCounts counts;
    const ExecResult shared =
        mpi_runs::run(plan, true, false, nullptr, 0, false, mpi_runs::lending_devices(counts), member, true);
    int64_t sent = 0, received = 0;
    std::vector<std::pair<int, int>> directions;
    for (const Op& op : plan.ops) {
      if (op.kind == OpKind::kSend && buffered::carries_boundary(op)) {
        sent += op.worker == world_rank();
        received += op.peer == world_rank();
        if (std::find(directions.begin(), directions.end(), std::pair{op.worker, op.peer}) == directions.end()) {
          directions.emplace_back(op.worker, op.peer);
        }
      }
    }
    ASSERT_GT(sent + received, 0);
    EXPECT_EQ(member->opened, directions);
    EXPECT_EQ(member->sends, sent);
    EXPECT_EQ(member->receives, received);
    EXPECT_EQ(counts.downloads, 0);
    EXPECT_EQ(counts.exports, sent);
    EXPECT_GE(counts.imports, received);
    BufferCounts host_counts;
    const ExecResult through_hosts =
        mpi_runs::run(plan, true, false, nullptr, 0, false, mpi_runs::lending_devices(host_counts));
    EXPECT_EQ(host_counts.downloads, sent);  // without the member, each went down to its sender's host
    if (world_rank() != 0) continue;
    mpi_runs::expect_trains_alike(shared, threads);
    // Each boundary counted once, its bytes as the host's message carried them.
    EXPECT_EQ(shared.traffic.pair_bytes, threads.traffic.pair_bytes);
    EXPECT_EQ(shared.traffic.pair_messages, through_hosts.traffic.pair_messages);
    for (size_t id = 0; id < plan.ops.size(); ++id) {
      const ExecOpTiming& t = shared.timings[id];
      if (plan.ops[id].kind != OpKind::kForward && plan.ops[id].kind != OpKind::kBackward) continue;
      ASSERT_FALSE(std::isnan(t.device_start_s) || std::isnan(t.device_end_s)) << "worker " << plan.ops[id].worker;
      EXPECT_LE(t.start_s, t.device_start_s + 1e-6);
      EXPECT_LE(t.device_end_s, t.end_s + 1e-6);
    }
  }
}

// A run's stretches between checkpoints each make a transport over one
// member: the second opens no path again, on any rank, and resumes as the
// threads' run does.
TEST(AcrossProcesses, ASecondStretchOpensNoPathAgain) {
  const Plan plan = mpi_runs::plan_for("1f1b");
  ExecResult first_alone, second_alone;
  if (world_rank() == 0) {
    first_alone = mpi_runs::run(plan, false, true);
    second_alone = mpi_runs::run(plan, false, true, &first_alone.state, 4);
  }
  auto member = std::make_shared<UntaggedPassingMember>();
  BufferCounts counts;
  const ExecResult first =
      mpi_runs::run(plan, true, true, nullptr, 0, false, mpi_runs::lending_devices(counts), member);
  const std::vector<std::pair<int, int>> opened = member->opened;
  const int64_t sends = member->sends;
  const ExecResult second =
      mpi_runs::run(plan, true, true, &first.state, 4, false, mpi_runs::lending_devices(counts), member);
  EXPECT_FALSE(opened.empty());
  EXPECT_EQ(member->opened, opened);
  EXPECT_EQ(member->sends, 2 * sends);
  if (world_rank() == 0) mpi_runs::expect_trains_alike(second, second_alone);
}

}  // namespace
}  // namespace trainsim
