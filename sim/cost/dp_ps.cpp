// `dp-ps`: synchronous data parallel with a parameter server, after backward
// and with no overlap: the classic scheme of seed 000 §2.2 (gradients summed
// at a server, the sum broadcast back) and seed 003 §2.3's "typical data
// parallel training". The server is device 0 or the host's CPU memory.
#include "sim/cost/common.hpp"
#include "sim/cost/data_parallel.hpp"
#include "sim/cost/models.hpp"

namespace trainsim {
namespace {

// server=device (seed 003 §2.3 steps T-3, T-5): the N-1 other devices push
// their M gradient bytes into device 0's link one after another, device 0
// sums N vectors ((N-1) additions of M bytes at γ), and sends the sum back the
// same way: 2(N-1)(α + Mβ) + (N-1)Mγ, on the group's link (the slower one
// once the group crosses machines).
double device_server_s(double bytes, int64_t workers, const Cluster& cluster) {
  const LinkParams link = collective_link(cluster, workers);
  const double others = static_cast<double>(workers - 1);
  return 2 * others * (link.alpha_s + bytes * link.beta_s_per_byte) + others * bytes * link.gamma_s_per_byte;
}

// server=host (seed 003 §3.2, Definition 3.4: T' = T_BP + Σ(t_aa + t_bc) with
// the whole model as one transfer): every device copies its M bytes to host
// memory over its own host link, concurrently; host threads sum N·M bytes at
// host.reduce_bytes_per_s; the sum goes back the same way. Devices of other
// machines also stage through their own host, then their copies funnel one
// after another through machine 0's network link, each way.
double host_server_s(double bytes, int64_t workers, const Cluster& cluster) {
  const double host_copy_s = cluster.host.link_latency_s + bytes / cluster.host.link_bandwidth_bytes_per_s;
  const double remote = static_cast<double>(workers - workers_per_machine(cluster, workers).front());
  const double network_s =
      remote * (cluster.inter_link.latency_s + bytes / cluster.inter_link.bandwidth_bytes_per_s);
  const double sum_s = static_cast<double>(workers) * bytes / cluster.host.reduce_bytes_per_s;
  return 2 * (host_copy_s + network_s) + sum_s;
}

}  // namespace

Prediction predict_dp_ps(const Profile& profile, const Cluster& cluster, StrategyConfig& config) {
  const int64_t workers = resolve_workers(config, cluster);
  const std::string server = config.get_choice("server", "device", {"device", "host"});
  const ModelTotals t = model_totals(profile);
  const double compute_s = t.forward_s + t.backward_s + exchanged_update_s(profile, cluster, workers);
  double comm_s = 0;
  if (workers > 1) {
    comm_s = server == "device" ? device_server_s(t.param_bytes, workers, cluster)
                                : host_server_s(t.param_bytes, workers, cluster);
  }
  Prediction p = data_parallel_prediction("dp-ps", profile, workers, compute_s, comm_s);
  // Device 0 as server keeps a receive buffer per peer (as Caffe's P2PSync
  // parent does); a host server keeps them in host memory.
  if (server == "device") p.memory[0].gradients_bytes += static_cast<double>(workers - 1) * t.param_bytes;
  p.staleness = 0;
  finish_prediction(p, config);
  return p;
}

}  // namespace trainsim
