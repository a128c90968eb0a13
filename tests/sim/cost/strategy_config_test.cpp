// StrategyConfig's getters on values that are not valid UTF-8: `--set`
// text that is not JSON is kept as a string, and an error that echoes it
// must still be an InputError (found by fuzzing, tests/fuzz/corpus/set_option/invalid-utf8).
#include "sim/cost/strategy_config.hpp"

#include <gtest/gtest.h>

#include <string>

#include "model/error.hpp"
#include "tests/sim/cost/fixtures.hpp"

namespace trainsim {
namespace {

const std::string kNotUtf8 = "[1,2,\xde]";

TEST(StrategyConfig, EchoesATextThatIsNotUtf8InAnInputError) {
  StrategyConfig config;
  config.set("replicas", kNotUtf8, "--set replicas");
  StrategyConfig as_int = config, as_number = config, as_bool = config, as_list = config;
  EXPECT_THROW(as_int.get_int("replicas", 1, 1), InputError);
  EXPECT_THROW(as_number.get_number("replicas", 1, 0), InputError);
  EXPECT_THROW(as_bool.get_bool("replicas", false), InputError);
  EXPECT_THROW(as_list.get_int_list("replicas"), InputError);
}

TEST(StrategyConfig, DspQueuesThatAreNotUtf8AreAnInputError) {
  const Profile profile = testing_fixtures::chain_profile(8, 1e-3, 2e-3, 1e6, 4e6);
  const Cluster cluster = testing_fixtures::simple_cluster(1, 4);
  EXPECT_THROW(testing_fixtures::run_strategy("dsp", profile, cluster, {{"queues", kNotUtf8}}), InputError);
}

}  // namespace
}  // namespace trainsim
