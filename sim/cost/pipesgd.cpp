#include <stdexcept>
#include "sim/cost/strategies.hpp"
namespace trainsim {
Prediction predict_pipesgd(const Profile&, const Cluster&, StrategyConfig&) { throw std::logic_error("pipesgd: cost model not written yet"); }
}  // namespace trainsim
