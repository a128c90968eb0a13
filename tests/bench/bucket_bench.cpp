// How much a shaped link's token bucket refills while ranks compute between
// a ring's hops, over the MPI transport (its waits poll and yield, as the
// executor's do): under mpirun, `bucket_bench BYTES GAP_US...` runs rounds
// of one hop per gap, each hop a busy wait of its gap (the pieces of a
// codec ring: encode, decode, reduce) then a message of BYTES to the next
// rank and one from the previous. Rank 0 prints the round's median, 10th
// and 90th percentile over 100 rounds (after 3), and the sum of the gaps:
// on a link of B bytes per second whose bucket does not refill during the
// gaps a round takes that sum plus hops · BYTES / B.
// `bucket_bench --ring CODEC FLOATS [BESIDE_US]` (quant8, trunc16, none)
// runs Pipe-SGD's ring itself over FLOATS values instead, and times one
// chunk's encode and decode on every rank at once: the pieces its hops wait
// for. With BESIDE_US each rank's thread is pinned to core rank (mod the
// cores), as the executor pins a worker's, and with BESIDE_US > 0 a second
// thread pinned beside it computes meanwhile (busy ops of that many µs, a
// yield between them), as the next iteration's compute does in Pipe-SGD.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <numeric>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "exec/interpreter.hpp"
#include "exec/mpi/mpi_transport.hpp"
#include "exec/optim/pipesgd_hop_codec.hpp"
#include "profiles/profiler/timing.hpp"

namespace {

double us_since(double start_s) { return (trainsim::now_s() - start_s) * 1e6; }

constexpr int kWarmup = 3, kRounds = 100;

// The median, 10th and 90th percentile of kRounds timings, as rank 0 prints them.
std::string spread(std::vector<double> us) {
  std::sort(us.begin(), us.end());
  char text[96];
  std::snprintf(text, sizeof text, "median %.1f us (10%%: %.1f, 90%%: %.1f)", us[us.size() / 2], us[us.size() / 10],
                us[us.size() * 9 / 10]);
  return text;
}

// Pipe-SGD's ring over `floats` values, round after round, then one chunk's
// encode and decode on every rank at once (a barrier before each).
int codec_ring(trainsim::MpiTransport& transport, int rank, int p, const std::string& name, int64_t floats,
               double beside_us) {
  const trainsim::HopCodec codec =
      trainsim::pipesgd_hop_codec(trainsim::parse_gradient_compression(name, "bucket_bench --ring"));
  std::vector<int> group(static_cast<size_t>(p));
  std::iota(group.begin(), group.end(), 0);
  std::vector<float> data(static_cast<size_t>(floats));
  std::vector<double> ring_us, encode_us, decode_us;
  int64_t tag = 0;
  std::atomic<bool> stop{false};
  std::thread beside;
  if (beside_us >= 0) trainsim::pin_current_thread(rank);
  if (beside_us > 0) {
    beside = std::thread([&stop, rank, beside_us] {
      trainsim::pin_current_thread(rank);
      while (!stop.load(std::memory_order_relaxed)) {
        trainsim::spin_for_s(beside_us * 1e-6);
        std::this_thread::yield();  // between ops, as a compute thread waits for its next op's inputs
      }
    });
  }
  for (int round = 0; round < kWarmup + kRounds; ++round) {
    for (size_t i = 0; i < data.size(); ++i)
      data[i] = 1e-3f * static_cast<float>(static_cast<int64_t>(i % 2001) - 1000);
    transport.barrier(rank, group, tag++);
    const double start = trainsim::now_s();
    trainsim::CollectivePeers peers(transport, rank, group, tag++);
    trainsim::all_reduce_ring_codec(peers, data, codec);
    if (round >= kWarmup) ring_us.push_back(us_since(start));
  }
  const std::span<float> chunk(data.data(), static_cast<size_t>(floats / p));
  for (int round = 0; round < kWarmup + kRounds; ++round) {
    transport.barrier(rank, group, tag++);
    double start = trainsim::now_s();
    const std::vector<float> message = codec.encode(chunk);
    if (round >= kWarmup) encode_us.push_back(us_since(start));
    transport.barrier(rank, group, tag++);
    start = trainsim::now_s();
    codec.decode(message, chunk);
    if (round >= kWarmup) decode_us.push_back(us_since(start));
  }
  stop = true;
  if (beside.joinable()) beside.join();
  if (rank == 0) {
    const std::string how = beside_us > 0
                                ? ", pinned beside ops of " + std::to_string(static_cast<long long>(beside_us)) + " us"
                            : beside_us == 0 ? ", pinned"
                                             : "";
    std::printf("%d ranks, %s ring of %lld values%s: %s; one chunk on every rank at once: encode %s, decode %s\n", p,
                name.c_str(), static_cast<long long>(floats), how.c_str(), spread(ring_us).c_str(),
                spread(encode_us).c_str(), spread(decode_us).c_str());
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  trainsim::MpiSession mpi(&argc, &argv);
  const int rank = mpi.rank(), p = mpi.size();
  if (p < 2 || argc < 3) {
    if (rank == 0) {
      std::fprintf(stderr,
                   "usage: mpirun -np P bucket_bench BYTES GAP_US... | bucket_bench --ring quant8|trunc16|none "
                   "FLOATS [BESIDE_US] (P >= 2)\n");
    }
    return 1;
  }
  if (std::strcmp(argv[1], "--ring") == 0) {
    const std::string name = argv[2];
    const int64_t floats = argc > 3 ? std::atoll(argv[3]) : 0;
    const double beside_us = argc > 4 ? std::atof(argv[4]) : -1;
    if ((name != "quant8" && name != "trunc16" && name != "none") || floats < p || (argc > 4 && !(beside_us >= 0))) {
      if (rank == 0) {
        std::fprintf(stderr, "bucket_bench --ring: quant8, trunc16 or none, at least P values, BESIDE_US at least 0\n");
      }
      return 1;
    }
    trainsim::MpiTransport transport;
    return codec_ring(transport, rank, p, name, floats, beside_us);
  }
  const int64_t bytes = std::atoll(argv[1]);
  std::vector<double> gaps;
  for (int i = 2; i < argc; ++i) gaps.push_back(std::atof(argv[i]));
  if (bytes < 4 || std::any_of(gaps.begin(), gaps.end(), [](double g) { return !(g >= 0); })) {
    if (rank == 0) std::fprintf(stderr, "bucket_bench: BYTES is at least 4 and every GAP_US at least 0\n");
    return 1;
  }
  trainsim::MpiTransport transport;
  const int next = (rank + 1) % p, prev = (rank + p - 1) % p;
  const std::vector<float> message(static_cast<size_t>(bytes / 4), 1.0f);
  std::vector<double> round_us;
  int64_t tag = 0;
  for (int round = 0; round < kWarmup + kRounds; ++round) {
    const double start = trainsim::now_s();
    for (const double gap : gaps) {
      trainsim::spin_for_s(gap * 1e-6);
      transport.send(rank, next, tag, message);
      transport.recv(rank, prev, tag);
      ++tag;
    }
    if (round >= kWarmup) round_us.push_back(us_since(start));
  }
  if (rank == 0) {
    double sum = 0;
    for (const double g : gaps) sum += g;
    std::printf("%d ranks, %zu hops of %lld B, gaps %.0f us in all: round %s\n", p, gaps.size(),
                static_cast<long long>(bytes), sum, spread(round_us).c_str());
  }
  return 0;
}
