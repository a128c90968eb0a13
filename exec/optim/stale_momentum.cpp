// Stability of momentum SGD on stale gradients; see stale_momentum.hpp and
// docs/results.md ("Momentum on stale gradients") for the derivation.
#include "exec/optim/stale_momentum.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "model/error.hpp"

namespace trainsim {
namespace {

constexpr int kBisections = 80;  // halves [0, 4] far below the 1e-9 asked
// The warning quotes the quadratic's bounds up to this staleness (each test
// costs O(τ²), times kBisections).
constexpr int64_t kQuotedStaleness = 64;

std::string short_number(double value) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.3g", value);
  return buffer;
}

}  // namespace

bool roots_inside_unit_circle(std::vector<double> a) {
  while (!a.empty() && a.back() == 0) a.pop_back();
  TRAINSIM_CHECK(!a.empty(), "the zero polynomial has no roots to place");
  // Schur–Cohn–Jury reduction: p has all roots inside iff |a_0| < |a_n| and
  // (a_n·p(z) − a_0·z^n·p(1/z)) / z, one degree lower, has them all inside too.
  while (a.size() > 1) {
    const size_t n = a.size() - 1;
    const double lead = a[n];
    const double constant = a[0];
    if (!(std::fabs(constant) < std::fabs(lead))) return false;
    std::vector<double> next(n);
    for (size_t k = 0; k < n; ++k) next[k] = lead * a[k + 1] - constant * a[n - 1 - k];
    const double scale = next[n - 1];  // lead² − constant² > 0
    for (double& c : next) c /= scale;
    a = std::move(next);
  }
  return true;
}

bool stale_heavy_ball_stable(double step_curvature, double momentum, int64_t staleness) {
  TRAINSIM_CHECK(staleness >= 0, "staleness is negative");
  // P(z) = z^τ(z − 1)(z − β) + ηλz, coefficients from z^0 up.
  std::vector<double> p(static_cast<size_t>(staleness) + 3, 0.0);
  const auto tau = static_cast<size_t>(staleness);
  p[tau] += momentum;
  p[tau + 1] -= 1 + momentum;
  p[tau + 2] += 1;
  p[1] += step_curvature;
  return step_curvature > 0 && roots_inside_unit_circle(p);
}

double max_stable_step_curvature(double momentum, int64_t staleness) {
  double lo = 0;
  double hi = 2 * (1 + momentum) + 1e-9;  // the bound without staleness; a delay only lowers it
  for (int i = 0; i < kBisections; ++i) {
    const double mid = 0.5 * (lo + hi);
    (stale_heavy_ball_stable(mid, momentum, staleness) ? lo : hi) = mid;
  }
  return lo;
}

double implicit_momentum(int64_t staleness) {
  TRAINSIM_CHECK(staleness >= 0, "staleness is negative");
  return static_cast<double>(staleness) / static_cast<double>(staleness + 1);
}

StaleMomentumCheck check_stale_momentum(double momentum, int64_t staleness) {
  StaleMomentumCheck c;
  c.staleness = staleness;
  c.momentum = momentum;
  c.total_momentum = momentum + implicit_momentum(staleness);
  c.stable = c.total_momentum < 1;
  c.suggested_momentum = std::max(0.0, momentum - implicit_momentum(staleness));
  return c;
}

std::string stale_momentum_warning(const StaleMomentumCheck& c, const std::string& strategy) {
  if (c.stable) return "";
  // The suggestion rounded down to two decimals, so it passes the check.
  const double suggested = std::floor(c.suggested_momentum * 100 + 1e-9) / 100;
  std::string line = "trainsim: warning: " + strategy + "'s gradients are " + std::to_string(c.staleness) +
                     (c.staleness == 1 ? " iteration" : " iterations") + " stale, which adds momentum of about " +
                     short_number(implicit_momentum(c.staleness)) + "; with --momentum " +
                     short_number(c.momentum) + " the total, " + short_number(c.total_momentum) +
                     ", is not below 1 and SGD does not settle";
  if (c.staleness <= kQuotedStaleness) {
    line += " (the stable learning rate x curvature shrinks from " +
            short_number(max_stable_step_curvature(c.momentum, 0)) + " to " +
            short_number(max_stable_step_curvature(c.momentum, c.staleness)) + ")";
  }
  return line + ": set --momentum " + short_number(suggested) + " (docs/results.md: momentum on stale gradients)";
}

}  // namespace trainsim
