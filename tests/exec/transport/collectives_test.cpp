// The collectives run over InProcessTransport with 1..6 worker threads: exact
// sums of small integers, identical bits on every member and closeness to a
// serial sum on random data of odd sizes, several tags in flight at once,
// broadcast, barrier, and the bytes each algorithm sends (docs/equations.md §2).
#include "exec/transport/collectives.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>

#include "exec/transport/in_process.hpp"

namespace trainsim {
namespace {

const CollectiveAlgorithm kAlgorithms[] = {CollectiveAlgorithm::kRing, CollectiveAlgorithm::kRecursiveDoubling,
                                           CollectiveAlgorithm::kRabenseifner, CollectiveAlgorithm::kBinomialTree};

std::vector<int> iota_group(int p) {
  std::vector<int> group(static_cast<size_t>(p));
  for (int w = 0; w < p; ++w) group[static_cast<size_t>(w)] = w;
  return group;
}

// Values in [-1, 1) from the engine's top 24 bits, the same on every library.
std::vector<float> random_values(uint64_t seed, int64_t n) {
  std::mt19937_64 engine(seed);
  std::vector<float> values(static_cast<size_t>(n));
  for (float& v : values) v = static_cast<float>(engine() >> 40) * 0x1p-23f - 1.0f;
  return values;
}

// Runs one AllReduce on p threads; data[w] is worker w's vector, summed in place.
void run_all_reduce(std::vector<std::vector<float>>& data, CollectiveAlgorithm algorithm,
                    TrafficStats* traffic = nullptr) {
  const int p = static_cast<int>(data.size());
  InProcessTransport transport(p, 30.0);
  const std::vector<int> group = iota_group(p);
  run_workers(transport, p, [&](int w) { transport.all_reduce(w, group, 7, data[static_cast<size_t>(w)], algorithm); });
  if (traffic != nullptr) *traffic = transport.traffic();
}

TEST(EvenChunk, SplitsAsEvenlyAsPossibleWithTheFirstPartsLarger) {
  // 7 = 3 + 2 + 2: the first 7 mod 3 = 1 part holds one more.
  EXPECT_EQ(even_chunk(7, 3, 0).offset, 0);
  EXPECT_EQ(even_chunk(7, 3, 0).count, 3);
  EXPECT_EQ(even_chunk(7, 3, 1).offset, 3);
  EXPECT_EQ(even_chunk(7, 3, 1).count, 2);
  EXPECT_EQ(even_chunk(7, 3, 2).offset, 5);
  EXPECT_EQ(even_chunk(7, 3, 2).count, 2);
  // 2 values in 4 parts: 1, 1, 0, 0, the empty ones at the end.
  EXPECT_EQ(even_chunk(2, 4, 1).count, 1);
  EXPECT_EQ(even_chunk(2, 4, 3).offset, 2);
  EXPECT_EQ(even_chunk(2, 4, 3).count, 0);
}

TEST(AllReduce, EveryAlgorithmSumsSmallIntegersExactly) {
  for (CollectiveAlgorithm algorithm : kAlgorithms) {
    // Worker w holds (w+1)·{1, 10, 100, 1000, -2}; over 3 workers 1 + 2 + 3 = 6,
    // so the sum is {6, 60, 600, 6000, -12}, exact in float32.
    std::vector<std::vector<float>> data;
    for (int w = 0; w < 3; ++w) {
      const auto k = static_cast<float>(w + 1);
      data.push_back({k, 10 * k, 100 * k, 1000 * k, -2 * k});
    }
    run_all_reduce(data, algorithm);
    for (const auto& result : data) {
      EXPECT_EQ(result, (std::vector<float>{6, 60, 600, 6000, -12})) << collective_algorithm_name(algorithm);
    }
  }
}

TEST(AllReduce, MembersGetIdenticalBitsWithinRoundingOfTheSerialSum) {
  const int64_t sizes[] = {0, 1, 2, 5, 7, 64, 1001};  // odd ones, and fewer values than workers
  for (CollectiveAlgorithm algorithm : kAlgorithms) {
    for (int p = 1; p <= 6; ++p) {
      for (int64_t n : sizes) {
        std::vector<std::vector<float>> data;
        for (int w = 0; w < p; ++w) data.push_back(random_values(static_cast<uint64_t>(1000 * p + w), n));
        const std::vector<std::vector<float>> inputs = data;
        run_all_reduce(data, algorithm);
        const std::string where =
            collective_algorithm_name(algorithm) + " p=" + std::to_string(p) + " n=" + std::to_string(n);
        for (int w = 1; w < p && n > 0; ++w) {  // memcmp wants non-null pointers, which empty vectors need not have
          ASSERT_EQ(
              std::memcmp(data[0].data(), data[static_cast<size_t>(w)].data(), sizeof(float) * static_cast<size_t>(n)),
              0)
              << where << ": worker " << w << " differs from worker 0";
        }
        for (int64_t i = 0; i < n; ++i) {
          double exact = 0;
          double magnitude = 0;
          for (const auto& input : inputs) {
            exact += input[static_cast<size_t>(i)];
            magnitude += std::abs(input[static_cast<size_t>(i)]);
          }
          // p - 1 float additions in some order: error <= (p-1)·u·Σ|x|, u = 2^-24.
          const double bound = (p - 1) * 0x1p-24 * magnitude * 1.0001;
          ASSERT_NEAR(data[0][static_cast<size_t>(i)], exact, bound) << where << " element " << i;
        }
      }
    }
  }
}

TEST(AllReduce, SeveralTagsInFlightAtOnceKeepTheirOwnData) {
  // Five workers, each running four collectives on four threads at once:
  // tags 1-3 over everyone with three algorithms, tag 4 over {1, 3, 4} only.
  struct Job {
    int64_t tag;
    CollectiveAlgorithm algorithm;
    std::vector<int> group;
  };
  const std::vector<Job> jobs = {{1, CollectiveAlgorithm::kRing, {0, 1, 2, 3, 4}},
                                 {2, CollectiveAlgorithm::kRabenseifner, {0, 1, 2, 3, 4}},
                                 {3, CollectiveAlgorithm::kBinomialTree, {0, 1, 2, 3, 4}},
                                 {4, CollectiveAlgorithm::kRecursiveDoubling, {1, 3, 4}}};
  const int workers = 5;
  InProcessTransport transport(workers, 30.0);
  // data[job][worker]: 9 values, worker w's value i is tag·100 + w + i.
  std::vector<std::vector<std::vector<float>>> data(jobs.size(), std::vector<std::vector<float>>(workers));
  run_workers(transport, workers * static_cast<int>(jobs.size()), [&](int thread) {
    const int w = thread % workers;
    const auto j = static_cast<size_t>(thread / workers);
    const Job& job = jobs[j];
    if (std::find(job.group.begin(), job.group.end(), w) == job.group.end()) return;
    std::vector<float>& mine = data[j][static_cast<size_t>(w)];
    for (int i = 0; i < 9; ++i) mine.push_back(static_cast<float>(job.tag * 100 + w + i));
    transport.all_reduce(w, job.group, job.tag, mine, job.algorithm);
  });
  for (size_t j = 0; j < jobs.size(); ++j) {
    const Job& job = jobs[j];
    // Σ over members of (tag·100 + w + i) = m·(tag·100 + i) + Σ w.
    const auto m = static_cast<float>(job.group.size());
    float member_sum = 0;
    for (int w : job.group) member_sum += static_cast<float>(w);
    for (int w : job.group) {
      for (int i = 0; i < 9; ++i) {
        EXPECT_EQ(data[j][static_cast<size_t>(w)][static_cast<size_t>(i)],
                  m * static_cast<float>(job.tag * 100 + i) + member_sum)
            << "tag " << job.tag << " worker " << w;
      }
    }
  }
}

TEST(Broadcast, EveryMemberGetsTheRootsData) {
  for (int p = 1; p <= 6; ++p) {
    for (int root = 0; root < p; ++root) {
      InProcessTransport transport(p, 30.0);
      std::vector<std::vector<float>> data(static_cast<size_t>(p));
      for (int w = 0; w < p; ++w) data[static_cast<size_t>(w)] = {static_cast<float>(w), 0.5f, -static_cast<float>(w)};
      const std::vector<int> group = iota_group(p);
      run_workers(transport, p, [&](int w) { transport.broadcast(w, group, root, 0, data[static_cast<size_t>(w)]); });
      const std::vector<float> expected = {static_cast<float>(root), 0.5f, -static_cast<float>(root)};
      for (const auto& got : data) EXPECT_EQ(got, expected) << "p=" << p << " root=" << root;
      // Binomial tree: p - 1 messages in all, each of the 3 values.
      int64_t bytes = 0;
      for (int w = 0; w < p; ++w) bytes += transport.traffic().sent_bytes(w);
      EXPECT_EQ(bytes, (p - 1) * 3 * 4) << "p=" << p;
    }
  }
}

TEST(Barrier, NoMemberLeavesBeforeEveryMemberEntered) {
  for (int p = 1; p <= 6; ++p) {
    InProcessTransport transport(p, 30.0);
    std::atomic<int> entered{0};
    std::atomic<int> early_leavers{0};
    const std::vector<int> group = iota_group(p);
    run_workers(transport, p, [&](int w) {
      for (int round = 1; round <= 3; ++round) {  // the same tag three times over
        std::this_thread::sleep_for(std::chrono::milliseconds(w));
        ++entered;
        transport.barrier(w, group, 11);
        if (entered.load() < round * p) ++early_leavers;
        transport.barrier(w, group, 11);  // nobody enters the next round before all checked
      }
    });
    EXPECT_EQ(early_leavers.load(), 0) << "p=" << p;
  }
}

TEST(CollectiveTraffic, RingSendsTwoTimesNMinusOneOverNOfTheVectorPerWorker) {
  for (int p = 1; p <= 6; ++p) {
    for (int64_t m : {3, 1000, 1001}) {
      std::vector<std::vector<float>> data(static_cast<size_t>(p), std::vector<float>(static_cast<size_t>(m), 1.0f));
      TrafficStats traffic;
      run_all_reduce(data, CollectiveAlgorithm::kRing, &traffic);
      // docs/equations.md §2, allreduce/ring: 2(p-1)/p·M floats per worker. Each
      // worker skips two chunks of ⌊M/p⌋ or ⌈M/p⌉, so it is off by < 2 floats.
      const double expected_floats = 2.0 * (p - 1) / p * static_cast<double>(m);
      for (int w = 0; w < p; ++w) {
        const double sent_floats = static_cast<double>(traffic.sent_bytes(w)) / 4;
        EXPECT_NEAR(sent_floats, expected_floats, 2.0) << "p=" << p << " M=" << m << " worker " << w;
        if (p > 1) {
          EXPECT_EQ(traffic.collective_bytes.at(7)[static_cast<size_t>(w)], traffic.sent_bytes(w));
          EXPECT_EQ(traffic.pair_messages[static_cast<size_t>(w)][static_cast<size_t>((w + 1) % p)], 2 * (p - 1));
        }
      }
    }
  }
}

// The ring called directly with segments of `segment` values on p threads.
TrafficStats run_ring(std::vector<std::vector<float>>& data, int64_t segment) {
  const int p = static_cast<int>(data.size());
  InProcessTransport transport(p, 30.0);
  const std::vector<int> group = iota_group(p);
  run_workers(transport, p, [&](int w) {
    CollectivePeers peers(transport, w, group, 7);
    all_reduce_ring(peers, data[static_cast<size_t>(w)], segment);
  });
  return transport.traffic();
}

TEST(CollectiveTraffic, TheRingsSegmentsChangeNoBitAndEachIsOneMessage) {
  for (int p = 2; p <= 5; ++p) {
    for (int64_t n : {0, 5, 100, 1001}) {
      std::vector<std::vector<float>> whole;
      for (int w = 0; w < p; ++w) whole.push_back(random_values(static_cast<uint64_t>(50 * p + w), n));
      std::vector<std::vector<float>> inputs = whole;
      run_ring(whole, kRingSegmentValues);
      for (int64_t segment : {1, 3, 7}) {
        std::vector<std::vector<float>> data = inputs;
        const TrafficStats traffic = run_ring(data, segment);
        const std::string where = "p=" + std::to_string(p) + " n=" + std::to_string(n) + " segment " +
                                  std::to_string(segment);
        for (int w = 0; w < p && n > 0; ++w) {
          ASSERT_EQ(std::memcmp(data[static_cast<size_t>(w)].data(), whole[static_cast<size_t>(w)].data(),
                                sizeof(float) * static_cast<size_t>(n)),
                    0)
              << where << ": worker " << w;
        }
        // Worker w sends chunks w, w-1, ..., w-p+2 (reduce-scatter) and w+1,
        // w, ..., w-p+3 (allgather): each its ⌈count / segment⌉ messages, one
        // for an empty chunk.
        for (int w = 0; w < p; ++w) {
          int64_t messages = 0;
          for (int step = 0; step < 2 * (p - 1); ++step) {
            const int index = step < p - 1 ? w - step : w + 1 - (step - (p - 1));
            const int64_t count = even_chunk(n, p, ((index % p) + p) % p).count;
            messages += std::max<int64_t>(1, (count + segment - 1) / segment);
          }
          EXPECT_EQ(traffic.pair_messages[static_cast<size_t>(w)][static_cast<size_t>((w + 1) % p)], messages)
              << where << ": worker " << w;
        }
      }
    }
  }
}

TEST(CollectiveTraffic, RabenseifnerSendsTheRingsVolumeInTwoLgPMessages) {
  // p = 4, M = 1000: halving sends 500 + 250, the allgather 250 + 500, so
  // 1500 floats = 2·(3/4)·1000 (docs/equations.md §2) in 2·lg 4 = 4 messages.
  std::vector<std::vector<float>> data(4, std::vector<float>(1000, 1.0f));
  TrafficStats traffic;
  run_all_reduce(data, CollectiveAlgorithm::kRabenseifner, &traffic);
  for (int w = 0; w < 4; ++w) {
    EXPECT_EQ(traffic.sent_bytes(w), 1500 * 4);
    int64_t messages = 0;
    for (int64_t count : traffic.pair_messages[static_cast<size_t>(w)]) messages += count;
    EXPECT_EQ(messages, 4);
  }
  EXPECT_EQ(data[3][999], 4.0f);
}

TEST(CollectiveTraffic, RecursiveDoublingFoldsTheExtraRanksOntoPartners) {
  // p = 6, n = 10: p' = 4, r = 2. Ranks 0 and 2 hand their 10 values to 1
  // and 3 and get the result back; the core ranks 1, 3, 4, 5 exchange the
  // whole vector lg 4 = 2 times (20 values); 1 and 3 also hand back 10.
  std::vector<std::vector<float>> data(6, std::vector<float>(10, 1.0f));
  TrafficStats traffic;
  run_all_reduce(data, CollectiveAlgorithm::kRecursiveDoubling, &traffic);
  const int64_t expected_floats[] = {10, 30, 10, 30, 20, 20};
  for (int w = 0; w < 6; ++w) EXPECT_EQ(traffic.sent_bytes(w), expected_floats[w] * 4) << "worker " << w;
  for (const auto& result : data) EXPECT_EQ(result, std::vector<float>(10, 6.0f));
}

TEST(CollectiveTraffic, TreeReducesAndBroadcastsAlongABinomialTree) {
  // p = 4, n = 5: reduce 1→0, 3→2, 2→0; broadcast 0→2, 0→1, 2→3. Rank 0
  // and 2 send 2 vectors, 1 and 3 one: 2(p-1) = 6 messages in all.
  std::vector<std::vector<float>> data(4, std::vector<float>(5, 2.0f));
  TrafficStats traffic;
  run_all_reduce(data, CollectiveAlgorithm::kBinomialTree, &traffic);
  const int64_t expected_floats[] = {10, 5, 10, 5};
  for (int w = 0; w < 4; ++w) EXPECT_EQ(traffic.sent_bytes(w), expected_floats[w] * 4) << "worker " << w;
  EXPECT_EQ(traffic.pair_messages[1][0], 1);
  EXPECT_EQ(traffic.pair_messages[2][3], 1);
  for (const auto& result : data) EXPECT_EQ(result, std::vector<float>(5, 8.0f));
}

}  // namespace
}  // namespace trainsim
