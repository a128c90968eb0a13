// The tags of the interpreter's messages: non-negative and dense, so a
// transport whose tags are bounded (MPI's, 0..MPI_TAG_UB, at least 32767 and
// 2^31 - 1 in OpenMPI) carries every plan of up to half a billion ops. Four
// classes interleaved: a send's (its op id), a collective's (its instance:
// the k-th collective of one kind in one group, the same on every member), a
// parameter server's round, and the exchanges of a run several processes
// share (its starting barrier, its results, its state).
#pragma once

#include <cstdint>

#include "sim/plan/plan.hpp"

namespace trainsim::interp {

inline int64_t send_tag(OpId send) { return 4 * static_cast<int64_t>(send); }
inline int64_t collective_tag(int64_t instance) { return 4 * instance + 1; }
inline int64_t server_round_tag(int64_t round) { return 4 * round + 2; }
inline int64_t start_tag() { return 3; }
inline int64_t result_tag() { return 7; }
inline int64_t state_tag() { return 11; }
// A copy between a worker and its machine's host memory held by another
// process (cgdp across processes): the copy op's id, above the three above.
inline int64_t host_copy_tag(OpId copy) { return 4 * (static_cast<int64_t>(copy) + 3) + 3; }

}  // namespace trainsim::interp
