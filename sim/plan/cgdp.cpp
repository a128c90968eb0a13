// `cgdp` plan (seed 003 §3.1, steps B-4-1 to B-5-2): backward walks the
// chunks from the last; after a chunk with gradients the device stream
// synchronizes (B-4-1, folded into the chunk's backward op), the chunk is
// copied to host memory on the device-to-host stream (B-4-2), host threads
// of the machine sum the devices' copies (B-5-1), and the sum is copied back
// on the host-to-device stream (B-5-2), all while backward goes on. Across
// machines, the hosts all-reduce each chunk before copying it back.
#include "sim/cost/data_parallel_settings.hpp"
#include "sim/cost/models.hpp"
#include "sim/plan/data_parallel_plan.hpp"
#include "sim/plan/generators.hpp"
#include "sim/plan/plan.hpp"

namespace trainsim {
namespace {

struct CgdpLayout {
  int64_t workers = 1;
  std::vector<LayerRange> chunks;    // ascending
  std::vector<int32_t> hosts;        // per machine: its first worker, whose kHost stream sums
  std::vector<int64_t> per_machine;  // workers on each machine
  int32_t hosts_group = -1;          // the hosts' AllReduce group when there are several machines
};

// One chunk's trip for every worker once each has its backward op
// `backward[w]`: D2H copies, one host accumulation per machine (bytes = its
// devices × the chunk's), the hosts' AllReduce across machines, H2D copies.
// Returns each worker's H2D copy.
std::vector<OpId> add_chunk_sync(PlanBuilder& b, const CgdpLayout& layout, LayerRange chunk, double bytes,
                                 int32_t iteration, const std::vector<OpId>& backward, const Cluster& cluster) {
  const auto workers = static_cast<int32_t>(layout.workers);
  std::vector<std::vector<OpId>> copies(layout.hosts.size());
  for (int32_t w = 0; w < workers; ++w) {
    copies[static_cast<size_t>(machine_of(cluster, w))].push_back(
        b.add(transfer_op(OpKind::kCopyToHost, w, iteration, bytes, chunk, {backward[static_cast<size_t>(w)]})));
  }
  std::vector<OpId> summed;  // per machine: when its host holds the chunk's sum
  for (size_t k = 0; k < layout.hosts.size(); ++k) {
    const double host_bytes = static_cast<double>(layout.per_machine[k]) * bytes;
    summed.push_back(
        b.add(transfer_op(OpKind::kHostAccumulate, layout.hosts[k], iteration, host_bytes, chunk, copies[k])));
  }
  if (layout.hosts.size() > 1) {
    for (size_t k = 0; k < layout.hosts.size(); ++k) {
      summed[k] = b.add(transfer_op(OpKind::kAllReduce, layout.hosts[k], iteration, bytes, chunk, {summed[k]},
                                    layout.hosts_group, CollectiveAlgorithm::kRing));
    }
  }
  std::vector<OpId> back;
  for (int32_t w = 0; w < workers; ++w) {
    const OpId source = summed[static_cast<size_t>(machine_of(cluster, w))];
    back.push_back(b.add(transfer_op(OpKind::kCopyToDevice, w, iteration, bytes, chunk, {source})));
  }
  return back;
}

}  // namespace

// docs/equations.md §7 with chunks (predict_cgdp): per worker, forward, then each
// chunk's backward (+ t_as when it has gradients and there is more than one
// worker) followed by its transfers through D2H, host accumulation, (the
// hosts' ring AllReduce,) H2D, each an in-order stream: the flow shop of
// cgdp_backward_s. The update waits for the last chunk back:
// iteration = Σfw + max(backward with syncs, last H2D end) + update.
Plan plan_cgdp(const Profile& profile, const Cluster& cluster, StrategyConfig& config, int32_t iterations) {
  PlanBuilder b = data_parallel_builder(&predict_cgdp, profile, cluster, config, iterations);
  CgdpLayout layout;
  layout.workers = resolve_workers(config, cluster);
  layout.chunks = resolve_cgdp_chunks(profile, cluster, layout.workers, config).ranges;
  layout.hosts = machine_first_workers(cluster, layout.workers);
  layout.per_machine = workers_per_machine(cluster, layout.workers);
  if (layout.hosts.size() > 1) layout.hosts_group = b.group(layout.hosts);
  const auto workers = static_cast<int32_t>(layout.workers);
  const LayerRange layers = all_layers(profile);
  std::vector<double> chunk_bytes;  // summed once, not per iteration
  for (const LayerRange& chunk : layout.chunks) chunk_bytes.push_back(range_totals(profile, chunk.first, chunk.last).param_bytes);
  const double update_s = exchanged_update_s(profile, cluster, workers);
  ReplicaCompute compute(profile);

  for (int32_t i = 0; i < iterations; ++i) {
    std::vector<OpId> last_back(static_cast<size_t>(workers), -1);
    for (int32_t w = 0; w < workers; ++w) b.add(compute.op(OpKind::kForward, layers, w, i, i));
    for (auto chunk = layout.chunks.rbegin(); chunk != layout.chunks.rend(); ++chunk) {
      const double bytes = chunk_bytes[static_cast<size_t>(layout.chunks.rend() - chunk - 1)];
      const bool synced = workers > 1 && bytes > 0;
      std::vector<OpId> backward;
      for (int32_t w = 0; w < workers; ++w) {
        Op op = compute.op(OpKind::kBackward, *chunk, w, i, i);
        if (synced) op.work_s += cluster.host.stream_sync_s;
        backward.push_back(b.add(std::move(op)));
      }
      if (synced) last_back = add_chunk_sync(b, layout, *chunk, bytes, i, backward, cluster);
    }
    for (int32_t w = 0; w < workers; ++w) {
      Op update = update_op(update_s, layers, w, i, i);
      if (last_back[static_cast<size_t>(w)] >= 0) update.deps = {last_back[static_cast<size_t>(w)]};
      b.add(std::move(update));
    }
  }
  return std::move(b).build();
}

}  // namespace trainsim
