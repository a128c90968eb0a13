// CGDP host accumulation: a fixed per-element summation order split over
// host threads by contiguous ranges, then the broadcast back.
#include "exec/optim/host_accumulate.hpp"

#include <algorithm>
#include <string>
#include <thread>
#include <vector>

#include "model/error.hpp"

namespace trainsim {
namespace {

// Blocks of elements small enough that the chunks' parts stay in cache
// between the sum and the scale.
constexpr size_t kBlock = 4096;

void accumulate_range(std::span<const std::span<const float>> worker_chunks, std::span<float> host_sum,
                      int64_t begin, int64_t end, float scale) {
  for (auto b = static_cast<size_t>(begin); b < static_cast<size_t>(end); b += kBlock) {
    const size_t e = std::min(static_cast<size_t>(end), b + kBlock);
    std::copy(worker_chunks[0].begin() + static_cast<std::ptrdiff_t>(b),
              worker_chunks[0].begin() + static_cast<std::ptrdiff_t>(e), host_sum.begin() + static_cast<std::ptrdiff_t>(b));
    for (size_t w = 1; w < worker_chunks.size(); ++w) {
      const std::span<const float> chunk = worker_chunks[w];
      for (size_t i = b; i < e; ++i) host_sum[i] += chunk[i];
    }
    if (scale != 1.0f) {
      for (size_t i = b; i < e; ++i) host_sum[i] *= scale;
    }
  }
}

}  // namespace

std::pair<int64_t, int64_t> host_thread_range(int64_t count, int64_t threads, int64_t index) {
  TRAINSIM_CHECK(count >= 0 && threads >= 1 && index >= 0 && index < threads, "bad host thread split");
  const int64_t base = count / threads;
  const int64_t extra = count % threads;
  const int64_t begin = index * base + std::min(index, extra);
  return {begin, begin + base + (index < extra ? 1 : 0)};
}

void host_accumulate(std::span<const std::span<const float>> worker_chunks, std::span<float> host_sum,
                     int64_t threads, float scale) {
  TRAINSIM_CHECK(threads >= 1, "host accumulation needs at least one thread");
  TRAINSIM_CHECK(!worker_chunks.empty(), "host accumulation over no workers");
  for (const auto& chunk : worker_chunks) {
    TRAINSIM_CHECK(chunk.size() == host_sum.size(), "worker chunk of " + std::to_string(chunk.size()) +
                                                        " floats for a host buffer of " +
                                                        std::to_string(host_sum.size()));
  }
  const auto count = static_cast<int64_t>(host_sum.size());
  std::vector<std::thread> helpers;
  const auto join_all = [&helpers] {
    for (std::thread& helper : helpers) helper.join();
  };
  try {
    for (int64_t t = 1; t < threads; ++t) {
      const auto [begin, end] = host_thread_range(count, threads, t);
      if (begin == end) continue;
      helpers.emplace_back(accumulate_range, worker_chunks, host_sum, begin, end, scale);
    }
  } catch (...) {
    join_all();  // a thread that failed to start must not leave running ones unjoined
    throw;
  }
  const auto [begin, end] = host_thread_range(count, threads, 0);
  if (begin < end) accumulate_range(worker_chunks, host_sum, begin, end, scale);
  join_all();
}

void broadcast_from_host(std::span<const float> host_sum, std::span<const std::span<float>> worker_chunks) {
  for (const std::span<float>& chunk : worker_chunks) {
    TRAINSIM_CHECK(chunk.size() == host_sum.size(), "broadcast into a chunk of another size");
    std::copy(host_sum.begin(), host_sum.end(), chunk.begin());
  }
}

}  // namespace trainsim
