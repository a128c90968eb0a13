// A transformer's training, memory, iteration and search as JSON, and its
// training from `--set` settings (llm_commands.hpp).
#include <algorithm>
#include <cmath>
#include <map>

#include "model/error.hpp"
#include "model/units.hpp"
#include "sim/cost/driver.hpp"
#include "sim/cost/strategy_config.hpp"
#include "tools/llm_commands.hpp"

namespace trainsim {

std::string recompute_name(Recompute r) {
  return r == Recompute::full ? "full" : r == Recompute::selective ? "selective" : "none";
}

nlohmann::json training_json(const TransformerTraining& t) {
  return {{"tp", t.tensor},
          {"pp", t.pipeline},
          {"dp", t.data},
          {"micro_batch", t.micro_batch},
          {"interleave", t.virtual_stages},
          {"recompute", recompute_name(t.recompute)},
          {"sequence_parallel", t.sequence_parallel},
          {"flash_attention", t.flash_attention},
          {"zero", t.zero_stage},
          {"schedule", t.zero_bubble ? "zb-h1" : "1f1b"}};
}

nlohmann::json memory_json(const TransformerMemory& m, const GpuMachine& machine) {
  return {{"params", m.params},
          {"weights_bytes", m.weights_bytes},
          {"gradients_bytes", m.gradients_bytes},
          {"optimizer_bytes", m.optimizer_bytes},
          {"activations_bytes", m.activations_bytes},
          {"total_bytes", m.total_bytes()},
          {"fits", m.total_bytes() <= machine.memory_bytes}};
}

nlohmann::json step_json(const TransformerStep& r, const GpuMachine& machine) {
  return {{"machine", machine.name},
          {"microbatches", r.microbatches},
          {"layer_forward_s", r.layer_forward_s},
          {"layer_tp_comm_s", r.layer_tp_comm_s},
          {"tensor_parallel_s", r.tensor_parallel_s},
          {"sharding_s", r.sharding_s},
          {"output_layer_s", r.output_layer_s},
          {"microbatch_s", r.microbatch_s},
          {"pipeline_s", r.pipeline_s},
          {"bubble_s", r.bubble_s},
          {"weight_share", r.weight_share},
          {"data_parallel_s", r.data_parallel_s},
          {"optimizer_s", r.optimizer_s},
          {"iteration_s", r.iteration_s},
          {"model_flops", r.model_flops},
          {"flops_per_gpu_per_s", r.flops_per_gpu_per_s}};
}

TransformerTraining training_from_settings(const std::vector<std::string>& settings, int64_t gpus) {
  StrategyConfig config;
  for (const std::string& text : settings) {
    const Setting s = parse_setting(text, "--set");
    config.set(s.key, s.value, s.where);
  }
  TransformerTraining t;
  t.tensor = config.get_int("tp", 1, 1);
  t.pipeline = config.get_int("pp", 1, 1);
  if (gpus > 0 && !config.has("dp") && gpus % (t.tensor * t.pipeline) != 0) {
    throw InputError("--gpus", std::to_string(gpus) + " GPUs over t·p = " + std::to_string(t.tensor * t.pipeline),
                     "a multiple of tp·pp, or --set dp=D");
  }
  t.data = config.get_int("dp", gpus > 0 ? gpus / (t.tensor * t.pipeline) : 1, 1);
  if (gpus > 0 && t.tensor * t.pipeline * t.data != gpus) {
    throw InputError("--set dp",
                     std::to_string(t.data) + ": t·p·d is " + std::to_string(t.tensor * t.pipeline * t.data),
                     "t·p·d = --gpus (" + std::to_string(gpus) + ")");
  }
  t.micro_batch = config.get_int("micro_batch", 1, 1);
  t.virtual_stages = config.get_int("interleave", 1, 1);
  const std::string recompute = config.get_choice("recompute", "none", {"none", "selective", "full"});
  t.recompute = recompute == "full"        ? Recompute::full
                : recompute == "selective" ? Recompute::selective
                                           : Recompute::none;
  t.sequence_parallel = config.get_bool("sequence_parallel", false);
  t.flash_attention = config.get_bool("flash_attention", false);
  t.zero_stage = static_cast<int>(config.get_int("zero", 0, 0));
  if (t.zero_stage > 3) throw InputError("--set zero", std::to_string(t.zero_stage), "a ZeRO stage 0 to 3");
  t.zero_bubble = config.get_choice("schedule", "1f1b", {"1f1b", "zb-h1"}) == "zb-h1";
  config.check_all_used(
      "a transformer (keys tp, pp, dp, micro_batch, interleave, recompute, sequence_parallel, "
      "flash_attention, zero, schedule)");
  return t;
}

void rethrow_as_setting(const InputError& e) {
  static const std::map<std::string, std::string> keys = {{"tensor", "--set tp"},
                                                          {"pipeline", "--set pp"},
                                                          {"data", "--set dp"},
                                                          {"micro_batch", "--set micro_batch"},
                                                          {"virtual_stages", "--set interleave"},
                                                          {"zero_stage", "--set zero"},
                                                          {"zero_bubble", "--set schedule"},
                                                          {"global_batch", "--global-batch"},
                                                          {"microbatches", "--global-batch"}};
  const auto key = keys.find(e.where());
  if (key == keys.end()) throw e;
  throw InputError(key->second, e.problem(), e.expected());
}

std::string search_why(const TransformerSearchResult& r, double memory_limit_bytes) {
  if (r.ranked.empty()) return "none fits: more GPUs, a smaller global batch, or a higher --memory-limit";
  const TransformerCandidate& best = r.ranked.front();
  const TransformerStep& s = best.step;
  const auto share = [&s](double part) { return format_percent(part / s.iteration_s); };
  std::string why = "why rank 1: it fits (" + format_bytes(best.memory.total_bytes()) + " of " +
                    format_bytes(memory_limit_bytes) + "); of its iteration the pipeline's compute and boundary " +
                    "sends take " + share(s.pipeline_s - s.bubble_s - s.tensor_parallel_s - s.sharding_s) +
                    ", the bubble " + share(s.bubble_s) + ", tensor-parallel all-reduces " + share(s.tensor_parallel_s);
  if (s.sharding_s > 0) why += ", ZeRO's gathers and scatters not hidden " + share(s.sharding_s);
  if (best.training.zero_stage < 3) {
    why += std::string(", the data-parallel ") + (best.training.zero_stage == 2 ? "all-gather " : "all-reduce ") +
           share(s.data_parallel_s);
  }
  why += " and the optimizer " + share(s.optimizer_s);
  if (r.ranked.size() > 1) {
    why += "; rank 2 is " + format_percent(r.ranked[1].iteration_s() / best.iteration_s() - 1) + " slower";
  }
  return why;
}

nlohmann::json search_json(const TransformerConfig& c, const GpuMachine& machine, const TransformerSearchRequest& o,
                           const TransformerSearchResult& r, double memory_limit_bytes) {
  const auto shown = static_cast<size_t>(std::min<int64_t>(o.top, static_cast<int64_t>(r.ranked.size())));
  nlohmann::json list = nlohmann::json::array();
  for (size_t i = 0; i < shown; ++i) {
    const TransformerCandidate& k = r.ranked[i];
    nlohmann::json entry = training_json(k.training);
    entry.update({{"family", transformer_family(k.training)},
                  {"memory_bytes", k.memory.total_bytes()},
                  {"memory", memory_json(k.memory, machine)},
                  {"iteration_s", k.step.iteration_s},
                  {"simulated_iteration_s", k.simulated_iteration_s},
                  {"step", step_json(k.step, machine)},
                  {"zero_bubble", k.training.zero_bubble},
                  {"flops_per_gpu_per_s", k.step.model_flops / (k.iteration_s() * static_cast<double>(o.gpus))}});
    list.push_back(std::move(entry));
  }
  return {{"format", "trainsim.llm-choice/1"},
          {"model", c.name},
          {"machine", machine.name},
          {"gpus", o.gpus},
          {"global_batch", o.global_batch},
          {"memory_limit_bytes", memory_limit_bytes},
          {"evaluated", r.evaluated},
          {"fit", r.fit},
          {"simulated", std::min(o.simulate, r.fit)},
          {"why", search_why(r, memory_limit_bytes)},
          {"ranked", list}};
}

}  // namespace trainsim
