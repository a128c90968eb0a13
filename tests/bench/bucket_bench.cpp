// How much a shaped link's token bucket refills while ranks compute between
// a ring's hops, over the MPI transport (its waits poll and yield, as the
// executor's do): under mpirun, `bucket_bench BYTES GAP_US...` runs rounds
// of one hop per gap, each hop a busy wait of its gap (the pieces of a
// codec ring: encode, decode, reduce) then a message of BYTES to the next
// rank and one from the previous. Rank 0 prints the round's median, 10th
// and 90th percentile over 100 rounds (after 3), and the sum of the gaps:
// on a link of B bytes per second whose bucket does not refill during the
// gaps a round takes that sum plus hops · BYTES / B.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "exec/mpi/mpi_transport.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double us_since(Clock::time_point start) {
  return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

void busy_us(double us) {
  const auto start = Clock::now();
  while (us_since(start) < us) {
  }
}

}  // namespace

int main(int argc, char** argv) {
  trainsim::MpiSession mpi(&argc, &argv);
  const int rank = mpi.rank(), p = mpi.size();
  if (p < 2 || argc < 3) {
    if (rank == 0) std::fprintf(stderr, "usage: mpirun -np P bucket_bench BYTES GAP_US... (P >= 2)\n");
    return 1;
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
  constexpr int kWarmup = 3, kRounds = 100;
  std::vector<double> round_us;
  int64_t tag = 0;
  for (int round = 0; round < kWarmup + kRounds; ++round) {
    const auto start = Clock::now();
    for (const double gap : gaps) {
      busy_us(gap);
      transport.send(rank, next, tag, message);
      transport.recv(rank, prev, tag);
      ++tag;
    }
    if (round >= kWarmup) round_us.push_back(us_since(start));
  }
  std::sort(round_us.begin(), round_us.end());
  if (rank == 0) {
    double sum = 0;
    for (const double g : gaps) sum += g;
    std::printf("%d ranks, %zu hops of %lld B, gaps %.0f us in all: round median %.1f us (10%%: %.1f, 90%%: %.1f)\n", p,
                gaps.size(), static_cast<long long>(bytes), sum, round_us[kRounds / 2], round_us[kRounds / 10],
                round_us[kRounds * 9 / 10]);
  }
  return 0;
}
