// Collective communication costs (docs/equations.md §2, after Thakur, Rabenseifner
// and Gropp 2005): the α-β-γ model of MPICH's algorithms. One file per
// algorithm under collectives/; this header is the narrow interface.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainsim {

struct Cluster;
struct CodecRates;

// α-β-γ parameters of a group of devices.
struct LinkParams {
  double alpha_s = 0;        // latency per message
  double beta_s_per_byte = 0;   // 1 / link bandwidth
  double gamma_s_per_byte = 0;  // 1 / reduction throughput
};

// kLibrary: the MPI library's own AllReduce (MPI_Allreduce), executed only
// across MPI processes, as a baseline beside the project's algorithms.
enum class CollectiveAlgorithm { kRing, kRecursiveDoubling, kRabenseifner, kBinomialTree, kLibrary };

// Names used in configs: "ring", "recursive-doubling", "rabenseifner", "tree", "mpi".
const std::vector<std::string>& collective_algorithm_names();
CollectiveAlgorithm parse_collective_algorithm(const std::string& name, const std::string& where);
std::string collective_algorithm_name(CollectiveAlgorithm algorithm);

// AllReduce of `bytes` over `p` processes; 0 when p == 1.
double allreduce_s(CollectiveAlgorithm algorithm, double bytes, int64_t p, const LinkParams& link);

// The AllReduce algorithms behind allreduce_s, one file each. Recursive
// doubling and Rabenseifner fold a non-power-of-two p onto the largest power
// of two first (Thakur et al. 2005 §4); the tree is a binomial reduce followed
// by a binomial broadcast.
double allreduce_ring_s(double bytes, int64_t p, const LinkParams& link);
double allreduce_recursive_doubling_s(double bytes, int64_t p, const LinkParams& link);
double allreduce_rabenseifner_s(double bytes, int64_t p, const LinkParams& link);
double allreduce_tree_s(double bytes, int64_t p, const LinkParams& link);

// A barrier of p processes: one global synchronization, t_sync of
// docs/equations.md §2 (the measured cluster's sync_s is a barrier's time); 0 when p == 1.
double barrier_s(int64_t p, double sync_s);

// What one AllReduce or broadcast call of `bytes` over p > 1 members costs
// beyond its algorithm's α-β-γ time: t_sync (docs/equations.md §2), plus, where
// the cluster gives collective.pack_bytes_per_s, pack_latency_s + bytes /
// that rate for packing the tensors into one buffer and unpacking the result (a fusion
// buffer, as Horovod's and PyTorch DDP's buckets copy; the GPU's virtual
// workers' copies of the gradient down and up around their host
// collective), `bytes` the float32 bytes packed, whatever the wire
// carries. t_sync alone when p == 1, and for `algorithm` kLibrary priced by
// the library's own hops (collective.library, members on one machine:
// NCCL's AllReduce of the gradients where each GPU keeps them, its copies
// inside its measured hops).
double collective_call_overhead_s(const Cluster& cluster, double bytes, int64_t p, CollectiveAlgorithm algorithm,
                                  bool crosses_machines);

// Pipe-SGD's codec at every hop of a ring AllReduce of `gradient_bytes`
// float32 bytes over p members (seed 002 §3.2, Fig. 3b; the executor's
// all_reduce_ring_codec): each member encodes p chunks of 1/p (p − 1 partial
// sums and its finished chunk) and decodes 2p − 1 (p − 1 partial sums, its
// finished chunk, p − 1 forwarded results), each hop waiting on the last:
// (p·e + (2p − 1)·d)·gradient_bytes/p, e and d the seconds per byte of the
// cluster's codec rates (0 where it has none). 0 for "none" or p == 1.
double ring_codec_s(const Cluster& cluster, const std::string& compression, double gradient_bytes, int64_t p);

// The cluster's rates of Pipe-SGD's codec `compression` (trunc16 or quant8).
const CodecRates& codec_rates(const Cluster& cluster, const std::string& compression);

// Largest power of two <= p (p >= 1), and ⌈log2 p⌉ (0 for p == 1).
int64_t floor_power_of_two(int64_t p);
int64_t ceil_log2(int64_t p);

// `core_s`, the cost of an AllReduce run by p' = floor_power_of_two(p)
// processes, plus, when p' < p, the step that folds the extra processes onto
// partners before it (α + nβ + nγ) and hands them the result after (α + nβ)
// (Thakur et al. 2005 §4). Shared by recursive doubling and Rabenseifner.
double add_power_of_two_fold_s(double core_s, double bytes, int64_t p, const LinkParams& link);

// Binomial-tree reduce and broadcast, ring allgather (bytes = total gathered),
// pairwise reduce-scatter (bytes = the whole vector). 0 when p == 1.
double reduce_tree_s(double bytes, int64_t p, const LinkParams& link);
double broadcast_tree_s(double bytes, int64_t p, const LinkParams& link);
double broadcast_scatter_allgather_s(double bytes, int64_t p, const LinkParams& link);
double allgather_ring_s(double bytes, int64_t p, const LinkParams& link);
double reduce_scatter_pairwise_s(double bytes, int64_t p, const LinkParams& link);

// The link of a group of `group` devices placed in order on `cluster`: the
// intra-machine link while the group fits on one machine, else the slower of
// the intra- and inter-machine links (a flat collective crossing machines is
// paced by its slowest hop). γ from cluster.collective.reduce_bytes_per_s.
// For `algorithm` kLibrary on one machine whose cluster gives the library's
// own hops (collective.library: NCCL between GPUs): α and β of those, γ 0.
LinkParams collective_link(const Cluster& cluster, int64_t group,
                           CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing);

// The same link for a group whose placement is known: the intra-machine link
// when every member sits on one machine, else the slower of the two (as
// above). collective_link is this with crosses_machines = group > devices_per_machine.
LinkParams collective_link_for(const Cluster& cluster, bool crosses_machines,
                               CollectiveAlgorithm algorithm = CollectiveAlgorithm::kRing);

}  // namespace trainsim
