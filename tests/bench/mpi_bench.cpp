// The MPI transport beside the MPI library itself, side by side in one run
// under mpirun (`mpirun -np P mpi_bench [max MB] [repetitions]`): the
// per-message cost (half a ping-pong of one float between ranks 0 and 1,
// MpiTransport's send/recv against MPI_Send/MPI_Recv), and the ring
// AllReduce over MpiTransport against MPI_Allreduce for 1 MB up to max MB
// (default 256), in turns, each the median of the repetitions (default 5),
// as bus bandwidth: nccl-tests' busbw = bytes / time · 2(P − 1) / P. Rank 0
// prints the table.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <vector>

#include "exec/mpi/mpi_transport.hpp"

namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

// One-way time of a 4-byte message: `round_trips` ping-pongs between ranks 0 and 1, halved.
template <typename Send, typename Recv>
double one_way_s(int rank, int round_trips, Send send, Recv recv) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto start = Clock::now();
  for (int i = 0; i < round_trips; ++i) {
    if (rank == 0) {
      send(1);
      recv(1);
    } else if (rank == 1) {
      recv(0);
      send(0);
    }
  }
  return seconds_since(start) / (2.0 * round_trips);
}

}  // namespace

int main(int argc, char** argv) {
  trainsim::MpiSession mpi(&argc, &argv);
  const int64_t max_mb = argc > 1 ? std::atoll(argv[1]) : 256;
  const int repetitions = argc > 2 ? std::atoi(argv[2]) : 5;
  trainsim::MpiTransport transport;
  const int rank = mpi.rank(), p = mpi.size();
  if (p < 2) {
    std::fprintf(stderr, "mpi_bench: run under mpirun with at least 2 ranks\n");
    return 1;
  }
  MPI_Comm raw;
  MPI_Comm_dup(MPI_COMM_WORLD, &raw);

  // Per message: 3 runs of 2000 round trips each way, in turns.
  std::vector<double> ours, theirs;
  float value = 1.0f;
  for (int run = 0; run < 3; ++run) {
    ours.push_back(one_way_s(
        rank, 2000, [&](int to) { transport.send(rank, to, 1, {value}); },
        [&](int from) { value = transport.recv(rank, from, 1).front(); }));
    theirs.push_back(one_way_s(
        rank, 2000, [&](int to) { MPI_Send(&value, 1, MPI_FLOAT, to, 1, raw); },
        [&](int from) { MPI_Recv(&value, 1, MPI_FLOAT, from, 1, raw, MPI_STATUS_IGNORE); }));
  }
  if (rank == 0) {
    std::printf("one 4-byte message, one way (3 runs of 2000 round trips, ranks 0 and 1 of %d):\n", p);
    std::printf("  MpiTransport %.2f us (%.2f-%.2f), MPI_Send/MPI_Recv %.2f us (%.2f-%.2f)\n\n", 1e6 * median(ours),
                1e6 * *std::min_element(ours.begin(), ours.end()), 1e6 * *std::max_element(ours.begin(), ours.end()),
                1e6 * median(theirs), 1e6 * *std::min_element(theirs.begin(), theirs.end()),
                1e6 * *std::max_element(theirs.begin(), theirs.end()));
    std::printf("| size | ring over MpiTransport | MPI_Allreduce | ring / MPI |\n|---|---|---|---|\n");
  }

  std::vector<int> group(static_cast<size_t>(p));
  std::iota(group.begin(), group.end(), 0);
  int64_t tag = 2;
  for (int64_t mb = 1; mb <= max_mb; mb *= 4) {
    const auto count = static_cast<size_t>(mb << 18);  // floats
    std::vector<float> data(count, 1.0f), out(count);
    std::vector<double> ring_s, library_s;
    for (int r = 0; r < repetitions; ++r) {
      transport.barrier(rank, group, tag++);
      auto start = Clock::now();
      transport.all_reduce(rank, group, tag++, data, trainsim::CollectiveAlgorithm::kRing);
      transport.barrier(rank, group, tag++);
      ring_s.push_back(seconds_since(start));
      start = Clock::now();
      MPI_Allreduce(data.data(), out.data(), static_cast<int>(count), MPI_FLOAT, MPI_SUM, raw);
      transport.barrier(rank, group, tag++);
      library_s.push_back(seconds_since(start));
      std::fill(data.begin(), data.end(), 1.0f);
    }
    if (rank == 0) {
      const double bytes = static_cast<double>(count) * sizeof(float), bus = 2.0 * (p - 1) / p;
      const double ring_busbw = bytes / median(ring_s) * bus, library_busbw = bytes / median(library_s) * bus;
      std::printf("| %lld MB | %.1f MB/s busbw (%.1f ms) | %.1f MB/s busbw (%.1f ms) | %.2f |\n",
                  static_cast<long long>(mb), ring_busbw / 1e6, 1e3 * median(ring_s), library_busbw / 1e6,
                  1e3 * median(library_s), ring_busbw / library_busbw);
    }
  }
  MPI_Comm_free(&raw);
  return 0;
}
