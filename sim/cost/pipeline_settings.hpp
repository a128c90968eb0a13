// A pipeline strategy's stages from its settings, shared by the pipeline cost
// models (pipedream, pipedream-sync, dualpipe, gpipe, dsp) and their plan
// generators: the partition and its replication, given or chosen by the
// partition search (sim/search/partition.hpp), GPipe's micro-batches and
// DSP's queues.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "sim/cost/stages.hpp"
#include "sim/cost/strategy_config.hpp"
#include "sim/search/partition.hpp"

namespace trainsim {

// How a pipeline strategy chooses the partition the user did not give: the
// partition search's objective for its schedule, and whether it replicates
// stages by default (key `replicate`; PipeDream's optimizer does, the straight
// pipelines of DualPipe, GPipe and DSP do not).
struct PartitionDefaults {
  PartitionObjective objective = PartitionObjective::kOneFOneB;
  bool replicate = false;
};

// Each pipeline strategy's defaults, shared by its cost model and its plan.
extern const PartitionDefaults kPipedreamPartition;      // 1F1B, replicated
extern const PartitionDefaults kPipedreamSyncPartition;  // 1F1B, straight (seed 000 runs it so)
extern const PartitionDefaults kDualpipePartition;       // DualPipe's F+B unit, straight
extern const PartitionDefaults kGpipePartition;          // GPipe with its bubble, straight
extern const PartitionDefaults kDspPartition;            // DSP with recomputation, straight

// The partition search for K stages over n layers works in time and memory
// growing with K·n; a stage count that the search chooses ranges for is held
// to K·n <= kMaxPartitionCells (about a second; docs/simulator.md "Limits").
// Stage ranges given in full need no search and are not held to it.
inline constexpr int64_t kMaxPartitionCells = 1'000'000;

// Reads `stages` (ranges, or an integer stage count K) and, with
// read_replicas, `replicas` (default 1 per stage) and `replicate`, checks them
// against the profile and cluster (InputError naming --set stages / --set
// replicas) and builds the pipeline. Without `stages` and `replicas`: with
// `replicate` the partition search (sim/search/partition.hpp) places stages
// and replicas over every device; otherwise K = the cluster's devices capped
// at the layer count and at kMaxPartitionCells / layers, searched straight
// (K = len(replicas) balanced when only replicas are given). The chosen
// partition is recorded into the config and explained in `notes`.
Pipeline resolve_pipeline(const Profile& profile, const Cluster& cluster, StrategyConfig& config,
                          std::vector<std::string>& notes, const PartitionDefaults& defaults,
                          bool read_replicas = true);

// Interleaved 1F1B's virtual pipeline (Narayanan et al. 2021 §2.2.2), key
// `chunks` v > 1: K devices (key `stages` as a count; default the cluster's
// devices, at most layers / v), the layers cut into K·v balanced chunks,
// chunk c of device d being virtual stage c·K + d, each boundary on the
// link between its two devices; Pipeline::devices = K. No replicas.
// InputError naming --set stages for ranges or a count the layers or the
// cluster cannot hold, --set replicas and --set replicate=true.
Pipeline resolve_interleaved_pipeline(const Profile& profile, const Cluster& cluster, StrategyConfig& config,
                                      std::vector<std::string>& notes, int64_t chunks);

// Interleaved 1F1B runs the micro-batches in groups of K (Megatron-LM
// requires it): InputError naming --set microbatches for M that K does not
// divide, where chunks > 1.
void check_interleaved_microbatches(int64_t chunks, int64_t microbatches, int64_t devices);

// GPipe's micro-batches per mini-batch, key `microbatches`: default 4·stages
// (GPipe's advice that M >= 4K makes the bubble negligible) but no more than
// the batch_size samples; InputError naming --set microbatches above that.
int64_t resolve_microbatches(StrategyConfig& config, int64_t stages, int64_t batch_size,
                             std::vector<std::string>& notes);

// The zero-bubble schedules' split of each backward, key `weight_share`:
// the fraction that is the weight gradients (W), the rest the input
// gradient (B); default 0.5, a matrix product's two halves (Qi et al. 2023
// take T_B = T_W). InputError naming --set weight_share outside (0, 1).
double resolve_weight_share(StrategyConfig& config);

// DSP's FIFO queue lengths (seed 001 §3.3), one entry per block.
struct DspQueues {
  std::vector<int64_t> p;  // output queue P_k holds 1 + p_k batches
  std::vector<int64_t> m;  // input queue M_k holds 1 + m_k; m_k is block k's staleness Δt_k (§3.3)
  std::vector<int64_t> q;  // gradient queue Q_k holds 1 + q_k; follows from p and m
};

// Key `queues`: {"p": [...], "m": [...]}, checked against §3.2's ordering
// (InputError naming --set queues), q derived as m_k - m_{k+1} - p_k - 1;
// default the paper's smallest setting DSP(1,...,1,0; 2(K-1),...,2,0).
// Records the resolved lengths.
DspQueues resolve_dsp_queues(StrategyConfig& config, int64_t blocks, std::vector<std::string>& notes);

}  // namespace trainsim
