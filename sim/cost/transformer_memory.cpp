// The memory of a transformer's training per device (transformer_memory.hpp).
#include "sim/cost/transformer_memory.hpp"

#include <algorithm>
#include <string>

#include "model/error.hpp"

namespace trainsim {
namespace {

void check(const TransformerConfig& c, const TransformerTraining& t) {
  const auto at_least_one = [](int64_t v, const char* what) {
    if (v < 1) throw InputError(what, std::to_string(v), "1 or more");
  };
  at_least_one(t.tensor, "tensor");
  at_least_one(t.pipeline, "pipeline");
  at_least_one(t.data, "data");
  at_least_one(t.micro_batch, "micro_batch");
  at_least_one(t.virtual_stages, "virtual_stages");
  if (t.microbatches < 0) throw InputError("microbatches", std::to_string(t.microbatches), "0 (p) or more");
  if (c.layers % (t.pipeline * t.virtual_stages) != 0) {
    throw InputError("pipeline",
                     std::to_string(t.pipeline) + " stages of " + std::to_string(t.virtual_stages) + " chunks for " +
                         c.name + "'s " + std::to_string(c.layers) + " layers",
                     "stages times chunks dividing the layers");
  }
  if (c.heads % t.tensor != 0 || (c.kv_heads > 0 && c.kv_heads % t.tensor != 0)) {
    throw InputError("tensor",
                     std::to_string(t.tensor) + " for " + c.name + "'s " + std::to_string(c.heads) + " heads" +
                         (c.kv_heads > 0 ? " (" + std::to_string(c.kv_heads) + " key-value)" : ""),
                     "a tensor-parallel size dividing the heads");
  }
  if (t.zero_stage < 0 || t.zero_stage > 3)
    throw InputError("zero_stage", std::to_string(t.zero_stage), "0, 1, 2 or 3");
  if (t.zero_bubble && t.virtual_stages > 1) {
    throw InputError("zero_bubble", "with " + std::to_string(t.virtual_stages) + " chunks a device",
                     "ZB-H1 without interleaving (its interleaved variants are not built)");
  }
  if (t.virtual_stages > 1 && t.pipeline == 1) {
    throw InputError("virtual_stages", std::to_string(t.virtual_stages) + " without a pipeline", "1, or pipeline > 1");
  }
}

}  // namespace

double first_stage_params(const TransformerConfig& c, const TransformerTraining& t) {
  const auto h = static_cast<double>(c.hidden), tp = static_cast<double>(t.tensor);
  const double layers = static_cast<double>(c.layers) / static_cast<double>(t.pipeline);
  const double vocabulary = static_cast<double>(c.vocab) * h / tp;
  // GPT: the token and position embeddings; Llama: the token embedding, and
  // its own output layer where one stage holds everything.
  const double embeddings =
      c.llama ? vocabulary * (t.pipeline == 1 ? 2 : 1) : vocabulary + static_cast<double>(c.seq) * h;
  return layers * block_params(c, t.tensor) + embeddings;
}

ModelStates model_state_bytes(double params, int zero_stage, int64_t data, double optimizer_bytes_per_param) {
  const auto d = static_cast<double>(data);
  ModelStates m;
  m.weights_bytes = 2 * params / (zero_stage >= 3 ? d : 1);
  m.gradients_bytes = 2 * params / (zero_stage >= 2 ? d : 1);
  m.optimizer_bytes = optimizer_bytes_per_param * params / (zero_stage >= 1 ? d : 1);
  return m;
}

double layer_activation_bytes(const TransformerConfig& c, const TransformerTraining& t) {
  const auto s = static_cast<double>(c.seq), b = static_cast<double>(t.micro_batch), h = static_cast<double>(c.hidden);
  const auto a = static_cast<double>(c.heads), tp = static_cast<double>(t.tensor);
  const auto kv = static_cast<double>(c.kv_width()), f = static_cast<double>(c.ffn_width());
  const double sb = s * b;
  if (t.recompute == Recompute::full) return t.sequence_parallel ? 2 * sb * h / tp : 2 * sb * h;
  // Kept whole on every GPU of the group (without SP): the two norms' inputs
  // and the two column-parallel products' inputs, 2·s·b·h bytes each, and
  // GPT's two dropout masks; split over t: Q, K, V and the output
  // projection's input, and the MLP's (GPT: its 4h product and GELU;
  // Llama: SwiGLU's gate, up and product); per head, the scores' softmax
  // (GPT: and its dropout mask and output).
  const double whole = 8 * sb * h + (c.llama ? 0 : 2 * sb * h);
  const double split = sb * (4 * h + 4 * kv) + sb * (c.llama ? 6 * f : 4 * f);
  const double scores = t.flash_attention ? 4 * a * sb : (c.llama ? 2 : 5) * a * s * sb;
  const double kept = t.sequence_parallel ? (whole + split) / tp : whole + split / tp;
  return kept + (t.recompute == Recompute::selective && !t.flash_attention ? 0 : scores / tp);
}

TransformerMemory transformer_memory(const TransformerConfig& c, const TransformerTraining& t) {
  check(c, t);
  TransformerMemory m;
  m.params = first_stage_params(c, t);
  const ModelStates states = model_state_bytes(m.params, t.zero_stage, t.data, t.optimizer_bytes_per_param);
  m.weights_bytes = states.weights_bytes;
  if (t.zero_stage == 3) {
    // The weights gathered whole for the layer running and the one
    // prefetched beside it (FSDP's default of one unit ahead), or for the
    // vocabulary's table, whichever is larger.
    const double vocabulary =
        static_cast<double>(c.vocab) * static_cast<double>(c.hidden) / static_cast<double>(t.tensor);
    m.weights_bytes += 2 * 2 * std::max(block_params(c, t.tensor), vocabulary / 2);
  }
  m.gradients_bytes = states.gradients_bytes;
  m.optimizer_bytes = states.optimizer_bytes;
  const auto p = static_cast<double>(t.pipeline), v = static_cast<double>(t.virtual_stages);
  const double in_flight =
      t.microbatches > 0 ? std::min(p, static_cast<double>(t.microbatches)) : p;  // 1F1B's first stage
  const double interleaved = v > 1 ? 1 + (p - 1) / (p * v) : 1;                   // Korthikanti et al. §4.2.3
  const double layers = static_cast<double>(c.layers) / p * in_flight * interleaved;
  m.activations_bytes = layers * layer_activation_bytes(c, t);
  return m;
}

}  // namespace trainsim
