#include <stdexcept>
#include "sim/cost/strategies.hpp"
namespace trainsim {
Prediction predict_dsp(const Profile&, const Cluster&, StrategyConfig&) { throw std::logic_error("dsp: cost model not written yet"); }
}  // namespace trainsim
