// The GPU profiler: every layer's forward, backward and update timed with
// CUDA events inside whole training passes on exec's GPU device
// (CudaNetwork), written as a `trainsim.profile/1` (source "measured").
#pragma once

#include <cstdint>
#include <vector>

#include "exec/cuda/cuda_network.hpp"
#include "model/layer.hpp"
#include "profiles/cluster.hpp"
#include "profiles/profile.hpp"
#include "profiles/profiler/profiler.hpp"

namespace trainsim {

// Profile of `model` at `batch` samples on GPU `device`. Each of
// options.warmups + options.repeats passes is one training step on the GPU
// (CudaNetwork::timed_pass: every forward, the last with the loss, every
// backward, then every momentum-SGD step with its gradient zeroed; an
// embedding bag's on the rows it touched) on one batch that stays in device
// memory, so no layer's time includes a host copy: rows drawn from
// options.source where given, else random ones (measured_batch). Each
// layer's times are the medians over the timed passes. The fixed parts are
// fitted from a second measurement at batch / 8, as on the CPU. A sparse
// first layer's sparsity is the fraction of its table the batch's ids
// touch, its union_sparsity as measure_profile's. device = {the GPU's name,
// "gpu"}, the name followed by " (TF32)" under CudaPrecision::tf32 and
// " (BF16 products)" under bf16. InputError naming --batch or --repeats for
// values < 1, --concurrent when it is not 1 (each GPU worker is measured
// alone), --dataset for a source whose rows do not fit the model's input,
// and CudaNetwork's errors (an op without a kernel, no such GPU, a build
// without CUDA).
Profile measure_cuda_profile(const Model& model, int64_t batch, int device, const MeasureOptions& options = {},
                             CudaPrecision precision = CudaPrecision::fast);

// DeviceSpec::compute_rate_while_shared of `workers` virtual workers on GPU
// `device` training `model` at `batch` samples each: the median time of one
// worker's training pass alone (CudaNetwork::timed_pass, host launch to its
// end) over the median time all `workers`, each its own network and stream
// on its own thread, take to run theirs at once (from their common start
// to the last one's end, concurrent_makespan_median_s: the simulator runs
// them at one rate, ending together), at most 1; 1 for one worker. InputErrors as
// measure_cuda_profile's, and naming --device for workers < 1.
// GPU `device` as `workers` virtual workers training `model` at `batch`
// each: measure_cuda_cluster over the model's gradient (gradient_bytes:
// its parameters' bytes), and where workers > 1 its
// compute_rate_while_shared from measure_cuda_shared_rate, and its
// host_per_op from measure_host_per_op on one worker of the GPU alone (the
// description says so). What `profile --device cuda:GxW --cluster-out` and `validate
// --devices cuda:GxW` measure.
Cluster measure_cuda_workers_cluster(const Model& model, int64_t batch, int device, int64_t workers,
                                     const MeasureOptions& options = {}, CudaPrecision precision = CudaPrecision::fast);

// GPUs `gpus`, a worker each, training `model` at `batch` each:
// measure_cuda_gpus_cluster over the model's gradient, and its host_per_op
// from measure_host_per_op on one worker of the first GPU. What `profile
// --device cuda:G,H,... --cluster-out` and `validate --devices cuda:G,H,...`
// measure.
Cluster measure_cuda_gpus_cluster(const Model& model, int64_t batch, const std::vector<int>& gpus,
                                  const MeasureOptions& options = {}, CudaPrecision precision = CudaPrecision::fast);

double measure_cuda_shared_rate(const Model& model, int64_t batch, int device, int64_t workers,
                                const MeasureOptions& options = {}, CudaPrecision precision = CudaPrecision::fast);

}  // namespace trainsim
