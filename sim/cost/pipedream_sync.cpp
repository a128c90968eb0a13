#include <stdexcept>
#include "sim/cost/strategies.hpp"
namespace trainsim {
Prediction predict_pipedream_sync(const Profile&, const Cluster&, StrategyConfig&) { throw std::logic_error("pipedream_sync: cost model not written yet"); }
}  // namespace trainsim
