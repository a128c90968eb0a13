// `trainsim zoo list` and `trainsim zoo show MODEL [--batch B] [--json]`.
#include <memory>
#include <sstream>

#include "analysis/table.hpp"
#include "model/error.hpp"
#include "model/model_json.hpp"
#include "model/units.hpp"
#include "model/zoo/zoo.hpp"
#include "tools/commands.hpp"

namespace trainsim {
namespace {

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string text;
  for (int64_t d : shape) text += (text.empty() ? "" : "x") + std::to_string(d);
  return text.empty() ? "scalar" : text;
}

void print_zoo_list(std::ostream& out) {
  TextTable t;
  t.header = {"model", "params", "layers", "GFLOPs/sample", "batch", "what"};
  t.right_aligned = {false, true, true, true, true, false};
  for (const ZooEntry& entry : zoo_entries()) {
    const Model m = entry.build();
    std::ostringstream gflops;
    gflops.precision(3);
    gflops << forward_flops(m) / 1e9;
    t.rows.push_back({entry.name, format_count(static_cast<double>(param_count(m))), std::to_string(m.layers.size()),
                      gflops.str(), std::to_string(m.default_batch), entry.summary});
  }
  print_aligned(out, t);
}

void print_model(std::ostream& out, const Model& m, int64_t batch) {
  out << m.name << ": " << m.description << "\n"
      << "input " << shape_text(m.input_shape) << " per sample, batch " << batch << "; "
      << param_count(m) << " parameters; " << format_count(forward_flops(m) * batch) << " FLOPs forward per batch; "
      << m.layers.size() << " layers\n\n";
  TextTable t;
  t.header = {"#", "layer", "op", "inputs", "output", "params", "MFLOPs/batch", "activations"};
  t.right_aligned = {true, false, false, false, false, true, true, true};
  for (size_t i = 0; i < m.layers.size(); ++i) {
    const Layer& l = m.layers[i];
    std::string inputs;
    for (const auto& in : l.inputs) inputs += (inputs.empty() ? "" : ",") + in;
    std::ostringstream mflops;
    mflops.precision(4);
    mflops << l.forward_flops * batch / 1e6;
    t.rows.push_back({std::to_string(i), l.name, l.op + (l.sparse ? " (sparse)" : ""), inputs,
                      shape_text(l.output_shape), std::to_string(l.param_count), mflops.str(),
                      format_bytes(4.0 * element_count(l.output_shape) * batch)});
  }
  print_aligned(out, t);
}

}  // namespace

void add_zoo_command(CLI::App& app, CommandContext& ctx) {
  CLI::App* zoo = app.add_subcommand("zoo", "The built-in models: list them or show one layer by layer");
  zoo->require_subcommand(1);
  zoo->add_subcommand("list", "List the zoo's models with parameters and FLOPs")->callback([&ctx] {
    ctx.action = [&ctx] { print_zoo_list(ctx.out); };
  });
  struct Options {
    std::string model;
    int64_t batch = 0;
    bool json = false;
  };
  auto opts = std::make_shared<Options>();
  CLI::App* show = zoo->add_subcommand("show", "Show one model's layers (shapes, parameters, FLOPs)");
  show->add_option("model", opts->model, "Zoo model id (see `trainsim zoo list`) or a model JSON file")->required();
  show->add_option("--batch", opts->batch, "Batch size for the per-batch figures (default: the model's)")
      ->check(CLI::PositiveNumber);
  show->add_flag("--json", opts->json, "Print the trainsim.model/1 JSON document instead of a table");
  show->callback([&ctx, opts] {
    ctx.action = [&ctx, opts] {
      const Model m = load_model(opts->model, "zoo show");
      const int64_t batch = opts->batch > 0 ? opts->batch : m.default_batch;
      if (opts->json) {
        ctx.out << model_to_json(m, batch).dump(2) << "\n";
      } else {
        print_model(ctx.out, m, batch);
      }
    };
  });
}

}  // namespace trainsim
