// `parallax` plan (seed 004, docs/equations.md §3): after backward, dense
// gradients by an AllReduce and sparse ones by parameter servers, one per
// machine on its first worker, each owning 1/m of every variable; `ps` sends
// dense gradients to the servers too, `ar` gathers the sparse rows with a
// ring allgather. Local aggregation sums a machine's sparse gradients in its
// host memory and pushes (and pulls) them once per machine. The phases run
// one after another, as predict_parallax adds them.
#include <string>

#include "sim/cost/models.hpp"
#include "sim/plan/data_parallel_plan.hpp"
#include "sim/plan/generators.hpp"
#include "sim/plan/plan.hpp"

namespace trainsim {
namespace {

struct ParallaxSetup {
  const Profile* profile = nullptr;
  const Cluster* cluster = nullptr;
  int64_t workers = 1;
  bool local_aggregation = true;
  std::vector<int32_t> servers;      // per machine: its first worker, which holds the server
  std::vector<int64_t> per_machine;  // workers on each machine
  std::vector<LayerRange> served;    // the layers of each of the plan's servers
  int32_t iteration = 0;
};

// What the servers' exchange of one iteration builds on: per machine, the
// ops after which its server holds every push, and its workers' host copies.
struct ServerPhase {
  std::vector<std::vector<OpId>> held;    // per machine: pushes its server has received
  std::vector<std::vector<OpId>> copies;  // per machine: its workers' copies to host memory
};

double share_bytes_of(const ParallaxSetup& s, double dense_bytes, double sparse_touched_bytes) {
  return (dense_bytes + (s.local_aggregation ? 0.0 : sparse_touched_bytes)) / static_cast<double>(s.servers.size());
}

// The 1/m share of machine k's union of touched rows, U(d_k)/m: what local
// aggregation sends to (and pulls from) each remote server.
double union_share_bytes(const ParallaxSetup& s, size_t k) {
  return sparse_union_bytes(*s.profile, s.per_machine[k]) / static_cast<double>(s.servers.size());
}

// Push (parameter_server_s): each worker copies its G = dense + αw bytes to
// host memory (its host link) and sends a 1/m share to every remote server:
// dense/m, and αw/m unless local aggregation sends the machine's U(d_k)/m
// once, from its server, after all its workers' copies. Machine k sends to
// k+1, k+2, ... in turn, so at each step every machine receives from one.
ServerPhase push_to_servers(PlanBuilder& b, const ParallaxSetup& s, double dense_bytes, double sparse_touched_bytes,
                            bool aggregated, const std::vector<OpId>& ready) {
  const auto machines = static_cast<int32_t>(s.servers.size());
  const double share_bytes = share_bytes_of(s, dense_bytes, sparse_touched_bytes);
  const LayerRange layers = all_layers(*s.profile);
  ServerPhase phase{std::vector<std::vector<OpId>>(s.servers.size()), std::vector<std::vector<OpId>>(s.servers.size())};
  for (int32_t w = 0; w < static_cast<int32_t>(s.workers); ++w) {
    const int32_t k = machine_of(*s.cluster, w);
    const OpId after = ready[static_cast<size_t>(w)];
    const OpId copy =
        b.add(transfer_op(OpKind::kCopyToHost, w, s.iteration, dense_bytes + sparse_touched_bytes, layers, {after}));
    phase.held[static_cast<size_t>(k)].push_back(copy);
    phase.copies[static_cast<size_t>(k)].push_back(copy);
    for (int32_t step = 1; step < machines && share_bytes > 0; ++step) {
      const auto j = static_cast<size_t>((k + step) % machines);
      phase.held[j].push_back(
          add_transfer(b, Payload::kParamGradient, w, s.servers[j], s.iteration, share_bytes, layers, {after}).recv);
    }
  }
  for (int32_t k = 0; k < machines && aggregated; ++k) {
    for (int32_t step = 1; step < machines; ++step) {
      const auto j = static_cast<size_t>((k + step) % machines);
      phase.held[j].push_back(add_transfer(b, Payload::kParamGradient, s.servers[static_cast<size_t>(k)], s.servers[j],
                                           s.iteration, union_share_bytes(s, static_cast<size_t>(k)), layers,
                                           phase.copies[static_cast<size_t>(k)])
                                  .recv);
    }
  }
  return phase;
}

// Pull, the mirror image once a server holds every push: each server sends
// its shares to the remote workers (aggregated rows to the remote machines'
// servers), machine j serving j+1, j+2, ... in turn; then every worker copies
// its G back over its host link. Returns what each worker's update waits for.
std::vector<std::vector<OpId>> pull_from_servers(PlanBuilder& b, const ParallaxSetup& s, double dense_bytes,
                                                 double sparse_touched_bytes, bool aggregated,
                                                 const ServerPhase& phase) {
  const auto machines = static_cast<int32_t>(s.servers.size());
  const double share_bytes = share_bytes_of(s, dense_bytes, sparse_touched_bytes);
  const LayerRange layers = all_layers(*s.profile);
  std::vector<std::vector<OpId>> waits(static_cast<size_t>(s.workers));
  std::vector<std::vector<OpId>> at_host = phase.held;  // what machine k's host holds before copying back
  for (int32_t j = 0; j < machines; ++j) {
    const int32_t server = s.servers[static_cast<size_t>(j)];
    const std::vector<OpId>& held = phase.held[static_cast<size_t>(j)];
    for (int32_t step = 1; step < machines; ++step) {
      const auto k = static_cast<size_t>((j + step) % machines);
      for (int32_t w = 0; w < static_cast<int32_t>(s.workers) && share_bytes > 0; ++w) {
        if (static_cast<size_t>(machine_of(*s.cluster, w)) != k) continue;
        waits[static_cast<size_t>(w)].push_back(
            add_transfer(b, Payload::kWeights, server, w, s.iteration, share_bytes, layers, held).recv);
      }
      if (aggregated) {
        at_host[k].push_back(
            add_transfer(b, Payload::kWeights, server, s.servers[k], s.iteration, union_share_bytes(s, k), layers, held)
                .recv);
      }
    }
  }
  for (int32_t w = 0; w < static_cast<int32_t>(s.workers); ++w) {
    const auto k = static_cast<size_t>(machine_of(*s.cluster, w));
    waits[static_cast<size_t>(w)].push_back(b.add(
        transfer_op(OpKind::kCopyToDevice, w, s.iteration, dense_bytes + sparse_touched_bytes, layers, at_host[k])));
  }
  return waits;
}

// Each machine's server steps its share of every served variable once it
// holds every push (parallax_server_step_s), one variable after another on
// its host; the pulls from it wait for the steps, not the pushes.
void add_server_steps(PlanBuilder& b, const ParallaxSetup& s, ServerPhase& phase) {
  for (size_t j = 0; j < s.servers.size(); ++j) {
    std::vector<OpId> steps;
    for (const LayerRange& served : s.served) {
      Op step;
      step.kind = OpKind::kServerStep;
      step.stream = StreamKind::kHost;
      step.worker = s.servers[j];
      step.iteration = s.iteration;
      step.first_layer = static_cast<int32_t>(served.first);
      step.last_layer = static_cast<int32_t>(served.last);
      step.work_s = parallax_server_step_s(*s.profile, *s.cluster, s.workers, served);
      step.deps = phase.held[j];
      steps.push_back(b.add(std::move(step)));
    }
    phase.held[j] = std::move(steps);
  }
}

// The servers' exchange of one iteration (parameter_server_s): push, the
// servers' steps, then pull. `ready[w]` is what worker w's push waits for.
std::vector<std::vector<OpId>> add_parameter_servers(PlanBuilder& b, const ParallaxSetup& s, double dense_bytes,
                                                     double sparse_touched_bytes, const std::vector<OpId>& ready) {
  const bool aggregated = s.local_aggregation && sparse_touched_bytes > 0 && s.servers.size() > 1;
  ServerPhase phase = push_to_servers(b, s, dense_bytes, sparse_touched_bytes, aggregated, ready);
  add_server_steps(b, s, phase);
  return pull_from_servers(b, s, dense_bytes, sparse_touched_bytes, aggregated, phase);
}

// AllGatherv by the ring (allgather_ring_s): N-1 steps, in each of which
// every worker sends `block_bytes` (one worker's rows) to the next, the block
// it received in the step before. Returns what each worker's update waits
// for: its last receive, and its own sends (which read the rows it updates).
std::vector<std::vector<OpId>> add_ring_allgather(PlanBuilder& b, const ParallaxSetup& s, double block_bytes,
                                                  std::vector<OpId> ready) {
  const auto workers = static_cast<int32_t>(s.workers);
  std::vector<std::vector<OpId>> waits(static_cast<size_t>(workers));
  for (int32_t step = 0; step + 1 < workers; ++step) {
    std::vector<OpId> received(static_cast<size_t>(workers));
    for (int32_t w = 0; w < workers; ++w) {
      const int32_t next = (w + 1) % workers;
      const Transfer t =
          add_transfer(b, Payload::kSparseRows, w, next, s.iteration, block_bytes, all_layers(*s.profile),
                       {ready[static_cast<size_t>(w)]});
      received[static_cast<size_t>(next)] = t.recv;
      waits[static_cast<size_t>(w)].push_back(t.send);
    }
    ready = std::move(received);
  }
  for (int32_t w = 0; w < workers; ++w) waits[static_cast<size_t>(w)].push_back(ready[static_cast<size_t>(w)]);
  return waits;
}

// The plan's servers: one per sparse layer (its table, stepped on the touched
// rows), and in ps mode one for the dense layers after the last sparse one.
std::vector<LayerRange> add_servers(PlanBuilder& b, const Profile& profile, bool serves_dense) {
  const std::vector<LayerRange> served = parallax_served_layers(profile, serves_dense);
  for (const LayerRange& r : served) {
    const bool sparse = profile.layers[static_cast<size_t>(r.first)].sparse;
    b.add_server({static_cast<int32_t>(r.first), static_cast<int32_t>(r.last),
                  sparse ? ServerRule::kSparseRows : ServerRule::kDense});
  }
  return served;
}

}  // namespace

// docs/equations.md §3 per mode (predict_parallax): ar = AllReduce(dense) then the
// sparse allgather; ps = the servers for both; hybrid = AllReduce(dense) then
// the servers for sparse; each worker then updates dense + αw bytes.
Plan plan_parallax(const Profile& profile, const Cluster& cluster, StrategyConfig& config, int32_t iterations) {
  PlanBuilder b = data_parallel_builder(&predict_parallax, profile, cluster, config, iterations);
  ParallaxSetup s;
  s.profile = &profile;
  s.cluster = &cluster;
  s.workers = resolve_workers(config, cluster);
  const CollectiveAlgorithm algorithm = read_collective_algorithm(config);
  const std::string mode = config.get_choice("mode", "hybrid", {"hybrid", "ps", "ar"});
  s.local_aggregation = config.get_bool("local_aggregation", true);
  s.servers = machine_first_workers(cluster, s.workers);
  s.per_machine = workers_per_machine(cluster, s.workers);
  const VariableBytes v = variable_bytes(profile);
  const auto workers = static_cast<int32_t>(s.workers);
  const LayerRange layers = all_layers(profile);
  const bool dense_allreduce = workers > 1 && mode != "ps" && v.dense > 0;
  const int32_t group = dense_allreduce ? b.group(all_workers(s.workers)) : -1;
  const double served_dense_bytes = mode == "ps" ? v.dense : 0.0;  // dense bytes through the servers

  const bool through_servers = workers > 1 && mode != "ar" && served_dense_bytes + v.sparse_touched > 0;
  if (through_servers) s.served = add_servers(b, profile, mode == "ps");
  b.set_gathers_sparse_rows(mode == "ar");

  ReplicaCompute compute(profile);
  for (int32_t i = 0; i < iterations; ++i) {
    s.iteration = i;
    std::vector<OpId> ready;
    for (int32_t w = 0; w < workers; ++w) {
      b.add(compute.op(OpKind::kForward, layers, w, i, i));
      ready.push_back(b.add(compute.op(OpKind::kBackward, layers, w, i, i)));
      if (dense_allreduce) {
        Op allreduce = transfer_op(OpKind::kAllReduce, w, i, v.dense, layers, {ready.back()}, group, algorithm);
        allreduce.dense_only = true;  // the sparse gradients go to the servers or around the ring
        ready.back() = b.add(std::move(allreduce));
      }
    }
    std::vector<std::vector<OpId>> waits(static_cast<size_t>(workers));
    for (int32_t w = 0; w < workers; ++w) waits[static_cast<size_t>(w)] = {ready[static_cast<size_t>(w)]};
    if (workers > 1 && mode == "ar" && v.sparse_touched > 0) {
      waits = add_ring_allgather(b, s, v.sparse_touched, ready);
    } else if (through_servers) {
      waits = add_parameter_servers(b, s, served_dense_bytes, v.sparse_touched, ready);
    }
    for (int32_t w = 0; w < workers; ++w) {
      Op update = update_op(parallax_worker_update_s(profile, cluster, s.workers, mode), layers, w, i, i);
      update.deps = waits[static_cast<size_t>(w)];
      b.add(std::move(update));
    }
  }
  return std::move(b).build();
}

}  // namespace trainsim
