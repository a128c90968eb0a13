// measure_cuda_profile: per-layer CUDA-event medians over whole passes.
#include "profiles/profiler/cuda_profiler.hpp"

#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "exec/cuda/cuda_device.hpp"
#include "exec/cuda/cuda_network.hpp"
#include "exec/tensor/layers.hpp"
#include "model/error.hpp"
#include "model/layer.hpp"
#include "profiles/profiler/cuda_cluster_probe.hpp"
#include "profiles/profiler/host_per_op.hpp"
#include "profiles/profiler/measured_layers.hpp"
#include "profiles/profiler/timing.hpp"

namespace trainsim {
namespace {

// A network of `model` on GPU `device` holding the batch `x` (labels 0,
// one per output position).
std::unique_ptr<CudaNetwork> network_with_batch(const Model& model, const Network& network, const Tensor& x, int device,
                                                const MeasureOptions& options, CudaPrecision precision) {
  const int64_t batch = x.rows();
  auto gpu = std::make_unique<CudaNetwork>(model, init_weights(network, options.seed), batch, device,
                                           CudaNetworkOptions{precision, false});
  const std::vector<int64_t>& out = model.layers.back().output_shape;
  const int64_t per_sample = out.empty() ? 1 : element_count(out) / std::max<int64_t>(1, out.back());
  gpu->set_batch(x, std::vector<int32_t>(static_cast<size_t>(batch * per_sample), 0));
  return gpu;
}

// The medians of `passes` timed passes after `warmups` untimed ones.
LayerMedians time_passes(const Model& model, int64_t batch, int device, const MeasureOptions& options,
                         CudaPrecision precision, int64_t progress_offset, int64_t progress_total,
                         std::string& device_name) {
  const Network network = build_network(model);
  const Tensor x = measured_batch(model, batch, options);
  const std::unique_ptr<CudaNetwork> owned = network_with_batch(model, network, x, device, options, precision);
  CudaNetwork& gpu = *owned;
  device_name = gpu.device_name();
  GpuPassTimes runs;
  const int64_t passes = options.warmups + options.repeats;
  for (int64_t r = 0; r < passes; ++r) {
    const GpuPassTimes t = gpu.timed_pass(kTimedSgd);
    if (r >= options.warmups) {
      runs.forward_s.insert(runs.forward_s.end(), t.forward_s.begin(), t.forward_s.end());
      runs.backward_s.insert(runs.backward_s.end(), t.backward_s.begin(), t.backward_s.end());
      runs.update_s.insert(runs.update_s.end(), t.update_s.begin(), t.update_s.end());
    }
    if (options.progress) options.progress(progress_offset + r + 1, progress_total);
  }
  const auto count = static_cast<int64_t>(model.layers.size());
  return {layer_medians(runs.forward_s, count), layer_medians(runs.backward_s, count),
          layer_medians(runs.update_s, count), batch_sparsity(model, x)};
}

void check_measure_options(const Model& model, int64_t batch, const MeasureOptions& options) {
  check_source(model, options);
  if (batch < 1) throw InputError("--batch", std::to_string(batch), "a batch size >= 1");
  if (options.repeats < 1) throw InputError("--repeats", std::to_string(options.repeats), "at least 1 timed run");
  if (options.warmups < 0) throw InputError("--warmups", std::to_string(options.warmups), "0 or more warm-up runs");
}

// What each compute op of a worker on GPU `device` takes of its host,
// through the executor, into `cluster` (its description says so). One
// worker alone: with several at once an op whose host waits for its
// kernels would take the GPU's sharing into its host part, which the
// simulator prices beside it (shared_devices, compute_rate_while_shared,
// whose passes' wall times take the workers' launches at once).
void add_host_per_op(const Model& model, int64_t batch, int device, const MeasureOptions& options,
                     CudaPrecision precision, Cluster& cluster) {
  cluster.device.host_per_op = measure_host_per_op(
      model, batch, 1, [&](int32_t) { return make_cuda_device(model, device, precision); }, options);
  cluster.description += "; host_per_op: " + model.name + "'s single plan through the executor at batch " +
                         std::to_string(batch) + ", one worker alone on GPU " + std::to_string(device);
}

}  // namespace

double measure_cuda_shared_rate(const Model& model, int64_t batch, int device, int64_t workers,
                                const MeasureOptions& options, CudaPrecision precision) {
  check_measure_options(model, batch, options);
  if (workers < 1) throw InputError("--device", std::to_string(workers) + " workers", "cuda:GxW with W >= 1");
  if (workers == 1) return 1;
  validate_model(model, "model " + model.name);
  const Network network = build_network(model);
  const Tensor x = measured_batch(model, batch, options);
  std::vector<std::unique_ptr<CudaNetwork>> gpus;
  for (int64_t w = 0; w < workers; ++w)
    gpus.push_back(network_with_batch(model, network, x, device, options, precision));
  const auto pass = [&](int64_t w) { gpus[static_cast<size_t>(w)]->timed_pass(kTimedSgd); };
  const double alone_s = concurrent_median_s(1, options.warmups, options.repeats, pass);
  // Until the last of them ends: the simulator runs the workers at one rate, ending together.
  const double together_s = concurrent_makespan_median_s(workers, options.warmups, options.repeats, pass);
  return together_s > 0 ? std::min(1.0, alone_s / together_s) : 1.0;
}

Cluster measure_cuda_workers_cluster(const Model& model, int64_t batch, int device, int64_t workers,
                                     const MeasureOptions& options, CudaPrecision precision) {
  CudaProbeOptions probe;
  probe.gradient_bytes = std::max<int64_t>(4, 4 * param_count(model));  // what its collectives carry
  Cluster cluster = measure_cuda_cluster(device, workers, probe);
  add_host_per_op(model, batch, device, options, precision, cluster);
  if (workers > 1) {  // what sharing the GPU leaves each worker of this model's passes
    cluster.device.compute_rate_while_shared =
        measure_cuda_shared_rate(model, batch, device, workers, options, precision);
    cluster.description += "; compute_rate_while_shared: " + model.name + "'s training pass at batch " +
                           std::to_string(batch) + ", alone over " + std::to_string(workers) + " at once";
  }
  return cluster;
}

Cluster measure_cuda_gpus_cluster(const Model& model, int64_t batch, const std::vector<int>& gpus,
                                  const MeasureOptions& options, CudaPrecision precision) {
  CudaProbeOptions probe;
  probe.gradient_bytes = std::max<int64_t>(4, 4 * param_count(model));  // what its collectives carry
  Cluster cluster = measure_cuda_gpus_cluster(gpus, probe);
  if (!gpus.empty()) add_host_per_op(model, batch, gpus.front(), options, precision, cluster);
  return cluster;
}

Profile measure_cuda_profile(const Model& model, int64_t batch, int device, const MeasureOptions& options,
                             CudaPrecision precision) {
  check_measure_options(model, batch, options);
  if (options.concurrent != 1) {
    throw InputError("--concurrent", "is " + std::to_string(options.concurrent),
                     "1 with a GPU: each GPU worker is measured alone");
  }
  validate_model(model, "model " + model.name);
  const int64_t passes = options.warmups + options.repeats;
  const int64_t small = batch / kSmallBatchDivisor;  // micro-batch size the fixed parts are fitted at
  const int64_t total = small >= 1 ? 2 * passes : passes;
  std::string name;
  const LayerMedians at_batch = time_passes(model, batch, device, options, precision, 0, total, name);
  LayerMedians at_small;
  if (small >= 1) at_small = time_passes(model, small, device, options, precision, passes, total, name);
  if (precision == CudaPrecision::tf32) name += " (TF32)";
  if (precision == CudaPrecision::bf16) name += " (BF16 products)";
  Profile profile = measured_profile(model, batch, at_batch, small, small >= 1 ? &at_small : nullptr, {name, "gpu"});
  add_union_sparsity(model, batch, options, profile);
  return profile;
}

}  // namespace trainsim
