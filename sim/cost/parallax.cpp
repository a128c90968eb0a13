// `parallax` (seed 004, Kim et al. EuroSys 2019; docs/equations.md §3): dense
// variables by AllReduce, sparse ones (embeddings) by parameter servers, one
// server per machine, with local aggregation of a machine's sparse gradients;
// `ps` and `ar` are the pure variants. Communication runs after backward, as
// TensorFlow schedules it: nothing overlaps it.
#include <algorithm>
#include <cmath>

#include "sim/cost/common.hpp"
#include "sim/cost/data_parallel.hpp"
#include "sim/cost/models.hpp"

namespace trainsim {

namespace {

// Parameter servers, one per machine, each owning 1/m of every variable
// (seed 004 §5.1: partitioned evenly by size). Every worker pushes its
// gradients (dense_bytes of dense ones in ps mode, αw of sparse rows) and
// later pulls the same bytes of parameters (Table 3: 2w dense, 2αw sparse per
// GPU). Per machine k with d_k of N workers, on its network link, per
// direction and per phase (push, then pull, mirror images):
//   out = d_k·G(m-1)/m (its workers to remote servers),
//   in  = (N-d_k)·G/m (remote workers to its server), with G = dense + αw;
// local aggregation (sparse only, §5.3.2) sums the machine's sparse gradients
// first and pulls once per machine: the sparse share becomes U(d_k)(m-1)/m out
// and Σ_{j≠k} U(d_j)/m in, U = sparse_union_bytes. Each worker's own G crosses
// its host link either way. A phase lasts as long as its busiest link.
double parameter_server_s(const Profile& profile, const Cluster& cluster, int64_t workers, double dense_bytes,
                          double sparse_touched_bytes, bool local_aggregation) {
  const double per_worker_bytes = dense_bytes + sparse_touched_bytes;
  if (per_worker_bytes <= 0) return 0;
  const std::vector<int64_t> per_machine = workers_per_machine(cluster, workers);
  const double m = static_cast<double>(per_machine.size());
  const double n = static_cast<double>(workers);
  double phase_s = cluster.host.link_latency_s + per_worker_bytes / cluster.host.link_bandwidth_bytes_per_s;
  if (per_machine.size() > 1) {
    std::vector<double> union_bytes;
    double union_total = 0;
    for (int64_t d : per_machine) {
      union_bytes.push_back(sparse_union_bytes(profile, d));
      union_total += union_bytes.back();
    }
    double busiest_bytes = 0;
    for (size_t k = 0; k < per_machine.size(); ++k) {
      const double d = static_cast<double>(per_machine[k]);
      double out = d * dense_bytes * (m - 1) / m;
      double in = (n - d) * dense_bytes / m;
      out += local_aggregation ? union_bytes[k] * (m - 1) / m : d * sparse_touched_bytes * (m - 1) / m;
      in += local_aggregation ? (union_total - union_bytes[k]) / m : (n - d) * sparse_touched_bytes / m;
      busiest_bytes = std::max({busiest_bytes, out, in});
    }
    phase_s = std::max(phase_s, cluster.inter_link.latency_s + busiest_bytes / cluster.inter_link.bandwidth_bytes_per_s);
  }
  return 2 * phase_s;
}

// A collective of `algorithm` over all `workers`, with its t_sync and
// packing; nothing when there is nothing to send.
double collective_call_s(double collective_s, double bytes, const Cluster& cluster, int64_t workers,
                         CollectiveAlgorithm algorithm) {
  return bytes > 0 ? collective_s + collective_call_overhead_s(cluster, bytes, workers, algorithm,
                                                               workers > cluster.devices_per_machine)
                   : 0.0;
}

}  // namespace

namespace {

// A layer's rows one worker touches per iteration: α·w (all of a dense layer).
double touched_bytes(const LayerProfile& l) { return l.sparse ? l.sparsity * l.param_bytes : l.param_bytes; }

// The optimizer's step on one worker's touched rows: as profiled, else the
// bandwidth formula over them.
double touched_step_s(const LayerProfile& l, const Cluster& cluster) {
  return l.update_s ? *l.update_s : update_s(touched_bytes(l), cluster);
}

}  // namespace

std::vector<LayerRange> parallax_served_layers(const Profile& profile, bool serves_dense) {
  std::vector<LayerRange> served;
  int64_t dense_first = 0;
  for (size_t l = 0; l < profile.layers.size(); ++l) {
    if (!profile.layers[l].sparse) continue;
    served.push_back({static_cast<int64_t>(l), static_cast<int64_t>(l)});
    dense_first = static_cast<int64_t>(l) + 1;
  }
  const auto last = static_cast<int64_t>(profile.layers.size()) - 1;
  if (serves_dense && dense_first <= last) served.push_back({dense_first, last});
  return served;
}

double parallax_server_step_s(const Profile& profile, const Cluster& cluster, int64_t workers, LayerRange layers) {
  const auto machines = static_cast<double>(workers_per_machine(cluster, workers).size());
  const auto n = static_cast<double>(workers);
  double pushed_bytes = 0, optimizer_s = 0;
  for (int64_t i = layers.first; i <= layers.last; ++i) {
    const LayerProfile& l = profile.layers[static_cast<size_t>(i)];
    pushed_bytes += n * touched_bytes(l);
    const double union_fraction = touched_fraction(l, workers) / (l.sparse ? l.sparsity : 1.0);
    optimizer_s += touched_step_s(l, cluster) * union_fraction;
  }
  return (2.0 * pushed_bytes / cluster.host.reduce_bytes_per_s + optimizer_s) / machines;
}

double parallax_worker_update_s(const Profile& profile, const Cluster& cluster, int64_t workers,
                                const std::string& mode) {
  double total_s = 0;
  for (const LayerProfile& l : profile.layers) {
    if (l.param_bytes <= 0) continue;
    if (!l.sparse) {
      if (mode != "ps" || workers == 1) total_s += touched_step_s(l, cluster);
    } else if (workers == 1) {
      total_s += touched_step_s(l, cluster);
    } else if (mode == "ar") {
      total_s += static_cast<double>(workers) * touched_step_s(l, cluster);  // every worker's gathered rows
    }
  }
  return total_s;
}

// Communication per mode (docs/equations.md §3, Table 3 of seed 004):
//   ar:     AllReduce(dense) + AllGatherv(sparse): ring allgather of N·αw;
//   ps:     parameter servers for dense and sparse;
//   hybrid: AllReduce(dense) + parameter servers for sparse.
// The AllReduce and the servers share the network, so their times add, and
// between the push and the pull each server steps its variables
// (parallax_server_step_s). t = Σfw + Σbw + communication + the worker's
// update (parallax_worker_update_s).
Prediction predict_parallax(const Profile& profile, const Cluster& cluster, StrategyConfig& config) {
  const int64_t workers = resolve_workers(config, cluster);
  const CollectiveAlgorithm algorithm = read_collective_algorithm(config);
  const std::string mode = config.get_choice("mode", "hybrid", {"hybrid", "ps", "ar"});
  const bool local_aggregation = config.get_bool("local_aggregation", true);
  const ModelTotals t = model_totals(profile);
  const VariableBytes v = variable_bytes(profile);

  double comm_s = 0;
  if (workers > 1) {
    const LinkParams link = collective_link(cluster, workers, algorithm);
    if (mode == "ps") {
      comm_s = parameter_server_s(profile, cluster, workers, v.dense, v.sparse_touched, local_aggregation);
    } else {
      comm_s = collective_call_s(allreduce_s(algorithm, v.dense, workers, link), v.dense, cluster, workers, algorithm);
    }
    if (mode == "hybrid") {
      comm_s += parameter_server_s(profile, cluster, workers, 0.0, v.sparse_touched, local_aggregation);
    } else if (mode == "ar") {
      const double gathered = static_cast<double>(workers) * v.sparse_touched;
      // The rows' allgather runs on the host's messages, whatever the AllReduce's algorithm.
      comm_s += collective_call_s(allgather_ring_s(gathered, workers, collective_link(cluster, workers)), gathered,
                                  cluster, workers, CollectiveAlgorithm::kRing);
    }
    // Between the push and the pull, each server steps its variables (one after another on its host).
    const bool through_servers = mode != "ar" && (mode == "ps" ? v.dense : 0.0) + v.sparse_touched > 0;
    for (const LayerRange& served : parallax_served_layers(profile, mode == "ps")) {
      if (through_servers) comm_s += parallax_server_step_s(profile, cluster, workers, served);
    }
  }
  const double compute_s = t.forward_s + t.backward_s + parallax_worker_update_s(profile, cluster, workers, mode);
  Prediction p = data_parallel_prediction("parallax", profile, workers, compute_s, comm_s);
  for (DeviceMemory& m : p.memory) {
    if (mode == "ar") {
      m.gradients_bytes += static_cast<double>(workers) * v.sparse_touched;  // AllGatherv's receive buffer
    } else {
      // The servers own the sparse tables (and in ps mode the dense variables)
      // with their optimizer state in host memory; a worker holds the rows it pulled.
      m.weights_bytes -= v.sparse - v.sparse_touched;
      m.gradients_bytes -= v.sparse - v.sparse_touched;
      m.optimizer_bytes -= v.sparse + (mode == "ps" ? v.dense : 0.0);
    }
  }
  p.staleness = 0;
  finish_prediction(p, config);
  return p;
}

}  // namespace trainsim
