#include <stdexcept>
#include "sim/cost/strategies.hpp"
namespace trainsim {
Prediction predict_dualpipe(const Profile&, const Cluster&, StrategyConfig&) { throw std::logic_error("dualpipe: cost model not written yet"); }
}  // namespace trainsim
