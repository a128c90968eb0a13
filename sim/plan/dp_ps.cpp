// `dp-ps` plan: synchronous data parallel through a parameter server after
// backward, as predict_dp_ps has it. server=device follows seed 003 §2.3:
// the other devices push their gradients to device 0 one after another
// (T-3), device 0 sums them and updates (T-3, T-4), then sends the new
// weights to each device in turn (T-5). server=host: every device copies its
// gradients to host memory, host threads sum them, the sum goes back and
// every device updates; devices of other machines relay through the network.
#include "sim/cost/collective.hpp"
#include "sim/cost/models.hpp"
#include "sim/plan/data_parallel_plan.hpp"
#include "sim/plan/generators.hpp"
#include "sim/plan/plan.hpp"

namespace trainsim {
namespace {

// One iteration's exchange: `backward[w]` is worker w's backward op; the
// exchange fills `weights_ready[w]` with the op worker w's next forward must
// wait for when that is not its own update (the device server's weights).
// The model's gradient bytes and a worker's update time, summed over the
// layers once per plan.
struct Exchange {
  int32_t iteration = 0;
  std::vector<OpId> backward;
  std::vector<OpId> weights_ready;
  double bytes = 0;
  double update_s = 0;
};

// server=device: 2(N-1)(α + Mβ) + (N-1)Mγ (sim/cost/dp_ps.cpp's device_server_s):
// N-1 pushes chained one after another into device 0, device 0's update
// carries the (N-1)Mγ summation besides update_s(M), then N-1 sends of the
// weights back, in order on device 0's send stream.
void add_device_server(PlanBuilder& b, const Profile& profile, const Cluster& cluster, int64_t workers, Exchange& ex) {
  const LayerRange layers = all_layers(profile);
  const double bytes = ex.bytes;
  std::vector<OpId> pushed;
  OpId previous_push = -1;
  for (int32_t w = 1; w < static_cast<int32_t>(workers); ++w) {
    std::vector<OpId> deps = {ex.backward[static_cast<size_t>(w)]};
    if (previous_push >= 0) deps.push_back(previous_push);
    const Transfer push = add_transfer(b, Payload::kParamGradient, w, 0, ex.iteration, bytes, layers, std::move(deps));
    previous_push = push.send;
    pushed.push_back(push.recv);
  }
  Op update = update_op(ex.update_s, layers, 0, ex.iteration, ex.iteration);
  update.work_s += static_cast<double>(workers - 1) * bytes * collective_link(cluster, workers).gamma_s_per_byte;
  update.deps = pushed;
  const OpId server_update = b.add(std::move(update));
  for (int32_t w = 1; w < static_cast<int32_t>(workers); ++w) {
    ex.weights_ready[static_cast<size_t>(w)] =
        add_transfer(b, Payload::kWeights, 0, w, ex.iteration, bytes, layers, {server_update}).recv;
  }
}

// server=host: (sim/cost/dp_ps.cpp's host_server_s) 2(host copy + remote relays) +
// N·M / host reduction: each device's M bytes over its own host link; the
// devices of other machines then relay through machine 0's network link one
// after another; one host accumulation of N·M bytes on machine 0 (worker 0's
// host stream); the same way back; then every device updates.
void add_host_server(PlanBuilder& b, const Profile& profile, const Cluster& cluster, int64_t workers,
                     const Exchange& ex) {
  const LayerRange layers = all_layers(profile);
  const double bytes = ex.bytes;
  const int32_t i = ex.iteration;
  std::vector<OpId> arrived;  // at machine 0's host
  OpId previous_relay = -1;
  for (int32_t w = 0; w < static_cast<int32_t>(workers); ++w) {
    const OpId copy =
        b.add(transfer_op(OpKind::kCopyToHost, w, i, bytes, layers, {ex.backward[static_cast<size_t>(w)]}));
    if (machine_of(cluster, w) == 0) {
      arrived.push_back(copy);
      continue;
    }
    std::vector<OpId> deps = {copy};
    if (previous_relay >= 0) deps.push_back(previous_relay);
    const Transfer relay = add_transfer(b, Payload::kParamGradient, w, 0, i, bytes, layers, std::move(deps));
    previous_relay = relay.send;
    arrived.push_back(relay.recv);
  }
  const double summed_bytes = static_cast<double>(workers) * bytes;
  const OpId sum = b.add(transfer_op(OpKind::kHostAccumulate, 0, i, summed_bytes, layers, arrived));
  for (int32_t w = 0; w < static_cast<int32_t>(workers); ++w) {
    OpId source = sum;
    if (machine_of(cluster, w) != 0) {
      source = add_transfer(b, Payload::kParamGradient, 0, w, i, bytes, layers, {sum}).recv;
    }
    Op update = update_op(ex.update_s, layers, w, i, i);
    update.deps = {b.add(transfer_op(OpKind::kCopyToDevice, w, i, bytes, layers, {source}))};
    b.add(std::move(update));
  }
}

}  // namespace

// Per worker and iteration: forward, backward, the server's exchange, and
// the update (on device 0 only with a device server: the others receive its
// weights). One worker communicates nothing.
Plan plan_dp_ps(const Profile& profile, const Cluster& cluster, StrategyConfig& config, int32_t iterations) {
  PlanBuilder b = data_parallel_builder(&predict_dp_ps, profile, cluster, config, iterations);
  const int64_t workers = resolve_workers(config, cluster);
  const std::string server = config.get_choice("server", "device", {"device", "host"});
  const LayerRange layers = all_layers(profile);
  std::vector<OpId> weights_ready(static_cast<size_t>(workers), -1);
  const double param_bytes = model_totals(profile).param_bytes;
  const double update_s = exchanged_update_s(profile, cluster, workers);
  const double single_update_s = model_update_s(profile, cluster);
  ReplicaCompute compute(profile);
  for (int32_t i = 0; i < iterations; ++i) {
    Exchange ex{i, {}, std::vector<OpId>(static_cast<size_t>(workers), -1), param_bytes, update_s};
    for (int32_t w = 0; w < static_cast<int32_t>(workers); ++w) {
      Op forward = compute.op(OpKind::kForward, layers, w, i, i);
      if (weights_ready[static_cast<size_t>(w)] >= 0) forward.deps = {weights_ready[static_cast<size_t>(w)]};
      b.add(std::move(forward));
      ex.backward.push_back(b.add(compute.op(OpKind::kBackward, layers, w, i, i)));
    }
    if (workers == 1) {
      b.add(update_op(single_update_s, layers, 0, i, i));
    } else if (server == "device") {
      add_device_server(b, profile, cluster, workers, ex);
    } else {
      add_host_server(b, profile, cluster, workers, ex);
    }
    weights_ready = ex.weights_ready;
  }
  return std::move(b).build();
}

}  // namespace trainsim
