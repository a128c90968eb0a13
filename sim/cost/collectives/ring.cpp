// Ring AllReduce (Thakur, Rabenseifner, Gropp 2005; docs/equations.md §2): a
// reduce-scatter then an allgather around the ring, p-1 steps each, every
// step moving n/p bytes per process. Bandwidth-optimal, latency linear in p.
#include "model/error.hpp"
#include "sim/cost/collective.hpp"

namespace trainsim {

// docs/equations.md §2, allreduce/ring: 2(p-1)α + 2((p-1)/p)nβ + ((p-1)/p)nγ.
double allreduce_ring_s(double bytes, int64_t p, const LinkParams& link) {
  TRAINSIM_CHECK(p >= 1 && bytes >= 0, "allreduce_ring_s: needs p >= 1 and bytes >= 0");
  if (p == 1) return 0;
  const double steps = static_cast<double>(p - 1);
  const double share = steps / static_cast<double>(p);
  return 2 * steps * link.alpha_s + 2 * share * bytes * link.beta_s_per_byte + share * bytes * link.gamma_s_per_byte;
}

}  // namespace trainsim
