// The subcommands of `trainsim`, one file each; cli.cpp wires them up.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <ostream>
#include <string>

#include "exec/data/dataset.hpp"
#include "model/layer.hpp"
#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "sim/cost/transformer_step.hpp"
#include "sim/des/engine.hpp"
#include "tools/options.hpp"

namespace trainsim {

// What a subcommand needs once parsing is done.
struct CommandContext {
  std::ostream& out;
  std::ostream& err;
  // Set by the chosen subcommand's callback; run after parsing succeeds.
  std::function<void()> action;
};

void add_zoo_command(CLI::App& app, CommandContext& ctx);
void add_cluster_command(CLI::App& app, CommandContext& ctx);
void add_profile_command(CLI::App& app, CommandContext& ctx);
void add_predict_command(CLI::App& app, CommandContext& ctx);
void add_devices_command(CLI::App& app, CommandContext& ctx);
void add_simulate_command(CLI::App& app, CommandContext& ctx);
void add_partition_command(CLI::App& app, CommandContext& ctx);
void add_chunk_command(CLI::App& app, CommandContext& ctx);
void add_choose_command(CLI::App& app, CommandContext& ctx);
void add_run_command(CLI::App& app, CommandContext& ctx);
// `trainsim validate`: profile here, predict, run, and compare (cmd_validate.cpp).
void add_validate_command(CLI::App& app, CommandContext& ctx);
// `trainsim report`: predictions, ranking and simulated schedules as one HTML page (cmd_report.cpp).
void add_report_command(CLI::App& app, CommandContext& ctx);
// `trainsim llm`: a transformer's 3-D parallel training, memory and iteration (cmd_llm.cpp).
void add_llm_command(CLI::App& app, CommandContext& ctx);

// A transformer's 3-D search as `trainsim llm --search` and `trainsim choose
// --model TRANSFORMER` print it (cmd_llm.cpp): the fastest configurations
// that fit, and why the first.
struct TransformerSearchRequest {
  std::string model, machine = "dgx-a100", memory_limit, json;
  int64_t gpus = 0, global_batch = 0, top = 10, simulate = 0;
  StepAssumptions assumptions;
};
void print_transformer_search(const TransformerSearchRequest& request, CommandContext& ctx);
// The whole job of `llm --simulate-job` as a plan, simulated and printed
// beside its closed form `step` (tools/llm_job.cpp).
void print_job_simulation(const TransformerConfig& c, const TransformerTraining& t, int64_t global_batch,
                          const GpuMachine& machine, const StepAssumptions& a, const TransformerStep& step,
                          std::ostream& out);
// Whether `name` is one of the transformer configurations (trainsim llm --list).
bool is_transformer_config(const std::string& name);
// `--gpus` and `--global-batch`, a transformer's job size, on `predict`,
// `simulate`, `choose` and `report` (cmd_llm.cpp).
void add_job_size_options(CLI::App* cmd, int64_t& gpus, int64_t& global_batch);
// InputError naming --gpus or --global-batch where either is given for a
// model that is not a transformer.
void refuse_job_size_without_transformer(int64_t gpus, int64_t global_batch);

// `trainsim profile --import-kineto TRACE` (kineto_profile.cpp).
struct KinetoCliOptions {
  std::string trace, granularity = "auto", name, out = "-", cluster_out;
  int64_t batch = 0;
  bool summary = false;
};
void run_kineto_import(const KinetoCliOptions& options, CommandContext& ctx);

// A zoo id, or the path of a trainsim.model/1 JSON file.
Model load_model(const std::string& name_or_path, const std::string& where);

// The profile a command works on: `--profile FILE`, or `--model M [--batch B]`
// profiled analytically on the cluster's device.
Profile resolve_profile_input(const std::string& profile_path, const std::string& model, int64_t batch,
                              const Cluster& cluster);

// `--dataset` for a model: fashion-mnist, fortunes, fortune-topics or
// synthetic (word bags), by default the one the model's input and output
// take. `data_dir` (`--data-dir`) is where Fashion-MNIST's or the fortune
// files are; empty: Debian's folders.
Dataset load_dataset(const std::string& name, const Model& model, const std::string& data_dir);
// --dataset's help, the same for run and validate.
inline constexpr const char* kDatasetHelp =
    "fashion-mnist, fortunes (bytes of text), fortune-topics (word bags of four topics) or synthetic (generated word "
    "bags, for models that take word ids as text-bag does) (default: by the model's input and output)";

// For every `--seed`: digits only. CLI11 alone reads "-1" into a uint64_t as
// 2^64 - 1.
const CLI::Validator& seed_check();

// Writes `text` to `path`, or to `out` when path is "-" (write_output_file:
// special files written through, links kept, regular files replaced atomically).
void write_text_output(const std::string& path, const std::string& text, std::ostream& out,
                       const std::string& where);

}  // namespace trainsim
