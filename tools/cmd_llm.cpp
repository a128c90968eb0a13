// `trainsim llm`: a transformer's 3-D parallel training on GPU machines, its
// memory per device by part (sim/cost/transformer_memory.hpp) and, given a
// global batch, its iteration in closed form (sim/cost/transformer_step.hpp);
// or the configurations it knows.
#include <cmath>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/table.hpp"
#include "model/error.hpp"
#include "model/units.hpp"
#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "sim/cost/transformer_memory.hpp"
#include "sim/cost/transformer_step.hpp"
#include "sim/search/transformer_search.hpp"
#include "tools/llm_commands.hpp"

namespace trainsim {
namespace {

struct LlmOptions {
  std::string model;
  TransformerTraining training;
  std::string recompute = "none";
  std::string machine = "dgx-a100";
  int64_t global_batch = 0;
  StepAssumptions assumptions;
  std::string profile_out, cluster_out;
  bool search = false;
  int64_t gpus = 0;
  int64_t top = 10;
  int64_t simulate = 0;
  bool simulate_job = false;
  std::string memory_limit;
  bool list = false;
  std::string json;
};

Recompute parse_recompute(const std::string& text) {
  if (text == "none") return Recompute::none;
  if (text == "selective") return Recompute::selective;
  if (text == "full") return Recompute::full;
  throw InputError("--recompute", "'" + text + "'", "none, selective or full");
}

void print_configs(std::ostream& out) {
  TextTable t;
  t.header = {"model", "params", "layers", "hidden", "heads", "sequence", "vocabulary", "source"};
  t.right_aligned = {false, true, true, true, true, true, true, false};
  for (const TransformerConfig& c : transformer_configs()) {
    t.rows.push_back({c.name, format_count(transformer_params(c)), std::to_string(c.layers), std::to_string(c.hidden),
                      std::to_string(c.heads), std::to_string(c.seq), std::to_string(c.vocab), c.source});
  }
  print_aligned(out, t);
}

std::string settings_text(const TransformerTraining& t) {
  std::ostringstream s;
  s << "t=" << t.tensor << " p=" << t.pipeline << " d=" << t.data << ", micro-batch " << t.micro_batch;
  if (t.virtual_stages > 1) s << ", interleaved over " << t.virtual_stages << " chunks";
  if (t.zero_bubble) s << ", ZB-H1";
  if (t.sequence_parallel) s << ", sequence parallel";
  if (t.flash_attention) s << ", FlashAttention";
  s << (t.recompute == Recompute::full        ? ", full recomputation"
        : t.recompute == Recompute::selective ? ", selective recomputation"
                                              : ", no recomputation");
  s << ", ZeRO-" << t.zero_stage;
  return s.str();
}

// The setting's field of a library error, named by its flag.
[[noreturn]] void rethrow_with_flag(const InputError& e) {
  static const std::map<std::string, std::string> flags = {{"tensor", "--tp"},
                                                           {"pipeline", "--pp"},
                                                           {"data", "--dp"},
                                                           {"micro_batch", "--micro-batch"},
                                                           {"microbatches", "--microbatches"},
                                                           {"virtual_stages", "--interleave"},
                                                           {"zero_stage", "--zero"},
                                                           {"zero_bubble", "--zero-bubble"},
                                                           {"global_batch", "--global-batch"}};
  const auto flag = flags.find(e.where());
  if (flag == flags.end()) throw e;
  throw InputError(flag->second, e.problem(), e.expected());
}

void print_step(std::ostream& out, const TransformerStep& r, const GpuMachine& machine, const LlmOptions& o) {
  out << "\none iteration of " << o.global_batch << " sequences on " << machine.name << " machines ("
      << format_percent(o.assumptions.gemm_efficiency) << " of the " << format_number(machine.peak_flops_per_s / 1e12)
      << " TFLOP/s peak in a product's whole tiles and waves, NCCL at " << format_percent(o.assumptions.link_efficiency)
      << " of the links; assumed):\n";
  TextTable table;
  table.header = {"part", "time", "what"};
  table.right_aligned = {false, true, false};
  table.rows = {
      {"micro-batch", format_seconds(r.microbatch_s),
       "the last stage's forward, recomputation and backward of one micro-batch (its output layer " +
           format_seconds(r.output_layer_s) + "); a layer's tensor-parallel all-reduces " +
           format_seconds(r.layer_tp_comm_s) + " a pass"},
      {"pipeline", format_seconds(r.pipeline_s),
       std::to_string(r.microbatches) + " micro-batches, of which the bubble " + format_seconds(r.bubble_s)},
      {"data parallel", format_seconds(r.data_parallel_s),
       o.training.zero_stage == 3   ? "nothing after the drain (ZeRO-3 gathers the weights when used)"
       : o.training.zero_stage == 2 ? "the updated weights' all-gather after the drain"
                                    : "the gradients' all-reduce after the drain"},
      {"optimizer", format_seconds(r.optimizer_s), "Adam over the device's parameters"},
      {"iteration", format_seconds(r.iteration_s),
       format_number(std::round(r.flops_per_gpu_per_s / 1e12)) + " TFLOP/s a GPU (" +
           format_percent(r.flops_per_gpu_per_s / machine.peak_flops_per_s) + " of peak) by Narayanan et al.'s eq. 3"}};
  if (r.sharding_s > 0) {
    table.rows.insert(table.rows.begin() + 2,
                      {"ZeRO", format_seconds(r.sharding_s),
                       "of the pipeline, the gathers and scatters of each micro-batch its compute does not hide"});
  }
  print_aligned(out, table);
}

}  // namespace

bool is_transformer_config(const std::string& name) {
  for (const TransformerConfig& c : transformer_configs()) {
    if (c.name == name) return true;
  }
  return false;
}

void add_job_size_options(CLI::App* cmd, int64_t& gpus, int64_t& global_batch) {
  cmd->add_option("--gpus", gpus, "With a transformer: the GPUs to spread its training over")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--global-batch", global_batch, "With a transformer: the sequences an iteration trains")
      ->check(CLI::PositiveNumber);
}

void refuse_job_size_without_transformer(int64_t gpus, int64_t global_batch) {
  if (gpus > 0 || global_batch > 0) {
    throw InputError(gpus > 0 ? "--gpus" : "--global-batch", "without a transformer --model",
                     "a transformer configuration (trainsim llm --list), or neither");
  }
}

// The fastest configurations that fit, best first, and why the first.
void print_transformer_search(const TransformerSearchRequest& o, CommandContext& ctx) {
  const TransformerConfig& c = find_transformer_config(o.model, "--model");
  const GpuMachine& machine = find_gpu_machine(o.machine, "--machine");
  if (o.gpus < 1) throw InputError("--gpus", "is missing", "the GPUs to spread the training over, with --search");
  if (o.global_batch < 1)
    throw InputError("--global-batch", "is missing", "the sequences an iteration trains, with --search");
  TransformerSearchOptions options;
  options.gpus = o.gpus;
  options.global_batch = o.global_batch;
  options.memory_limit_bytes = o.memory_limit.empty() ? 0 : parse_bytes(o.memory_limit, "--memory-limit");
  options.simulate = o.simulate;
  options.assumptions = o.assumptions;
  const TransformerSearchResult r = search_transformer(c, machine, options);
  const double limit = options.memory_limit_bytes > 0 ? options.memory_limit_bytes : machine.memory_bytes;
  if (!o.json.empty()) {
    write_text_output(o.json, search_json(c, machine, o, r, limit).dump(2) + "\n", ctx.out, "--json");
    if (o.json == "-") return;
  }
  const auto shown = static_cast<size_t>(std::min<int64_t>(o.top, static_cast<int64_t>(r.ranked.size())));
  ctx.out << c.name << " on " << o.gpus << " GPUs of " << machine.name << " machines, " << o.global_batch
          << " sequences an iteration: " << r.evaluated << " configurations priced, " << r.fit << " fit "
          << format_bytes(limit) << " a GPU"
          << (o.simulate > 0 ? "; the best " + std::to_string(std::min(o.simulate, r.fit)) +
                                   " simulated (whole jobs, or their pipelines where too large) and ranked by that"
                             : "")
          << "\n";
  if (r.ranked.empty()) {
    ctx.out << search_why(r, limit) << "\n";
    return;
  }
  TextTable table;
  table.header = {"rank", "t",     "p",    "d",      "b",         "v",         "schedule",      "recompute",
                  "SP",   "flash", "ZeRO", "memory", "iteration", "simulated", "TFLOP/s a GPU", "bubble"};
  table.right_aligned = {true,  true,  true, true, true, true, false, false,
                         false, false, true, true, true, true, true,  true};
  for (size_t i = 0; i < shown; ++i) {
    const TransformerCandidate& k = r.ranked[i];
    const TransformerTraining& t = k.training;
    table.rows.push_back(
        {std::to_string(i + 1), std::to_string(t.tensor), std::to_string(t.pipeline), std::to_string(t.data),
         std::to_string(t.micro_batch), std::to_string(t.virtual_stages), t.zero_bubble ? "zb-h1" : "1f1b",
         recompute_name(t.recompute), t.sequence_parallel ? "yes" : "no", t.flash_attention ? "yes" : "no",
         std::to_string(t.zero_stage), format_bytes(k.memory.total_bytes()), format_seconds(k.step.iteration_s),
         k.simulated_iteration_s > 0 ? format_seconds(k.simulated_iteration_s) : "-",
         format_number(std::round(k.step.model_flops / (k.iteration_s() * static_cast<double>(o.gpus)) / 1e12)),
         format_percent(k.step.bubble_s / k.step.iteration_s)});
  }
  print_aligned(ctx.out, table);
  ctx.out << "\n" << search_why(r, limit) << "\n";
}

namespace {

// --profile-out / --cluster-out: one pipeline as the simulator's inputs.
void write_pipeline(const LlmOptions& o, const TransformerConfig& c, const TransformerTraining& t,
                    const GpuMachine& machine, CommandContext& ctx) {
  if (o.profile_out.empty() && o.cluster_out.empty()) return;
  TransformerPipeline pipe;
  try {
    pipe = transformer_pipeline(c, t, o.global_batch, machine, o.assumptions);
  } catch (const InputError& e) {
    rethrow_with_flag(e);
  }
  if (!o.profile_out.empty()) {
    write_text_output(o.profile_out, profile_to_json(pipe.profile).dump(2) + "\n", ctx.out, "--profile-out");
  }
  if (!o.cluster_out.empty()) {
    write_text_output(o.cluster_out, cluster_to_json(pipe.cluster).dump(2) + "\n", ctx.out, "--cluster-out");
  }
  if (!o.profile_out.empty() && !o.cluster_out.empty() && o.json != "-") {
    ctx.out << "\nsimulate the pipeline: trainsim simulate --profile " << o.profile_out << " --cluster "
            << o.cluster_out << " --strategy " << pipe.strategy << " --set stages=" << pipe.stages
            << " --set microbatches=" << pipe.microbatches
            << (pipe.chunks > 1 ? " --set chunks=" + std::to_string(pipe.chunks) : std::string())
            << (pipe.strategy == "zb-h1" ? " --set weight_share=" + format_number(pipe.weight_share) : std::string())
            << "\n";
  }
}

void report(const LlmOptions& o, CommandContext& ctx) {
  const TransformerConfig& c = find_transformer_config(o.model, "--model");
  const GpuMachine& machine = find_gpu_machine(o.machine, "--machine");
  TransformerTraining t = o.training;
  t.recompute = parse_recompute(o.recompute);
  TransformerMemory m;
  TransformerStep step;
  try {
    if (o.global_batch > 0) {
      step = transformer_step(c, t, o.global_batch, machine, o.assumptions);
      // The iteration's micro-batches bound what the first stage holds, unless --microbatches says otherwise.
      if (t.microbatches == 0) t.microbatches = step.microbatches;
    }
    m = transformer_memory(c, t);
  } catch (const InputError& e) {
    rethrow_with_flag(e);
  }
  const double layer = layer_activation_bytes(c, t);
  if (!o.json.empty()) {
    nlohmann::json j = {{"model", c.name},
                        {"params", m.params},
                        {"weights_bytes", m.weights_bytes},
                        {"gradients_bytes", m.gradients_bytes},
                        {"optimizer_bytes", m.optimizer_bytes},
                        {"activations_bytes", m.activations_bytes},
                        {"layer_activation_bytes", layer},
                        {"total_bytes", m.total_bytes()},
                        {"fits", m.total_bytes() <= machine.memory_bytes}};
    if (o.global_batch > 0) j["step"] = step_json(step, machine);
    write_text_output(o.json, j.dump(2) + "\n", ctx.out, "--json");
    if (o.json == "-") return;
  }
  ctx.out << c.name << ": " << c.layers << " layers, hidden " << c.hidden << ", " << c.heads << " heads, sequence "
          << c.seq << ", vocabulary " << c.vocab << "; " << format_count(transformer_params(c)) << " parameters ("
          << c.source << ")\n"
          << settings_text(t) << "\n"
          << "the first pipeline stage's device (16-bit weights and gradients, "
          << format_number(t.optimizer_bytes_per_param) << " bytes of optimizer state a parameter):\n";
  TextTable table;
  table.header = {"part", "bytes", "what"};
  table.right_aligned = {false, true, false};
  const std::string over = " over " + std::to_string(t.data) + " data-parallel devices";
  table.rows = {{"weights", format_bytes(m.weights_bytes),
                 format_count(m.params) + " parameters" + (t.zero_stage >= 3 ? over : "")},
                {"gradients", format_bytes(m.gradients_bytes), t.zero_stage >= 2 ? "partitioned" + over : ""},
                {"optimizer", format_bytes(m.optimizer_bytes), t.zero_stage >= 1 ? "partitioned" + over : ""},
                {"activations", format_bytes(m.activations_bytes),
                 format_number(m.activations_bytes / layer) + " layers' worth of " + format_bytes(layer)},
                {"total", format_bytes(m.total_bytes()),
                 (m.total_bytes() <= machine.memory_bytes ? "fits " : "does not fit ") + machine.name + "'s " +
                     format_bytes(machine.memory_bytes) + " a GPU"}};
  print_aligned(ctx.out, table);
  if (o.global_batch > 0) print_step(ctx.out, step, machine, o);
  write_pipeline(o, c, t, machine, ctx);
  if (!o.simulate_job) return;
  if (o.global_batch == 0) throw InputError("--simulate-job", "without --global-batch", "--global-batch B");
  try {
    print_job_simulation(c, t, o.global_batch, machine, o.assumptions, step, ctx.out);
  } catch (const InputError& e) {
    rethrow_with_flag(e);
  }
}

}  // namespace

void add_llm_command(CLI::App& app, CommandContext& ctx) {
  auto o = std::make_shared<LlmOptions>();
  CLI::App* cmd =
      app.add_subcommand("llm",
                         "A transformer's 3-D parallel training on GPU machines: memory per device by part and, with "
                         "--global-batch, the iteration in closed form");
  cmd->add_option("--model", o->model, "A transformer configuration (see --list)");
  cmd->add_flag("--list", o->list, "List the transformer configurations");
  cmd->add_option("--machine", o->machine, "dgx-a100 or dgx-h100 (8 GPUs each)")->capture_default_str();
  cmd->add_option("--tp", o->training.tensor, "Tensor-parallel size t (inside a machine)")->capture_default_str();
  cmd->add_option("--pp", o->training.pipeline, "Pipeline stages p")->capture_default_str();
  cmd->add_option("--dp", o->training.data, "Data-parallel size d")->capture_default_str();
  cmd->add_option("--micro-batch", o->training.micro_batch, "Sequences per micro-batch b")->capture_default_str();
  cmd->add_option("--microbatches", o->training.microbatches,
                  "Micro-batches per pipeline flush for the memory (default: p, what 1F1B's first stage holds)");
  cmd->add_option("--interleave", o->training.virtual_stages, "Model chunks per device (interleaved 1F1B)")
      ->capture_default_str();
  cmd->add_flag("--sequence-parallel", o->training.sequence_parallel,
                "Sequence parallelism: the layer norms' and dropouts' activations split over t too");
  cmd->add_option("--recompute", o->recompute, "none, selective (attention's) or full")->capture_default_str();
  cmd->add_flag("--flash-attention", o->training.flash_attention,
                "Fused attention: no scores kept, recomputed in the backward (Dao et al. 2022)");
  cmd->add_flag("--zero-bubble", o->training.zero_bubble,
                "ZB-H1's schedule instead of 1F1B: weight gradients held back to fill the bubble (Qi et al. 2023)");
  cmd->add_option("--zero", o->training.zero_stage,
                  "ZeRO stage 0-3 over the data-parallel group (2 and 3 without a pipeline)")
      ->capture_default_str();
  cmd->add_option("--global-batch", o->global_batch, "Sequences per iteration: also price the iteration")
      ->check(CLI::PositiveNumber);
  cmd->add_option("--gemm-efficiency", o->assumptions.gemm_efficiency,
                  "Fraction of the peak a matrix product reaches in its whole tiles and waves (an assumption)")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  cmd->add_option("--link-efficiency", o->assumptions.link_efficiency,
                  "Fraction of NVLink's and InfiniBand's rate NCCL's collectives reach (an assumption)")
      ->check(CLI::Range(0.01, 1.0))
      ->capture_default_str();
  cmd->add_option("--profile-out", o->profile_out,
                  "With --global-batch: one pipeline's profile (a GPU of each TP group) for trainsim simulate");
  cmd->add_option("--cluster-out", o->cluster_out, "With --global-batch: that pipeline's cluster of p GPUs");
  cmd->add_flag("--search", o->search,
                "Search every t, p, d, micro-batch, interleaving, recomputation, SP and ZeRO stage that fits "
                "(needs --gpus and --global-batch)");
  cmd->add_option("--gpus", o->gpus, "With --search: the GPUs to spread the training over")->check(CLI::PositiveNumber);
  cmd->add_option("--top", o->top, "With --search: configurations shown")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option(
         "--simulate", o->simulate,
         "With --search: simulate the best N (whole jobs, or their pipelines where too large) and rank by that")
      ->check(CLI::NonNegativeNumber);
  cmd->add_flag("--simulate-job", o->simulate_job,
                "With --global-batch: simulate the whole job (every GPU, its tensor-, pipeline- and data-parallel "
                "collectives) beside the closed form");
  cmd->add_option("--memory-limit", o->memory_limit, "With --search: memory a GPU may use (default: its HBM)");
  cmd->add_option("--json", o->json, "Also write the parts as JSON here (- for standard output alone)");
  cmd->footer(
      "Formulas and assumptions: docs/equations.md §9 and §10.\n"
      "Examples:\n  trainsim llm --model megatron-145.6b --tp 8 --pp 8 --dp 24 --recompute full --global-batch 2304\n"
      "  trainsim llm --model gpt3-175b --search --gpus 1024 --global-batch 1536 --simulate 5");
  cmd->callback([&ctx, o] {
    ctx.action = [&ctx, o] {
      if (o->list) return print_configs(ctx.out);
      if (o->model.empty()) throw InputError("--model", "is missing", "a transformer configuration, or --list");
      if (o->search) {
        return print_transformer_search({o->model, o->machine, o->memory_limit, o->json, o->gpus, o->global_batch,
                                         o->top, o->simulate, o->assumptions},
                                        ctx);
      }
      if ((!o->profile_out.empty() || !o->cluster_out.empty()) && o->global_batch == 0) {
        throw InputError(o->profile_out.empty() ? "--cluster-out" : "--profile-out", "without --global-batch",
                         "--global-batch B: the pipeline's micro-batches");
      }
      report(*o, ctx);
    };
  });
}

}  // namespace trainsim
