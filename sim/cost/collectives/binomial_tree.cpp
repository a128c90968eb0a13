// Binomial-tree reduce and broadcast (Thakur, Rabenseifner, Gropp 2005;
// docs/equations.md §2), and the AllReduce built from them: a reduce to the root
// followed by a broadcast from it, each ⌈lg p⌉ rounds of whole-vector messages.
#include "model/error.hpp"
#include "sim/cost/collective.hpp"

namespace trainsim {

// docs/equations.md §2, reduce/binomial tree: lg p·α + n lg p·β + n lg p·γ, with
// ⌈lg p⌉ rounds when p is not a power of two (the tree's depth).
double reduce_tree_s(double bytes, int64_t p, const LinkParams& link) {
  TRAINSIM_CHECK(p >= 1 && bytes >= 0, "reduce_tree_s: needs p >= 1 and bytes >= 0");
  const double rounds = static_cast<double>(ceil_log2(p));
  return rounds * (link.alpha_s + bytes * link.beta_s_per_byte + bytes * link.gamma_s_per_byte);
}

// docs/equations.md §2, broadcast/binomial tree: ⌈lg p⌉(α + nβ).
double broadcast_tree_s(double bytes, int64_t p, const LinkParams& link) {
  TRAINSIM_CHECK(p >= 1 && bytes >= 0, "broadcast_tree_s: needs p >= 1 and bytes >= 0");
  const double rounds = static_cast<double>(ceil_log2(p));
  return rounds * (link.alpha_s + bytes * link.beta_s_per_byte);
}

// Reduce then broadcast: ⌈lg p⌉(2α + 2nβ + nγ).
double allreduce_tree_s(double bytes, int64_t p, const LinkParams& link) {
  return reduce_tree_s(bytes, p, link) + broadcast_tree_s(bytes, p, link);
}

}  // namespace trainsim
