// The plan interpreter; see interpreter.hpp. Data moves by key: a worker
// keeps the output of layer l for (iteration, micro-batch) until the op that
// consumes it (its next forward, or a send) takes it, and likewise the
// gradient arriving at layer l's output. It reads only what the plan's ops
// carry (sim/plan/plan.hpp), never the strategy's name or settings: what a
// send carries (its payload, taken from the op it depends on), the weights a
// compute op reads (its policy), an AllReduce's codec, the plan's servers.
#include "exec/interpreter.hpp"

#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <map>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <thread>
#include <tuple>

#include "exec/data/batching.hpp"
#include "exec/optim/host_accumulate.hpp"
#include "exec/optim/pipesgd.hpp"
#include "exec/optim/spectrain.hpp"
#include "exec/transport/codec_all_reduce.hpp"
#include "exec/transport/in_process.hpp"
#include "exec/transport/param_server.hpp"
#include "model/error.hpp"
#include "sim/des/engine.hpp"

namespace trainsim {
namespace {

using Key = std::tuple<int32_t, int32_t, int32_t>;  // (iteration, micro-batch, layer)

// Everything one worker holds. Its streams' threads share it under `mu`;
// weights are written only by its compute stream (updates) and by installs of
// received weights, which the plan orders before the ops that read them.
struct WorkerState {
  Weights weights;                      // every layer (those the worker runs are the ones that move)
  std::unique_ptr<Sgd> optimizer;
  std::unique_ptr<SpecTrain> spectrain; // dualpipe with spectrain: the smoothed gradient v
  Weights predicted;                    // SpecTrain: Ŵ of the compute op running, reused op after op
  int32_t version = 0;                  // updates applied so far
  std::map<int32_t, Weights> snapshots; // stashed versions still to be read
  std::map<int32_t, int64_t> readers;   // compute ops yet to read each version
  std::map<Key, Tensor> outputs;        // layer outputs awaiting their consumer
  std::map<Key, Tensor> output_grads;   // gradients w.r.t. layer outputs awaiting their backward
  std::map<Key, LayerCache> caches;     // per layer, from its forward (or recompute) to its backward
  std::map<Key, Tensor> inputs;         // (it, mb, first layer): a forward's input kept for its recompute
  std::map<int32_t, Gradients> grads;   // parameter gradients per iteration
  std::vector<Gradients> spare_grads;   // applied sets kept for reuse, already zero
  int32_t grad_first = -1;              // the layers whose gradients the worker writes
  int32_t grad_last = -1;
  // Iterations without an update here (a parameter server's client): how
  // many gradient sends are still to read the set before it is released.
  std::map<int32_t, int32_t> gradient_sends_left;
  std::map<OpId, std::vector<float>> received;  // flat gradients or weights a recv brought
  // An update's new weights, for its sends, and how many of them are still to go.
  std::map<OpId, std::pair<std::vector<float>, int32_t>> weight_payloads;
  std::mutex mu;
};

// Host memory shared by the workers of a machine (cgdp).
struct HostState {
  std::map<std::pair<int32_t, int32_t>, std::map<int32_t, std::vector<float>>> copies;  // (it, first layer) -> worker
  // (it, first layer) -> the workers' mean, and how many workers are still to copy it back.
  std::map<std::pair<int32_t, int32_t>, std::pair<std::vector<float>, int64_t>> means;
  std::mutex mu;
};

std::vector<float> flatten_weights(const Weights& weights, int64_t first, int64_t last) {
  size_t size = 0;
  for (int64_t l = first; l <= last; ++l) {
    for (const Tensor& t : weights[static_cast<size_t>(l)]) size += t.data.size();
  }
  std::vector<float> flat;
  flat.reserve(size);
  for (int64_t l = first; l <= last; ++l) {
    for (const Tensor& t : weights[static_cast<size_t>(l)]) flat.insert(flat.end(), t.data.begin(), t.data.end());
  }
  return flat;
}

void unflatten_weights(std::span<const float> flat, Weights& weights, int64_t first, int64_t last) {
  size_t at = 0;
  for (int64_t l = first; l <= last; ++l) {
    for (Tensor& t : weights[static_cast<size_t>(l)]) {
      TRAINSIM_CHECK(at + t.data.size() <= flat.size(), "weight payload shorter than its layers");
      std::copy_n(flat.begin() + static_cast<std::ptrdiff_t>(at), t.data.size(), t.data.begin());
      at += t.data.size();
    }
  }
  TRAINSIM_CHECK(at == flat.size(), "weight payload longer than its layers");
}

// Sparse gradients of layers [first, last] made dense, so they reduce as flat buffers.
void densify_range(Gradients& grads, const Weights& weights, int64_t first, int64_t last) {
  for (int64_t l = first; l <= last; ++l) {
    for (size_t p = 0; p < grads[static_cast<size_t>(l)].size(); ++p) {
      ParamGrad& g = grads[static_cast<size_t>(l)][p];
      if (!g.sparse) continue;
      g.dense = densify_gradient(g, weights[static_cast<size_t>(l)][p].shape);
      g.sparse = false;
      g.rows.clear();
      g.row_values = Tensor();
    }
  }
}

// A server of the plan (Parallax, seed 004 §3): a sparse variable (an
// embedding table) lives on a parameter-server shard; its server runs on its
// own thread of the machine, transport worker `server`, and applies the
// optimizer to the rows the round's pushes touched. A dense server (Parallax's
// ps mode) holds the dense variables, layers [first, last], and steps them on
// the workers' mean.
struct VariableServer {
  int32_t first = 0;  // its layers: one sparse table, or (ps) the dense layers
  int32_t last = 0;
  int server = 0;
  ShardShape shape;
  std::unique_ptr<Sgd> optimizer;  // over `table`, the server's copy of the variables
  Weights table;                   // layers 0..last filled (its own are [first, last])
  std::unique_ptr<ParamServerShard> shard;
};

// pipesgd's wire (seed 002 §3.2) for an AllReduce's codec.
GradientCompression compression_of(Codec codec) {
  switch (codec) {
    case Codec::kNone: return GradientCompression::kNone;
    case Codec::kTrunc16: return GradientCompression::kTrunc16;
    case Codec::kQuant8: return GradientCompression::kQuant8;
  }
  return GradientCompression::kNone;
}

// Tags of the servers' rounds: below every collective's (interpreter tags
// are op ids, >= 0, and collectives' small negatives).
constexpr int64_t kServerTagBase = -(int64_t{1} << 52);
// Applied gradient sets a worker keeps for the next iterations (pipelines
// hold a few iterations' gradients at once).
constexpr size_t kSpareGradientSets = 2;

class Interpreter {
 public:
  Interpreter(const Plan& plan, const Network& network, const Weights& initial, const BatchSource& batches,
              const ExecOptions& options)
      : plan_(plan), network_(network), batches_(batches), options_(options),
        spectrain_(std::any_of(plan.ops.begin(), plan.ops.end(),
                               [](const Op& op) { return op.weights == WeightPolicy::kPredicted; })),
        gathers_sparse_rows_(plan.gathers_sparse_rows),
        serves_dense_(std::any_of(plan.servers.begin(), plan.servers.end(),
                                  [](const PlanServer& s) { return s.rule == ServerRule::kDense; })),
        transport_(static_cast<int>(plan.workers.size() + plan.servers.size()), options.recv_timeout_s),
        done_(plan.ops.size()), timings_(plan.ops.size()) {
    TRAINSIM_CHECK(options.batch_size > 0, "the executor needs the plan's per-device batch size");
    workers_.resize(plan.workers.size());
    for (auto& w : workers_) {
      w = std::make_unique<WorkerState>();
      w->weights = initial;
      w->optimizer = std::make_unique<Sgd>(options.sgd);
      if (spectrain_) w->spectrain = std::make_unique<SpecTrain>(SpecTrainOptions{options.sgd.learning_rate, options.spectrain_gamma});
    }
    for (const Op& op : plan.ops) {
      check_supported(op);
      if (op.kind == OpKind::kRecompute) recomputed_.insert({op.worker, op.iteration, std::max(0, op.microbatch), op.first_layer});
      if (reads_weights(op.kind) && op.weight_version >= 0) ++workers_[op.worker]->readers[op.weight_version];
      if (op.kind == OpKind::kForward) microbatches_ = std::max(microbatches_, op.microbatch + 1);
      if ((op.kind == OpKind::kBackward || op.kind == OpKind::kUpdate) && op.first_layer >= 0) {
        WorkerState& w = *workers_[op.worker];
        w.grad_first = w.grad_first < 0 ? op.first_layer : std::min(w.grad_first, op.first_layer);
        w.grad_last = std::max(w.grad_last, op.last_layer);
      }
    }
    count_gradient_sends_without_update();
    shards_ = std::max<int64_t>(1, std::llround(plan.samples_per_iteration / static_cast<double>(options.batch_size)));
    for (const LayerGrads& layer : zero_gradients(network_, initial)) {
      gradient_layout_.emplace_back();
      for (const ParamGrad& g : layer) gradient_layout_.back().push_back(g.sparse);
    }
    releases_own_stream_.assign(plan.ops.size(), 0);
    for (const Op& op : plan.ops) {
      for (OpId dep : op.deps) {
        const Op& d = plan.ops[static_cast<size_t>(dep)];
        if (d.stream == StreamKind::kCompute && d.worker == op.worker && op.stream != StreamKind::kCompute) {
          releases_own_stream_[static_cast<size_t>(dep)] = 1;
        }
      }
    }
    assign_collective_tags();
    make_servers(initial);
    loss_sum_.assign(static_cast<size_t>(plan.iterations), 0.0);
    loss_rows_.assign(static_cast<size_t>(plan.iterations), 0);
  }

  ExecResult run() {
    std::vector<std::pair<int32_t, int32_t>> streams;  // (worker, stream kind) with ops
    for (size_t w = 0; w < plan_.streams.size(); ++w) {
      for (int k = 0; k < kStreamKinds; ++k) {
        if (!plan_.streams[w][k].empty()) streams.emplace_back(static_cast<int32_t>(w), k);
      }
    }
    start_ = std::chrono::steady_clock::now();
    const auto threads = static_cast<int>(streams.size() + servers_.size());
    const int64_t cores = usable_cores();
    run_workers(transport_, threads, [&](int i) {
      try {
        if (static_cast<size_t>(i) >= streams.size()) return serve(*servers_[static_cast<size_t>(i) - streams.size()]);
        const auto [w, k] = streams[static_cast<size_t>(i)];
        if (options_.pin_workers) {
          pin_current_thread(worker_thread_core(w, static_cast<int64_t>(plan_.streams.size()), cores,
                                                k == static_cast<int>(StreamKind::kCompute)));
        }
        for (OpId id : plan_.streams[w][k]) run_op(id);
      } catch (...) {
        release_waiters();
        throw;
      }
    });
    return result();
  }

 private:
  static bool reads_weights(OpKind kind) {
    return kind == OpKind::kForward || kind == OpKind::kBackward || kind == OpKind::kRecompute;
  }

  void check_supported(const Op& op) const {
    if (op.kind == OpKind::kAllReduce && op.codec != Codec::kNone && op.algorithm != CollectiveAlgorithm::kRing) {
      throw InputError("--set algorithm", "is " + std::string(collective_algorithm_name(op.algorithm)) +
                                              " with compression " + codec_name(op.codec),
                       "algorithm=ring (compressed gradients are reduced hop by hop around the ring)");
    }
    if (!plan_.servers.empty() && (op.kind == OpKind::kSend || op.kind == OpKind::kRecv)) {
      throw InputError("--devices", "parallax across machines (remote servers) is not executed",
                       "the workers of one machine");
    }
    TRAINSIM_CHECK(op.kind != OpKind::kSend || op.payload != Payload::kNone, "plan: a send without its payload");
  }

  // --- the plan's servers (parallax) ----------------------------------------------

  void make_servers(const Weights& initial) {
    std::vector<int> members(plan_.workers.size());
    std::iota(members.begin(), members.end(), 0);
    const auto workers = static_cast<float>(members.size());
    const auto add = [&](std::unique_ptr<VariableServer> s, std::vector<float> values) {
      s->server = static_cast<int>(plan_.workers.size() + servers_.size());
      s->optimizer = std::make_unique<Sgd>(options_.sgd);
      s->table.resize(static_cast<size_t>(s->last) + 1);
      // Every layer up to its last (the zero gradients of a dense step need their shapes).
      for (int32_t l = 0; l <= s->last; ++l) s->table[static_cast<size_t>(l)] = initial[static_cast<size_t>(l)];
      VariableServer* raw = s.get();
      s->shard = std::make_unique<ParamServerShard>(transport_, s->server, members, s->shape, std::move(values),
                                                    [this, raw, workers](const ShardUpdate& u) { apply_on_server(*raw, u, workers); });
      servers_.push_back(std::move(s));
    };
    for (const PlanServer& server : plan_.servers) {
      if (server.rule != ServerRule::kSparseRows) continue;
      const int32_t layer = server.first_layer;
      TRAINSIM_CHECK(server.last_layer == layer, "a sparse server holds one layer's table");
      const LayerParams& params = initial[static_cast<size_t>(layer)];
      TRAINSIM_CHECK(params.size() == 1, "a sparse layer holds one table");
      if (layer != 0) {
        throw InputError("--model", "parallax with a sparse layer (" + std::to_string(layer) + ") after the input",
                         "the embedding table as the first layer (its rows are the batch's token ids)");
      }
      auto s = std::make_unique<VariableServer>();
      s->first = s->last = layer;
      s->shape = {params[0].rows(), params[0].row_size(), true};
      add(std::move(s), params[0].data);
    }
    for (const PlanServer& server : plan_.servers) {
      if (server.rule != ServerRule::kDense) continue;
      auto s = std::make_unique<VariableServer>();
      s->first = server.first_layer;
      s->last = server.last_layer;
      std::vector<float> values = flatten_weights(initial, s->first, s->last);
      s->shape = {1, static_cast<int64_t>(values.size()), false};
      add(std::move(s), std::move(values));
    }
  }

  // The server's step on the mean of the workers' pushes (their sum / N),
  // through the same SGD a worker runs: lazy on a sparse table's touched
  // rows, whose new values go into the shard the pulls read; on the dense
  // variables, all of them.
  void apply_on_server(VariableServer& s, const ShardUpdate& u, float workers) const {
    Gradients grads(s.table.size());
    if (!s.shape.sparse) {
      grads = zero_gradients(network_, s.table);
      std::vector<float> mean(u.gradient.begin(), u.gradient.end());
      for (float& v : mean) v /= workers;
      unflatten_gradients(mean, grads, s.first, s.last);
      s.optimizer->step(s.table, grads, s.first, s.last);
      const std::vector<float> flat = flatten_weights(s.table, s.first, s.last);
      std::copy(flat.begin(), flat.end(), u.weights.begin());
      return;
    }
    ParamGrad g;
    g.sparse = true;
    g.rows.assign(u.rows.begin(), u.rows.end());
    g.row_values = Tensor({static_cast<int64_t>(u.rows.size()), u.row_floats});
    for (size_t i = 0; i < u.gradient.size(); ++i) g.row_values.data[i] = u.gradient[i] / workers;
    grads[static_cast<size_t>(s.first)].push_back(std::move(g));
    s.optimizer->step(s.table, grads, s.first, s.first);
    const std::vector<float>& table = s.table[static_cast<size_t>(s.first)][0].data;
    for (int64_t row : u.rows) {
      std::copy_n(table.begin() + row * u.row_floats, u.row_floats, u.weights.begin() + row * u.row_floats);
    }
  }

  void serve(VariableServer& s) {
    for (int32_t it = 0; it < plan_.iterations; ++it) s.shard->serve_round(server_tag(it, s));
  }

  int64_t server_tag(int32_t iteration, const VariableServer& s) const {
    return kServerTagBase - (static_cast<int64_t>(iteration) * 1024 + (s.server - static_cast<int64_t>(plan_.workers.size())));
  }

  // CopyToHost of parallax: the worker's gradients to each server (push): a
  // sparse table's rows, after which its own copy of that gradient is empty
  // so its update leaves the table; in ps mode also every dense gradient,
  // which its update then leaves alone (update() skips the step).
  void push_to_servers(const Op& op) {
    WorkerState& w = *workers_[op.worker];
    for (const auto& s : servers_) {
      ParamServerClient client(transport_, op.worker, s->server, s->shape);
      if (!s->shape.sparse) {
        std::vector<float> flat;
        {
          std::lock_guard lock(w.mu);
          flat = flatten_gradients(gradients_of(w, op.iteration), s->first, s->last);
        }
        client.push(server_tag(op.iteration, *s), flat);
        continue;
      }
      ParamGrad g;
      {
        std::lock_guard lock(w.mu);
        ParamGrad& mine = gradients_of(w, op.iteration)[static_cast<size_t>(s->first)][0];
        TRAINSIM_CHECK(mine.sparse, "parallax: a sparse layer's gradient arrived dense");
        g = std::move(mine);
        mine = ParamGrad{true, Tensor(), {}, Tensor({0, s->shape.row_floats})};
      }
      client.push_rows(server_tag(op.iteration, *s), g.rows, g.row_values.data);
    }
  }

  // CopyToDevice of parallax: pulls, after the servers' update, the rows the
  // worker's next forward looks up (its next batch's token ids), so its copy
  // of the table is current where it is read, and in ps mode every dense
  // variable.
  void pull_from_servers(const Op& op) {
    WorkerState& w = *workers_[op.worker];
    std::vector<int64_t> rows;
    const bool serves_sparse =
        std::any_of(servers_.begin(), servers_.end(), [](const auto& s) { return s->shape.sparse; });
    if (op.iteration + 1 < plan_.iterations && serves_sparse) {
      Tensor x;
      batch_rows(plan_.ops[static_cast<size_t>(forward_of(op.worker, op.iteration + 1))], &x, nullptr);
      for (float id : x.data) rows.push_back(static_cast<int64_t>(id));
      std::sort(rows.begin(), rows.end());
      rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
    }
    for (const auto& s : servers_) {
      ParamServerClient client(transport_, op.worker, s->server, s->shape);
      if (!s->shape.sparse) {
        const std::vector<float> values = client.pull(server_tag(op.iteration, *s));
        std::lock_guard lock(w.mu);
        unflatten_weights(values, w.weights, s->first, s->last);
        continue;
      }
      const std::vector<float> values = client.pull_rows(server_tag(op.iteration, *s), rows);
      std::lock_guard lock(w.mu);
      std::vector<float>& table = w.weights[static_cast<size_t>(s->first)][0].data;
      const int64_t width = s->shape.row_floats;
      for (size_t i = 0; i < rows.size(); ++i) {
        std::copy_n(values.begin() + static_cast<std::ptrdiff_t>(i) * width, width, table.begin() + rows[i] * width);
      }
    }
  }

  OpId forward_of(int32_t worker, int32_t iteration) const {
    for (OpId id : plan_.streams[static_cast<size_t>(worker)][static_cast<int>(StreamKind::kCompute)]) {
      const Op& op = plan_.ops[static_cast<size_t>(id)];
      if (op.kind == OpKind::kForward && op.iteration == iteration) return id;
    }
    throw std::logic_error("plan: no forward of iteration " + std::to_string(iteration));
  }

  // Collectives match as in the simulator: the k-th of a kind a member issues
  // on a group (in op order) joins the other members' k-th.
  void assign_collective_tags() {
    std::map<std::tuple<int32_t, int, int32_t>, int64_t> issued;  // (group, kind, worker) -> count
    tags_.assign(plan_.ops.size(), 0);
    for (size_t id = 0; id < plan_.ops.size(); ++id) {
      const Op& op = plan_.ops[id];
      if (!is_collective(op.kind)) continue;
      const int64_t k = issued[{op.group, static_cast<int>(op.kind), op.worker}]++;
      tags_[id] = -(((k * 64 + static_cast<int64_t>(op.kind)) * 65536 + op.group) + 1);  // negative: never a send id
    }
  }

  double now_s() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

  void wait_for_deps(const Op& op) {
    for (OpId dep : op.deps) done_[static_cast<size_t>(dep)].wait(false);
    if (failed_.load()) throw TransportAborted("another worker failed");
  }

  // A failing worker wakes every thread waiting on an op, so the run stops
  // with that worker's error instead of hanging.
  void release_waiters() {
    failed_.store(true);
    transport_.abort("a worker failed");
    for (auto& flag : done_) {
      flag.store(true);
      flag.notify_all();
    }
  }

  void run_op(OpId id) {
    const Op& op = plan_.ops[static_cast<size_t>(id)];
    wait_for_deps(op);
    timings_[static_cast<size_t>(id)].start_s = now_s();
    execute(id, op);
    timings_[static_cast<size_t>(id)].end_s = now_s();
    done_[static_cast<size_t>(id)].store(true);
    done_[static_cast<size_t>(id)].notify_all();
    // A compute op that released another thread of its worker (a send, a
    // collective, a copy) lets it take the core now, as a DMA engine would
    // start at once: the scheduler otherwise leaves it waiting for the rest
    // of the compute thread's time slice (hundreds of µs here).
    if (releases_own_stream_[static_cast<size_t>(id)]) std::this_thread::yield();
  }

  void execute(OpId id, const Op& op) {
    switch (op.kind) {
      case OpKind::kForward: forward(id, op); break;
      case OpKind::kBackward: backward(id, op); break;
      case OpKind::kUpdate: update(id, op); break;
      case OpKind::kCompress: compress(op); break;
      case OpKind::kDecompress: break;  // the AllReduce's hops decode what they receive
      case OpKind::kSend: send(id, op); break;
      case OpKind::kRecv: recv(id, op); break;
      case OpKind::kAllReduce: all_reduce(id, op); break;
      case OpKind::kBroadcast: broadcast(id, op); break;
      case OpKind::kBarrier: transport_.barrier(op.worker, group(op), tags_[static_cast<size_t>(id)]); break;
      case OpKind::kCopyToHost: copy_to_host(op); break;
      case OpKind::kHostAccumulate: host_accumulate_op(op); break;
      case OpKind::kCopyToDevice: copy_to_device(op); break;
      case OpKind::kRecompute: recompute(id, op); break;
    }
  }

  const std::vector<int>& group(const Op& op) {
    std::lock_guard lock(groups_mu_);
    auto& g = groups_[op.group];
    if (g.empty()) g.assign(plan_.groups[static_cast<size_t>(op.group)].begin(), plan_.groups[static_cast<size_t>(op.group)].end());
    return g;
  }

  // --- weights by version ------------------------------------------------------

  // The weights compute op `op` of `w` reads, as its policy says: live,
  // stashed, or (SpecTrain) predicted into the worker's buffer s =
  // weight_ahead versions ahead of the worker's: Ŵ = W − s·η·v (seed 000 eq.
  // 4), the op's layers only (the worker's compute ops run one at a time, so
  // one buffer serves them all).
  // Reported to on_weights_read.
  const Weights& weights_for(WorkerState& w, OpId id, const Op& op) {
    const Weights& weights = select_weights(w, op);
    if (options_.on_weights_read) options_.on_weights_read(id, weights);
    return weights;
  }

  const Weights& select_weights(WorkerState& w, const Op& op) {
    const int32_t version = op.weight_version;
    std::lock_guard lock(w.mu);
    if (op.weights == WeightPolicy::kPredicted) {
      if (version - op.weight_ahead != w.version) {
        throw std::logic_error("plan: an op predicts weight version " + std::to_string(version) + " from " +
                               std::to_string(version - op.weight_ahead) + " but the worker holds " +
                               std::to_string(w.version));
      }
      w.spectrain->predict_into(w.weights, op.weight_ahead, op.first_layer, op.last_layer, w.predicted);
      return w.predicted;
    }
    if (version < 0 || version == w.version) return w.weights;
    auto it = w.snapshots.find(version);
    if (op.weights == WeightPolicy::kLatest || it == w.snapshots.end()) {
      throw std::logic_error("plan: an op reads " + std::string(weight_policy_name(op.weights)) +
                             " weight version " + std::to_string(version) + " but the worker holds " +
                             std::to_string(w.version));
    }
    return it->second;
  }

  void done_reading(WorkerState& w, int32_t version) {
    if (version < 0) return;
    std::lock_guard lock(w.mu);
    if (--w.readers[version] == 0 && version != w.version) w.snapshots.erase(version);
  }

  // Keeps the current weights for the ops that will still read this version.
  void stash_before_change(WorkerState& w) {
    std::lock_guard lock(w.mu);
    auto it = w.readers.find(w.version);
    if (it != w.readers.end() && it->second > 0) w.snapshots[w.version] = w.weights;
    ++w.version;
  }

  // Weights a recv this op depends on brought (parameter-server pulls).
  void install_received_weights(WorkerState& w, const Op& op) {
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
      unflatten_weights(flat, w.weights, d.first_layer, d.last_layer);
    }
  }

  // --- compute -----------------------------------------------------------------

  RowRange rows_of(const Op& op) const {
    const int64_t shard = shards_ > 1 ? std::max(0, op.stage) : 0;
    const RowRange micro = split_rows(options_.batch_size, std::max(1, microbatches_))[std::max(0, op.microbatch)];
    return {shard * options_.batch_size + micro.first, micro.count};
  }

  // The op's own rows of its iteration's batch, fetched by its worker.
  void batch_rows(const Op& op, Tensor* x, std::vector<int32_t>* y) {
    batches_(op.iteration, static_cast<int64_t>(std::llround(plan_.samples_per_iteration)), rows_of(op), x, y);
  }

  void forward(OpId id, const Op& op) {
    WorkerState& w = *workers_[op.worker];
    install_received_weights(w, op);
    const int32_t mb = std::max(0, op.microbatch);
    Tensor x;
    if (op.first_layer == 0) {
      batch_rows(op, &x, nullptr);
    } else {
      std::lock_guard lock(w.mu);
      auto it = w.outputs.find({op.iteration, mb, op.first_layer - 1});
      TRAINSIM_CHECK(it != w.outputs.end(), "plan: a forward's input never arrived");
      x = std::move(it->second);
      w.outputs.erase(it);
    }
    std::vector<LayerCache> caches;
    Tensor y = forward_range(network_, weights_for(w, id, op), op.first_layer, op.last_layer, x, caches);
    done_reading(w, op.weight_version);
    const auto last_layer = static_cast<int32_t>(network_.layers.size()) - 1;
    const bool recomputed = recomputed_.contains({op.worker, op.iteration, mb, op.first_layer});
    std::lock_guard lock(w.mu);
    if (recomputed) {
      // DSP (seed 001 §3.3): keep the input, drop the caches; the recompute rebuilds them.
      w.inputs[{op.iteration, mb, op.first_layer}] = std::move(x);
    } else {
      for (int32_t l = op.first_layer; l <= op.last_layer; ++l) {
        w.caches[{op.iteration, mb, l}] = std::move(caches[static_cast<size_t>(l - op.first_layer)]);
      }
    }
    if (op.last_layer == last_layer) {
      w.output_grads[{op.iteration, mb, last_layer}] = loss_gradient(op, y, /*count_loss=*/true);
    } else {
      w.outputs[{op.iteration, mb, op.last_layer}] = std::move(y);
    }
  }

  // dL/dlogits of the micro-batch, weighted by its share of the shard's rows
  // so the micro-batches' gradients add up to the shard's mean-loss gradient.
  Tensor loss_gradient(const Op& op, const Tensor& logits, bool count_loss) {
    std::vector<int32_t> labels;
    batch_rows(op, nullptr, &labels);
    Tensor dlogits;
    const double loss = softmax_cross_entropy(logits, labels, &dlogits);
    const auto rows = static_cast<int64_t>(labels.size());
    const auto share = static_cast<float>(static_cast<double>(rows) / static_cast<double>(options_.batch_size));
    for (float& v : dlogits.data) v *= share;
    if (!count_loss) return dlogits;
    std::lock_guard lock(loss_mu_);
    loss_sum_[static_cast<size_t>(op.iteration)] += loss * static_cast<double>(rows);
    loss_rows_[static_cast<size_t>(op.iteration)] += rows;
    return dlogits;
  }

  Gradients& gradients_of(WorkerState& w, int32_t iteration) {
    // Callers hold w.mu.
    auto it = w.grads.find(iteration);
    if (it == w.grads.end()) it = w.grads.emplace(iteration, fresh_gradients(w)).first;
    return it->second;
  }

  // Zero gradients for a new iteration: a set an update released (zeroed
  // there), else a new one. Callers hold w.mu.
  Gradients fresh_gradients(WorkerState& w) {
    if (w.spare_grads.empty()) return zero_gradients(network_, w.weights);
    Gradients g = std::move(w.spare_grads.back());
    w.spare_grads.pop_back();
    return g;
  }

  // Keeps an applied gradient set for reuse unless densifying changed its
  // layout. It is zeroed here, on the layers the worker writes, as a
  // framework's optimizer step is followed by zero_grad: the measuring
  // profiler times the same clearing in each layer's update_s.
  void release_gradients(WorkerState& w, Gradients grads) {
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

  // A worker that sends its gradients to a parameter server and has no
  // update of its own releases the iteration's set after its last send.
  void count_gradient_sends_without_update() {
    std::set<std::pair<int32_t, int32_t>> updated;  // (worker, iteration)
    for (const Op& op : plan_.ops) {
      if (op.kind == OpKind::kUpdate) updated.insert({op.worker, op.iteration});
    }
    for (size_t id = 0; id < plan_.ops.size(); ++id) {
      const Op& op = plan_.ops[id];
      if (op.kind != OpKind::kSend || payload_of(static_cast<OpId>(id)) != Payload::kParamGradient) continue;
      if (updated.contains({op.worker, op.iteration})) continue;
      ++workers_[op.worker]->gradient_sends_left[op.iteration];
    }
  }

  // DSP's recomputation (seed 001 eq. 5): the forward of the op's layers
  // again, from the input the forward kept, on the weight version the op
  // names (the backward's parameters), rebuilding the caches the backward
  // uses. On the last layer the loss gradient is that of the recomputed
  // logits; the loss was counted by the forward.
  void recompute(OpId id, const Op& op) {
    WorkerState& w = *workers_[op.worker];
    const int32_t mb = std::max(0, op.microbatch);
    Tensor x;
    {
      std::lock_guard lock(w.mu);
      auto it = w.inputs.find({op.iteration, mb, op.first_layer});
      TRAINSIM_CHECK(it != w.inputs.end(), "plan: a recompute without its forward's input");
      x = std::move(it->second);
      w.inputs.erase(it);
    }
    std::vector<LayerCache> caches;
    Tensor y = forward_range(network_, weights_for(w, id, op), op.first_layer, op.last_layer, x, caches);
    done_reading(w, op.weight_version);
    const auto last_layer = static_cast<int32_t>(network_.layers.size()) - 1;
    std::lock_guard lock(w.mu);
    for (int32_t l = op.first_layer; l <= op.last_layer; ++l) {
      w.caches[{op.iteration, mb, l}] = std::move(caches[static_cast<size_t>(l - op.first_layer)]);
    }
    if (op.last_layer == last_layer) {
      w.output_grads[{op.iteration, mb, last_layer}] = loss_gradient(op, y, /*count_loss=*/false);
    }
  }

  void backward(OpId id, const Op& op) {
    WorkerState& w = *workers_[op.worker];
    const int32_t mb = std::max(0, op.microbatch);
    Tensor dy;
    std::vector<LayerCache> caches;
    Gradients* grads = nullptr;
    {
      std::lock_guard lock(w.mu);
      auto it = w.output_grads.find({op.iteration, mb, op.last_layer});
      TRAINSIM_CHECK(it != w.output_grads.end(), "plan: a backward's gradient never arrived");
      dy = std::move(it->second);
      w.output_grads.erase(it);
      for (int32_t l = op.first_layer; l <= op.last_layer; ++l) {
        auto c = w.caches.find({op.iteration, mb, l});
        TRAINSIM_CHECK(c != w.caches.end(), "plan: a backward without its forward");
        caches.push_back(std::move(c->second));
        w.caches.erase(c);
      }
      grads = &gradients_of(w, op.iteration);
    }
    Tensor dx = backward_range(network_, weights_for(w, id, op), op.first_layer, op.last_layer, dy,
                               caches, *grads);
    done_reading(w, op.weight_version);
    if (op.first_layer > 0) {
      std::lock_guard lock(w.mu);
      w.output_grads[{op.iteration, mb, op.first_layer - 1}] = std::move(dx);
    }
  }

  void update(OpId id, const Op& op) {
    WorkerState& w = *workers_[op.worker];
    Gradients grads;
    int64_t contributions = 0;
    {
      std::lock_guard lock(w.mu);
      auto it = w.grads.find(op.iteration);
      if (it != w.grads.end()) {
        grads = std::move(it->second);
        w.grads.erase(it);
        contributions = 1;
      } else {
        grads = fresh_gradients(w);
      }
      // Gradients pushed by other workers (a parameter server's update).
      for (OpId dep : op.deps) {
        if (plan_.ops[static_cast<size_t>(dep)].kind != OpKind::kRecv) continue;
        auto r = w.received.find(dep);
        if (r == w.received.end() || payload_of(sender_of(dep)) != Payload::kParamGradient) continue;
        const Op& d = plan_.ops[static_cast<size_t>(dep)];
        densify_range(grads, w.weights, d.first_layer, d.last_layer);
        add_flat_gradients(r->second, grads, d.first_layer, d.last_layer);
        w.received.erase(r);
        ++contributions;
      }
    }
    if (contributions > 1) scale_gradients(grads, 1.0f / static_cast<float>(contributions), op.first_layer, op.last_layer);
    if (gathers_sparse_rows_) add_gathered_rows(w, op, grads);
    stash_before_change(w);
    // SpecTrain's eq. 1: v follows the gradients the worker applies.
    if (w.spectrain) w.spectrain->observe(w.weights, grads, op.first_layer, op.last_layer);
    // In Parallax's ps mode the servers stepped every variable; the worker
    // holds what it pulled.
    if (!serves_dense_) w.optimizer->step(w.weights, grads, op.first_layer, op.last_layer);
    if (const int32_t sends = weight_sends_of(id); sends > 0) {
      std::lock_guard lock(w.mu);
      w.weight_payloads[id] = {flatten_weights(w.weights, op.first_layer, op.last_layer), sends};
    }
    release_gradients(w, std::move(grads));
  }

  // --- parallax, mode=ar -------------------------------------------------------

  // The block a send of the ring allgather carries: at its first step the
  // worker's own sparse rows of every sparse layer, each as its row count (a
  // float, exact below 2^24) then encode_sparse_rows; later, the block the
  // worker received the step before (kept for its own update).
  std::vector<float> sparse_rows_block(WorkerState& w, const Op& send) {
    const OpId source = send.deps.front();
    if (plan_.ops[static_cast<size_t>(source)].kind == OpKind::kRecv) {
      auto it = w.received.find(source);
      TRAINSIM_CHECK(it != w.received.end(), "parallax: relaying a block never received");
      return it->second;
    }
    std::vector<float> block;
    for (const LayerGrads& layer : gradients_of(w, send.iteration)) {
      for (const ParamGrad& g : layer) {
        if (!g.sparse) continue;
        TRAINSIM_CHECK(g.rows.size() < (size_t{1} << 24), "parallax: too many sparse rows for one block");
        block.push_back(static_cast<float>(g.rows.size()));
        const std::vector<float> rows = encode_sparse_rows(g.rows, g.row_values.data);
        block.insert(block.end(), rows.begin(), rows.end());
      }
    }
    return block;
  }

  // Before the update: the other workers' rows, every block this worker
  // received in the iteration, appended to its own sparse gradients (repeated
  // rows add), and the sum scaled to the mean over the workers, as the
  // AllReduce did for the dense ones.
  void add_gathered_rows(WorkerState& w, const Op& update, Gradients& grads) {
    std::vector<std::vector<float>> blocks;
    {
      std::lock_guard lock(w.mu);
      for (auto it = w.received.begin(); it != w.received.end();) {
        const Op& recv = plan_.ops[static_cast<size_t>(it->first)];
        if (recv.iteration != update.iteration || payload_of(sender_of(it->first)) != Payload::kSparseRows) {
          ++it;
          continue;
        }
        blocks.push_back(std::move(it->second));
        it = w.received.erase(it);
      }
    }
    for (const std::vector<float>& block : blocks) {
      size_t at = 0;
      for (size_t l = 0; l < grads.size(); ++l) {
        for (size_t p = 0; p < grads[l].size(); ++p) {
          ParamGrad& g = grads[l][p];
          if (!g.sparse) continue;
          TRAINSIM_CHECK(at < block.size(), "parallax: a gathered block ends early");
          const auto count = static_cast<size_t>(block[at++]);
          const int64_t width = w.weights[l][p].row_size();
          const size_t floats = count * static_cast<size_t>(2 + width);
          TRAINSIM_CHECK(at + floats <= block.size(), "parallax: a gathered block ends early");
          const SparseRows rows = decode_sparse_rows(std::span<const float>(block).subspan(at, floats), width);
          at += floats;
          g.rows.insert(g.rows.end(), rows.rows.begin(), rows.rows.end());
          g.row_values.data.insert(g.row_values.data.end(), rows.values.begin(), rows.values.end());
          g.row_values.shape = {static_cast<int64_t>(g.rows.size()), width};
        }
      }
      TRAINSIM_CHECK(at == block.size(), "parallax: a gathered block longer than its rows");
    }
    const float mean = 1.0f / static_cast<float>(plan_.workers.size());
    for (LayerGrads& layer : grads) {
      for (ParamGrad& g : layer) {
        if (g.sparse) {
          for (float& v : g.row_values.data) v *= mean;
        }
      }
    }
  }

  // Sends carrying the weights an update wrote.
  int32_t weight_sends_of(OpId update_id) {
    std::lock_guard lock(sends_mu_);
    if (weight_senders_.empty()) {
      weight_senders_.assign(plan_.ops.size(), 0);
      for (const Op& op : plan_.ops) {
        if (op.kind == OpKind::kSend && !op.deps.empty()) ++weight_senders_[static_cast<size_t>(op.deps.front())];
      }
    }
    return weight_senders_[static_cast<size_t>(update_id)];
  }

  // Pipe-SGD's compress op readies the gradients for the lossy wire: sparse
  // ones made dense. The codec itself runs at every hop of the AllReduce
  // (seed 002 §3.2, Fig. 3b; all_reduce below).
  void compress(const Op& op) {
    WorkerState& w = *workers_[op.worker];
    std::lock_guard lock(w.mu);
    const int64_t first = op.first_layer >= 0 ? op.first_layer : 0;
    const int64_t last = op.last_layer >= 0 ? op.last_layer : static_cast<int64_t>(network_.layers.size()) - 1;
    densify_range(gradients_of(w, op.iteration), w.weights, first, last);
  }

  // The codec of Pipe-SGD's AllReduce: a message is the packed compressed
  // gradient (exec/optim/pipesgd.hpp), so the wire carries its bytes.
  static HopCodec hop_codec(GradientCompression kind) {
    return {[kind](std::span<const float> values) { return pack_compressed(compress_gradient(values, kind)); },
            [kind](std::span<const float> message, std::span<float> out) {
              decompress_gradient(unpack_compressed(message, static_cast<int64_t>(out.size()), kind), out);
            }};
  }

  // --- communication -----------------------------------------------------------

  OpId sender_of(OpId recv) const {
    const Op& r = plan_.ops[static_cast<size_t>(recv)];
    TRAINSIM_CHECK(!r.deps.empty(), "a recv without its send");
    return r.deps.front();
  }

  // What a send carries, of the op it depends on. kSparseRows: Parallax's
  // `ar` mode (seed 004 §3.1) gathers every worker's sparse rows around the
  // ring; a worker's own rows first, then, hop by hop, the block it received
  // the step before.
  Payload payload_of(OpId send) const {
    const Op& s = plan_.ops[static_cast<size_t>(send)];
    TRAINSIM_CHECK(!s.deps.empty(), "a send without the op it sends the result of");
    return s.payload;
  }

  void send(OpId id, const Op& op) {
    WorkerState& w = *workers_[op.worker];
    const Op& source = plan_.ops[static_cast<size_t>(op.deps.front())];
    const int32_t mb = std::max(0, source.microbatch);
    std::vector<float> payload;
    std::optional<Gradients> released;  // the iteration's gradients, read by their last send
    {
      std::lock_guard lock(w.mu);
      switch (payload_of(id)) {
        case Payload::kActivation: {
          auto it = w.outputs.find({source.iteration, mb, source.last_layer});
          TRAINSIM_CHECK(it != w.outputs.end(), "plan: sending an activation the worker lacks");
          payload = std::move(it->second.data);
          w.outputs.erase(it);
          break;
        }
        case Payload::kInputGradient: {
          auto it = w.output_grads.find({source.iteration, mb, source.first_layer - 1});
          TRAINSIM_CHECK(it != w.output_grads.end(), "plan: sending a gradient the worker lacks");
          payload = std::move(it->second.data);
          w.output_grads.erase(it);
          break;
        }
        case Payload::kParamGradient: {
          Gradients& grads = gradients_of(w, op.iteration);
          densify_range(grads, w.weights, op.first_layer, op.last_layer);
          payload = flatten_gradients(grads, op.first_layer, op.last_layer);
          auto left = w.gradient_sends_left.find(op.iteration);
          if (left != w.gradient_sends_left.end() && --left->second == 0) {
            w.gradient_sends_left.erase(left);
            auto set = w.grads.find(op.iteration);
            released = std::move(set->second);
            w.grads.erase(set);
          }
          break;
        }
        case Payload::kSparseRows:
          payload = sparse_rows_block(w, op);
          break;
        case Payload::kNone: throw std::logic_error("plan: a send without its payload");
        case Payload::kWeights: {
          auto it = w.weight_payloads.find(op.deps.front());
          TRAINSIM_CHECK(it != w.weight_payloads.end(), "plan: sending weights never updated");
          // Several sends may carry one update's weights: the last one takes them.
          if (--it->second.second == 0) {
            payload = std::move(it->second.first);
            w.weight_payloads.erase(it);
          } else {
            payload = it->second.first;
          }
          break;
        }
      }
    }
    transport_.send(op.worker, op.peer, id, std::move(payload));
    if (released) release_gradients(w, std::move(*released));
  }

  void recv(OpId id, const Op& op) {
    const OpId from = sender_of(id);
    const Op& send_op = plan_.ops[static_cast<size_t>(from)];
    const Op& source = plan_.ops[static_cast<size_t>(send_op.deps.front())];
    std::vector<float> payload = transport_.recv(op.worker, op.peer, from);
    WorkerState& w = *workers_[op.worker];
    const int32_t mb = std::max(0, source.microbatch);
    std::lock_guard lock(w.mu);
    switch (payload_of(from)) {
      case Payload::kActivation:
        w.outputs[{source.iteration, mb, source.last_layer}] = as_layer_output(std::move(payload), source.last_layer);
        break;
      case Payload::kInputGradient:
        w.output_grads[{source.iteration, mb, source.first_layer - 1}] =
            as_layer_output(std::move(payload), source.first_layer - 1);
        break;
      case Payload::kParamGradient:
      case Payload::kWeights:
      case Payload::kSparseRows: w.received[id] = std::move(payload); break;
      case Payload::kNone: throw std::logic_error("plan: a recv of a send without its payload");
    }
  }

  Tensor as_layer_output(std::vector<float> data, int32_t layer) const {
    const std::vector<int64_t>& sample = output_shape(layer);
    const int64_t per_sample = std::accumulate(sample.begin(), sample.end(), int64_t{1}, std::multiplies<>());
    Tensor t;
    t.shape = {static_cast<int64_t>(data.size()) / per_sample};
    t.shape.insert(t.shape.end(), sample.begin(), sample.end());
    t.data = std::move(data);
    return t;
  }

  const std::vector<int64_t>& output_shape(int32_t layer) const {
    return network_.output_shapes[static_cast<size_t>(layer)];
  }

  void all_reduce(OpId id, const Op& op) {
    WorkerState& w = *workers_[op.worker];
    std::vector<float> flat;
    {
      std::lock_guard lock(w.mu);
      Gradients& grads = gradients_of(w, op.iteration);
      // Parallax reduces the dense variables only (dense_only); the sparse go
      // to servers (hybrid) or around the ring as rows (ar).
      if (!op.dense_only) densify_range(grads, w.weights, op.first_layer, op.last_layer);
      flat = flatten_gradients(grads, op.first_layer, op.last_layer);
    }
    const std::vector<int>& members = group(op);
    if (op.codec == Codec::kNone) {
      transport_.all_reduce(op.worker, members, tags_[static_cast<size_t>(id)], flat, op.algorithm);
    } else {
      CollectivePeers peers(transport_, op.worker, members, tags_[static_cast<size_t>(id)]);
      all_reduce_ring_codec(peers, flat, hop_codec(compression_of(op.codec)));
    }
    const float mean = 1.0f / static_cast<float>(members.size());
    for (float& v : flat) v *= mean;
    std::lock_guard lock(w.mu);
    unflatten_gradients(flat, gradients_of(w, op.iteration), op.first_layer, op.last_layer);
  }

  // The group's first member's weights of the op's layers to every member.
  void broadcast(OpId id, const Op& op) {
    WorkerState& w = *workers_[op.worker];
    const std::vector<int>& members = group(op);
    std::vector<float> flat = flatten_weights(w.weights, op.first_layer, op.last_layer);
    transport_.broadcast(op.worker, members, members.front(), tags_[static_cast<size_t>(id)], flat);
    if (op.worker != members.front()) {
      stash_before_change(w);
      unflatten_weights(flat, w.weights, op.first_layer, op.last_layer);
    }
  }

  // --- host (cgdp) -------------------------------------------------------------

  void copy_to_host(const Op& op) {
    if (!servers_.empty()) return push_to_servers(op);
    WorkerState& w = *workers_[op.worker];
    std::vector<float> flat;
    {
      std::lock_guard lock(w.mu);
      Gradients& grads = gradients_of(w, op.iteration);
      densify_range(grads, w.weights, op.first_layer, op.last_layer);
      flat = flatten_gradients(grads, op.first_layer, op.last_layer);
    }
    std::lock_guard lock(host_.mu);
    host_.copies[{op.iteration, op.first_layer}][op.worker] = std::move(flat);
  }

  void host_accumulate_op(const Op& op) {
    std::map<int32_t, std::vector<float>> copies;
    {
      std::lock_guard lock(host_.mu);
      copies = std::move(host_.copies[{op.iteration, op.first_layer}]);
      host_.copies.erase({op.iteration, op.first_layer});
    }
    TRAINSIM_CHECK(!copies.empty(), "plan: host accumulation without copies");
    std::vector<std::span<const float>> chunks;
    for (const auto& [worker, flat] : copies) chunks.emplace_back(flat);
    std::vector<float> mean(copies.begin()->second.size());
    host_accumulate(chunks, mean, 1);
    const float scale = 1.0f / static_cast<float>(copies.size());
    for (float& v : mean) v *= scale;
    std::lock_guard lock(host_.mu);
    host_.means[{op.iteration, op.first_layer}] = {std::move(mean), static_cast<int64_t>(copies.size())};
  }

  void copy_to_device(const Op& op) {
    if (!servers_.empty()) return pull_from_servers(op);
    std::vector<float> mean;
    {
      std::lock_guard lock(host_.mu);
      auto it = host_.means.find({op.iteration, op.first_layer});
      TRAINSIM_CHECK(it != host_.means.end(), "plan: copying back a chunk never accumulated");
      if (--it->second.second == 0) {  // the last worker takes the buffer
        mean = std::move(it->second.first);
        host_.means.erase(it);
      } else {
        mean = it->second.first;
      }
    }
    WorkerState& w = *workers_[op.worker];
    std::lock_guard lock(w.mu);
    unflatten_gradients(mean, gradients_of(w, op.iteration), op.first_layer, op.last_layer);
  }

  // --- result ------------------------------------------------------------------

  ExecResult result() {
    ExecResult r;
    r.timings = timings_;
    r.iteration_end_s.assign(static_cast<size_t>(plan_.iterations), 0.0);
    for (size_t id = 0; id < plan_.ops.size(); ++id) {
      double& end = r.iteration_end_s[static_cast<size_t>(plan_.ops[id].iteration)];
      end = std::max(end, timings_[id].end_s);
    }
    for (size_t i = 0; i < loss_sum_.size(); ++i) {
      r.loss_per_iteration.push_back(loss_rows_[i] > 0 ? loss_sum_[i] / static_cast<double>(loss_rows_[i]) : 0.0);
    }
    r.weights = workers_.front()->weights;
    std::vector<bool> taken(network_.layers.size(), false);
    for (const Op& op : plan_.ops) {
      if (op.kind != OpKind::kUpdate) continue;
      for (int32_t l = op.first_layer; l <= op.last_layer; ++l) {
        if (taken[static_cast<size_t>(l)]) continue;
        taken[static_cast<size_t>(l)] = true;
        r.weights[static_cast<size_t>(l)] = workers_[static_cast<size_t>(op.worker)]->weights[static_cast<size_t>(l)];
      }
    }
    for (const auto& s : servers_) {
      if (s->shape.sparse) {
        r.weights[static_cast<size_t>(s->first)][0].data = s->shard->weights();
      } else {
        unflatten_weights(s->shard->weights(), r.weights, s->first, s->last);
      }
    }
    r.traffic = transport_.traffic();
    return r;
  }

  const Plan& plan_;
  const Network& network_;
  const BatchSource& batches_;
  ExecOptions options_;
  bool spectrain_ = false;              // ops read predicted weights (SpecTrain, seed 000)
  bool gathers_sparse_rows_ = false;    // updates add the rows the ring gathered (parallax, mode=ar)
  bool serves_dense_ = false;           // a server steps the dense variables (parallax, mode=ps)
  std::vector<std::unique_ptr<VariableServer>> servers_;  // the plan's: sparse tables, then dense
  std::set<std::tuple<int32_t, int32_t, int32_t, int32_t>> recomputed_;  // (worker, it, mb, first layer) of recomputes
  InProcessTransport transport_;
  std::vector<std::atomic<bool>> done_;
  std::atomic<bool> failed_{false};
  std::vector<ExecOpTiming> timings_;
  std::vector<std::unique_ptr<WorkerState>> workers_;
  HostState host_;
  std::vector<int64_t> tags_;
  std::vector<uint8_t> releases_own_stream_;  // per op: a compute op another stream of its worker waits on
  std::vector<std::vector<bool>> gradient_layout_;  // per layer and parameter: sparse
  int32_t microbatches_ = 1;
  int64_t shards_ = 1;
  std::chrono::steady_clock::time_point start_;

  std::mutex groups_mu_;
  std::map<int32_t, std::vector<int>> groups_;
  std::mutex sends_mu_;
  std::vector<int32_t> weight_senders_;  // per update op: sends of its weights
  std::mutex loss_mu_;
  std::vector<double> loss_sum_;
  std::vector<int64_t> loss_rows_;
};

}  // namespace

bool pin_current_thread(int core) {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0 || CPU_COUNT(&allowed) == 0) return false;
  int target = core % CPU_COUNT(&allowed);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (!CPU_ISSET(cpu, &allowed)) continue;
    if (target-- > 0) continue;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu, &one);
    return pthread_setaffinity_np(pthread_self(), sizeof one, &one) == 0;
  }
  return false;
}

int64_t usable_cores() {
  cpu_set_t allowed;
  CPU_ZERO(&allowed);
  if (sched_getaffinity(0, sizeof allowed, &allowed) != 0) return 1;
  return std::max(1, CPU_COUNT(&allowed));
}

bool communication_shares_compute_core(int64_t workers, int64_t cores) { return cores < 2 * workers; }

int worker_thread_core(int32_t worker, int64_t workers, int64_t cores, bool compute) {
  if (compute || communication_shares_compute_core(workers, cores)) return worker;
  return static_cast<int>(workers) + worker;
}

BatchSource whole_batches(WholeBatchSource source) {
  constexpr size_t kBatchesKept = 4;
  struct Cache {
    std::mutex mu;
    std::map<int32_t, std::pair<Tensor, std::vector<int32_t>>> batches;  // by iteration
  };
  auto cache = std::make_shared<Cache>();
  return [source = std::move(source), cache](int32_t iteration, int64_t global_rows, RowRange rows, Tensor* x,
                                             std::vector<int32_t>* y) {
    std::lock_guard lock(cache->mu);
    auto it = cache->batches.find(iteration);
    if (it == cache->batches.end()) {
      if (cache->batches.size() >= kBatchesKept) cache->batches.erase(cache->batches.begin());
      it = cache->batches.try_emplace(iteration).first;
      source(iteration, global_rows, it->second.first, it->second.second);
    }
    if (x != nullptr) *x = slice_rows(it->second.first, rows);
    if (y != nullptr) *y = slice_labels(it->second.second, rows);
  };
}

ExecResult execute_plan(const Plan& plan, const Network& network, const Weights& initial, const BatchSource& batches,
                        const ExecOptions& options) {
  Interpreter interpreter(plan, network, initial, batches, options);
  return interpreter.run();
}

nlohmann::json exec_chrome_trace(const Plan& plan, const ExecResult& result) {
  std::vector<OpTiming> timings;
  timings.reserve(result.timings.size());
  for (const ExecOpTiming& t : result.timings) {
    timings.push_back({static_cast<SimTime>(std::llround(t.start_s * 1e9)), static_cast<SimTime>(std::llround(t.end_s * 1e9))});
  }
  return chrome_trace(plan, timings);
}

}  // namespace trainsim
