// Rabenseifner's AllReduce (Thakur, Rabenseifner, Gropp 2005 §4.4;
// docs/equations.md §2): a recursive-halving reduce-scatter then a
// recursive-doubling allgather. Ring's bandwidth term with lg p latency.
#include "model/error.hpp"
#include "sim/cost/collective.hpp"

namespace trainsim {

// docs/equations.md §2, allreduce/Rabenseifner: 2 lg p·α + 2((p-1)/p)nβ +
// ((p-1)/p)nγ for p a power of two. Otherwise (Thakur et al. 2005 §4) the
// extra processes fold onto p' = 2^⌊lg p⌋ partners first (α + nβ + nγ) and
// get the result back after (α + nβ); the core runs with p'.
double allreduce_rabenseifner_s(double bytes, int64_t p, const LinkParams& link) {
  TRAINSIM_CHECK(p >= 1 && bytes >= 0, "allreduce_rabenseifner_s: needs p >= 1 and bytes >= 0");
  if (p == 1) return 0;
  const int64_t core = floor_power_of_two(p);
  const double rounds = static_cast<double>(ceil_log2(core));
  const double share = static_cast<double>(core - 1) / static_cast<double>(core);
  const double core_s = 2 * rounds * link.alpha_s + 2 * share * bytes * link.beta_s_per_byte +
                        share * bytes * link.gamma_s_per_byte;
  return add_power_of_two_fold_s(core_s, bytes, p, link);
}

}  // namespace trainsim
