// Collective algorithm names and parsing, the AllReduce dispatch, and the
// α-β-γ link of a group of devices on a cluster (docs/equations.md §2). The
// algorithms themselves live one per file beside this one.
#include <algorithm>

#include "model/error.hpp"
#include "model/strings.hpp"
#include "profiles/cluster.hpp"
#include "sim/cost/collective.hpp"

namespace trainsim {

const std::vector<std::string>& collective_algorithm_names() {
  static const std::vector<std::string> names = {"ring", "recursive-doubling", "rabenseifner", "tree", "mpi"};
  return names;
}

CollectiveAlgorithm parse_collective_algorithm(const std::string& name, const std::string& where) {
  static const CollectiveAlgorithm algorithms[] = {CollectiveAlgorithm::kRing, CollectiveAlgorithm::kRecursiveDoubling,
                                                   CollectiveAlgorithm::kRabenseifner,
                                                   CollectiveAlgorithm::kBinomialTree, CollectiveAlgorithm::kLibrary};
  const std::vector<std::string>& names = collective_algorithm_names();
  for (size_t i = 0; i < names.size(); ++i) {
    if (names[i] == name) return algorithms[i];
  }
  throw InputError(where, "is '" + name + "'", "one of " + join(names, ", "));
}

std::string collective_algorithm_name(CollectiveAlgorithm algorithm) {
  switch (algorithm) {
    case CollectiveAlgorithm::kRing: return "ring";
    case CollectiveAlgorithm::kRecursiveDoubling: return "recursive-doubling";
    case CollectiveAlgorithm::kRabenseifner: return "rabenseifner";
    case CollectiveAlgorithm::kBinomialTree: return "tree";
    case CollectiveAlgorithm::kLibrary: return "mpi";
  }
  TRAINSIM_CHECK(false, "unknown collective algorithm");
  return "";
}

double allreduce_s(CollectiveAlgorithm algorithm, double bytes, int64_t p, const LinkParams& link) {
  switch (algorithm) {
    case CollectiveAlgorithm::kRing: return allreduce_ring_s(bytes, p, link);
    case CollectiveAlgorithm::kRecursiveDoubling: return allreduce_recursive_doubling_s(bytes, p, link);
    case CollectiveAlgorithm::kRabenseifner: return allreduce_rabenseifner_s(bytes, p, link);
    case CollectiveAlgorithm::kBinomialTree: return allreduce_tree_s(bytes, p, link);
    // docs/equations.md §2's ring: Open MPI's tuned AllReduce runs a ring for
    // messages of gradients' sizes; docs/results.md measures the two side by side.
    case CollectiveAlgorithm::kLibrary: return allreduce_ring_s(bytes, p, link);
  }
  TRAINSIM_CHECK(false, "unknown collective algorithm");
  return 0;
}

// docs/equations.md §2: t_sync, the global synchronization of p > 1 processes.
double barrier_s(int64_t p, double sync_s) { return p > 1 ? sync_s : 0.0; }

// docs/equations.md §2's t_sync per call, and the measured packing of the bytes
// (its fixed part, then the bytes at its rate) but where the library's own
// hops sum the gradients in place.
double collective_call_overhead_s(const Cluster& cluster, double bytes, int64_t p, CollectiveAlgorithm algorithm,
                                  bool crosses_machines) {
  const CollectiveSpec& k = cluster.collective;
  const bool in_place = algorithm == CollectiveAlgorithm::kLibrary && k.library && !crosses_machines;
  return k.sync_s +
         (p > 1 && k.pack_bytes_per_s > 0 && !in_place ? k.pack_latency_s + bytes / k.pack_bytes_per_s : 0.0);
}

const CodecRates& codec_rates(const Cluster& cluster, const std::string& compression) {
  TRAINSIM_CHECK(compression == "trunc16" || compression == "quant8", "unknown compression " + compression);
  return compression == "trunc16" ? cluster.collective.trunc16 : cluster.collective.quant8;
}

double ring_codec_s(const Cluster& cluster, const std::string& compression, double gradient_bytes, int64_t p) {
  if (compression == "none" || p <= 1) return 0;
  const CodecRates& rates = codec_rates(cluster, compression);
  const auto per_byte = [](double rate) { return rate > 0 ? 1.0 / rate : 0.0; };
  const auto n = static_cast<double>(p);
  return (n * per_byte(rates.encode_bytes_per_s) + (2 * n - 1) * per_byte(rates.decode_bytes_per_s)) *
         gradient_bytes / n;
}

int64_t floor_power_of_two(int64_t p) {
  TRAINSIM_CHECK(p >= 1, "a process count must be >= 1");
  int64_t power = 1;
  while (power * 2 <= p) power *= 2;
  return power;
}

int64_t ceil_log2(int64_t p) {
  TRAINSIM_CHECK(p >= 1, "a process count must be >= 1");
  int64_t rounds = 0;
  for (int64_t reach = 1; reach < p; reach *= 2) ++rounds;
  return rounds;
}

// Thakur et al. 2005 §4: non-power-of-two p for recursive doubling and
// Rabenseifner. Added term by term, fold then hand-back, onto `core_s`.
double add_power_of_two_fold_s(double core_s, double bytes, int64_t p, const LinkParams& link) {
  if (floor_power_of_two(p) == p) return core_s;
  core_s += link.alpha_s + bytes * link.beta_s_per_byte + bytes * link.gamma_s_per_byte;  // fold in
  core_s += link.alpha_s + bytes * link.beta_s_per_byte;                                  // hand back
  return core_s;
}

LinkParams collective_link(const Cluster& cluster, int64_t group, CollectiveAlgorithm algorithm) {
  TRAINSIM_CHECK(group >= 1 && group <= device_count(cluster), "collective group larger than the cluster");
  return collective_link_for(cluster, group > cluster.devices_per_machine, algorithm);
}

LinkParams collective_link_for(const Cluster& cluster, bool crosses_machines, CollectiveAlgorithm algorithm) {
  LinkParams link;
  // docs/equations.md §2: the library's own measured ring hops (NCCL between
  // GPUs), which sum inside them.
  if (algorithm == CollectiveAlgorithm::kLibrary && cluster.collective.library && !crosses_machines) {
    link.alpha_s = cluster.collective.library->hop_latency_s;
    link.beta_s_per_byte = 1.0 / cluster.collective.library->hop_bytes_per_s;
    return link;
  }
  // A hop inside a machine at the measured rate of every member sending and
  // receiving at once, and after the measured latency of a hop, where the
  // cluster has them (docs/equations.md §2).
  const double intra_bytes_per_s = cluster.collective.hop_bytes_per_s > 0 ? cluster.collective.hop_bytes_per_s
                                                                          : cluster.intra_link.bandwidth_bytes_per_s;
  const double intra_latency_s = cluster.collective.hop_latency_s.value_or(cluster.intra_link.latency_s);
  if (!crosses_machines) {
    link.alpha_s = intra_latency_s;
    link.beta_s_per_byte = 1.0 / intra_bytes_per_s;
  } else {
    // Crossing machines, a flat collective waits on its slowest hop: the lower
    // bandwidth and the higher latency, taken separately.
    link.alpha_s = std::max(intra_latency_s, cluster.inter_link.latency_s);
    link.beta_s_per_byte = 1.0 / std::min(intra_bytes_per_s, cluster.inter_link.bandwidth_bytes_per_s);
  }
  link.gamma_s_per_byte = 1.0 / cluster.collective.reduce_bytes_per_s;
  return link;
}

}  // namespace trainsim
