// The closed-form iteration of a transformer's 3-D parallel training
// (transformer_step.hpp; docs/equations.md §10).
#include "sim/cost/transformer_step.hpp"

#include <algorithm>
#include <cmath>

#include "model/error.hpp"

namespace trainsim {
namespace {

// A ring all-reduce of `bytes` over `n` members at `bandwidth` each way
// (docs/equations.md §2, allreduce/ring, without its γ).
double ring_all_reduce_s(double bytes, int64_t n, double bandwidth, double latency_s) {
  if (n <= 1) return 0;
  const auto p = static_cast<double>(n);
  return 2 * (p - 1) / p * bytes / bandwidth + 2 * (p - 1) * latency_s;
}

// Adam's step on 16-bit weights with fp32 masters: reads the 16-bit
// gradient and the fp32 weight, momentum and variance, writes the last
// three and the 16-bit weight (assumed fused: 28 bytes a parameter).
constexpr double kAdamBytesPerParam = 2 + 3 * 4 + 3 * 4 + 2;

}  // namespace

const std::vector<GpuMachine>& gpu_machines() {
  static const std::vector<GpuMachine> machines = {
      {"dgx-a100", "NVIDIA A100 datasheet (SXM4 80GB), DGX A100 user guide; 108 SMs (A100 whitepaper)", 312e12, 2039e9,
       80e9, 8, 300e9, 25e9, 108},
      {"dgx-h100", "NVIDIA H100 datasheet (SXM5), DGX H100 user guide; 132 SMs (H100 whitepaper)", 989e12, 3350e9, 80e9,
       8, 450e9, 50e9, 132},
  };
  return machines;
}

const GpuMachine& find_gpu_machine(const std::string& name, const std::string& flag) {
  for (const GpuMachine& m : gpu_machines()) {
    if (m.name == name) return m;
  }
  throw InputError(flag, "'" + name + "' is not a GPU machine", "dgx-a100 or dgx-h100");
}

double gemm_s(double m, double n, double k, double batch, const GpuMachine& machine, const StepAssumptions& a) {
  constexpr double kTileM = 256, kTileN = 128;
  const double tiles = batch * std::ceil(m / kTileM) * std::ceil(n / kTileN);
  const double waves = std::ceil(tiles / static_cast<double>(machine.sms));
  // Every wave takes a full tile's time on every SM it occupies.
  const double tile_flops = 2 * kTileM * kTileN * k;
  const double sm_rate = machine.peak_flops_per_s * a.gemm_efficiency / static_cast<double>(machine.sms);
  const double compute_s = waves * tile_flops / sm_rate;
  const double memory_s = 2 * batch * (m * k + k * n + m * n) / machine.memory_bytes_per_s;
  return std::max(compute_s, memory_s);
}

TransformerStep transformer_step(const TransformerConfig& c, const TransformerTraining& t, int64_t global_batch,
                                 const GpuMachine& machine, const StepAssumptions& a) {
  transformer_memory(c, t);  // its checks
  if (t.zero_stage >= 2 && t.pipeline > 1) {
    throw InputError("zero_stage",
                     std::to_string(t.zero_stage) + " with " + std::to_string(t.pipeline) + " pipeline stages",
                     "0 or 1 with a pipeline (a stage's gradients accumulate over its micro-batches; DeepSpeed's "
                     "pipeline engine shards the optimizer states only), or --pp 1");
  }
  if (t.tensor > machine.gpus) {
    throw InputError(
        "tensor",
        std::to_string(t.tensor) + " GPUs, more than a " + machine.name + " machine's " + std::to_string(machine.gpus),
        "a tensor-parallel group inside one machine");
  }
  const int64_t per_step = t.data * t.micro_batch;
  if (global_batch < 1 || global_batch % per_step != 0) {
    throw InputError("global_batch", std::to_string(global_batch),
                     "a multiple of data × micro_batch (" + std::to_string(per_step) + ")");
  }
  TransformerStep r;
  r.microbatches = global_batch / per_step;
  const auto s = static_cast<double>(c.seq), b = static_cast<double>(t.micro_batch), h = static_cast<double>(c.hidden);
  const auto l = static_cast<double>(c.layers), v = static_cast<double>(c.vocab);
  const auto tp = static_cast<double>(t.tensor), p = static_cast<double>(t.pipeline);
  const double nvlink = machine.nvlink_bytes_per_s * a.link_efficiency;
  const double network = machine.network_bytes_per_s * a.link_efficiency;

  // One layer's forward on a GPU of its TP group: 24bsh² + 4bs²h FLOPs over t
  // (Narayanan et al. §3.4), and its elementwise work reading and writing
  // what the layer keeps (Korthikanti et al.'s Table 2 bytes, twice).
  TransformerTraining kept = t;
  kept.recompute = Recompute::none;
  const double elementwise_s = 2 * layer_activation_bytes(c, kept) / machine.memory_bytes_per_s;
  // The block's matrices, 2·b·s FLOPs a parameter (GPT: 24bsh²).
  const auto kv = static_cast<double>(c.kv_width()), f = static_cast<double>(c.ffn_width());
  const double matrices = 2 * h * h + 2 * h * kv + (c.llama ? 3 : 2) * h * f;
  // Its products on one GPU of the TP group, b·s tokens a micro-batch: the
  // query, key and value projection (column-parallel), the attention's
  // scores and weighted values per head, the output projection
  // (row-parallel), the MLP's (or SwiGLU's) up and down.
  const double tokens = b * s, heads = static_cast<double>(c.heads) / tp, head = h / static_cast<double>(c.heads);
  const double attention_s = gemm_s(s, s, head, b * heads, machine, a) + gemm_s(s, head, s, b * heads, machine, a);
  // The weights' products; each one's weight gradient in the backward is a
  // product of the same size (ZB-H1's W), the rest of the backward its input
  // gradient (B).
  const double weight_products_s =
      gemm_s(tokens, (h + 2 * kv) / tp, h, 1, machine, a) + gemm_s(tokens, h, h / tp, 1, machine, a) +
      gemm_s(tokens, (c.llama ? 2 : 1) * f / tp, h, 1, machine, a) + gemm_s(tokens, h, f / tp, 1, machine, a);
  r.layer_forward_s = weight_products_s + attention_s + elementwise_s;
  // Recomputation before the backward: the whole forward, or (selective) the
  // attention's scores, softmax and dropout: their products and 5as²b bytes
  // (FlashAttention recomputes them in its backward anyway: S = QKᵀ,
  // 2·b·s²·h/t FLOPs more than twice its forward, Dao et al. 2022 §3.1).
  double recompute_s = 0;
  if (t.recompute == Recompute::full) recompute_s = r.layer_forward_s;
  if (t.flash_attention) recompute_s += attention_s / 2;
  if (t.recompute == Recompute::selective && !t.flash_attention) {
    recompute_s = attention_s + 2 * 5 * static_cast<double>(c.heads) * s * s * b / tp / machine.memory_bytes_per_s;
  }
  // Two all-reduces of b·s·h 16-bit values a pass (forward, backward, and a
  // recomputed forward), or as many reduce-scatter and all-gather pairs
  // with sequence parallelism (the same bytes).
  r.layer_tp_comm_s = 2 * ring_all_reduce_s(2 * b * s * h, t.tensor, nvlink, a.collective_latency_s);
  r.tp_passes = 2 + (t.recompute == Recompute::full ? 1 : 0);
  const double tp_passes = r.tp_passes;
  r.layer_backward_s = recompute_s + 2 * r.layer_forward_s;
  const double forward_s = r.layer_forward_s + r.layer_tp_comm_s;
  const double backward_s = recompute_s + 2 * r.layer_forward_s + (tp_passes - 1) * r.layer_tp_comm_s;
  // Each micro-batch's boundary activations to the next stage and their
  // gradient back, b·s·h 16-bit values split over the TP group (Megatron's
  // scatter-gather), once per model chunk.
  const double chunks = static_cast<double>(t.virtual_stages);
  const double p2p_s = t.pipeline > 1 ? 2 * chunks * (2 * b * s * h / tp / network + a.collective_latency_s) : 0;
  // The last stage also runs the output layer's logits, 2·b·s·h·V/t FLOPs a
  // forward, and their backward (the slowest stage sets the pipeline's pace).
  const double output_s = 3 * gemm_s(tokens, v / tp, h, 1, machine, a);
  // Megatron-LM's rank order (the tensor-parallel rank fastest, then the
  // data-parallel one, then the stage) gives a machine k = 8/t consecutive
  // data-parallel ranks of one stage (at least 1), whose NICs their rings
  // share; a data-parallel group within one machine all-reduces over NVLink.
  const double params = first_stage_params(c, t);
  const int64_t per_machine = std::max<int64_t>(1, machine.gpus / t.tensor);
  const double dp_bandwidth =
      t.data > per_machine ? std::min(nvlink, static_cast<double>(per_machine) * network) : nvlink;
  // ZeRO-2 and -3 move gradients (and ZeRO-3 weights) every micro-batch,
  // layer by layer, each layer's beside the compute of the one before
  // (Rajbhandari et al. 2020 §7; FSDP's prefetch): ZeRO-2 reduce-scatters a
  // layer's gradients beside the backward; ZeRO-3 also all-gathers its
  // weights before the forward and again before the backward. A pass takes
  // the longer of its compute and its collectives, and the first layer's
  // gather and last scatter wait for nothing to hide them.
  const auto shard_s = [&](double param_count) {  // a ring reduce-scatter, or all-gather, of 16-bit values
    return ring_all_reduce_s(2 * param_count, t.data, dp_bandwidth, a.collective_latency_s) / 2;
  };
  const double layer_shard_s = shard_s(block_params(c, t.tensor));
  // GPT ties its output layer to the token embedding; Llama's are two tables.
  const double vocabulary_shard_s = shard_s((c.llama ? 2 : 1) * v * h / tp);
  double layer_s = forward_s + backward_s;
  r.output_layer_s = output_s;
  r.output_compute_s = output_s;
  double exposed_s = 0;
  if (t.zero_stage == 2) {
    layer_s = forward_s + std::max(backward_s, layer_shard_s);
    r.output_layer_s = output_s / 3 + std::max(2 * output_s / 3, vocabulary_shard_s);
    exposed_s = layer_shard_s;
  } else if (t.zero_stage == 3) {
    layer_s = std::max(forward_s, layer_shard_s) + std::max(backward_s, 2 * layer_shard_s);
    r.output_layer_s = std::max(output_s / 3, vocabulary_shard_s) + std::max(2 * output_s / 3, 2 * vocabulary_shard_s);
    exposed_s = 2 * layer_shard_s;
  }
  r.microbatch_s = l / p * layer_s + r.output_layer_s + p2p_s + exposed_s;
  r.sharding_s =
      static_cast<double>(r.microbatches) * (r.microbatch_s - (l / p * (forward_s + backward_s) + output_s + p2p_s));
  r.tensor_parallel_s = static_cast<double>(r.microbatches) * l / p * tp_passes * r.layer_tp_comm_s;
  r.weight_share = weight_products_s / backward_s;
  // 1F1B (Narayanan et al. 2021 §2.2): the last stage, the slowest (it also
  // runs the output layer), takes its m micro-batches back to back once the
  // first arrives; the bubble is the critical path's rest, the other p − 1
  // stages' forward of the first micro-batch and backward of the last, l/p
  // layers each ((p − 1) micro-batch times with equal stages); interleaved
  // over v chunks, (p − 1)/v of them.
  r.bubble_s = (p - 1) / chunks * (r.microbatch_s - r.output_layer_s);
  if (t.zero_bubble) {
    // ZB-H1 (Qi et al. 2023 §3.1): (p − 1)·max(F + B − W, F, B) of the last
    // stage's forward F, input gradients B and weight gradients W.
    const double forward = l / p * forward_s + output_s / 3;
    const double weights = l / p * weight_products_s + output_s / 3;
    const double input = r.microbatch_s - p2p_s - forward - weights;
    r.bubble_s = (p - 1) * std::max({forward + input - weights, forward, input});
  }
  r.pipeline_s = static_cast<double>(r.microbatches) * r.microbatch_s + r.bubble_s;
  // After the drain: the gradients' all-reduce; ZeRO-1 reduce-scatters them
  // and all-gathers the updated weights instead (the same bytes); ZeRO-2
  // all-gathers the updated weights (its gradients were scattered); ZeRO-3
  // nothing (its weights are gathered when used).
  r.data_parallel_s = t.zero_stage == 3   ? 0
                      : t.zero_stage == 2 ? shard_s(params)
                                          : ring_all_reduce_s(2 * params, t.data, dp_bandwidth, a.collective_latency_s);
  r.optimizer_s =
      kAdamBytesPerParam * params / (t.zero_stage >= 1 ? static_cast<double>(t.data) : 1) / machine.memory_bytes_per_s;
  r.iteration_s = r.pipeline_s + r.data_parallel_s + r.optimizer_s;
  // Eq. 3, for any block: the layers' products and attention 4 passes with
  // the recomputed forward (3 without), the output layer 3:
  // GPT's 96·B·s·l·h²·(1 + s/(6h) + V/(16·l·h)), 72·B·s·l·h²·(… ) without recomputation.
  const double passes = t.recompute == Recompute::full ? 4 : 3;
  const auto batch = static_cast<double>(global_batch);
  r.model_flops = passes * batch * s * l * (2 * matrices + 4 * s * h) + 6 * batch * s * h * v;
  r.flops_per_gpu_per_s = r.model_flops / (r.iteration_s * static_cast<double>(t.tensor * t.pipeline * t.data));
  return r;
}

TransformerPipeline transformer_pipeline(const TransformerConfig& c, const TransformerTraining& t, int64_t global_batch,
                                         const GpuMachine& machine, const StepAssumptions& a) {
  const TransformerStep r = transformer_step(c, t, global_batch, machine, a);
  const auto m = static_cast<double>(r.microbatches);
  const auto s = static_cast<double>(c.seq), b = static_cast<double>(t.micro_batch), h = static_cast<double>(c.hidden);
  const auto tp = static_cast<double>(t.tensor);
  const double boundary_bytes = 2 * b * s * h / tp;  // a micro-batch's output, split over the TP group
  // Per layer and micro-batch, as transformer_step prices them.
  const double forward_s = r.layer_forward_s + r.layer_tp_comm_s;
  const double layer_s =
      (r.microbatch_s - r.output_layer_s) / (static_cast<double>(c.layers) / static_cast<double>(t.pipeline));
  const double p2p_s =
      t.pipeline > 1 ? 2 * (boundary_bytes / (machine.network_bytes_per_s * a.link_efficiency) + a.collective_latency_s)
                     : 0;
  const double backward_s =
      layer_s - p2p_s / (static_cast<double>(c.layers) / static_cast<double>(t.pipeline)) - forward_s;
  const double layer_params = block_params(c, t.tensor);
  const double adam_s_per_param =
      28.0 / machine.memory_bytes_per_s / (t.zero_stage >= 1 ? static_cast<double>(t.data) : 1);
  TransformerPipeline out;
  out.microbatches = r.microbatches;
  Profile& p = out.profile;
  p.model = c.name;
  p.device = {machine.name + " GPU, " + std::to_string(t.tensor) + "-way tensor parallel", "gpu"};
  p.batch_size = global_batch / t.data;
  p.dtype = "bf16";
  p.source = "analytic";
  const auto layer = [&](std::string name, std::string input, double fwd, double bwd, double params) {
    LayerProfile l;
    l.name = std::move(name);
    l.inputs = {std::move(input)};
    l.forward_s = m * fwd;
    l.backward_s = m * bwd;
    l.param_bytes = 2 * params;
    l.activation_bytes = m * boundary_bytes;
    l.update_s = params * adam_s_per_param;
    return l;
  };
  const double vocabulary_params = static_cast<double>(c.vocab) * h / tp;
  p.layers.push_back(layer("embedding", "input", 0, 0, vocabulary_params + (c.llama ? 0 : s * h)));
  for (int64_t i = 0; i < c.layers; ++i) {
    p.layers.push_back(layer("layer" + std::to_string(i), p.layers.back().name, forward_s, backward_s, layer_params));
  }
  p.layers.push_back(layer("output", p.layers.back().name, r.output_layer_s / 3, 2 * r.output_layer_s / 3,
                           c.llama ? vocabulary_params : 0));
  out.chunks = t.virtual_stages;
  if (t.zero_bubble) out.strategy = "zb-h1";
  out.weight_share = r.weight_share;
  if (t.virtual_stages > 1) {  // interleaved: 1f1b cuts p·v balanced chunks itself
    out.stages = std::to_string(t.pipeline);
  }
  // Stages of l/p layers, the embedding with the first and the output layer with the last.
  const int64_t per_stage = c.layers / t.pipeline;
  for (int64_t k = 0; t.virtual_stages == 1 && k < t.pipeline; ++k) {
    const int64_t first = k == 0 ? 0 : 1 + k * per_stage,
                  last = k + 1 == t.pipeline ? c.layers + 1 : (k + 1) * per_stage;
    out.stages += (k == 0 ? "" : ",") + std::to_string(first) + "-" + std::to_string(last);
  }
  Cluster& cl = out.cluster;
  cl.name = machine.name + "-pipeline";
  cl.description = "one pipeline of " + std::to_string(t.pipeline) + " " + machine.name +
                   " GPUs (each for its tensor-parallel group), one a machine, a NIC between stages";
  cl.machines = t.pipeline;
  cl.devices_per_machine = 1;
  cl.device = {machine.name + " GPU", "gpu", machine.memory_bytes, machine.peak_flops_per_s,
               machine.memory_bytes_per_s};
  cl.intra_link = {machine.nvlink_bytes_per_s * a.link_efficiency, a.collective_latency_s};
  cl.inter_link = {machine.network_bytes_per_s * a.link_efficiency, a.collective_latency_s};
  cl.host = {25e9, 5e-6, 100e9, 8, 5e-6};
  cl.collective = {machine.memory_bytes_per_s / 3, 0};
  return out;
}

}  // namespace trainsim
