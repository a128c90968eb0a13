// validation_to_json: a validation as `trainsim.validation/1` (docs/formats.md).
#include <cmath>

#include "tools/validation.hpp"

namespace trainsim {
namespace {

nlohmann::json finite_or_null(double x) { return std::isfinite(x) ? nlohmann::json(x) : nlohmann::json(); }

}  // namespace

nlohmann::json validation_to_json(const Validation& v, const std::string& model, const std::string& devices,
                                  int32_t iterations) {
  nlohmann::json results = nlohmann::json::array();
  for (const StrategyValidation& r : v.results) {
    if (!r.skipped.empty()) {
      results.push_back({{"strategy", r.strategy}, {"skipped", r.skipped}});
      continue;
    }
    nlohmann::json ops = nlohmann::json::array();
    for (const OpGroupComparison& g : r.ops) {
      ops.push_back({{"kind", g.kind},
                     {"stream", g.stream},
                     {"worker", g.worker},
                     {"first_layer", g.first_layer},
                     {"last_layer", g.last_layer},
                     {"count", g.count},
                     {"simulated_s", g.simulated_s},
                     {"measured_s", g.measured_s},
                     {"error", g.error}});
    }
    results.push_back({{"strategy", r.strategy},
                       {"config", r.config},
                       {"measured_s", r.measured_s},
                       {"measured_min_s", r.measured_min_s},
                       {"measured_max_s", r.measured_max_s},
                       {"measured_rounds_s", r.measured_rounds_s},
                       {"probe_rounds_s", r.probe_rounds_s},
                       {"measured_low_s", r.interval.low},
                       {"measured_high_s", r.interval.high},
                       {"coverage", r.interval.coverage},
                       {"measurement_uncertainty", finite_or_null(r.interval.relative_half_width)},
                       {"predicted_rounds_s", r.predicted_rounds_s},
                       {"prediction_spread", finite_or_null(r.prediction_spread)},
                       {"uncertainty", finite_or_null(r.uncertainty)},
                       {"verdict", r.verdict},
                       {"predicted_analytic_s", r.predicted_analytic_s},
                       {"predicted_simulated_s", r.predicted_simulated_s},
                       {"error_analytic", r.error_analytic},
                       {"error_simulated", r.error_simulated},
                       {"device_busy", finite_or_null(r.device_busy)},
                       {"predicted_memory_bytes", r.predicted_memory_bytes},
                       {"measured_memory_bytes", r.measured_memory_bytes >= 0 ? nlohmann::json(r.measured_memory_bytes)
                                                                              : nlohmann::json(nullptr)},
                       {"ops", std::move(ops)}});
  }
  return {{"format", "trainsim.validation/1"},
          {"model", model},
          {"devices", devices},
          {"workers", v.workers},
          {"batch_size", v.profile.batch_size},
          {"iterations", iterations},
          {"rounds", v.rounds},
          {"cluster", v.cluster.name},
          {"elapsed_s", v.elapsed_s},
          {"stopped", v.stopped},
          {"probe_s", v.probe_s},
          {"machine_variability", finite_or_null(v.probe.relative_half_width)},
          {"median_abs_error_simulated", median_abs_error(v, true)},
          {"median_abs_error_simulated_judged", median_abs_error(v, true, true)},
          {"median_abs_error_analytic", median_abs_error(v, false)},
          {"results", std::move(results)}};
}

}  // namespace trainsim
