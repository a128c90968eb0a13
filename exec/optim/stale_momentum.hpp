// Momentum on stale gradients. A gradient τ iterations old acts as momentum
// of its own: asynchrony with M workers adds implicit momentum 1 − 1/M
// (Mitliagkas, Zhang, Hadjis and Ré, "Asynchrony begets momentum", 2016,
// §3), τ/(τ + 1) for a delay of τ. With explicit momentum β the total must
// stay below 1; on a quadratic of curvature λ, heavy-ball with delay τ,
//   x_{t+1} = x_t + β(x_t − x_{t−1}) − ηλ·x_{t−τ},
// is stable iff every root of P(z) = z^τ(z − 1)(z − β) + ηλz lies inside the
// unit circle (docs/results.md, "Momentum on stale gradients").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace trainsim {

// Schur–Cohn test: whether every root of the real polynomial Σ coefficients[k]·z^k
// (leading coefficient last, nonzero) lies strictly inside the unit circle.
bool roots_inside_unit_circle(std::vector<double> coefficients);

// Whether heavy-ball SGD with momentum β in [0, 1) and gradients `staleness`
// (τ >= 0) iterations stale converges on a quadratic where the step times the
// curvature is `step_curvature` (ηλ > 0).
bool stale_heavy_ball_stable(double step_curvature, double momentum, int64_t staleness);

// The largest ηλ at which it is still stable (the stable set is (0, this)):
// 2(1 + β) without staleness, 1 − β with one iteration, 2·sin(π/(4τ + 2)) for
// plain SGD (β = 0). Bisection on stale_heavy_ball_stable, relative error 1e-9.
double max_stable_step_curvature(double momentum, int64_t staleness);

// τ/(τ + 1): the momentum a delay of τ iterations adds (Mitliagkas et al. 2016, M = τ + 1).
double implicit_momentum(int64_t staleness);

struct StaleMomentumCheck {
  int64_t staleness = 0;          // τ, iterations
  double momentum = 0;            // β, explicit
  double total_momentum = 0;      // β + τ/(τ + 1)
  bool stable = true;             // total_momentum < 1
  double suggested_momentum = 0;  // max(0, β − τ/(τ + 1)): the total back at β
};

// The check of momentum β with gradients `staleness` iterations stale.
StaleMomentumCheck check_stale_momentum(double momentum, int64_t staleness);

// One line for standard error saying why `strategy` will train badly and what
// to set, or "" when the check is stable.
std::string stale_momentum_warning(const StaleMomentumCheck& check, const std::string& strategy);

}  // namespace trainsim
