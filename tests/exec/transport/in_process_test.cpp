// InProcessTransport: matching by (sender, tag) in any arrival order, FIFO
// within one (sender, tag), blocking receives, abort and timeout wake-ups,
// run_workers' failure handling, and the per-pair traffic counters.
#include "exec/transport/in_process.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <stdexcept>
#include <thread>

namespace trainsim {
namespace {

using std::chrono::milliseconds;

TEST(InProcessTransport, MatchesMessagesBySenderAndTagInAnyArrivalOrder) {
  InProcessTransport transport(3);
  transport.send(0, 2, 5, {1.0f});
  transport.send(0, 2, 7, {2.0f});
  transport.send(1, 2, 5, {3.0f});
  // Received in an order unlike the sending one; each gets its own payload.
  EXPECT_EQ(transport.recv(2, 1, 5), std::vector<float>{3.0f});
  EXPECT_EQ(transport.recv(2, 0, 7), std::vector<float>{2.0f});
  EXPECT_EQ(transport.recv(2, 0, 5), std::vector<float>{1.0f});
}

TEST(InProcessTransport, KeepsSendingOrderWithinOneSenderAndTag) {
  InProcessTransport transport(2);
  for (int i = 0; i < 4; ++i) transport.send(0, 1, 9, {static_cast<float>(i)});
  for (int i = 0; i < 4; ++i) EXPECT_EQ(transport.recv(1, 0, 9), std::vector<float>{static_cast<float>(i)});
}

TEST(InProcessTransport, RecvWaitsUntilTheMessageArrives) {
  InProcessTransport transport(2);
  std::vector<float> received;
  std::thread receiver([&] { received = transport.recv(1, 0, 3); });
  std::this_thread::sleep_for(milliseconds(20));
  transport.send(0, 1, 4, {9.0f});  // another tag: must not wake it with the wrong message
  transport.send(0, 1, 3, {1.5f, 2.5f});
  receiver.join();
  EXPECT_EQ(received, (std::vector<float>{1.5f, 2.5f}));
}

TEST(InProcessTransport, AbortWakesEveryWaiterWithTheReason) {
  InProcessTransport transport(4);
  std::vector<std::string> errors(3);
  std::vector<std::thread> waiters;
  for (int w = 1; w <= 3; ++w) {
    waiters.emplace_back([&, w] {
      try {
        transport.recv(w, 0, 1);  // never sent
      } catch (const TransportAborted& error) {
        errors[static_cast<size_t>(w - 1)] = error.what();
      }
    });
  }
  std::this_thread::sleep_for(milliseconds(20));
  transport.abort("worker 0 ran out of memory");
  for (auto& waiter : waiters) waiter.join();
  for (const std::string& error : errors)
    EXPECT_NE(error.find("worker 0 ran out of memory"), std::string::npos) << error;
  EXPECT_TRUE(transport.aborted());
  EXPECT_THROW(transport.send(0, 1, 1, {}), TransportAborted);
  EXPECT_THROW(transport.recv(1, 0, 1), TransportAborted);
}

TEST(InProcessTransport, RecvTimeoutAbortsInsteadOfHanging) {
  InProcessTransport transport(2, 0.05);
  try {
    transport.recv(1, 0, 42);
    FAIL() << "recv returned without a message";
  } catch (const TransportAborted& error) {
    EXPECT_NE(std::string(error.what()).find("worker 1 waited"), std::string::npos) << error.what();
    EXPECT_NE(std::string(error.what()).find("tag 42"), std::string::npos) << error.what();
  }
  EXPECT_TRUE(transport.aborted());
}

TEST(RunWorkers, RethrowsTheFirstFailureAndStopsTheWorkersWaitingOnIt) {
  InProcessTransport transport(3);
  try {
    run_workers(transport, 3, [&](int w) {
      if (w == 1) throw std::runtime_error("bad batch");
      transport.recv(w, 1, 0);  // worker 1 never sends: only the abort frees these
    });
    FAIL() << "run_workers returned normally";
  } catch (const TransportAborted&) {
    FAIL() << "rethrew the abort instead of the failure that caused it";
  } catch (const std::runtime_error& error) {
    EXPECT_STREQ(error.what(), "bad batch");
  }
}

TEST(RunWorkers, RunsEveryWorkerOnceWhenNoneFails) {
  InProcessTransport transport(4);
  std::vector<float> received(4, -1.0f);
  run_workers(transport, 4, [&](int w) {
    transport.send(w, (w + 1) % 4, 0, {static_cast<float>(w)});
    received[static_cast<size_t>(w)] = transport.recv(w, (w + 3) % 4, 0).at(0);
  });
  EXPECT_EQ(received, (std::vector<float>{3.0f, 0.0f, 1.0f, 2.0f}));
}

TEST(TransportTraffic, CountsPayloadBytesAndMessagesPerPair) {
  InProcessTransport transport(3);
  transport.send(0, 1, 0, std::vector<float>(10));
  transport.send(0, 1, 1, std::vector<float>(5));
  transport.send(2, 0, 0, {});
  const TrafficStats traffic = transport.traffic();
  EXPECT_EQ(traffic.pair_bytes[0][1], 60);  // (10 + 5) floats × 4 bytes
  EXPECT_EQ(traffic.pair_messages[0][1], 2);
  EXPECT_EQ(traffic.pair_bytes[2][0], 0);  // an empty message carries no bytes
  EXPECT_EQ(traffic.pair_messages[2][0], 1);
  EXPECT_EQ(traffic.sent_bytes(0), 60);
  EXPECT_EQ(traffic.received_bytes(1), 60);
  EXPECT_TRUE(traffic.collective_bytes.empty());
}

TEST(Transport, AWorkerOutsideTheTransportIsALogicError) {
  InProcessTransport transport(2);
  EXPECT_THROW(transport.send(0, 2, 0, {}), std::logic_error);
  EXPECT_THROW(transport.recv(-1, 0, 0), std::logic_error);
  std::vector<float> data(3);
  EXPECT_THROW(transport.all_reduce(0, {1}, 0, data, CollectiveAlgorithm::kRing), std::logic_error);
  EXPECT_THROW(transport.all_reduce(0, {0, 0}, 0, data, CollectiveAlgorithm::kRing), std::logic_error);
  EXPECT_THROW(transport.broadcast(0, {0, 1}, 5, 0, data), std::logic_error);
}

}  // namespace
}  // namespace trainsim
