// Compute ops: forward, recompute (DSP), backward, update; the rows of the
// batch each reads and the gradient sets they write.
#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "exec/interpreter/flat_weights.hpp"
#include "exec/interpreter/handlers.hpp"
#include "exec/interpreter/weight_versions.hpp"
#include "model/error.hpp"

namespace trainsim::interp {
namespace {

// Applied gradient sets a worker keeps for the next iterations (pipelines
// hold a few iterations' gradients at once).
constexpr size_t kSpareGradientSets = 2;

}  // namespace

// The weights the op reads (weight_versions.hpp), reported to on_weights_read.
const Weights& Interpreter::weights_for(WorkerState& w, OpId id, const Op& op, const Tensor* x) {
  SpecTrain::Only only;
  std::vector<int64_t> rows;
  if (op.weights == WeightPolicy::kPredicted) {
    // A backward skips the layers whose backward does not read them; a
    // forward from a sparse first layer predicts only its batch's rows.
    if (op.kind == OpKind::kBackward) {
      only.skip.resize(network_.layers.size(), 0);
      for (size_t l = 0; l < network_.layers.size(); ++l) only.skip[l] = !network_.layers[l]->backward_reads_params();
    } else if (x != nullptr && op.first_layer == 0 && network_.layers[0]->sparse()) {
      // In batch order: a repeated id predicts its row again, to the same
      // values, which costs less than sorting the ids; padding ids (< 0)
      // are not looked up.
      rows.reserve(x->data.size());
      for (float id_value : x->data) {
        if (id_value >= 0) rows.push_back(static_cast<int64_t>(id_value));
      }
      only.sparse_layer = 0;
      only.rows = rows;
    }
  }
  const Weights& weights = select_weights(w, op, only);
  if (options_.on_weights_read) options_.on_weights_read(id, weights);
  return weights;
}

// Weights a recv this op depends on brought (parameter-server pulls).
void Interpreter::install_received_weights(WorkerState& w, const Op& op) {
  for (OpId dep : op.deps) {
    const Op& d = plan_.ops[static_cast<size_t>(dep)];
    if (d.kind != OpKind::kRecv || payload_of(sender_of(dep)) != Payload::kWeights) continue;
    std::vector<float> flat;
    {
      std::lock_guard lock(w.mu);
      auto it = w.received.find(dep);
      if (it == w.received.end()) continue;  // installed by an earlier op
      flat = std::move(it->second);
      w.received.erase(it);
    }
    stash_before_change(w);
    w.device->weights_to_host(w.weights, d.first_layer, d.last_layer);
    unflatten_weights(flat, w.weights, d.first_layer, d.last_layer);
  }
}

RowRange Interpreter::rows_of(const Op& op) const {
  const int64_t shard = shards_ > 1 ? std::max(0, op.stage) : 0;
  const RowRange micro = split_rows(options_.batch_size, std::max(1, microbatches_))[std::max(0, op.microbatch)];
  return {shard * options_.batch_size + micro.first, micro.count};
}

// The op's own rows of its iteration's batch, fetched by its worker.
void Interpreter::batch_rows(const Op& op, Tensor* x, std::vector<int32_t>* y) {
  batches_(op.iteration, static_cast<int64_t>(std::llround(plan_.samples_per_iteration)), rows_of(op), x, y);
}

void Interpreter::forward(OpId id, const Op& op) {
  WorkerState& w = *workers_[op.worker];
  install_received_weights(w, op);
  const int32_t mb = std::max(0, op.microbatch);
  Tensor x;
  if (op.first_layer == 0) {
    batch_rows(op, &x, nullptr);
  } else {
    std::lock_guard lock(w.mu);
    x = take(w.outputs, {op.iteration, mb, op.first_layer - 1}, "plan: a forward's input never arrived");
  }
  std::vector<LayerCache> caches;
  const bool recomputed = recomputed_.contains({op.worker, op.iteration, mb, op.first_layer});
  const Weights& weights = weights_for(w, id, op, &x);
  // The input goes to the device, which keeps what the backward needs,
  // unless the recompute needs it again.
  bool loss_grad = false;
  Tensor y =
      forward_on_device(w, op, weights, recomputed ? Tensor(x) : std::move(x), caches, /*count_loss=*/true, &loss_grad);
  w.device->update_statistics(network_, op.first_layer, op.last_layer, caches, w.statistics);
  done_reading(w, op, network_);
  std::lock_guard lock(w.mu);
  if (recomputed) {
    // DSP (seed 001 §3.3): keep the input, drop the caches; the recompute rebuilds them.
    w.inputs[{op.iteration, mb, op.first_layer}] = std::move(x);
  } else {
    for (int32_t l = op.first_layer; l <= op.last_layer; ++l) {
      w.caches[{op.iteration, mb, l}] = std::move(caches[static_cast<size_t>(l - op.first_layer)]);
    }
  }
  if (loss_grad) {
    w.output_grads[{op.iteration, mb, op.last_layer}] = std::move(y);
  } else {
    w.outputs[{op.iteration, mb, op.last_layer}] = std::move(y);
  }
}

Tensor Interpreter::forward_on_device(WorkerState& w, const Op& op, const Weights& weights, Tensor x,
                                      std::vector<LayerCache>& caches, bool count_loss, bool* loss_grad) {
  const WeightsGeneration generation = generation_of(w, op);
  *loss_grad = op.last_layer + 1 == static_cast<int32_t>(network_.layers.size());
  const PassId pass{op.iteration, std::max(0, op.microbatch)};
  if (!*loss_grad) {
    return w.device->forward(network_, weights, generation, pass, op.first_layer, op.last_layer, std::move(x), caches);
  }
  std::vector<int32_t> labels;
  batch_rows(op, nullptr, &labels);
  // dL/dlogits of the micro-batch, weighted by its share of the shard's
  // rows so the micro-batches' gradients add up to the shard's mean-loss
  // gradient; its loss is the mean over its positions (one per sample, or
  // one per token), counted by them.
  const auto share =
      static_cast<float>(static_cast<double>(rows_of(op).count) / static_cast<double>(options_.batch_size));
  Tensor dlogits;
  PendingLoss loss = w.device->forward_loss(network_, weights, generation, pass, op.first_layer, op.last_layer,
                                            std::move(x), caches, labels, share, dlogits);
  if (!count_loss) return dlogits;
  {
    std::lock_guard lock(loss_mu_);
    w.unread_losses.push_back(UnreadLoss{op.iteration, static_cast<int64_t>(labels.size()), std::move(loss)});
  }
  // A loss still on the device is read once the worker has queued the next
  // iteration's forward after it, when that forward's own work is in flight.
  count_losses(op.worker, op.iteration);
  return dlogits;
}

void Interpreter::count_losses(int32_t worker, int32_t before_iteration) {
  WorkerState& w = *workers_[static_cast<size_t>(worker)];
  std::vector<UnreadLoss> now;
  {
    std::lock_guard lock(loss_mu_);
    std::vector<UnreadLoss>& unread = w.unread_losses;
    const auto later = std::find_if(unread.begin(), unread.end(), [&](const UnreadLoss& u) {
      return !u.loss.known() && u.iteration >= before_iteration;
    });
    now.assign(std::make_move_iterator(unread.begin()), std::make_move_iterator(later));
    unread.erase(unread.begin(), later);
  }
  for (UnreadLoss& u : now) {
    const double loss = u.loss.read();  // outside the lock: it may wait for the device
    if (options_.stop_on_divergence && !std::isfinite(loss)) throw LossDiverged(u.iteration, loss);
    std::lock_guard lock(loss_mu_);
    loss_sum_[static_cast<size_t>(worker)][static_cast<size_t>(u.iteration)] += loss * static_cast<double>(u.positions);
    loss_rows_[static_cast<size_t>(worker)][static_cast<size_t>(u.iteration)] += u.positions;
  }
}

// DSP's recomputation (seed 001 eq. 5): the forward of the op's layers
// again, from the input the forward kept, on the weight version the op
// names (the backward's parameters), rebuilding the caches the backward
// uses. On the last layer the loss gradient is that of the recomputed
// logits; the loss was counted by the forward.
void Interpreter::recompute(OpId id, const Op& op) {
  WorkerState& w = *workers_[op.worker];
  const int32_t mb = std::max(0, op.microbatch);
  Tensor x;
  {
    std::lock_guard lock(w.mu);
    x = take(w.inputs, {op.iteration, mb, op.first_layer}, "plan: a recompute without its forward's input");
  }
  std::vector<LayerCache> caches;
  const Weights& weights = weights_for(w, id, op);
  bool loss_grad = false;
  Tensor y = forward_on_device(w, op, weights, std::move(x), caches, /*count_loss=*/false, &loss_grad);
  done_reading(w, op, network_);
  std::lock_guard lock(w.mu);
  for (int32_t l = op.first_layer; l <= op.last_layer; ++l) {
    w.caches[{op.iteration, mb, l}] = std::move(caches[static_cast<size_t>(l - op.first_layer)]);
  }
  if (loss_grad) w.output_grads[{op.iteration, mb, op.last_layer}] = std::move(y);
}

void Interpreter::backward(OpId id, const Op& op) {
  WorkerState& w = *workers_[op.worker];
  const int32_t mb = std::max(0, op.microbatch);
  Tensor dy;
  std::vector<LayerCache> caches;
  Gradients* grads = nullptr;
  {
    std::lock_guard lock(w.mu);
    dy = take(w.output_grads, {op.iteration, mb, op.last_layer}, "plan: a backward's gradient never arrived");
    for (int32_t l = op.first_layer; l <= op.last_layer; ++l) {
      auto c = w.caches.find({op.iteration, mb, l});
      TRAINSIM_CHECK(c != w.caches.end(), "plan: a backward without its forward");
      caches.push_back(std::move(c->second));
      w.caches.erase(c);
    }
    grads = &gradients_of(w, op.iteration);
  }
  const Weights& weights = weights_for(w, id, op);
  Tensor dx = w.device->backward(network_, weights, generation_of(w, op), PassId{op.iteration, mb}, op.first_layer,
                                 op.last_layer, std::move(dy), caches, *grads);
  done_reading(w, op, network_);
  if (op.first_layer > 0) {
    std::lock_guard lock(w.mu);
    w.output_grads[{op.iteration, mb, op.first_layer - 1}] = std::move(dx);
  }
}

void Interpreter::update(OpId id, const Op& op) {
  WorkerState& w = *workers_[op.worker];
  Gradients own;
  Gradients* shared = nullptr;  // the iteration's set, left for the worker's updates still to come
  int64_t contributions = 0;
  {
    std::lock_guard lock(w.mu);
    auto left = w.updates_left.find(op.iteration);
    const bool last = left == w.updates_left.end() || --left->second <= 0;
    if (last && left != w.updates_left.end()) w.updates_left.erase(left);
    auto it = w.grads.find(op.iteration);
    if (it != w.grads.end()) {
      if (last) {
        own = std::move(it->second);
        w.grads.erase(it);
      } else {
        shared = &it->second;
      }
      contributions = 1;
    } else {
      own = fresh_gradients(w);
    }
  }
  Gradients& grads = shared != nullptr ? *shared : own;
  // Where a server steps the dense variables, the host holds the sums the
  // worker no longer steps; elsewhere they may stay on the device for its
  // step (the sparse rows gathered or dropped below are the host's).
  if (serves_dense_) w.device->gradients_to_host(grads, op.first_layer, op.last_layer);
  // Gradients pushed by other workers (a parameter server's update), taken
  // under the worker's lock and added without it: a GPU's store waits for
  // their upload, which must not hold up the receives of the worker's
  // communication thread (the plan orders this op's other readers of `grads`).
  std::vector<std::pair<const Op*, std::vector<float>>> pushed;
  {
    std::lock_guard lock(w.mu);
    for (OpId dep : op.deps) {
      if (plan_.ops[static_cast<size_t>(dep)].kind != OpKind::kRecv) continue;
      auto r = w.received.find(dep);
      if (r == w.received.end() || payload_of(sender_of(dep)) != Payload::kParamGradient) continue;
      const Op& d = plan_.ops[static_cast<size_t>(dep)];
      densify_range(grads, w.weights, d.first_layer, d.last_layer);  // the sparse ones, which the host holds
      pushed.emplace_back(&d, std::move(r->second));
      w.received.erase(r);
      ++contributions;
    }
  }
  for (const auto& [d, flat] : pushed) w.device->add_flat_gradients(flat, grads, d->first_layer, d->last_layer);
  if (contributions > 1) {
    w.device->scale_gradients(grads, 1.0f / static_cast<float>(contributions), op.first_layer, op.last_layer);
  }
  if (gathers_sparse_rows_) add_gathered_rows(w, op, grads);
  drop_served_rows(grads);
  stash_before_change(w);
  // In Parallax's ps mode the servers stepped every variable; the worker
  // holds what it pulled. Elsewhere the device may step its own copy; with
  // SpecTrain, v follows the gradients the worker applies (its eq. 1).
  if (!serves_dense_ && w.spectrain) {
    w.device->step_spectrain(*w.optimizer, *w.spectrain, w.weights, grads, op.first_layer, op.last_layer);
  } else if (!serves_dense_) {
    w.device->step(*w.optimizer, w.weights, grads, op.first_layer, op.last_layer);
  }
  if (const int32_t sends = weight_sends_of(id); sends > 0) {
    w.device->weights_to_host(w.weights, op.first_layer, op.last_layer);
    std::lock_guard lock(w.mu);
    w.weight_payloads[id] = {flatten_weights(w.weights, op.first_layer, op.last_layer), sends};
  }
  if (shared == nullptr) release_gradients(w, std::move(own));
}

Gradients& Interpreter::gradients_of(WorkerState& w, int32_t iteration) {
  // Callers hold w.mu.
  auto it = w.grads.find(iteration);
  if (it == w.grads.end()) it = w.grads.emplace(iteration, fresh_gradients(w)).first;
  return it->second;
}

Gradients& Interpreter::host_gradients(WorkerState& w, int32_t iteration, int32_t first, int32_t last) {
  Gradients* grads = nullptr;
  {
    std::lock_guard lock(w.mu);
    grads = &gradients_of(w, iteration);
  }
  const int64_t layers = static_cast<int64_t>(grads->size());
  w.device->gradients_to_host(*grads, first >= 0 ? first : 0, last >= 0 ? last : layers - 1);
  return *grads;
}

// Zero gradients for a new iteration: a set an update released (zeroed
// there), else a new one. Callers hold w.mu.
Gradients Interpreter::fresh_gradients(WorkerState& w) {
  if (w.spare_grads.empty()) return w.device->zero_gradients(network_, w.weights);
  Gradients g = std::move(w.spare_grads.back());
  w.spare_grads.pop_back();
  return g;
}

// Keeps an applied gradient set for reuse unless densifying changed its
// layout. It is zeroed here, on the layers the worker writes, as a
// framework's optimizer step is followed by zero_grad: the measuring
// profiler times the same clearing in each layer's update_s.
void Interpreter::release_gradients(WorkerState& w, Gradients grads) {
  for (size_t l = 0; l < grads.size(); ++l) {
    for (size_t p = 0; p < grads[l].size(); ++p) {
      if (grads[l][p].sparse != gradient_layout_[l][p]) return;
    }
  }
  {
    std::lock_guard lock(w.mu);
    if (w.spare_grads.size() >= kSpareGradientSets) return;
  }
  if (w.grad_first >= 0) clear_gradients(grads, w.grad_first, w.grad_last);
  std::lock_guard lock(w.mu);
  if (w.spare_grads.size() < kSpareGradientSets) w.spare_grads.push_back(std::move(grads));
}

}  // namespace trainsim::interp
