// A Kineto trace's steps, forward ops and their backward (kineto_steps.hpp).
#include "profiles/kineto/kineto_steps.hpp"

#include <algorithm>
#include <cctype>
#include <unordered_map>

#include "model/error.hpp"
#include "profiles/kineto/kineto_import.hpp"

namespace trainsim::kineto_detail {
namespace {

enum class Region : uint8_t { kNone, kOptimizer, kData };

// Spans nest on a thread; a child may end a rounding error after its parent.
constexpr double kSlackUs = 1e-3;

bool starts_with(const std::string& s, const char* prefix) { return s.rfind(prefix, 0) == 0; }
bool is_step(const std::string& name) { return starts_with(name, "ProfilerStep#"); }
// A record_function span the 2021 schema writes as an op (the current one
// as a user annotation): transparent, as an annotation is.
bool is_label(const std::string& name) {
  return starts_with(name, "##") || name.find(".forward") != std::string::npos || starts_with(name, "nn.Module") ||
         starts_with(name, "DistributedDataParallel");
}
Region region_of(const std::string& name) {
  if (starts_with(name, "Optimizer.")) return Region::kOptimizer;
  if (starts_with(name, "enumerate(DataLoader)")) return Region::kData;
  return Region::kNone;
}
bool is_nccl(const std::string& name) {
  std::string lower(name.size(), ' ');
  std::transform(name.begin(), name.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
  return lower.find("nccl") != std::string::npos;
}
bool is_all_reduce(const std::string& name) {
  return name.find("AllReduce") != std::string::npos || name.find("all_reduce") != std::string::npos;
}

// What was open on a thread at an instant: the outermost op, the region,
// whether autograd's engine ran it.
struct Context {
  int64_t outermost = -1;
  int64_t module = -1;             // the innermost nn.Module span (with_modules=True) around it
  int64_t first_sequence = kNoId;  // of the outermost op, or the first op below it that has one
  Region region = Region::kNone;
  bool backward = false;
};

class Sweep {
 public:
  Sweep(const KinetoTrace& t, uint32_t main_thread)
      : t_(t), main_(main_thread), span_(t.events.size()), container_(t.events.size(), false) {}

  void run() {
    std::unordered_map<uint32_t, std::vector<size_t>> by_thread;
    for (size_t i = 0; i < t_.events.size(); ++i) {
      const KinetoEvent& e = t_.events[i];
      if (is_span(e) || is_module(e) || e.cat == KinetoCat::kRuntime) by_thread[e.thread].push_back(i);
    }
    for (auto& [thread, items] : by_thread) {
      std::sort(items.begin(), items.end(), [this](size_t a, size_t b) {
        const KinetoEvent &x = t_.events[a], &y = t_.events[b];
        if (x.ts_us != y.ts_us) return x.ts_us < y.ts_us;
        const bool xs = x.cat != KinetoCat::kRuntime, ys = y.cat != KinetoCat::kRuntime;
        if (xs != ys) return xs;  // a span opens before a launch at the same instant
        return x.dur_us > y.dur_us;
      });
      std::vector<size_t> stack;
      for (const size_t i : items) {
        const KinetoEvent& e = t_.events[i];
        while (!stack.empty() && t_.events[stack.back()].end_us() + kSlackUs < e.ts_us) stack.pop_back();
        Context c = context(stack, thread);
        if (e.cat == KinetoCat::kRuntime) {
          launch_[e.correlation] = {i, c};
          continue;
        }
        if (is_module(e)) {  // transparent to the ops, but each op knows its innermost one
          if (c.module >= 0) container_[static_cast<size_t>(c.module)] = true;
          c.module = static_cast<int64_t>(i);
          span_[i] = c;
          stack.push_back(i);
          continue;
        }
        const bool op = region_of(name(e)) == Region::kNone;
        if (c.outermost < 0 && op) {
          c.outermost = static_cast<int64_t>(i);
          c.first_sequence = e.sequence;
        } else if (c.outermost >= 0 && span_[static_cast<size_t>(c.outermost)].first_sequence == kNoId &&
                   e.sequence != kNoId) {
          span_[static_cast<size_t>(c.outermost)].first_sequence = e.sequence;
        }
        if (!op && c.region == Region::kNone) c.region = region_of(name(e));
        c.backward = c.backward || e.backward || starts_with(name(e), "autograd::engine::evaluate_function");
        span_[i] = c;
        stack.push_back(i);
      }
    }
  }

  const std::string& name(const KinetoEvent& e) const { return t_.names[e.name]; }
  bool is_span(const KinetoEvent& e) const {
    return (e.cat == KinetoCat::kCpuOp && !is_step(name(e)) && !is_label(name(e))) ||
           (e.cat == KinetoCat::kAnnotation && region_of(name(e)) != Region::kNone);
  }
  bool is_module(const KinetoEvent& e) const {
    return e.cat == KinetoCat::kPython && starts_with(name(e), "nn.Module: ");
  }
  // Whether a module span holds another module's.
  bool container(int64_t module) const { return module >= 0 && container_[static_cast<size_t>(module)]; }
  const Context& span(size_t i) const { return span_[i]; }
  const std::pair<size_t, Context>* launch(int64_t correlation) const {
    const auto it = launch_.find(correlation);
    return correlation == kNoId || it == launch_.end() ? nullptr : &it->second;
  }

 private:
  Context context(const std::vector<size_t>& stack, uint32_t thread) const {
    Context c;
    c.backward = thread != main_;
    for (const size_t s : stack) {
      const Context& below = span_[s];
      if (c.outermost < 0 && below.outermost >= 0) {
        c.outermost = below.outermost;
        c.first_sequence = span_[static_cast<size_t>(below.outermost)].first_sequence;
      }
      if (c.region == Region::kNone) c.region = below.region;
      if (below.module >= 0) c.module = below.module;
      c.backward = c.backward || below.backward;
    }
    return c;
  }

  const KinetoTrace& t_;
  uint32_t main_;
  std::vector<Context> span_;
  std::vector<bool> container_;
  std::unordered_map<int64_t, std::pair<size_t, Context>> launch_;
};

// The length of the union of intervals.
double union_us(std::vector<std::pair<double, double>> v) {
  std::sort(v.begin(), v.end());
  double total = 0, start = 0, end = -1e300;
  for (const auto& [a, b] : v) {
    if (a > end) {
      if (end > start) total += end - start;
      start = a;
      end = b;
    } else {
      end = std::max(end, b);
    }
  }
  if (end > start) total += end - start;
  return total;
}

// Of the union of `a`, the time the union of `b` covers too.
double overlap_us(std::vector<std::pair<double, double>> a, const std::vector<std::pair<double, double>>& b) {
  std::vector<std::pair<double, double>> both = a;
  both.insert(both.end(), b.begin(), b.end());
  return union_us(std::move(a)) + union_us(b) - union_us(std::move(both));
}

}  // namespace

TraceSteps trace_steps(const KinetoTrace& t) {
  std::vector<size_t> spans;
  for (size_t i = 0; i < t.events.size(); ++i) {
    const KinetoEvent& e = t.events[i];
    if ((e.cat == KinetoCat::kAnnotation || e.cat == KinetoCat::kCpuOp) && is_step(t.names[e.name])) spans.push_back(i);
  }
  if (spans.empty()) {
    throw InputError(t.path, "has no ProfilerStep#N spans",
                     "a trace of training steps: torch.profiler with a schedule and prof.step() after each step");
  }
  std::sort(spans.begin(), spans.end(), [&t](size_t a, size_t b) { return t.events[a].ts_us < t.events[b].ts_us; });
  const uint32_t main_thread = t.events[spans.front()].thread;
  Sweep sweep(t, main_thread);
  sweep.run();

  TraceSteps out;
  out.steps.resize(spans.size());
  const auto step_of = [&](double ts) -> int64_t {  // the step whose span holds ts
    const auto it =
        std::upper_bound(spans.begin(), spans.end(), ts, [&t](double x, size_t s) { return x < t.events[s].ts_us; });
    if (it == spans.begin()) return -1;
    const size_t s = static_cast<size_t>(it - spans.begin()) - 1;
    return ts <= t.events[spans[s]].end_us() ? static_cast<int64_t>(s) : -1;
  };
  // Forward units and backward ops by step, in time order.
  std::vector<std::unordered_map<size_t, size_t>> unit_of(spans.size());  // outermost op -> unit
  std::vector<std::vector<size_t>> backward_ops(spans.size());
  std::vector<size_t> order(t.events.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&t](size_t a, size_t b) { return t.events[a].ts_us < t.events[b].ts_us; });
  for (size_t s = 0; s < spans.size(); ++s) out.steps[s].span = spans[s];
  std::unordered_map<int64_t, std::pair<size_t, size_t>> unit_of_sequence;  // sequence -> (step, unit)
  for (const size_t i : order) {
    const KinetoEvent& e = t.events[i];
    if (!sweep.is_span(e)) continue;
    const Context& c = sweep.span(i);
    const int64_t s = step_of(e.ts_us);
    if (s < 0) continue;
    StepUnits& step = out.steps[static_cast<size_t>(s)];
    if (e.thread == main_thread && region_of(t.names[e.name]) != Region::kNone &&
        c.region == region_of(t.names[e.name]) && c.outermost < 0) {  // an outermost region span
      (c.region == Region::kData ? step.data_loader_us : step.cpu_optimizer_us) += e.dur_us;
    }
    if (c.outermost != static_cast<int64_t>(i) || c.region != Region::kNone) continue;
    if (c.backward) {
      backward_ops[static_cast<size_t>(s)].push_back(i);
    } else if (e.thread == main_thread) {
      unit_of[static_cast<size_t>(s)][i] = step.forward.size();
      const int64_t module =
          sweep.container(c.module) ? -1 : c.module;  // ops a container runs itself join the layer before
      step.forward.push_back({e.name, i, 0, 0, 0, e.dur_us, 0, module});
      step.key += t.names[e.name] + ";";
    }
  }
  // Every op below a forward unit with a sequence number names that unit.
  for (size_t i = 0; i < t.events.size(); ++i) {
    const KinetoEvent& e = t.events[i];
    if (e.sequence == kNoId || !sweep.is_span(e)) continue;
    const Context& c = sweep.span(i);
    if (c.outermost < 0 || c.backward) continue;
    const int64_t s = step_of(t.events[static_cast<size_t>(c.outermost)].ts_us);
    if (s < 0) continue;
    const auto unit = unit_of[static_cast<size_t>(s)].find(static_cast<size_t>(c.outermost));
    if (unit != unit_of[static_cast<size_t>(s)].end())
      unit_of_sequence[e.sequence] = {static_cast<size_t>(s), unit->second};
  }
  // A backward op joins its forward unit, else the unit of the backward before it.
  std::vector<std::unordered_map<size_t, size_t>> backward_unit(spans.size());
  for (size_t s = 0; s < spans.size(); ++s) {
    StepUnits& step = out.steps[s];
    if (step.forward.empty()) continue;
    size_t last = step.forward.size() - 1;  // the backward starts at the last forward op
    for (const size_t i : backward_ops[s]) {
      const auto match = unit_of_sequence.find(sweep.span(i).first_sequence);
      if (match != unit_of_sequence.end() && match->second.first == s) {
        last = match->second.second;
      } else {
        ++step.unmatched_backward;
      }
      backward_unit[s][i] = last;
      step.forward[last].cpu_backward_us += t.events[i].dur_us;
      step.forward[last].backward_end_us = std::max(step.forward[last].backward_end_us, t.events[i].end_us());
    }
  }
  // GPU time by what launched it.
  std::vector<std::vector<std::pair<double, double>>> compute(spans.size()), comm(spans.size());
  for (size_t i = 0; i < t.events.size(); ++i) {
    const KinetoEvent& g = t.events[i];
    if (g.cat != KinetoCat::kKernel && g.cat != KinetoCat::kMemcpy && g.cat != KinetoCat::kMemset) continue;
    const auto* launch = sweep.launch(g.correlation);
    if (launch == nullptr) ++out.unlaunched_gpu_events;
    const double launched_us = launch != nullptr ? t.events[launch->first].ts_us : g.ts_us;
    const int64_t s = step_of(launched_us);
    if (s < 0) {
      ++out.outside_gpu_events;
      continue;
    }
    StepUnits& step = out.steps[static_cast<size_t>(s)];
    if (launch != nullptr && g.ts_us + kSlackUs < launched_us) ++step.early_kernels;
    if (is_nccl(t.names[g.name])) {
      comm[static_cast<size_t>(s)].push_back({g.ts_us, g.end_us()});
      if (is_all_reduce(t.names[g.name]) && g.message_elements >= 0) {
        step.all_reduce_bytes.push_back(g.message_elements *
                                        (g.message_element_bytes > 0 ? g.message_element_bytes : 4));
        step.all_reduce_launch_us.push_back(launched_us);
        step.all_reduce_kernel_us += g.dur_us;
      }
      continue;
    }
    compute[static_cast<size_t>(s)].push_back({g.ts_us, g.end_us()});
    const Context c = launch != nullptr ? launch->second : Context{};
    const auto& units = unit_of[static_cast<size_t>(s)];
    if (c.region == Region::kOptimizer) {
      step.optimizer_us += g.dur_us;
    } else if (c.outermost >= 0 && units.count(static_cast<size_t>(c.outermost)) > 0) {
      step.forward[units.at(static_cast<size_t>(c.outermost))].forward_us += g.dur_us;
    } else if (c.outermost >= 0 && backward_unit[static_cast<size_t>(s)].count(static_cast<size_t>(c.outermost)) > 0) {
      step.forward[backward_unit[static_cast<size_t>(s)].at(static_cast<size_t>(c.outermost))].backward_us += g.dur_us;
    } else {
      step.other_us += g.dur_us;
    }
  }
  for (size_t s = 0; s < spans.size(); ++s) {
    StepUnits& step = out.steps[s];
    std::vector<std::pair<double, double>> launched;  // the all-reduces in launch order
    for (size_t k = 0; k < step.all_reduce_bytes.size(); ++k) {
      launched.push_back({step.all_reduce_launch_us[k], step.all_reduce_bytes[k]});
    }
    std::sort(launched.begin(), launched.end());
    for (size_t k = 0; k < launched.size(); ++k) {
      step.all_reduce_launch_us[k] = launched[k].first;
      step.all_reduce_bytes[k] = launched[k].second;
    }
    std::vector<std::pair<double, double>> all = compute[s];
    all.insert(all.end(), comm[s].begin(), comm[s].end());
    step.gpu_busy_us = union_us(std::move(all));
    step.compute_us = union_us(compute[s]);
    step.comm_us = union_us(comm[s]);
    step.overlap_us = overlap_us(comm[s], compute[s]);
  }
  return out;
}

bool has_weights(const std::string& op) {
  for (const char* w : {"conv", "linear", "addmm", "batch_norm", "layer_norm", "group_norm", "instance_norm",
                        "embedding", "lstm", "gru", "rnn_tanh", "rnn_relu", "rms_norm"}) {
    if (op.find(w) != std::string::npos) return true;
  }
  return false;
}

double weight_bytes(const std::string& op, const std::vector<KinetoInput>& in) {
  const auto at = [&in](size_t i) { return i < in.size() ? in[i].bytes() : 0.0; };
  if (op.find("addmm") != std::string::npos) return at(0) + at(2);  // addmm(bias, input, weightᵀ)
  if (op.find("embedding") != std::string::npos) return at(0);      // embedding(weight, indices)
  if (op.find("norm") != std::string::npos) return at(1) + at(2);   // (input, weight, bias, ...)
  if (op.find("lstm") != std::string::npos || op.find("gru") != std::string::npos) {
    double sum = 0;  // (input, hx, params, ...): the params' list is not recorded by its tensors
    for (size_t i = 2; i < in.size(); ++i) sum += at(i);
    return sum;
  }
  if (has_weights(op)) return at(1) + at(2);  // conv and linear: (input, weight, bias, ...)
  return 0;
}

}  // namespace trainsim::kineto_detail

namespace trainsim {
bool op_has_weights(const std::string& op) { return kineto_detail::has_weights(op); }
}  // namespace trainsim
