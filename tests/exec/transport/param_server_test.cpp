// Parameter server over InProcessTransport: three worker threads and a
// server thread. Dense rounds sum every push before one update and answer
// every pull with the new weights; sparse pushes add repeated rows and pulls
// return just the rows asked for; a failing update stops the workers.
#include "exec/transport/param_server.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

#include "exec/transport/in_process.hpp"
#include "model/error.hpp"

namespace trainsim {
namespace {

constexpr int kWorkers = 3;
constexpr int kServer = 3;  // workers 0..2 push and pull; worker 3 serves
const std::vector<int> kPushers = {0, 1, 2};

// SGD with learning rate `lr`: weights[row] -= lr · gradient row.
ShardUpdateFn sgd(float lr, int* calls, std::vector<int64_t>* last_rows) {
  return [=](const ShardUpdate& update) {
    ++*calls;
    last_rows->assign(update.rows.begin(), update.rows.end());
    for (size_t i = 0; i < update.rows.size(); ++i) {
      for (int64_t k = 0; k < update.row_floats; ++k) {
        update.weights[static_cast<size_t>(update.rows[i] * update.row_floats + k)] -=
            lr * update.gradient[i * static_cast<size_t>(update.row_floats) + static_cast<size_t>(k)];
      }
    }
  };
}

TEST(ParamServer, DenseRoundSumsEveryPushThenAnswersEveryPullWithTheUpdate) {
  const ShardShape shape{2, 2, false};
  InProcessTransport transport(kWorkers + 1, 30.0);
  int calls = 0;
  std::vector<int64_t> rows;
  ParamServerShard shard(transport, kServer, kPushers, shape, {1, 2, 3, 4}, sgd(0.5f, &calls, &rows));
  std::vector<std::vector<float>> pulled(kWorkers * 2);
  run_workers(transport, kWorkers + 1, [&](int w) {
    if (w == kServer) {
      shard.serve_round(0);
      shard.serve_round(1);
      return;
    }
    ParamServerClient client(transport, w, kServer, shape);
    const auto k = static_cast<float>(w + 1);
    client.push(0, std::vector<float>{k, k, k, k});
    pulled[static_cast<size_t>(w)] = client.pull(0);
    client.push(1, std::vector<float>{static_cast<float>(w), 0, 0, 0});
    pulled[static_cast<size_t>(kWorkers + w)] = client.pull(1);
  });
  // Round 0: gradients 1+2+3 = 6 everywhere, w = {1,2,3,4} - 0.5·6 = {-2,-1,0,1}.
  // Round 1: first value 0+1+2 = 3, w[0] = -2 - 0.5·3 = -3.5.
  for (int w = 0; w < kWorkers; ++w) {
    EXPECT_EQ(pulled[static_cast<size_t>(w)], (std::vector<float>{-2, -1, 0, 1})) << "worker " << w;
    EXPECT_EQ(pulled[static_cast<size_t>(kWorkers + w)], (std::vector<float>{-3.5f, -1, 0, 1})) << "worker " << w;
  }
  EXPECT_EQ(shard.weights(), (std::vector<float>{-3.5f, -1, 0, 1}));
  EXPECT_EQ(calls, 2);                            // one update per round, not one per push
  EXPECT_EQ(rows, (std::vector<int64_t>{0, 1}));  // a dense shard updates every row
  // Per round each worker sends its 4 values and gets 4 back: 2 rounds × 16 bytes.
  const TrafficStats traffic = transport.traffic();
  for (int w = 0; w < kWorkers; ++w) {
    EXPECT_EQ(traffic.pair_bytes[static_cast<size_t>(w)][kServer], 32);
    EXPECT_EQ(traffic.pair_bytes[kServer][static_cast<size_t>(w)], 32);
  }
}

TEST(ParamServer, SparsePushesAddRepeatedRowsAndPullsReturnTheRowsAsked) {
  const ShardShape shape{4, 2, true};
  InProcessTransport transport(kWorkers + 1, 30.0);
  int calls = 0;
  std::vector<int64_t> updated_rows;
  ParamServerShard shard(transport, kServer, kPushers, shape, std::vector<float>(8, 0.0f),
                         sgd(1.0f, &calls, &updated_rows));
  std::vector<std::vector<float>> pulled(kWorkers);
  run_workers(transport, kWorkers + 1, [&](int w) {
    if (w == kServer) return shard.serve_round(5);
    ParamServerClient client(transport, w, kServer, shape);
    if (w == 0) {
      client.push_rows(5, std::vector<int64_t>{2, 0, 2}, std::vector<float>{1, 1, 10, 10, 100, 100});
      pulled[0] = client.pull_rows(5, std::vector<int64_t>{1, 2});
    } else if (w == 1) {
      client.push_rows(5, std::vector<int64_t>{3}, std::vector<float>{1000, 1000});
      pulled[1] = client.pull_rows(5, std::vector<int64_t>{3});
    } else {
      client.push_rows(5, {}, {});  // touched nothing this round
      pulled[2] = client.pull_rows(5, {});
    }
  });
  // Summed: row 0 ← 10, row 2 ← 1 + 100 = 101, row 3 ← 1000; row 1 untouched.
  // SGD with lr 1 from zero weights: row r = -sum.
  EXPECT_EQ(updated_rows, (std::vector<int64_t>{0, 2, 3}));
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(shard.weights(), (std::vector<float>{-10, -10, 0, 0, -101, -101, -1000, -1000}));
  EXPECT_EQ(pulled[0], (std::vector<float>{0, 0, -101, -101}));
  EXPECT_EQ(pulled[1], (std::vector<float>{-1000, -1000}));
  EXPECT_TRUE(pulled[2].empty());
  // Worker 0 sent 3 row indices (8 bytes each) + 6 values (4 bytes) = 48
  // bytes of push, plus 2 indices = 16 bytes of pull request; it got 4 values.
  const TrafficStats traffic = transport.traffic();
  EXPECT_EQ(traffic.pair_bytes[0][kServer], 64);
  EXPECT_EQ(traffic.pair_bytes[kServer][0], 16);
}

TEST(ParamServer, EachSparseRoundSumsOnlyItsOwnPushes) {
  // Round 1: rows 3 and 1 (worker 0 pushes row 3 twice); round 2: rows 1
  // and 0. Round 2's sums start from zero: row 1 gets 5 there, not 2 + 5.
  const ShardShape shape{4, 1, true};
  InProcessTransport transport(kWorkers + 1, 30.0);
  int calls = 0;
  std::vector<int64_t> updated_rows;
  ParamServerShard shard(transport, kServer, kPushers, shape, std::vector<float>(4, 0.0f),
                         sgd(1.0f, &calls, &updated_rows));
  std::vector<std::vector<int64_t>> rows_per_round;
  run_workers(transport, kWorkers + 1, [&](int w) {
    if (w == kServer) {
      shard.serve_round(1);
      rows_per_round.push_back(updated_rows);
      shard.serve_round(2);
      rows_per_round.push_back(updated_rows);
      return;
    }
    ParamServerClient client(transport, w, kServer, shape);
    const bool first = w == 0;
    client.push_rows(1, first ? std::vector<int64_t>{3, 3} : std::vector<int64_t>{1},
                     first ? std::vector<float>{10, 20} : std::vector<float>{1});
    client.pull_rows(1, {});
    client.push_rows(2, first ? std::vector<int64_t>{1} : std::vector<int64_t>{0},
                     first ? std::vector<float>{5} : std::vector<float>{100});
    client.pull_rows(2, {});
  });
  EXPECT_EQ(calls, 2);
  EXPECT_EQ(rows_per_round, (std::vector<std::vector<int64_t>>{{1, 3}, {0, 1}}));
  // Row 1: 1 + 1 (workers 1 and 2) in round 1, 5 in round 2; row 3: 30; row 0: 2 · 100.
  EXPECT_EQ(shard.weights(), (std::vector<float>{-200, -7, 0, -30}));
}

TEST(ParamServer, AFailingUpdateStopsTheWorkersWaitingToPull) {
  const ShardShape shape{1, 3, false};
  InProcessTransport transport(kWorkers + 1);
  ParamServerShard shard(transport, kServer, kPushers, shape, {0, 0, 0},
                         [](const ShardUpdate&) { throw std::runtime_error("update diverged"); });
  EXPECT_THROW(
      {
        run_workers(transport, kWorkers + 1, [&](int w) {
          if (w == kServer) return shard.serve_round(0);
          ParamServerClient client(transport, w, kServer, shape);
          client.push(0, std::vector<float>{1, 2, 3});
          client.pull(0);
        });
      },
      std::runtime_error);
  EXPECT_TRUE(transport.aborted());
}

TEST(ParamServer, APushOfTheWrongSizeIsALogicError) {
  InProcessTransport transport(2);
  ParamServerClient dense(transport, 0, 1, ShardShape{2, 3, false});
  EXPECT_THROW(dense.push(0, std::vector<float>(5)), std::logic_error);
  EXPECT_THROW(dense.push_rows(0, std::vector<int64_t>{0}, std::vector<float>(3)), std::logic_error);
  ParamServerClient sparse(transport, 0, 1, ShardShape{2, 3, true});
  EXPECT_THROW(sparse.push_rows(0, std::vector<int64_t>{0}, std::vector<float>(2)), std::logic_error);
  EXPECT_THROW(sparse.push_rows(0, std::vector<int64_t>{2}, std::vector<float>(3)), std::logic_error);  // row 2 of 0..1
}

}  // namespace
}  // namespace trainsim
