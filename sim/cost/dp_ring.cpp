// `dp-ring`: synchronous data parallel; every worker runs forward and backward
// on its own batch, then one AllReduce of all gradients (ring by default),
// then the update. Nothing overlaps the communication (seeds 002 and 004).
#include "sim/cost/common.hpp"
#include "sim/cost/data_parallel.hpp"
#include "sim/cost/models.hpp"

namespace trainsim {

// docs/equations.md §1 eq. (2) with the ring AllReduce of §2:
// t = Σfw + Σbw + ringAllReduce(M) + t_sync (+ packing) + update, M = Σ param_bytes,
// ringAllReduce = 2(N-1)α + 2((N-1)/N)Mβ + ((N-1)/N)Mγ; N = 1 communicates nothing.
Prediction predict_dp_ring(const Profile& profile, const Cluster& cluster, StrategyConfig& config) {
  const int64_t workers = resolve_workers(config, cluster);
  const CollectiveAlgorithm algorithm = read_collective_algorithm(config);
  const ModelTotals t = model_totals(profile);
  const double compute_s = t.forward_s + t.backward_s + exchanged_update_s(profile, cluster, workers);
  double comm_s = 0;
  if (workers > 1) {
    comm_s =
        allreduce_s(algorithm, t.param_bytes, workers, collective_link(cluster, workers, algorithm)) +
        collective_call_overhead_s(cluster, t.param_bytes, workers, algorithm, workers > cluster.devices_per_machine);
  }
  Prediction p = data_parallel_prediction("dp-ring", profile, workers, compute_s, comm_s);
  p.staleness = 0;
  finish_prediction(p, config);
  return p;
}

}  // namespace trainsim
