// The time of one training iteration of a transformer language model
// (model/zoo/transformer_configs.hpp) with tensor (t), pipeline (p) and data
// (d) parallelism on machines of 8 GPUs, in closed form (Narayanan et al.
// 2021 §3): every stage runs its l/p layers per micro-batch (forward,
// recomputed forward where activations are recomputed, backward), the
// tensor-parallel group all-reducing each layer's activations over NVLink,
// 1F1B's (or interleaved 1F1B's) bubble, the data-parallel all-reduce of
// the gradients after the pipeline drains, and the optimizer step.
// docs/equations.md §10 has the equations and every assumption.
#pragma once

#include <string>
#include <vector>

#include "model/zoo/transformer_configs.hpp"
#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "sim/cost/transformer_memory.hpp"

namespace trainsim {

// A machine of GPUs as the datasheets give it, 16-bit tensor-core math.
struct GpuMachine {
  std::string name, source;
  double peak_flops_per_s = 0;     // dense 16-bit (bf16/fp16) tensor-core peak per GPU
  double memory_bytes_per_s = 0;   // HBM bandwidth per GPU
  double memory_bytes = 0;         // HBM per GPU
  int64_t gpus = 8;                // per machine
  double nvlink_bytes_per_s = 0;   // per GPU, one direction
  double network_bytes_per_s = 0;  // per GPU, one direction (one NIC per GPU)
  int64_t sms = 0;                 // streaming multiprocessors per GPU
};

// DGX A100 (A100 SXM4 80GB: 312 TFLOP/s, 2,039 GB/s; NVLink 3 600 GB/s both
// ways; 8 × 200 Gb/s HDR InfiniBand) and DGX H100 (H100 SXM5: 989 TFLOP/s,
// 3,350 GB/s; NVLink 4 900 GB/s both ways; 8 × 400 Gb/s NDR).
const std::vector<GpuMachine>& gpu_machines();
const GpuMachine& find_gpu_machine(const std::string& name, const std::string& flag);

// What the closed form assumes of the software (docs/equations.md §10).
struct StepAssumptions {
  double gemm_efficiency = 0.8;        // of the peak, for a matrix product that fills whole waves of whole tiles
  double collective_latency_s = 5e-6;  // per ring step of an all-reduce, per message
  // What NCCL moves over a link of the datasheet's rate: about 80% of it
  // after its protocol's overhead (NCCL's maintainers, nccl-tests issue #212:
  // 370 of H100's 450 GB/s of NVLink), for NVLink and InfiniBand alike.
  double link_efficiency = 0.8;
};

// The time of one matrix product C[m×n] = A[m×k]·B[k×n] in 16-bit, `batch`
// of them at once, as cuBLAS runs it (NVIDIA, "Matrix Multiplication
// Background User's Guide", §2.3 and §3): C in tiles of 256×128, each
// tile a thread block on one SM, so a product whose sides the tile does not
// divide computes whole tiles anyway (tile quantization) and one whose tiles
// do not fill the last wave of SMs leaves the rest idle (wave
// quantization); each tile at `gemm_efficiency` of its SM's share of the
// peak, and never faster than reading A and B and writing C from HBM.
double gemm_s(double m, double n, double k, double batch, const GpuMachine& machine, const StepAssumptions& a);

struct TransformerStep {
  int64_t microbatches = 0;    // m = B / (d·b)
  double layer_forward_s = 0;  // one layer, one micro-batch, on one GPU of its TP group
  double layer_backward_s = 0;  // its backward's compute: the recomputed forward (or attention) and twice the forward
  double layer_tp_comm_s = 0;  // the layer's all-reduces of one pass over NVLink
  int tp_passes = 2;           // passes that all-reduce: forward, backward, and a fully recomputed forward
  double tensor_parallel_s = 0;  // of the pipeline, the last stage's all-reduces (every micro-batch)
  double output_layer_s = 0;     // the last stage's logits, forward and backward, one micro-batch
                                 // (with ZeRO-2 and -3: beside the vocabulary's scatter and gathers)
  double output_compute_s = 0;   // the output layer's forward and backward alone (output_layer_s without ZeRO)
  double sharding_s = 0;         // of the pipeline, what ZeRO-2's and -3's collectives add to its micro-batches
  double microbatch_s = 0;     // the last stage's forward, recompute and backward of one micro-batch
  double pipeline_s = 0;       // m micro-batches through the pipeline, bubble included
  double bubble_s = 0;         // of which the bubble
  double weight_share = 0;     // of a layer's backward, the part that is its weight gradients (ZB-H1's W)
  double data_parallel_s = 0;  // the gradients' all-reduce
  double optimizer_s = 0;
  double iteration_s = 0;
  double model_flops = 0;          // per iteration, Narayanan et al.'s eq. 3
  double flops_per_gpu_per_s = 0;  // model_flops / (iteration_s · GPUs)
};

// InputError naming the setting for a batch that t·p·d·b does not divide
// into whole micro-batches, a tensor-parallel group larger than a machine,
// ZeRO-2 or -3 with a pipeline, and transformer_memory's refusals.
TransformerStep transformer_step(const TransformerConfig& c, const TransformerTraining& t, int64_t global_batch,
                                 const GpuMachine& machine, const StepAssumptions& a = {});

// One pipeline of that training as the simulator's inputs: a profile of the
// token embedding, the l layers and the output layer on one GPU of a
// tensor-parallel group, at the pipeline's mini-batch of B/d sequences
// (each layer's forward with its all-reduces, its backward with the
// recomputed forward; 16-bit weights over t; as activations, the b·s·h/t
// 16-bit values a micro-batch sends to the next stage; Adam's step as
// update_s), and a cluster of p such GPUs, one a machine, linked by a NIC
// (`stages` gives Megatron's layer split: l/p layers a stage, the
// embedding on the first, the output layer on the last; interleaved, the p
// devices whose v chunks 1f1b balances itself). `trainsim simulate
// --strategy 1f1b` then runs the schedule event by event.
struct TransformerPipeline {
  Profile profile;
  Cluster cluster;
  std::string stages;  // the 1f1b `stages` setting: ranges, or with chunks the device count
  int64_t microbatches = 0;
  int64_t chunks = 1;  // the 1f1b `chunks` setting (interleaved 1F1B's v)
  std::string strategy = "1f1b";  // or "zb-h1", with its `weight_share` setting
  double weight_share = 0.5;
};
TransformerPipeline transformer_pipeline(const TransformerConfig& c, const TransformerTraining& t, int64_t global_batch,
                                         const GpuMachine& machine, const StepAssumptions& a = {});

}  // namespace trainsim
