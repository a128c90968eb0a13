// `trainsim choose`: every strategy with its best settings, ranked, and why
// the winner wins.
#include <memory>

#include "analysis/table.hpp"
#include "model/units.hpp"
#include "sim/search/choose.hpp"
#include "sim/search/rank.hpp"
#include "tools/commands.hpp"
#include "tools/progress.hpp"

namespace trainsim {
namespace {

struct ChooseOptions {
  std::string profile;
  std::string model;
  int64_t batch = 0;
  std::string cluster;
  std::string strategies = "all";
  std::string json;
  bool quiet = false;
  int64_t gpus = 0, global_batch = 0, simulate = 3;  // a transformer's search
};

std::string settings_text(const StrategyChoice& c) {
  std::string text;
  for (const Setting& s : c.settings) text += (text.empty() ? "" : " ") + s.key + "=" + s.value;
  return text.empty() ? "defaults" : text;
}

void print_choices(std::ostream& out, const std::vector<StrategyChoice>& ranked, const Profile& profile,
                   const Cluster& cluster) {
  out << profile.model << ", batch " << profile.batch_size << " per device, on " << cluster.name
      << ": every strategy at its best settings\n\n";
  // An iteration is a global step for data parallelism but one mini-batch per
  // replica for pipelines: its samples are shown beside its time.
  TextTable t;
  t.header = {"#", "strategy", "settings", "samples/s", "speedup", "samples/iter", "time/iter", "dominant cost",
              "memory/device", "staleness"};
  t.right_aligned = {true, false, false, true, true, true, true, false, true, true};
  bool any_tie = false;
  for (const StrategyChoice& c : ranked) {
    const Prediction& p = c.best;
    any_tie = any_tie || c.tied;
    t.rows.push_back({rank_text(c.rank, c.tied), p.strategy, settings_text(c), format_count(p.samples_per_s),
                      format_ratio(p.speedup_vs_single), format_count(p.samples_per_iteration),
                      format_seconds(p.iteration_s), dominant_cost(p.breakdown),
                      format_bytes(peak_memory_bytes(p)) + (c.feasible ? "" : " (OOM)"), std::to_string(p.staleness)});
  }
  print_aligned(out, t);
  if (any_tie) out << tie_rule_text() << "\n";
  for (const StrategyChoice& c : ranked) {
    if (!c.feasible) out << "excluded: " << c.best.strategy << ": " << c.reason << "\n";
  }
  out << "\n" << explain_winner(ranked) << "\n";
}

}  // namespace

void add_choose_command(CLI::App& app, CommandContext& ctx) {
  auto o = std::make_shared<ChooseOptions>();
  CLI::App* cmd = app.add_subcommand("choose", "Rank every strategy at its best settings and say why the winner wins");
  cmd->add_option("--profile", o->profile, "Per-layer profile (trainsim.profile/1 JSON)");
  cmd->add_option("--model", o->model,
                  "Zoo model id or model JSON file, profiled analytically on the cluster; or a transformer "
                  "configuration (trainsim llm --list), searched in 3-D on --cluster dgx-a100 or dgx-h100");
  cmd->add_option("--batch", o->batch, "Per-device batch size with --model (default: the model's)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--cluster", o->cluster, "Cluster preset or cluster JSON file")->required();
  cmd->add_option("--strategies", o->strategies, "'all' or strategy ids separated by commas")->capture_default_str();
  cmd->add_option("--json", o->json, "Write the trainsim.choice/1 JSON here ('-' for standard output)");
  cmd->add_flag("--quiet", o->quiet, "Print no table");
  add_job_size_options(cmd, o->gpus, o->global_batch);
  cmd->add_option("--simulate", o->simulate,
                  "With a transformer: the best N simulated (whole jobs, or their pipelines)")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->callback([&ctx, o] {
    ctx.action = [&ctx, o] {
      if (is_transformer_config(o->model)) {  // TP × PP × DP, micro-batch, schedule, recomputation, ZeRO
        return print_transformer_search(
            {o->model, o->cluster, "", o->json, o->gpus, o->global_batch, 10, o->simulate, {}}, ctx);
      }
      refuse_job_size_without_transformer(o->gpus, o->global_batch);
      const Cluster cluster = load_cluster(o->cluster, "--cluster");
      const Profile profile = resolve_profile_input(o->profile, o->model, o->batch, cluster);
      const std::vector<std::string> ids = parse_strategy_list(o->strategies, "--strategies");
      ProgressBar bar(ctx.err, "choosing", !o->quiet);
      const std::vector<StrategyChoice> ranked =
          choose_strategies(profile, cluster, ids, [&bar](int64_t done, int64_t total) { bar.update(done, total); });
      bar.finish();
      if (!o->json.empty()) {
        write_text_output(o->json, choice_to_json(ranked, profile, cluster).dump(2) + "\n", ctx.out, "--json");
      }
      if (!o->quiet && o->json != "-") print_choices(ctx.out, ranked, profile, cluster);
    };
  });
}

}  // namespace trainsim
