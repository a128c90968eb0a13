#include <stdexcept>
#include "sim/cost/strategies.hpp"
namespace trainsim {
Prediction predict_parallax(const Profile&, const Cluster&, StrategyConfig&) { throw std::logic_error("parallax: cost model not written yet"); }
}  // namespace trainsim
