// `trainsim profile`: per-layer profiles from the analytic (roofline) model
// or imported from PipeDream's graph.txt. Measured profiles come from exec.
#include <memory>
#include <optional>

#include "model/error.hpp"
#include "profiles/analytic_profiler.hpp"
#include "profiles/cluster.hpp"
#include "profiles/pipedream_import.hpp"
#include "profiles/profile.hpp"
#include "tools/commands.hpp"

namespace trainsim {

void add_profile_command(CLI::App& app, CommandContext& ctx) {
  struct Options {
    std::string model;
    int64_t batch = 0;
    bool analytic = false;
    std::string cluster;
    std::string pipedream_graph;
    std::string out = "-";
  };
  auto opts = std::make_shared<Options>();
  CLI::App* cmd = app.add_subcommand("profile", "Write a per-layer profile (trainsim.profile/1)");
  cmd->add_option("--model", opts->model, "Zoo model id or model JSON file (with --analytic)");
  cmd->add_option("--batch", opts->batch, "Batch size (default: the model's; for imports, inferred)")
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--analytic", opts->analytic, "Estimate each layer by a roofline on the cluster's device");
  cmd->add_option("--cluster", opts->cluster, "Preset or cluster file whose device the estimate is for");
  cmd->add_option("--import-pipedream", opts->pipedream_graph, "Import a PipeDream profiler graph.txt");
  cmd->add_option("--out", opts->out, "Where to write the profile JSON ('-' for standard output)")
      ->capture_default_str();
  cmd->callback([&ctx, opts] {
    ctx.action = [&ctx, opts] {
      Profile profile;
      if (!opts->pipedream_graph.empty()) {
        if (opts->analytic) throw InputError("--import-pipedream", "given with --analytic", "one source");
        profile = import_pipedream_graph(opts->pipedream_graph,
                                         opts->batch > 0 ? std::optional<int64_t>(opts->batch) : std::nullopt);
      } else if (opts->analytic) {
        if (opts->model.empty()) throw InputError("--model", "is missing", "a model to profile");
        if (opts->cluster.empty()) throw InputError("--cluster", "is missing", "the cluster whose device to model");
        const Model model = load_model(opts->model, "--model");
        const Cluster cluster = load_cluster(opts->cluster, "--cluster");
        profile = analytic_profile(model, opts->batch > 0 ? opts->batch : model.default_batch, cluster);
      } else {
        throw InputError("profile", "no source given",
                         "--analytic --model M --cluster C, or --import-pipedream GRAPH.txt; measured "
                         "profiles come with the execution backend");
      }
      write_text_output(opts->out, profile_to_json(profile).dump(2) + "\n", ctx.out, "--out");
    };
  });
}

}  // namespace trainsim
