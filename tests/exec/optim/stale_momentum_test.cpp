// Momentum SGD on stale gradients: the Schur–Cohn root test, the stable bound
// on ηλ against its closed forms, and the check and warning `trainsim run`
// prints, on cases computed by hand.
#include "exec/optim/stale_momentum.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <numbers>

namespace trainsim {
namespace {

TEST(RootsInsideUnitCircle, AgreesWithPolynomialsWhoseRootsAreKnown) {
  EXPECT_TRUE(roots_inside_unit_circle({-0.5, 1}));              // z − 0.5
  EXPECT_FALSE(roots_inside_unit_circle({-2, 1}));               // z − 2
  EXPECT_TRUE(roots_inside_unit_circle({0.25, 0, 1}));           // z² + 0.25: ±0.5i
  EXPECT_TRUE(roots_inside_unit_circle({0.5, -1, 1}));           // 0.5 ± 0.5i, |z| = 0.707
  EXPECT_FALSE(roots_inside_unit_circle({-0.75, 1, 1}));         // (z − 0.5)(z + 1.5)
  EXPECT_FALSE(roots_inside_unit_circle({1, 0, 1}));             // ±i: on the circle is not inside
  EXPECT_TRUE(roots_inside_unit_circle({0, 0, -0.25, 0, 1}));    // z²(z − 0.5)(z + 0.5)
  EXPECT_FALSE(roots_inside_unit_circle({0, 0, 0.5, -1.5, 1}));  // z²(z − 0.5)(z − 1)
}

TEST(StaleHeavyBall, PipeSgdDefaultsAreStableOnlyAtLowCurvature) {
  // τ = 1: P(z)/z = z² − (1 + β)z + β + ηλ, stable iff β + ηλ < 1. With
  // η = 0.05 and β = 0.9 that is λ < 2.
  EXPECT_TRUE(stale_heavy_ball_stable(0.05 * 1, 0.9, 1));
  EXPECT_FALSE(stale_heavy_ball_stable(0.05 * 10, 0.9, 1));
  // Without the delay the same step is stable up to ηλ = 2(1 + β) = 3.8.
  EXPECT_TRUE(stale_heavy_ball_stable(0.05 * 10, 0.9, 0));
  EXPECT_TRUE(stale_heavy_ball_stable(3.7, 0.9, 0));
  EXPECT_FALSE(stale_heavy_ball_stable(3.9, 0.9, 0));
  // Plain SGD one iteration stale: stable iff ηλ < 1.
  EXPECT_TRUE(stale_heavy_ball_stable(0.5, 0, 1));
  EXPECT_FALSE(stale_heavy_ball_stable(1.1, 0, 1));
}

TEST(StaleHeavyBall, BoundMatchesTheClosedForms) {
  for (double beta : {0.0, 0.5, 0.9, 0.99}) {
    EXPECT_NEAR(max_stable_step_curvature(beta, 0), 2 * (1 + beta), 1e-9) << beta;
    EXPECT_NEAR(max_stable_step_curvature(beta, 1), 1 - beta, 1e-9) << beta;
  }
  // Delayed gradient descent: 0 < ηλ < 2·sin(π / (2(2τ + 1))).
  for (int64_t tau = 0; tau <= 8; ++tau) {
    EXPECT_NEAR(max_stable_step_curvature(0, tau), 2 * std::sin(std::numbers::pi / (4.0 * tau + 2)), 1e-9) << tau;
  }
}

TEST(StaleHeavyBall, StableSetIsAnIntervalThatShrinksWithMomentum) {
  // What the bisections assume: for τ >= 1, stable exactly on (0, bound), and
  // the bound falls as β grows.
  for (int64_t tau = 1; tau <= 6; ++tau) {
    double previous = 1e9;
    for (double beta = 0; beta < 0.99; beta += 0.07) {
      const double bound = max_stable_step_curvature(beta, tau);
      EXPECT_LT(bound, previous) << "tau " << tau << " beta " << beta;
      previous = bound;
      for (int k = 1; k < 100; ++k) {
        if (k == 50) continue;  // the bound itself
        EXPECT_EQ(stale_heavy_ball_stable(k / 50.0 * bound, beta, tau), k < 50) << tau << " " << beta << " " << k;
      }
    }
  }
}

TEST(StaleMomentumCheck, PipeSgdDefaultsAreUnstableAndTheFixKeepsTheTotalMomentum) {
  // τ = 1 adds 1 − 1/2 = 0.5; 0.9 + 0.5 = 1.4 >= 1. Setting 0.9 − 0.5 = 0.4
  // brings the total back to the 0.9 asked for.
  const StaleMomentumCheck c = check_stale_momentum(0.9, 1);
  EXPECT_FALSE(c.stable);
  EXPECT_DOUBLE_EQ(c.total_momentum, 1.4);
  EXPECT_NEAR(c.suggested_momentum, 0.4, 1e-12);
  EXPECT_EQ(stale_momentum_warning(c, "pipesgd"),
            "trainsim: warning: pipesgd's gradients are 1 iteration stale, which adds momentum of about 0.5; "
            "with --momentum 0.9 the total, 1.4, is not below 1 and SGD does not settle (the stable learning rate "
            "x curvature shrinks from 3.8 to 0.1): set --momentum 0.4 (docs/results.md: momentum on stale "
            "gradients)");
  EXPECT_TRUE(check_stale_momentum(c.suggested_momentum, 1).stable);
}

TEST(StaleMomentumCheck, StableSettingsSayNothing) {
  EXPECT_TRUE(check_stale_momentum(0.4, 1).stable);  // 0.4 + 0.5 = 0.9
  EXPECT_TRUE(check_stale_momentum(0, 3).stable);    // plain SGD: 0 + 3/4
  EXPECT_TRUE(check_stale_momentum(0.9, 0).stable);  // no delay, no implicit momentum
  EXPECT_EQ(stale_momentum_warning(check_stale_momentum(0.4, 1), "pipesgd"), "");
}

TEST(StaleMomentumCheck, LongDelaysLeaveNoRoomForMomentum) {
  // τ = 2 adds 2/3: 0.5 + 2/3 > 1, and 0.5 − 2/3 < 0 asks for momentum 0.
  const StaleMomentumCheck c = check_stale_momentum(0.5, 2);
  EXPECT_FALSE(c.stable);
  EXPECT_EQ(c.suggested_momentum, 0);
  const std::string line = stale_momentum_warning(c, "dualpipe");
  EXPECT_NE(line.find("dualpipe's gradients are 2 iterations stale, which adds momentum of about 0.667;"),
            std::string::npos)
      << line;
  EXPECT_NE(line.find("set --momentum 0 ("), std::string::npos) << line;
  // The boundary: 0.5 + 0.5 is not below 1.
  EXPECT_FALSE(check_stale_momentum(0.5, 1).stable);
  // A very long delay: the warning stays cheap and leaves out the quadratic's bounds.
  const std::string long_line = stale_momentum_warning(check_stale_momentum(0.9, 100000), "dsp");
  EXPECT_NE(long_line.find("does not settle: set --momentum 0 ("), std::string::npos) << long_line;
}

}  // namespace
}  // namespace trainsim
