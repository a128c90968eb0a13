// A run shared by several processes (ExecOptions::local_endpoints): which
// endpoints this process runs, the plans it refuses, the barrier the
// processes start from, and the results each sends the process running
// endpoint 0 at the end (its workers' losses, op timings, the layers whose
// result it holds, the traffic it sent), which merges them.
#include <algorithm>
#include <bit>
#include <cmath>
#include <numeric>
#include <string>

#include "exec/devices.hpp"
#include "exec/interpreter/handlers.hpp"
#include "exec/interpreter/tags.hpp"
#include "exec/transport/in_process.hpp"
#include "model/error.hpp"

namespace trainsim::interp {
namespace {

// Doubles through a float channel, bit for bit: two floats carrying the halves.
void append_double(std::vector<float>& out, double value) {
  const auto bits = std::bit_cast<uint64_t>(value);
  out.push_back(std::bit_cast<float>(static_cast<uint32_t>(bits >> 32)));
  out.push_back(std::bit_cast<float>(static_cast<uint32_t>(bits & 0xffffffffu)));
}

// Reads what the matching writes wrote, in order; a record shorter than the
// reader expects is a plan mismatch between the processes.
class RecordReader {
 public:
  RecordReader(const std::vector<float>& record, int32_t worker) : record_(record), worker_(worker) {}
  double next_double() {
    check(2);
    const auto high = std::bit_cast<uint32_t>(record_[at_]), low = std::bit_cast<uint32_t>(record_[at_ + 1]);
    at_ += 2;
    return std::bit_cast<double>((static_cast<uint64_t>(high) << 32) | low);
  }
  void next_floats(std::vector<float>& into) {
    check(into.size());
    std::copy_n(record_.begin() + static_cast<std::ptrdiff_t>(at_), into.size(), into.begin());
    at_ += into.size();
  }
  Weights next_weights() {
    Weights w(static_cast<size_t>(next_count()));
    for (LayerParams& layer : w) {
      layer.resize(static_cast<size_t>(next_count()));
      for (Tensor& t : layer) {
        t.shape.resize(static_cast<size_t>(next_count()));
        for (int64_t& d : t.shape) d = next_count();
        t.data.resize(static_cast<size_t>(next_count()));
        next_floats(t.data);
      }
    }
    return w;
  }
  std::span<const float> rest() {
    const std::span<const float> out = std::span<const float>(record_).subspan(at_);
    at_ = record_.size();
    return out;
  }
  void expect_end() const {
    TRAINSIM_CHECK(at_ == record_.size(), "the result of worker " + std::to_string(worker_) +
                                              " is longer than its plan's: the processes ran different plans");
  }

 private:
  int64_t next_count() {
    const double v = next_double();
    TRAINSIM_CHECK(v >= 0 && v <= static_cast<double>(record_.size()) * 4,
                   "the state of worker " + std::to_string(worker_) + " holds a count beyond its record");
    return static_cast<int64_t>(v);
  }
  void check(size_t count) const {
    TRAINSIM_CHECK(at_ + count <= record_.size(), "the result of worker " + std::to_string(worker_) +
                                                      " is shorter than its plan's: the processes ran different plans");
  }
  const std::vector<float>& record_;
  int32_t worker_;
  size_t at_ = 0;
};

void append_weights(std::vector<float>& out, const Weights& w) {
  append_double(out, static_cast<double>(w.size()));
  for (const LayerParams& layer : w) {
    append_double(out, static_cast<double>(layer.size()));
    for (const Tensor& t : layer) {
      append_double(out, static_cast<double>(t.shape.size()));
      for (int64_t d : t.shape) append_double(out, static_cast<double>(d));
      append_double(out, static_cast<double>(t.data.size()));
      out.insert(out.end(), t.data.begin(), t.data.end());
    }
  }
}

std::vector<float> state_record(const EndpointState& e) {
  std::vector<float> out;
  for (const Weights* w : {&e.weights, &e.velocity, &e.smoothed, &e.statistics}) append_weights(out, *w);
  return out;
}

EndpointState read_state_record(const std::vector<float>& record, int32_t worker) {
  RecordReader in(record, worker);
  EndpointState e;
  for (Weights* w : {&e.weights, &e.velocity, &e.smoothed, &e.statistics}) *w = in.next_weights();
  in.expect_end();
  return e;
}

// Exchanges after each result record by which endpoint 0 reads the
// sender's clock against its own (clock_offset_s).
constexpr int kClockRounds = 8;

// computer_id() as a number a record carries exactly (52 bits of its
// FNV-1a hash), -1 where it cannot be read.
double computer_key() {
  const std::string id = computer_id();
  if (id.empty()) return -1.0;
  uint64_t hash = 14695981039346656037ull;
  for (const char c : id) hash = (hash ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return static_cast<double>(hash & ((uint64_t{1} << 52) - 1));
}

std::string op_name(const Op& op) {
  return std::string(op_kind_name(op.kind)) + " of worker " + std::to_string(op.worker) + " (iteration " +
         std::to_string(op.iteration) + ")";
}

}  // namespace

std::vector<uint8_t> Interpreter::local_mask(const Plan& plan, const ExecOptions& options) {
  const size_t endpoints = plan.workers.size();
  std::vector<uint8_t> local(endpoints, options.local_endpoints.empty() ? 1 : 0);
  for (const int32_t e : options.local_endpoints) {
    if (e < 0 || static_cast<size_t>(e) >= endpoints) {
      throw InputError("ExecOptions::local_endpoints", "names endpoint " + std::to_string(e),
                       "one of the plan's " + std::to_string(endpoints) + " workers");
    }
    local[static_cast<size_t>(e)] = 1;
  }
  return local;
}

std::vector<uint8_t> Interpreter::local_workers() const {
  return std::vector<uint8_t>(local_.begin(), local_.begin() + static_cast<std::ptrdiff_t>(plan_.workers.size()));
}

// Across workers an op may wait only for a message: a recv on its send. A
// send may also wait on another worker's send, which orders their use of
// one link in the simulator (dp-ps's pushes into the server, one after
// another); across processes the network orders them and the wait is
// dropped. A machine's host accumulation (or Parallax's server) waits on its
// workers' copies, and their copies back on the host: these come as
// messages to and from the process of the worker accumulating or serving
// (host_ops.cpp, server_ops.cpp). Anything else crossing
// workers shares memory and has no message to wait for. Every process
// checks every op, so all of them refuse a plan alike.
void Interpreter::check_shareable(const Plan& plan) {
  for (const Op& op : plan.ops) {
    for (size_t k = 0; k < op.deps.size(); ++k) {
      const Op& dep = plan.ops[static_cast<size_t>(op.deps[k])];
      if (dep.worker == op.worker) continue;
      if (op.kind == OpKind::kRecv && k == 0) continue;                    // the message is the wait
      if (op.kind == OpKind::kSend && dep.kind == OpKind::kSend) continue;  // the order of a shared link
      // A machine's host memory is its host worker's process's: a copy into
      // it, and the sum copied back, come as messages.
      if (op.kind == OpKind::kHostAccumulate && dep.kind == OpKind::kCopyToHost) continue;
      if (op.kind == OpKind::kCopyToDevice && (dep.kind == OpKind::kHostAccumulate || dep.kind == OpKind::kAllReduce)) {
        continue;
      }
      // Parallax: a server's step and the host's pushes read the machine's
      // copies; a copy back reads what the server's host holds.
      if ((op.kind == OpKind::kServerStep || op.kind == OpKind::kSend) && dep.kind == OpKind::kCopyToHost) continue;
      if (op.kind == OpKind::kCopyToDevice && (dep.kind == OpKind::kServerStep || dep.kind == OpKind::kRecv)) continue;
      throw InputError("the plan's " + op_name(op), "waits on the " + op_name(dep) + ", another worker's",
                       "ops that wait across workers only for a message (a recv on its send) to run across "
                       "processes");
    }
  }
}

// Every process's workers enter one barrier, so the runs' clocks start
// within a message's latency of each other.
void Interpreter::start_together() {
  std::vector<int> everyone(plan_.workers.size());
  std::iota(everyone.begin(), everyone.end(), 0);
  std::vector<int> mine;
  for (int w : everyone) {
    if (local_[static_cast<size_t>(w)]) mine.push_back(w);
  }
  run_workers(transport_, static_cast<int>(mine.size()),
              [&](int i) { transport_.barrier(mine[static_cast<size_t>(i)], everyone, start_tag()); });
}

// Worker w's part of the result: its losses per iteration, its ops'
// timings, the weights of the layers it updates first and the statistics of
// those it runs forward first (result() takes each layer from there), and
// the bytes it sent to each endpoint.
std::vector<float> Interpreter::result_record(int32_t worker, const ExecResult& r) const {
  const auto w = static_cast<size_t>(worker);
  std::vector<float> out;
  for (size_t i = 0; i < static_cast<size_t>(plan_.iterations); ++i) {
    append_double(out, loss_sum_[w][i]);
    append_double(out, static_cast<double>(loss_rows_[w][i]));
  }
  for (size_t id = 0; id < plan_.ops.size(); ++id) {
    if (plan_.ops[id].worker != worker) continue;
    append_double(out, r.timings[id].start_s);
    append_double(out, r.timings[id].end_s);
    append_double(out, r.timings[id].device_start_s);
    append_double(out, r.timings[id].device_end_s);
    append_double(out, static_cast<double>(r.timings[id].library_calls));
  }
  append_double(out, computer_key());
  append_double(out, scheduler_.start_clock_s());
  const std::vector<int32_t> updater = first_worker_per_layer(OpKind::kUpdate);
  const std::vector<int32_t> forwarder = first_worker_per_layer(OpKind::kForward);
  for (size_t l = 0; l < network_.layers.size(); ++l) {
    if (updater[l] == worker) {
      for (const Tensor& t : workers_[w]->weights[l]) out.insert(out.end(), t.data.begin(), t.data.end());
    }
    if (forwarder[l] == worker) {
      for (const Tensor& t : workers_[w]->statistics[l]) out.insert(out.end(), t.data.begin(), t.data.end());
    }
  }
  for (size_t to = 0; to < local_.size(); ++to) {
    append_double(out, static_cast<double>(r.traffic.pair_bytes.at(w).at(to)));
    append_double(out, static_cast<double>(r.traffic.pair_messages.at(w).at(to)));
  }
  const auto server = std::find(server_workers_.begin(), server_workers_.end(), worker);
  if (server != server_workers_.end()) {  // the share of every served variable its server owns
    const std::vector<float> shares = share_record(static_cast<int32_t>(server - server_workers_.begin()));
    out.insert(out.end(), shares.begin(), shares.end());
  }
  return out;
}

double Interpreter::read_result_record(int32_t worker, const std::vector<float>& record, ExecResult& r,
                                       bool& same_computer) {
  const auto w = static_cast<size_t>(worker);
  RecordReader in(record, worker);
  for (size_t i = 0; i < static_cast<size_t>(plan_.iterations); ++i) {
    loss_sum_[w][i] = in.next_double();
    loss_rows_[w][i] = static_cast<int64_t>(in.next_double());
  }
  for (size_t id = 0; id < plan_.ops.size(); ++id) {
    if (plan_.ops[id].worker != worker) continue;
    r.timings[id].start_s = in.next_double();
    r.timings[id].end_s = in.next_double();
    r.timings[id].device_start_s = in.next_double();
    r.timings[id].device_end_s = in.next_double();
    r.timings[id].library_calls = static_cast<int64_t>(in.next_double());
  }
  const double computer = in.next_double();
  const double start_clock_s = in.next_double();
  const double own = computer_key();
  const std::vector<int32_t> updater = first_worker_per_layer(OpKind::kUpdate);
  const std::vector<int32_t> forwarder = first_worker_per_layer(OpKind::kForward);
  for (size_t l = 0; l < network_.layers.size(); ++l) {
    if (updater[l] == worker) {
      for (Tensor& t : r.weights[l]) in.next_floats(t.data);
    }
    if (forwarder[l] == worker) {
      for (Tensor& t : r.statistics[l]) in.next_floats(t.data);
    }
  }
  for (size_t to = 0; to < local_.size(); ++to) {
    r.traffic.pair_bytes.at(w).at(to) = static_cast<int64_t>(in.next_double());
    r.traffic.pair_messages.at(w).at(to) = static_cast<int64_t>(in.next_double());
  }
  const auto server = std::find(server_workers_.begin(), server_workers_.end(), worker);
  if (server != server_workers_.end()) {
    read_share_record(static_cast<int32_t>(server - server_workers_.begin()), in.rest(), r.weights);
  } else {
    in.expect_end();
  }
  same_computer = own >= 0 && computer == own;
  return start_clock_s;
}

// Each process's workers send their part to endpoint 0, whose process
// merges them into its result; the others' results stay their own.
void Interpreter::gather_results(ExecResult& r) {
  if (!local_[0]) {
    r.complete = false;
    for (size_t w = 0; w < plan_.workers.size(); ++w) {
      if (!local_[w]) continue;
      const int self = static_cast<int>(w);
      transport_.send(self, 0, result_tag(), result_record(static_cast<int32_t>(w), r));
      for (int k = 0; k < kClockRounds; ++k) {  // endpoint 0 reads this clock against its own
        transport_.recv(self, 0, result_tag());
        std::vector<float> now;
        append_double(now, monotonic_clock_s());
        transport_.send(self, 0, result_tag(), std::move(now));
      }
    }
    return;
  }
  std::vector<double> start_clock_s(plan_.workers.size(), scheduler_.start_clock_s());
  for (size_t w = 0; w < plan_.workers.size(); ++w) {
    if (local_[w]) continue;
    const int from = static_cast<int>(w);
    bool same_computer = false;
    start_clock_s[w] =
        read_result_record(static_cast<int32_t>(w), transport_.recv(0, from, result_tag()), r, same_computer);
    std::vector<ClockSample> samples;
    for (int k = 0; k < kClockRounds; ++k) {
      ClockSample sample;
      sample.sent_s = monotonic_clock_s();
      transport_.send(0, from, result_tag(), {0.0f});
      const std::vector<float> reply = transport_.recv(0, from, result_tag());
      sample.received_s = monotonic_clock_s();
      sample.remote_s = RecordReader(reply, static_cast<int32_t>(w)).next_double();
      samples.push_back(sample);
    }
    // Another computer's clock: its start on this one's, as far as the
    // shortest exchange tells (within half its round trip).
    if (!same_computer) start_clock_s[w] -= clock_offset_s(samples);
  }
  align_timings(plan_, start_clock_s, r.timings);
  summarize(r);
}

void Interpreter::share_state(ExecResult& r) {
  r.state = raw_state();
  const size_t workers = plan_.workers.size();
  const size_t shares = server_workers_.size();  // servers_[j]: share j's server, where this process holds it
  if (!local_[0]) {
    for (size_t w = 0; w < workers; ++w) {
      if (local_[w]) transport_.send(static_cast<int>(w), 0, state_tag(), state_record(r.state.endpoints[w]));
    }
    for (const auto& s : servers_) {
      if (!s) continue;
      for (size_t v = 0; v < served_.size(); ++v) {
        transport_.send(s->worker, 0, state_tag(), state_record(server_share_state(*s, v)));
      }
    }
    for (size_t w = 0; w < workers; ++w) {
      if (local_[w]) r.state.endpoints[w] = read_state_record(transport_.recv(static_cast<int>(w), 0, state_tag()),
                                                               static_cast<int32_t>(w));
    }
    for (const auto& s : servers_) {
      if (!s) continue;
      for (size_t v = 0; v < served_.size(); ++v) {
        r.state.endpoints[workers + v] = read_state_record(transport_.recv(s->worker, 0, state_tag()), s->worker);
      }
    }
    return;
  }
  for (size_t w = 0; w < workers; ++w) {
    if (local_[w]) continue;
    r.state.endpoints[w] = read_state_record(transport_.recv(0, static_cast<int>(w), state_tag()),
                                             static_cast<int32_t>(w));
  }
  for (size_t j = 0; j < shares; ++j) {
    if (servers_[j]) continue;
    for (size_t v = 0; v < served_.size(); ++v) {
      add_server_share(static_cast<int32_t>(j), v,
                       read_state_record(transport_.recv(0, server_workers_[j], state_tag()), server_workers_[j]),
                       r.state.endpoints[workers + v]);
    }
  }
  complete_state(r.state);
  for (size_t w = 0; w < workers; ++w) {
    if (!local_[w]) transport_.send(0, static_cast<int>(w), state_tag(), state_record(r.state.endpoints[w]));
  }
  for (size_t j = 0; j < shares; ++j) {
    if (servers_[j]) continue;
    for (size_t v = 0; v < served_.size(); ++v) {
      transport_.send(0, server_workers_[j], state_tag(), state_record(r.state.endpoints[workers + v]));
    }
  }
}

}  // namespace trainsim::interp
