// MpiTransport across processes (run under mpirun with 3 ranks, tests/CMakeLists.txt):
// messages matched by pair and tag in order, several threads of a rank at
// once, the project's collectives giving the in-process transport's bits,
// broadcast and barrier, the traffic counted, a library AllReduce summed by
// a member given to it, and what a rank may not do.
#include "exec/mpi/mpi_transport.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <memory>
#include <numeric>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

#include "exec/transport/in_process.hpp"

namespace trainsim {
namespace {

const CollectiveAlgorithm kAlgorithms[] = {CollectiveAlgorithm::kRing, CollectiveAlgorithm::kRecursiveDoubling,
                                           CollectiveAlgorithm::kRabenseifner, CollectiveAlgorithm::kBinomialTree};

std::vector<int> world(int p) {
  std::vector<int> group(static_cast<size_t>(p));
  std::iota(group.begin(), group.end(), 0);
  return group;
}

// Rank w's vector: values in [-1, 1) from the engine's top 24 bits.
std::vector<float> values_of(int w, int64_t n) {
  std::mt19937_64 engine(1000 + static_cast<uint64_t>(w));
  std::vector<float> values(static_cast<size_t>(n));
  for (float& v : values) v = static_cast<float>(engine() >> 40) * 0x1p-23f - 1.0f;
  return values;
}

TEST(MpiTransport, MessagesMatchByPairAndTagInTheOrderSent) {
  MpiTransport t;
  const int p = t.workers(), me = t.rank();
  ASSERT_GE(p, 2) << "run under mpirun with at least 2 ranks";
  const int next = (me + 1) % p, previous = (me + p - 1) % p;
  // Tags 1 and 2 interleaved; the receiver takes tag 2's first.
  t.send(me, next, 1, {1.0f, static_cast<float>(me)});
  t.send(me, next, 2, {2.0f});
  t.send(me, next, 1, {3.0f});
  t.send(me, next, 2, {});
  EXPECT_EQ(t.recv(me, previous, 2), (std::vector<float>{2.0f}));
  EXPECT_EQ(t.recv(me, previous, 2), std::vector<float>{});
  EXPECT_EQ(t.recv(me, previous, 1), (std::vector<float>{1.0f, static_cast<float>(previous)}));
  EXPECT_EQ(t.recv(me, previous, 1), (std::vector<float>{3.0f}));
  const TrafficStats traffic = t.traffic();
  EXPECT_EQ(traffic.pair_messages[static_cast<size_t>(me)][static_cast<size_t>(next)], 4);
  EXPECT_EQ(traffic.pair_bytes[static_cast<size_t>(me)][static_cast<size_t>(next)], 4 * 4);
}

TEST(MpiTransport, ThreadsOfARankSendAndReceiveAtOnce) {
  // Each rank's two threads exchange with both neighbours under their own
  // tags, 200 messages each way, as a worker's send and receive streams do.
  MpiTransport t;
  const int p = t.workers(), me = t.rank();
  const int next = (me + 1) % p, previous = (me + p - 1) % p;
  constexpr int kMessages = 200;
  std::vector<float> forward_sum(1, 0.0f), backward_sum(1, 0.0f);
  std::thread forward([&] {
    for (int k = 0; k < kMessages; ++k) {
      t.send(me, next, 10, {static_cast<float>(k)});
      forward_sum[0] += t.recv(me, previous, 10).at(0);
    }
  });
  std::thread backward([&] {
    for (int k = 0; k < kMessages; ++k) {
      t.send(me, previous, 11, {static_cast<float>(2 * k)});
      backward_sum[0] += t.recv(me, next, 11).at(0);
    }
  });
  forward.join();
  backward.join();
  EXPECT_EQ(forward_sum[0], kMessages * (kMessages - 1) / 2);
  EXPECT_EQ(backward_sum[0], kMessages * (kMessages - 1));
}

TEST(MpiTransport, EveryAllReduceGivesTheInProcessTransportsBits) {
  MpiTransport t;
  const int p = t.workers(), me = t.rank();
  const std::vector<int> group = world(p);
  for (const int64_t n : {int64_t{1}, int64_t{7}, int64_t{1000}, int64_t{100003}}) {
    for (CollectiveAlgorithm algorithm : kAlgorithms) {
      // The same sums on p threads of one process.
      std::vector<std::vector<float>> expected(static_cast<size_t>(p));
      for (int w = 0; w < p; ++w) expected[static_cast<size_t>(w)] = values_of(w, n);
      InProcessTransport local(p, 30.0);
      run_workers(local, p, [&](int w) { local.all_reduce(w, group, 5, expected[static_cast<size_t>(w)], algorithm); });
      std::vector<float> mine = values_of(me, n);
      t.all_reduce(me, group, 5, mine, algorithm);
      EXPECT_EQ(mine, expected[static_cast<size_t>(me)]) << "n " << n << ", algorithm " << static_cast<int>(algorithm);
    }
  }
}

TEST(MpiTransport, AllReduceOverASubgroupLeavesTheOthersOut) {
  MpiTransport t;
  const int me = t.rank();
  const std::vector<int> pair{0, 1};
  if (me < 2) {
    std::vector<float> data{static_cast<float>(me + 1), 10.0f};
    t.all_reduce(me, pair, 9, data, CollectiveAlgorithm::kRing);
    EXPECT_EQ(data, (std::vector<float>{3.0f, 20.0f}));
  }
  t.barrier(me, world(t.workers()), 12);
}

TEST(MpiTransport, BroadcastCopiesTheRootsVectorAndBarrierGathersAll) {
  MpiTransport t;
  const int p = t.workers(), me = t.rank();
  const int root = p - 1;
  std::vector<float> data = me == root ? std::vector<float>{4.0f, 5.0f, 6.0f} : std::vector<float>(3, 0.0f);
  t.broadcast(me, world(p), root, 3, data);
  EXPECT_EQ(data, (std::vector<float>{4.0f, 5.0f, 6.0f}));
  t.barrier(me, world(p), 4);
  // Each process counts its own sends: the root's are the broadcast's first hops.
  if (me == root) {
    EXPECT_GT(t.traffic().collective_bytes.at(3).at(static_cast<size_t>(root)), 0);
  }
}

TEST(MpiTransport, TextFromRankZeroAndAValueFromEveryRank) {
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const std::string mine = rank == 0 ? std::string(100'000, 'x') + "end" : "rank " + std::to_string(rank);
  EXPECT_EQ(mpi_broadcast_text(mine), std::string(100'000, 'x') + "end");
  EXPECT_EQ(mpi_broadcast_text(rank == 0 ? "" : "ignored"), "");
  const std::vector<double> all = mpi_all_gather(0.5 + rank);
  ASSERT_EQ(all.size(), static_cast<size_t>(size));
  for (int r = 0; r < size; ++r) EXPECT_EQ(all[static_cast<size_t>(r)], 0.5 + r);
}

TEST(MpiTransport, ARankSendsAndReceivesAsItselfWithTagsMpiCarries) {
  MpiTransport t;
  const int p = t.workers(), me = t.rank();
  const int other = (me + 1) % p;
  EXPECT_THROW(t.send(other, me, 1, {1.0f}), std::logic_error);
  EXPECT_THROW((void)t.recv(other, me, 1), std::logic_error);
  EXPECT_THROW(t.send(me, other, t.max_tag() + 1, {1.0f}), std::logic_error);
  EXPECT_GE(t.max_tag(), 32767);
}

// A plan's send waits until its message has left the rank where the
// message goes eagerly over TCP, and never for its receiver: here each rank
// receives its neighbour's second message before the first (1 MB: a
// rendezvous over shared memory, eager in the run over TCP alone).
TEST(MpiTransport, ASendThatWaitsToLeaveNeverWaitsForItsReceiver) {
  MpiTransport t;
  const int p = t.workers(), me = t.rank();
  const int next = (me + 1) % p, previous = (me + p - 1) % p;
  const std::vector<float> big = values_of(me, 1 << 18);
  t.send(me, next, 5, big, SendReturns::kLeft);
  t.send(me, next, 6, {static_cast<float>(me)}, SendReturns::kLeft);
  EXPECT_EQ(t.recv(me, previous, 6), (std::vector<float>{static_cast<float>(previous)}));
  EXPECT_EQ(t.recv(me, previous, 5), values_of(previous, 1 << 18));
}

// Which messages Open MPI sends eagerly, from its settings.
TEST(MpiTransport, EagerMessagesAreThoseOfTcpAloneWithinItsLimit) {
  EXPECT_EQ(tcp_eager_bytes_of("tcp,self", nullptr, "1073741824"), int64_t{1} << 30);
  EXPECT_EQ(tcp_eager_bytes_of("self,tcp", "ob1", nullptr), 65536);  // Open MPI's default limit
  EXPECT_EQ(tcp_eager_bytes_of("vader,tcp,self", nullptr, "1073741824"), 0);  // shared memory between a host's ranks
  EXPECT_EQ(tcp_eager_bytes_of(nullptr, nullptr, "1073741824"), 0);           // whatever Open MPI picks
  EXPECT_EQ(tcp_eager_bytes_of("tcp,self", "ucx", "1073741824"), 0);
  // The socket buffer a send that waits to leave returns with: btl_tcp_sndbuf, where sends are eager over TCP.
  EXPECT_EQ(tcp_send_buffer_bytes_of(int64_t{1} << 30, "655360"), 655360);
  EXPECT_EQ(tcp_send_buffer_bytes_of(int64_t{1} << 30, nullptr), 0);  // Linux sizes it: unknown
  EXPECT_EQ(tcp_send_buffer_bytes_of(0, "655360"), 0);                // not eager over TCP
  EXPECT_EQ(tcp_send_buffer_bytes_of(65536, "0"), 0);                 // Open MPI's "the system's"
  EXPECT_EQ(tcp_eager_bytes_of("self", nullptr, nullptr), 0);
  EXPECT_EQ(tcp_eager_bytes_of("tcp,self", nullptr, "1g"), 0);
}

// Under ctest's mpi_transport_tcp (tcp and self alone, btl_tcp_sndbuf
// 262144) the sends leave into that buffer; on shared memory, none.
TEST(MpiTransport, ItsSendBufferIsTheTcpSocketsWhereSendsGoEagerlyOverTcp) {
  MpiTransport t;
  const char* btl = std::getenv("OMPI_MCA_btl");
  const bool tcp_alone = btl != nullptr && std::string(btl) == "tcp,self";
  const char* sndbuf = std::getenv("OMPI_MCA_btl_tcp_sndbuf");
  EXPECT_EQ(t.send_buffer_bytes(), tcp_alone && sndbuf != nullptr ? std::atoll(sndbuf) : 0)
      << (btl != nullptr ? btl : "btl unset");
}

// A member given to sum the library AllReduce in MPI's place (NCCL on the
// ranks' GPUs): it records its calls and what rank 0 shared, and gives 10x+1
// (no sum of the ranks' values).
class RecordingMember final : public LibraryMember {
 public:
  RecordingMember(int rank, int& calls, std::string& shared) : rank_(rank), calls_(calls), shared_(shared) {}
  bool all_reduce(std::span<float> data, const Share& share, const std::function<bool()>& aborted) override {
    ++calls_;
    shared_ = share("from rank " + std::to_string(rank_));
    if (aborted()) return false;
    for (float& v : data) v = 10.0f * v + 1.0f;
    return true;
  }

 private:
  int rank_;
  int& calls_;
  std::string& shared_;
};

TEST(MpiTransport, AGivenMemberSumsTheLibraryAllReduceWithRankZerosBytesShared) {
  MpiTransport t;
  const int p = t.workers(), me = t.rank();
  int calls = 0;
  std::string shared;
  const auto member = std::make_shared<RecordingMember>(me, calls, shared);
  {  // a transport before this one, the member serving it first (a run's earlier stretch)
    MpiTransport earlier;
    earlier.sum_library_by(member);
    std::vector<float> one{0.5f};
    earlier.all_reduce(me, world(p), 4, one, CollectiveAlgorithm::kLibrary);
    EXPECT_EQ(one, std::vector<float>{6.0f});
  }
  calls = 0;
  t.sum_library_by(member);
  std::vector<float> data{1.0f, -2.0f};
  t.all_reduce(me, world(p), 5, data, CollectiveAlgorithm::kLibrary);
  EXPECT_EQ(data, (std::vector<float>{11.0f, -19.0f}));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(shared, "from rank 0");
  // The project's algorithms stay the transport's own.
  std::vector<float> ring(3, static_cast<float>(me));
  t.all_reduce(me, world(p), 6, ring, CollectiveAlgorithm::kRing);
  EXPECT_EQ(ring, std::vector<float>(3, static_cast<float>(p * (p - 1) / 2)));
  EXPECT_EQ(calls, 1);
  // A member that gives up (the transport aborted) fails the AllReduce.
  t.abort("test");
  EXPECT_THROW(t.all_reduce(me, world(p), 7, data, CollectiveAlgorithm::kLibrary), TransportAborted);
  EXPECT_EQ(calls, 2);
}

TEST(MpiTransport, AnAbortWakesAWaitingReceive) {
  MpiTransport t;
  const int me = t.rank();
  std::thread waiter([&] {
    EXPECT_THROW((void)t.recv(me, (me + 1) % t.workers(), 77), TransportAborted);  // never sent
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  t.abort("test");
  waiter.join();
  EXPECT_TRUE(t.aborted());
  EXPECT_THROW(t.send(me, (me + 1) % t.workers(), 1, {}), TransportAborted);
}

// A rank whose run failed lets its transport go without waiting for ever
// on a send its peer will never receive: rank 1's 4 MB message to rank 0
// (a rendezvous over shared memory; eager, and done at once, over TCP
// alone) stays unreceived, and once rank 1 aborts, its transport's end
// takes a bounded wait, not rank 0's receive.
TEST(MpiTransport, AnAbortedTransportsEndDoesNotWaitForUnreceivedSends) {
  const auto started = std::chrono::steady_clock::now();
  {
    MpiTransport t;
    if (t.rank() == 1) {
      t.send(1, 0, 99, std::vector<float>(1 << 20, 1.0f));
      t.abort("test");
    }
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  EXPECT_LT(seconds, 30.0);
}

}  // namespace
}  // namespace trainsim

// Every rank runs every test, in the same order (each makes its transport
// collectively); MPI around them. A failure on any rank fails mpirun.
int main(int argc, char** argv) {
  trainsim::MpiSession mpi(&argc, &argv);
  testing::InitGoogleTest(&argc, argv);
  return RUN_ALL_TESTS();
}
