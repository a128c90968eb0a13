// A transformer configuration (trainsim llm --list) in `predict`,
// `simulate`, `choose` and `report`: its parts as JSON, its training from
// `--set` settings (llm_json.cpp), and what those commands run of it
// (llm_commands.cpp). The JSON formats are in docs/formats.md.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/error.hpp"
#include "sim/cost/transformer_memory.hpp"
#include "sim/cost/transformer_step.hpp"
#include "sim/search/transformer_search.hpp"
#include "tools/commands.hpp"

namespace trainsim {

std::string recompute_name(Recompute r);
// tp, pp, dp, micro_batch, interleave, recompute, sequence_parallel,
// flash_attention, zero and schedule ("1f1b" or "zb-h1").
nlohmann::json training_json(const TransformerTraining& t);
nlohmann::json memory_json(const TransformerMemory& m, const GpuMachine& machine);
nlohmann::json step_json(const TransformerStep& r, const GpuMachine& machine);

// A training from `--set` settings with training_json's keys (dp by default
// the GPUs over t·p when `gpus` > 0, else 1); InputError naming the setting
// for an unknown key or a bad value.
TransformerTraining training_from_settings(const std::vector<std::string>& settings, int64_t gpus);

// An error of the cost model naming a training field ("tensor", "data",
// "global_batch"), thrown again naming its --set key or flag.
[[noreturn]] void rethrow_as_setting(const InputError& e);

// trainsim.llm-choice/1: the search's best `top` configurations, and why
// the first (search_why).
nlohmann::json search_json(const TransformerConfig& c, const GpuMachine& machine, const TransformerSearchRequest& o,
                           const TransformerSearchResult& r, double memory_limit_bytes);
std::string search_why(const TransformerSearchResult& r, double memory_limit_bytes);

// `trainsim predict --model TRANSFORMER`: the fastest configuration of each
// family (transformer_families) that fits, in closed form, and simulated
// with --method simulated or both.
struct TransformerPredictRequest {
  std::string model, machine, families = "all", method = "analytic", json;
  int64_t gpus = 0, global_batch = 0;
  bool quiet = false;
};
// trainsim.llm-prediction/1.
nlohmann::json predict_transformer(const TransformerPredictRequest& o);
void run_transformer_predict(const TransformerPredictRequest& o, CommandContext& ctx);

// `trainsim report --model TRANSFORMER`: prediction.json (predict_transformer
// simulated), choice.json (the search, its best 3 simulated) and
// trace-<family>.json, the winner's pipeline simulated, into `out_dir`.
// Returns the search's why and the trace files written.
std::pair<std::string, std::vector<std::string>> write_transformer_report_inputs(const TransformerPredictRequest& o,
                                                                                 const std::string& out_dir,
                                                                                 CommandContext& ctx);

}  // namespace trainsim
