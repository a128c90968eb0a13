// `trainsim chunk`: how to group layers into cgdp's gradient-sync chunks
// (seed 003 §4): the exact optimum, the seed's uniform-size sweep as a table,
// or its runtime Algorithm 1 against simulated lapses; each prints the
// chunking and its predicted backward_s, and writes trainsim.chunking/1 JSON.
#include <memory>
#include <optional>

#include "analysis/table.hpp"
#include "model/error.hpp"
#include "model/units.hpp"
#include "sim/cost/common.hpp"
#include "sim/search/chunk.hpp"
#include "sim/search/chunk_heuristic.hpp"
#include "tools/commands.hpp"

namespace trainsim {
namespace {

struct ChunkOptions {
  std::string profile;
  std::string model;
  int64_t batch = 0;
  std::string cluster;
  std::string method = "auto";
  HeuristicChunkOptions heuristic;
  std::string json;
  bool quiet = false;
};

nlohmann::json ranges_json(const std::vector<LayerRange>& chunks) {
  nlohmann::json ranges = nlohmann::json::array();
  for (const LayerRange& r : chunks) ranges.push_back({r.first, r.last});
  return ranges;
}

std::string ranges_line(const std::vector<LayerRange>& chunks) {
  std::string text;
  for (const LayerRange& r : chunks) {
    text += text.empty() ? "" : ", ";
    text += r.size() == 1 ? std::to_string(r.first) : std::to_string(r.first) + "-" + std::to_string(r.last);
  }
  return text;
}

// The method's result, as text lines and JSON fields beside the common ones.
struct ChunkReport {
  Chunking chosen;
  nlohmann::json fields = nlohmann::json::object();
  TextTable table;  // uniform: the curve; heuristic: the lapses; exact: none
};

ChunkReport uniform_report(const Profile& profile, const Cluster& cluster, int64_t workers) {
  const std::vector<UniformChunkPoint> sweep = uniform_chunk_sweep(profile, cluster, workers);
  if (sweep.empty()) throw InputError("--profile", "has no layer with parameters", "gradients to chunk");
  ChunkReport report;
  size_t best = 0;
  for (size_t i = 1; i < sweep.size(); ++i) {
    if (sweep[i].chunking.backward_s < sweep[best].chunking.backward_s) best = i;
  }
  report.chosen = sweep[best].chunking;
  report.fields["chunk_size"] = sweep[best].chunk_size;
  report.fields["curve"] = nlohmann::json::array();
  report.table.header = {"chunk size", "chunks", "backward", ""};
  report.table.right_aligned = {true, true, true, false};
  for (size_t i = 0; i < sweep.size(); ++i) {
    const UniformChunkPoint& p = sweep[i];
    report.fields["curve"].push_back({{"chunk_size", p.chunk_size},
                                      {"chunks", p.chunking.chunks.size()},
                                      {"backward_s", p.chunking.backward_s}});
    report.table.rows.push_back({std::to_string(p.chunk_size), std::to_string(p.chunking.chunks.size()),
                                 format_seconds(p.chunking.backward_s), i == best ? "best" : ""});
  }
  return report;
}

ChunkReport heuristic_report(const Profile& profile, const Cluster& cluster, int64_t workers,
                             const HeuristicChunkOptions& options) {
  const HeuristicChunkResult r = heuristic_cgdp_chunking(profile, cluster, workers, options);
  ChunkReport report;
  report.chosen = r.chunking;
  report.fields = {{"chunk_size", r.best_chunk_size},      {"step", options.step},
                   {"range", options.range},               {"interval", options.interval},
                   {"jitter", options.jitter},             {"seed", options.seed},
                   {"trials", nlohmann::json::array()}};
  report.table.header = {"chunk size", "lapse of " + std::to_string(options.interval) + " iterations"};
  report.table.right_aligned = {true, true};
  for (const HeuristicChunkTrial& t : r.trials) {
    report.fields["trials"].push_back({{"chunk_size", t.chunk_size}, {"lapse_s", t.lapse_s}});
    report.table.rows.push_back({std::to_string(t.chunk_size), format_seconds(t.lapse_s)});
  }
  return report;
}

void run_chunk(const ChunkOptions& o, CommandContext& ctx) {
  const Cluster cluster = load_cluster(o.cluster, "--cluster");
  const Profile profile = resolve_profile_input(o.profile, o.model, o.batch, cluster);
  const int64_t workers = device_count(cluster);
  ChunkReport report;
  if (o.method == "uniform") {
    report = uniform_report(profile, cluster, workers);
  } else if (o.method == "heuristic") {
    report = heuristic_report(profile, cluster, workers, o.heuristic);
  } else if (o.method == "exact") {
    const std::optional<Chunking> exact = exact_cgdp_chunking(profile, cluster, workers, kExactChunkWorkBudget);
    if (!exact) {
      throw InputError("--method exact", "the exact search passed its work budget on this profile",
                       "--method auto, which bounds its distance from the optimum");
    }
    report.chosen = *exact;
  } else {
    report.chosen = bounded_cgdp_chunking(profile, cluster, workers);
  }
  report.fields["optimal"] = report.chosen.optimal;
  report.fields["lower_bound_s"] = report.chosen.lower_bound_s;
  const double compute_backward_s = model_totals(profile).backward_s;
  if (!o.json.empty()) {
    nlohmann::json doc = {{"format", "trainsim.chunking/1"}, {"model", profile.model},
                          {"batch", profile.batch_size},     {"cluster", cluster.name},
                          {"workers", workers},              {"method", o.method},
                          {"chunks", ranges_json(report.chosen.chunks)},
                          {"backward_s", report.chosen.backward_s},
                          {"compute_backward_s", compute_backward_s}};
    doc.update(report.fields);
    write_text_output(o.json, doc.dump(2) + "\n", ctx.out, "--json");
  }
  if (o.quiet || o.json == "-") return;
  ctx.out << "cgdp chunks (" << o.method << ") for " << profile.model << ", batch " << profile.batch_size << ", "
          << cluster.name << ", " << workers << " workers\n";
  if (!report.table.rows.empty()) {
    print_aligned(ctx.out, report.table);
    ctx.out << "\n";
  }
  if (report.fields.contains("chunk_size")) ctx.out << "chunk size " << report.fields["chunk_size"].get<int64_t>() << ": ";
  ctx.out << report.chosen.chunks.size() << " chunks: " << ranges_line(report.chosen.chunks) << "\n"
          << "backward " << format_seconds(report.chosen.backward_s) << " (compute alone "
          << format_seconds(compute_backward_s) << ")\n";
  if (o.method == "exact" || o.method == "auto") {
    if (report.chosen.optimal) {
      ctx.out << "optimal\n";
    } else {
      ctx.out << "within " << format_percent(report.chosen.optimality_gap()) << " of the optimum (lower bound "
              << format_seconds(report.chosen.lower_bound_s) << ")\n";
    }
  }
}

}  // namespace

void add_chunk_command(CLI::App& app, CommandContext& ctx) {
  auto o = std::make_shared<ChunkOptions>();
  CLI::App* cmd = app.add_subcommand("chunk", "Group layers into cgdp gradient-sync chunks (seed 003 §4)");
  cmd->add_option("--profile", o->profile, "Per-layer profile (trainsim.profile/1 JSON)");
  cmd->add_option("--model", o->model, "Zoo model id or model JSON file; profiled analytically on the cluster");
  cmd->add_option("--batch", o->batch, "Per-device batch size with --model (default: the model's)")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--cluster", o->cluster, "Cluster preset or cluster JSON file")->required();
  cmd->add_option("--method", o->method,
                  "auto (the optimum where the exact search fits its work budget, else a bounded search and its "
                  "distance from the optimum), exact (the optimum or an error), uniform (seed figure 2 sweep), "
                  "heuristic (seed Algorithm 1 on simulated lapses)")
      ->check(CLI::IsMember({"auto", "exact", "uniform", "heuristic"}))
      ->capture_default_str();
  cmd->add_option("--step", o->heuristic.step, "Algorithm 1's step")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--range", o->heuristic.range, "Algorithm 1's range")->check(CLI::PositiveNumber)->capture_default_str();
  cmd->add_option("--jitter", o->heuristic.jitter, "Relative standard deviation of simulated compute times")
      ->check(CLI::Range(0.0, 10.0))
      ->capture_default_str();
  cmd->add_option("--seed", o->heuristic.seed, "Seed of the first simulated lapse")
      ->check(seed_check())
      ->capture_default_str();
  cmd->add_option("--json", o->json, "Write the trainsim.chunking/1 result here ('-' for standard output)");
  cmd->add_flag("--quiet", o->quiet, "Print nothing");
  cmd->callback([&ctx, o, cmd] {
    for (const char* flag : {"--step", "--range", "--jitter", "--seed"}) {
      if (o->method != "heuristic" && cmd->count(flag) > 0) {
        throw InputError(flag, "given with --method " + o->method, "--method heuristic");
      }
    }
    ctx.action = [&ctx, o] { run_chunk(*o, ctx); };
  });
}

}  // namespace trainsim
