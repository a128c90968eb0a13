// `trainsim predict` and `report` for a transformer configuration
// (llm_commands.hpp): the fastest configuration of each way of spreading it,
// in closed form and simulated, and a report's JSON inputs.
#include "tools/llm_commands.hpp"

#include <cmath>
#include <filesystem>
#include <sstream>

#include "analysis/table.hpp"
#include "model/error.hpp"
#include "model/units.hpp"
#include "sim/des/engine.hpp"
#include "sim/plan/transformer_plan.hpp"

namespace trainsim {
namespace {

// The most ops of a winner's whole job a report traces (about 150 bytes of
// trace an op); a larger job is traced as one of its pipelines.
constexpr size_t kMaxReportTraceOps = 100'000;

std::vector<std::string> parse_families(const std::string& text) {
  const std::vector<std::string>& known = transformer_families();
  if (text == "all") return known;
  std::vector<std::string> out;
  std::stringstream stream(text);
  for (std::string id; std::getline(stream, id, ',');) {
    if (id.empty()) continue;
    if (std::find(known.begin(), known.end(), id) == known.end()) {
      std::string list;
      for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
      throw InputError("--strategies", "'" + id + "' is not a way of spreading a transformer",
                       "all, or some of " + list + " separated by commas");
    }
    if (std::find(out.begin(), out.end(), id) == out.end()) out.push_back(id);
  }
  if (out.empty()) throw InputError("--strategies", "is empty", "all, or families separated by commas");
  return out;
}

void require_job_size(int64_t gpus, int64_t global_batch) {
  if (gpus < 1) throw InputError("--gpus", "is missing", "the GPUs to spread the transformer's training over");
  if (global_batch < 1) throw InputError("--global-batch", "is missing", "the sequences an iteration trains");
}

std::string settings_cell(const nlohmann::json& t) {
  std::string s = "t=" + t.at("tp").dump() + " p=" + t.at("pp").dump() + " d=" + t.at("dp").dump() +
                  " b=" + t.at("micro_batch").dump();
  if (t.at("interleave").get<int64_t>() > 1) s += " v=" + t.at("interleave").dump();
  s += " recompute=" + t.at("recompute").get<std::string>();
  if (t.at("sequence_parallel").get<bool>()) s += " SP";
  if (t.at("flash_attention").get<bool>()) s += " flash";
  if (t.at("zero").get<int>() > 0) s += " ZeRO-" + t.at("zero").dump();
  return s;
}

}  // namespace

nlohmann::json predict_transformer(const TransformerPredictRequest& o) {
  const TransformerConfig& c = find_transformer_config(o.model, "--model");
  const GpuMachine& machine = find_gpu_machine(o.machine, "--cluster");
  require_job_size(o.gpus, o.global_batch);
  const std::vector<std::string> wanted = parse_families(o.families);
  TransformerSearchOptions options;
  options.gpus = o.gpus;
  options.global_batch = o.global_batch;
  const TransformerSearchResult r = search_transformer(c, machine, options);
  nlohmann::json families = nlohmann::json::array(), none_fit = nlohmann::json::array();
  const std::vector<TransformerCandidate> fastest = fastest_per_family(r.ranked);
  for (const std::string& family : wanted) {
    const auto k = std::find_if(fastest.begin(), fastest.end(), [&family](const TransformerCandidate& x) {
      return transformer_family(x.training) == family;
    });
    if (k == fastest.end()) {
      none_fit.push_back(family);
      continue;
    }
    nlohmann::json entry = {{"family", family},
                            {"training", training_json(k->training)},
                            {"memory", memory_json(k->memory, machine)},
                            {"analytic", step_json(k->step, machine)}};
    if (o.method != "analytic") {
      const TransformerSimulation sim =
          simulate_transformer(c, k->training, o.global_batch, machine, options.assumptions);
      entry["simulated"] = {
          {"iteration_s", sim.iteration_s},
          {"whole_job", sim.whole_job},
          {"ops", sim.ops},
          {"flops_per_gpu_per_s", k->step.model_flops / (sim.iteration_s * static_cast<double>(o.gpus))}};
    }
    families.push_back(std::move(entry));
  }
  return {{"format", "trainsim.llm-prediction/1"},
          {"model", c.name},
          {"machine", machine.name},
          {"gpus", o.gpus},
          {"global_batch", o.global_batch},
          {"method", o.method},
          {"evaluated", r.evaluated},
          {"fit", r.fit},
          {"families", std::move(families)},
          {"none_fit", std::move(none_fit)}};
}

void run_transformer_predict(const TransformerPredictRequest& o, CommandContext& ctx) {
  const nlohmann::json p = predict_transformer(o);
  if (!o.json.empty()) write_text_output(o.json, p.dump(2) + "\n", ctx.out, "--json");
  if (o.quiet || o.json == "-") return;
  const bool analytic = o.method != "simulated", simulated = o.method != "analytic";
  ctx.out << p["model"].get<std::string>() << " on " << o.gpus << " GPUs of " << p["machine"].get<std::string>()
          << " machines, " << o.global_batch << " sequences an iteration: the fastest configuration of each way "
          << "of spreading it that fits a GPU (" << p["fit"].get<int64_t>() << " of " << p["evaluated"].get<int64_t>()
          << " configurations fit)\n\n";
  TextTable t;
  t.header = {"strategy", "settings", "memory/GPU"};
  if (analytic) t.header.insert(t.header.end(), {"analytic iteration", "bubble"});
  if (simulated) t.header.insert(t.header.end(), {"simulated iteration", "simulated as"});
  if (analytic && simulated) t.header.push_back("simulated vs analytic");
  t.header.push_back("TFLOP/s a GPU");
  t.right_aligned = {false, false, true};
  for (size_t i = 3; i < t.header.size(); ++i) t.right_aligned.push_back(t.header[i] != "simulated as");
  for (const nlohmann::json& f : p["families"]) {
    const nlohmann::json& step = f["analytic"];
    const double analytic_s = step["iteration_s"].get<double>();
    std::vector<std::string> row = {f["family"].get<std::string>(), settings_cell(f["training"]),
                                    format_bytes(f["memory"]["total_bytes"].get<double>())};
    if (analytic) {
      row.push_back(format_seconds(analytic_s));
      row.push_back(format_percent(step["bubble_s"].get<double>() / analytic_s));
    }
    double flops = step["flops_per_gpu_per_s"].get<double>();
    if (simulated) {
      const double sim_s = f["simulated"]["iteration_s"].get<double>();
      row.push_back(format_seconds(sim_s));
      row.push_back(f["simulated"]["whole_job"].get<bool>() ? "the whole job" : "a pipeline + closed-form DP");
      if (analytic) row.push_back(format_percent(sim_s / analytic_s - 1));
      flops = f["simulated"]["flops_per_gpu_per_s"].get<double>();
    }
    row.push_back(format_number(std::round(flops / 1e12)));
    t.rows.push_back(std::move(row));
  }
  print_aligned(ctx.out, t);
  for (const nlohmann::json& family : p["none_fit"]) {
    ctx.out << family.get<std::string>() << ": no configuration fits a GPU's "
            << format_bytes(find_gpu_machine(o.machine, "--cluster").memory_bytes) << "\n";
  }
  ctx.out << "\nsettings: t, p, d tensor-, pipeline- and data-parallel sizes, b the micro-batch, v interleaved "
             "chunks (trainsim llm explains one; trainsim choose ranks them all)\n";
}

std::pair<std::string, std::vector<std::string>> write_transformer_report_inputs(const TransformerPredictRequest& o,
                                                                                 const std::string& out_dir,
                                                                                 CommandContext& ctx) {
  namespace fs = std::filesystem;
  TransformerPredictRequest both = o;
  both.method = "both";
  write_text_output((fs::path(out_dir) / "prediction.json").string(), predict_transformer(both).dump(2) + "\n", ctx.out,
                    "--out");
  const TransformerConfig& c = find_transformer_config(o.model, "--model");
  const GpuMachine& machine = find_gpu_machine(o.machine, "--cluster");
  TransformerSearchRequest request{o.model, o.machine, "", "", o.gpus, o.global_batch, 10, 3, {}};
  TransformerSearchOptions options;
  options.gpus = o.gpus;
  options.global_batch = o.global_batch;
  options.simulate = request.simulate;
  const TransformerSearchResult r = search_transformer(c, machine, options);
  nlohmann::json choice = search_json(c, machine, request, r, machine.memory_bytes);
  std::vector<std::string> traces;
  if (!r.ranked.empty()) {  // the winner simulated event by event: its whole job, else one pipeline of it
    const TransformerTraining& best = r.ranked.front().training;
    Plan plan;
    Cluster cluster;
    bool whole_job = false;
    try {
      TransformerJob job = transformer_job(c, best, o.global_batch, machine, options.assumptions, 1);
      if (job.plan.ops.size() <= kMaxReportTraceOps) {
        plan = std::move(job.plan);
        cluster = std::move(job.cluster);
        whole_job = true;
      }
    } catch (const InputError&) {
      // Too large for one plan: its pipeline below.
    }
    if (!whole_job) {
      const TransformerPipeline pipe = transformer_pipeline(c, best, o.global_batch, machine, options.assumptions);
      plan = transformer_pipeline_plan(pipe, 3);
      cluster = pipe.cluster;
    }
    const SimResult result = simulate_plan(plan, cluster, SimOptions{});
    traces.push_back("trace-" + transformer_family(best) + ".json");
    choice["trace"] = {{"file", traces.back()}, {"whole_job", whole_job}};
    write_text_output((fs::path(out_dir) / traces.back()).string(), chrome_trace(plan, result).dump() + "\n", ctx.out,
                      "--out");
  }
  write_text_output((fs::path(out_dir) / "choice.json").string(), choice.dump(2) + "\n", ctx.out, "--out");
  return {search_why(r, machine.memory_bytes), traces};
}

}  // namespace trainsim
