// `trainsim memory`: a transformer's training memory per device by part
// (sim/cost/transformer_memory.hpp), or the configurations it knows.
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <sstream>

#include "analysis/table.hpp"
#include "model/error.hpp"
#include "model/units.hpp"
#include "sim/cost/transformer_memory.hpp"
#include "tools/commands.hpp"

namespace trainsim {
namespace {

struct MemoryOptions {
  std::string model;
  TransformerTraining training;
  std::string recompute = "none";
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
  if (t.sequence_parallel) s << ", sequence parallel";
  s << (t.recompute == Recompute::full        ? ", full recomputation"
        : t.recompute == Recompute::selective ? ", selective recomputation"
                                              : ", no recomputation");
  s << ", ZeRO-" << t.zero_stage;
  return s.str();
}

void report(const MemoryOptions& o, CommandContext& ctx) {
  const TransformerConfig& c = find_transformer_config(o.model, "--model");
  TransformerTraining t = o.training;
  t.recompute = parse_recompute(o.recompute);
  TransformerMemory m;
  try {
    m = transformer_memory(c, t);
  } catch (const InputError& e) {  // the setting's field, named by its flag
    static const std::map<std::string, std::string> flags = {{"tensor", "--tp"},
                                                             {"pipeline", "--pp"},
                                                             {"data", "--dp"},
                                                             {"micro_batch", "--micro-batch"},
                                                             {"microbatches", "--microbatches"},
                                                             {"virtual_stages", "--interleave"},
                                                             {"zero_stage", "--zero"}};
    const auto flag = flags.find(e.where());
    if (flag == flags.end()) throw;
    throw InputError(flag->second, e.problem(), e.expected());
  }
  const double layer = layer_activation_bytes(c, t);
  if (!o.json.empty()) {
    const nlohmann::json j = {{"model", c.name},
                              {"params", m.params},
                              {"weights_bytes", m.weights_bytes},
                              {"gradients_bytes", m.gradients_bytes},
                              {"optimizer_bytes", m.optimizer_bytes},
                              {"activations_bytes", m.activations_bytes},
                              {"layer_activation_bytes", layer},
                              {"total_bytes", m.total_bytes()}};
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
                {"total", format_bytes(m.total_bytes()), ""}};
  print_aligned(ctx.out, table);
}

}  // namespace

void add_memory_command(CLI::App& app, CommandContext& ctx) {
  auto o = std::make_shared<MemoryOptions>();
  CLI::App* cmd = app.add_subcommand(
      "memory", "A transformer's training memory per device: weights, gradients, optimizer states, activations");
  cmd->add_option("--model", o->model, "A transformer configuration (see --list)");
  cmd->add_flag("--list", o->list, "List the transformer configurations");
  cmd->add_option("--tp", o->training.tensor, "Tensor-parallel size t")->capture_default_str();
  cmd->add_option("--pp", o->training.pipeline, "Pipeline stages p")->capture_default_str();
  cmd->add_option("--dp", o->training.data, "Data-parallel size d")->capture_default_str();
  cmd->add_option("--micro-batch", o->training.micro_batch, "Sequences per micro-batch b")->capture_default_str();
  cmd->add_option("--microbatches", o->training.microbatches,
                  "Micro-batches per pipeline flush (default: p, what 1F1B's first stage holds)");
  cmd->add_option("--interleave", o->training.virtual_stages, "Model chunks per device (interleaved 1F1B)")
      ->capture_default_str();
  cmd->add_flag("--sequence-parallel", o->training.sequence_parallel,
                "Sequence parallelism: the layer norms' and dropouts' activations split over t too");
  cmd->add_option("--recompute", o->recompute, "none, selective (attention's) or full")->capture_default_str();
  cmd->add_option("--zero", o->training.zero_stage, "ZeRO stage 0-3 over the data-parallel group")
      ->capture_default_str();
  cmd->add_option("--json", o->json, "Also write the parts as JSON here (- for standard output alone)");
  cmd->footer(
      "Formulas: docs/equations.md §9 (Rajbhandari et al. 2020; Korthikanti et al. 2022).\n"
      "Example:\n  trainsim memory --model megatron-145.6b --tp 8 --pp 8 --dp 8 --sequence-parallel --recompute "
      "selective "
      "--zero 1");
  cmd->callback([&ctx, o] {
    ctx.action = [&ctx, o] {
      if (o->list) return print_configs(ctx.out);
      if (o->model.empty()) throw InputError("--model", "is missing", "a transformer configuration, or --list");
      report(*o, ctx);
    };
  });
}

}  // namespace trainsim
