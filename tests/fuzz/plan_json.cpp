// A plan document (trainsim.plan/1, `simulate --dump-plan`): what is read back
// of a plan is its strategy and the settings it resolved
// (StrategyConfig::from_resolved, as validate re-runs a plan), which generate
// the plan again and are simulated.
#include "model/json_fields.hpp"
#include "sim/cost/strategies.hpp"
#include "sim/des/engine.hpp"
#include "tests/fuzz/fuzz_input.hpp"
#include "tests/fuzz/small_job.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace trainsim;
  static const Profile profile = fuzz::small_profile();
  static const Cluster cluster = fuzz::small_cluster();
  const std::string& path = fuzz::input_file(data, size, "plan.json");
  fuzz::expect_input_error([&] {
    const nlohmann::json doc = read_json_file(path);
    require_format(doc, "plan", path);
    const StrategyInfo& strategy = find_strategy(require_string(doc, "strategy", path), path + ": strategy");
    const StrategyConfig config = StrategyConfig::from_resolved(require_field(doc, "config", path), path + ": config");
    const Plan plan = generate_plan(strategy, profile, cluster, config, 2);
    simulate_plan(plan, cluster, SimOptions{});
  });
  return 0;
}
