#include <stdexcept>
#include "sim/cost/strategies.hpp"
namespace trainsim {
Prediction predict_dp_overlap(const Profile&, const Cluster&, StrategyConfig&) { throw std::logic_error("dp_overlap: cost model not written yet"); }
}  // namespace trainsim
