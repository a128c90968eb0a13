// Recursive-doubling AllReduce (Thakur, Rabenseifner, Gropp 2005 §4.1;
// docs/equations.md §2): lg p rounds, each exchanging and reducing the whole
// vector with a partner at distance 2^k. Latency-optimal, bandwidth-poor.
#include "model/error.hpp"
#include "sim/cost/collective.hpp"

namespace trainsim {

// docs/equations.md §2, allreduce/recursive doubling: lg p·α + n lg p·β + n lg p·γ,
// for p a power of two. Otherwise (Thakur et al. 2005 §4) the r = p - p'
// extra processes first hand their vector to a partner, who reduces it
// (α + nβ + nγ), the p' = 2^⌊lg p⌋ others run the algorithm, and the partners
// send the result back (α + nβ).
double allreduce_recursive_doubling_s(double bytes, int64_t p, const LinkParams& link) {
  TRAINSIM_CHECK(p >= 1 && bytes >= 0, "allreduce_recursive_doubling_s: needs p >= 1 and bytes >= 0");
  if (p == 1) return 0;
  const int64_t core = floor_power_of_two(p);
  const double rounds = static_cast<double>(ceil_log2(core));
  const double core_s = rounds * (link.alpha_s + bytes * link.beta_s_per_byte + bytes * link.gamma_s_per_byte);
  return add_power_of_two_fold_s(core_s, bytes, p, link);
}

}  // namespace trainsim
