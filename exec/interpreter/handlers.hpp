// The interpreter's op handlers: one class whose methods are spread over this
// folder by op kind (compute_ops.cpp, p2p_ops.cpp, collective_ops.cpp,
// host_ops.cpp; the constructor, the dispatch and the result in
// handlers.cpp). It runs each op the Scheduler hands it on the op's stream's
// thread. It reads only what the plan's ops carry (sim/plan/plan.hpp), never
// the strategy's name or settings: what a send carries (its payload, taken
// from the op it depends on), the weights a compute op reads (its policy), an
// AllReduce's codec, the plan's servers. Private to exec/.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "exec/interpreter.hpp"
#include "exec/interpreter/scheduler.hpp"
#include "exec/interpreter/server_state.hpp"
#include "exec/interpreter/worker_state.hpp"
#include "exec/transport/transport.hpp"

namespace trainsim::interp {

class Interpreter final : public OpHandler {
 public:
  // `transport` joins the plan's workers (plan.workers.size() endpoints).
  Interpreter(const Plan& plan, const Network& network, const Weights& initial, const BatchSource& batches,
              const ExecOptions& options, std::unique_ptr<Transport> transport);

  ExecResult run();

  // InputError unless `plan` can run across processes (checked before the
  // processes connect: every one refuses it alike). shared_run.cpp.
  static void check_shareable(const Plan& plan);

  // The op's handler, by its kind.
  void execute(OpId id, const Op& op) override;

 private:
  // handlers.cpp
  void check_supported(const Op& op) const;
  ExecResult result();
  // The iterations' ends from r.timings and their losses from the workers'.
  void summarize(ExecResult& r) const;
  // Every endpoint's state (ExecOptions::keep_state), and a run started from one (resume).
  RunState raw_state() const;
  void complete_state(RunState& state) const;
  void resume_from(const RunState& state);

  // shared_run.cpp: a run shared by several processes (ExecOptions::local_endpoints)
  static std::vector<uint8_t> local_mask(const Plan& plan, const ExecOptions& options);
  std::vector<uint8_t> local_workers() const;
  void start_together();
  std::vector<float> result_record(int32_t worker, const ExecResult& r) const;
  // Reads a worker's record into r; returns its run's start on its
  // process's clock, and sets `same_computer`: whether that process runs
  // on this computer (its clock is this one's).
  double read_result_record(int32_t worker, const std::vector<float>& record, ExecResult& r, bool& same_computer);
  void gather_results(ExecResult& r);
  // keep_state in a shared run: endpoint 0's process gathers every worker's
  // state and every server's share, completes it, and sends each worker its
  // own back and each server's process the served variables.
  void share_state(ExecResult& r);
  // Per layer, the worker of the first op of `kind` covering it (-1: none).
  std::vector<int32_t> first_worker_per_layer(OpKind kind) const;

  // compute_ops.cpp: forward, recompute, backward, update, their batches and gradients
  RowRange rows_of(const Op& op) const;
  void batch_rows(const Op& op, Tensor* x, std::vector<int32_t>* y);
  // The weights compute op `op` reads; `x`, a forward's input, names the
  // rows of a first-layer embedding a prediction must cover.
  const Weights& weights_for(WorkerState& w, OpId id, const Op& op, const Tensor* x = nullptr);
  void install_received_weights(WorkerState& w, const Op& op);
  void forward(OpId id, const Op& op);
  // The forward of the op's layers on `w`'s device, through the loss where
  // they end the model: their output, or dL/dlogits weighted by the
  // micro-batch's share of the shard's rows (`*loss_grad` set) with the loss
  // counted when `count_loss`.
  Tensor forward_on_device(WorkerState& w, const Op& op, const Weights& weights, Tensor x,
                           std::vector<LayerCache>& caches, bool count_loss, bool* loss_grad);
  // Worker `worker`'s unread losses, in the order of their forwards, added
  // into their iterations' sums up to the first that is neither known nor
  // of an iteration before `before_iteration`; with stop_on_divergence,
  // LossDiverged at the first that is NaN or infinite.
  void count_losses(int32_t worker, int32_t before_iteration);
  void recompute(OpId id, const Op& op);
  void backward(OpId id, const Op& op);
  void update(OpId id, const Op& op);
  Gradients& gradients_of(WorkerState& w, int32_t iteration);
  // The iteration's set with the part of layers [first, last] (-1: every
  // layer) that the worker's device still keeps added in, for the host to
  // read (Device::gradients_to_host). Callers do not hold w.mu.
  Gradients& host_gradients(WorkerState& w, int32_t iteration, int32_t first, int32_t last);
  Gradients fresh_gradients(WorkerState& w);
  void release_gradients(WorkerState& w, Gradients grads);

  // p2p_ops.cpp: send, recv, their payloads; Parallax's gathered sparse rows
  OpId sender_of(OpId recv) const;
  Payload payload_of(OpId send) const;
  bool server_payload(Payload payload) const;
  void send(OpId id, const Op& op);
  void recv(OpId id, const Op& op);
  Tensor as_layer_output(std::vector<float> data, int32_t layer) const;
  // Whether workers `from` and `to` run here, from's device reaching to's
  // (Device::reaches): a boundary between them passed device to device.
  bool device_to_device(int32_t from, int32_t to) const;
  // Whether a boundary from `from` to `to`, from's device not reaching to's
  // (one of them another process's, or GPUs that are not peers), goes
  // device to device by the transport (Transport::passes_kept).
  bool passed_kept(int32_t from, int32_t to) const;
  std::vector<std::pair<int, int>> kept_directions() const;
  const std::vector<int64_t>& output_shape(int32_t layer) const;
  int64_t per_sample(int32_t layer) const;  // values per sample at the boundary after `layer`
  void count_gradient_sends_without_update();
  int32_t weight_sends_of(OpId update_id);
  std::vector<float> sparse_rows_block(WorkerState& w, const Op& send);
  void add_gathered_rows(WorkerState& w, const Op& update, Gradients& grads);

  // collective_ops.cpp: AllReduce (with codecs), broadcast, barrier, compress
  void assign_collective_tags();
  const std::vector<int>& group(const Op& op);
  void compress(const Op& op);
  void all_reduce(OpId id, const Op& op);
  void broadcast(OpId id, const Op& op);
  void barrier(OpId id, const Op& op);

  // host_ops.cpp: copies to and from the host and host accumulation (cgdp); Parallax's go to server_ops.cpp
  void link_host_ops();
  OpId accumulation_of(OpId host_op) const;
  void copy_to_host(OpId id, const Op& op);
  void host_accumulate_op(OpId id, const Op& op);
  void host_all_reduce(OpId id, const Op& op);
  void hand_out_host_buffer(OpId id, OpId accumulation);
  void copy_to_device(OpId id, const Op& op);

  // server_ops.cpp: Parallax's servers, one per machine, each a share of every served variable
  void link_servers();
  void make_servers(const Weights& initial);
  size_t variable_of(const Op& step) const;
  MachineServer& server_at(int32_t worker) const;
  std::vector<int64_t> rows_to_pull(const Op& op);
  OpId forward_of(int32_t worker, int32_t iteration) const;
  ServerMessage gradient_message(WorkerState& w, const Op& op);
  void copy_to_server_host(OpId id, const Op& op);
  void gather_copies(MachineServer& s, const Op& op);
  const ServerMessage& aggregate_of(MachineServer& s, const Op& op);
  void send_push(OpId id, const Op& op);
  void server_step(const Op& op);
  void drop_served_rows(Gradients& grads) const;
  // server_pulls.cpp: the servers' answers and the copies back
  void send_pull(OpId id, const Op& op);
  void recv_server_message(OpId id, const Op& op, std::vector<float> payload);
  ServerMessage host_pull_for(MachineServer& s, int32_t iteration, int32_t worker);
  void pull_from_server_host(OpId id, const Op& op);
  void install_pull(WorkerState& w, const ServerMessage& pull) const;
  void hand_out_pulls(OpId done);
  // The servers' shares of every served variable held here, into `weights`;
  // one share's values in a flat record and back (a result across processes).
  void take_server_shares(Weights& weights) const;
  std::vector<float> share_record(int32_t share) const;
  void read_share_record(int32_t share, std::span<const float> record, Weights& weights) const;
  std::vector<EndpointState> server_states() const;  // per served variable
  // What server `s` holds of served variable `variable` (the whole table's
  // shape; its own share current), as a state endpoint.
  EndpointState server_share_state(const MachineServer& s, size_t variable) const;
  // Share `share`'s part of served variable `variable`'s state `from` into
  // `into` (which takes `from` whole while it is empty).
  void add_server_share(int32_t share, size_t variable, const EndpointState& from, EndpointState& into) const;
  void resume_servers(std::span<const EndpointState> states);

  const Plan& plan_;
  const Network& network_;
  const BatchSource& batches_;
  ExecOptions options_;
  bool spectrain_ = false;              // ops read predicted weights (SpecTrain, seed 000)
  bool gathers_sparse_rows_ = false;    // updates add the rows the ring gathered (parallax, mode=ar)
  bool serves_dense_ = false;           // a server steps the dense variables (parallax, mode=ps)
  std::set<std::tuple<int32_t, int32_t, int32_t, int32_t>> recomputed_;  // (worker, it, mb, first layer) of recomputes
  std::unique_ptr<Transport> owned_transport_;
  Transport& transport_;
  std::vector<uint8_t> local_;  // per worker: run by this process
  bool shared_ = false;         // some endpoint is another process's
  Scheduler scheduler_;
  std::vector<std::unique_ptr<WorkerState>> workers_;
  HostState host_;
  // Per op, the host op it reads or writes: a copy to host, the accumulation
  // it feeds; the hosts' AllReduce, the accumulation it reduces; a copy to
  // the device, the op whose buffer it copies back. -1 for other ops.
  std::vector<OpId> host_source_;
  std::map<OpId, std::vector<OpId>> host_readers_;  // op -> the copies to a device reading its buffer
  // Parallax's servers: the variables they step; per machine (share) its
  // server, null where another process holds it, and the worker holding it;
  // per worker its machine's share (-1: none).
  std::vector<ServedVariable> served_;
  std::vector<std::unique_ptr<MachineServer>> servers_;
  std::vector<int32_t> server_workers_;
  std::vector<int32_t> share_of_worker_;
  bool aggregated_ = false;        // a machine's rows go summed from its host (local aggregation)
  std::vector<uint8_t> to_host_;   // per op: a push from host memory, or a pull (and its send) into it
  // Boundaries passed device to device (Device::export_boundary), by their
  // send op, from the send until its recv takes them; the transport
  // carries an empty message in their place.
  std::mutex on_device_mu_;
  std::map<OpId, std::deque<Tensor>> on_device_;
  std::mutex handout_mu_;
  std::map<OpId, std::vector<OpId>> handout_readers_;  // op -> the copies to a device in another process it feeds
  std::map<OpId, size_t> handout_left_;                // such a copy -> its ops still to end
  std::vector<int64_t> tags_;
  std::vector<std::vector<bool>> gradient_layout_;  // per layer and parameter: sparse
  int32_t microbatches_ = 1;
  int64_t shards_ = 1;

  std::mutex groups_mu_;
  std::map<int32_t, std::vector<int>> groups_;
  std::mutex sends_mu_;
  std::vector<int32_t> weight_senders_;  // per update op: sends of its weights
  std::mutex loss_mu_;
  std::vector<std::vector<double>> loss_sum_;   // [worker][iteration]: loss · positions
  std::vector<std::vector<int64_t>> loss_rows_;  // [worker][iteration]: positions
};

}  // namespace trainsim::interp
