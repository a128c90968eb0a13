// The scatter/gather family (Thakur, Rabenseifner, Gropp 2005; docs/equations.md
// §2): ring allgather, pairwise reduce-scatter, and the long-message
// broadcast built from a binomial scatter and a ring allgather.
#include "model/error.hpp"
#include "sim/cost/collective.hpp"

namespace trainsim {

// docs/equations.md §2, allgather/ring (n = total gathered): (p-1)α + ((p-1)/p)nβ.
double allgather_ring_s(double bytes, int64_t p, const LinkParams& link) {
  TRAINSIM_CHECK(p >= 1 && bytes >= 0, "allgather_ring_s: needs p >= 1 and bytes >= 0");
  if (p == 1) return 0;
  const double steps = static_cast<double>(p - 1);
  return steps * link.alpha_s + steps / static_cast<double>(p) * bytes * link.beta_s_per_byte;
}

// docs/equations.md §2, reduce-scatter/pairwise: (p-1)α + ((p-1)/p)nβ + ((p-1)/p)nγ.
double reduce_scatter_pairwise_s(double bytes, int64_t p, const LinkParams& link) {
  TRAINSIM_CHECK(p >= 1 && bytes >= 0, "reduce_scatter_pairwise_s: needs p >= 1 and bytes >= 0");
  if (p == 1) return 0;
  const double steps = static_cast<double>(p - 1);
  const double share = steps / static_cast<double>(p);
  return steps * link.alpha_s + share * bytes * link.beta_s_per_byte + share * bytes * link.gamma_s_per_byte;
}

// docs/equations.md §2, broadcast/scatter + ring allgather: (lg p + p - 1)α +
// 2((p-1)/p)nβ, with ⌈lg p⌉ scatter rounds when p is not a power of two.
double broadcast_scatter_allgather_s(double bytes, int64_t p, const LinkParams& link) {
  TRAINSIM_CHECK(p >= 1 && bytes >= 0, "broadcast_scatter_allgather_s: needs p >= 1 and bytes >= 0");
  if (p == 1) return 0;
  const double share = static_cast<double>(p - 1) / static_cast<double>(p);
  return static_cast<double>(ceil_log2(p) + p - 1) * link.alpha_s + 2 * share * bytes * link.beta_s_per_byte;
}

}  // namespace trainsim
