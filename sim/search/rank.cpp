// Ranking with ties; see rank.hpp.
#include "sim/search/rank.hpp"

#include <algorithm>
#include <array>
#include <utility>

#include "model/units.hpp"

namespace trainsim {
namespace {

// The four parts of a breakdown with the words a user reads.
constexpr std::array<std::pair<const char*, double Breakdown::*>, 4> kParts = {{
    {"compute", &Breakdown::compute_s},
    {"exposed communication", &Breakdown::exposed_comm_s},
    {"waiting on transfers", &Breakdown::idle_transfer_s},
    {"imbalance", &Breakdown::idle_imbalance_s},
}};

// The order of preference within a tie: no staleness, less memory, simpler;
// then the faster, then by id, so the order is total.
bool preferred(const Prediction& a, const Prediction& b) {
  if ((a.staleness > 0) != (b.staleness > 0)) return a.staleness == 0;
  const double memory_a = peak_memory_bytes(a);
  const double memory_b = peak_memory_bytes(b);
  if (memory_a != memory_b) return memory_a < memory_b;
  const size_t simple_a = simplicity_rank(a.strategy);
  const size_t simple_b = simplicity_rank(b.strategy);
  if (simple_a != simple_b) return simple_a < simple_b;
  if (a.samples_per_s != b.samples_per_s) return a.samples_per_s > b.samples_per_s;
  return a.strategy < b.strategy;
}

std::string stale_text(int64_t staleness) {
  return std::to_string(staleness) + (staleness == 1 ? " iteration" : " iterations") + " stale";
}

std::string names_text(const std::vector<std::string>& names) {
  std::string text;
  for (size_t i = 0; i < names.size(); ++i) {
    text += (i == 0 ? "" : i + 1 == names.size() ? " and " : ", ") + names[i];
  }
  return text;
}

// A tie at the head of the ranking: who, at what speed, what broke it.
std::string explain_tie(const std::vector<Prediction>& predictions, const std::vector<RankEntry>& ranked,
                        size_t group) {
  std::vector<std::string> names;
  std::vector<std::string> stale;
  double low = predictions[ranked[0].index].samples_per_s;
  double high = low;
  for (size_t i = 0; i < group; ++i) {
    const Prediction& p = predictions[ranked[i].index];
    names.push_back(p.strategy);
    if (p.staleness > 0) stale.push_back(p.strategy);
    low = std::min(low, p.samples_per_s);
    high = std::max(high, p.samples_per_s);
  }
  const Prediction& first = predictions[ranked[0].index];
  const Prediction& second = predictions[ranked[1].index];
  const std::string speed =
      format_count(low) == format_count(high) ? format_count(high) : format_count(low) + " to " + format_count(high);
  std::string line = names_text(names) + " tie at " + speed + " samples/s (within " + format_percent(kTieRelative) +
                     ", the predictions' resolution); " + first.strategy + " ranks first for " +
                     tie_break_reason(first, second);
  if (!stale.empty() && second.staleness == 0) {
    line +=
        "; " + names_text(stale) + (stale.size() == 1 ? " ranks" : " rank") + " last among them for stale gradients";
  }
  return line;
}

// A clear winner against the runner-up, per the same number of samples.
std::string explain_lead(const Prediction& w, const Prediction& r) {
  const double samples = w.samples_per_iteration;
  const double scale_w = samples / w.samples_per_iteration;
  const double scale_r = samples / r.samples_per_iteration;
  const char* gap_part = kParts[0].first;
  double gap_s = -1;
  for (const auto& [label, member] : kParts) {
    const double gap = r.breakdown.*member * scale_r - w.breakdown.*member * scale_w;
    if (gap > gap_s) {
      gap_s = gap;
      gap_part = label;
    }
  }
  return w.strategy + " is fastest at " + format_count(w.samples_per_s) + " samples/s, " +
         format_percent(w.samples_per_s / r.samples_per_s - 1) + " ahead of " + r.strategy + " (" +
         format_count(r.samples_per_s) + " samples/s): per " + format_count(samples) + " samples (one iteration of " +
         w.strategy + ") it takes " + format_seconds(samples / w.samples_per_s) + " and " + r.strategy + " " +
         format_seconds(samples / r.samples_per_s) + ", most of the difference in " + gap_part + " (+" +
         format_seconds(gap_s) + ")";
}

}  // namespace

const std::vector<std::string>& simplicity_order() {
  static const std::vector<std::string> order = {"single", "dp-ring", "dp-overlap",     "dp-ps",     "gpipe",
                                                 "1f1b",   "zb-h1",   "pipedream-sync", "pipedream", "dualpipe",
                                                 "dsp",    "cgdp",    "pipesgd",        "parallax"};
  return order;
}

size_t simplicity_rank(const std::string& strategy) {
  const std::vector<std::string>& order = simplicity_order();
  return static_cast<size_t>(std::find(order.begin(), order.end(), strategy) - order.begin());
}

bool samples_per_s_tie(double a, double b) {
  const double fast = std::max(a, b);
  return fast > 0 && (fast - std::min(a, b)) / fast < kTieRelative;
}

std::string tie_rule_text() {
  std::string order;
  for (const std::string& id : simplicity_order()) order += (order.empty() ? "" : " < ") + id;
  return "=: a tie, samples/s within " + format_percent(kTieRelative) +
         " (the predictions' resolution), ordered by no stale gradients, then less memory per device, then the "
         "simpler strategy (" +
         order + ")";
}

std::string rank_text(int32_t rank, bool tied) {
  if (rank <= 0) return "-";
  return std::to_string(rank) + (tied ? "=" : "");
}

std::vector<RankEntry> rank_predictions(const std::vector<Prediction>& predictions, const std::vector<bool>& feasible) {
  std::vector<size_t> fits;
  std::vector<size_t> excluded;
  for (size_t i = 0; i < predictions.size(); ++i) (i < feasible.size() && !feasible[i] ? excluded : fits).push_back(i);
  std::stable_sort(fits.begin(), fits.end(),
                   [&](size_t a, size_t b) { return predictions[a].samples_per_s > predictions[b].samples_per_s; });
  std::vector<RankEntry> ranked;
  for (size_t start = 0; start < fits.size();) {
    size_t end = start + 1;
    const double leader = predictions[fits[start]].samples_per_s;
    while (end < fits.size() && samples_per_s_tie(leader, predictions[fits[end]].samples_per_s)) ++end;
    std::sort(fits.begin() + static_cast<std::ptrdiff_t>(start), fits.begin() + static_cast<std::ptrdiff_t>(end),
              [&](size_t a, size_t b) { return preferred(predictions[a], predictions[b]); });
    for (size_t i = start; i < end; ++i) {
      ranked.push_back({fits[i], static_cast<int32_t>(start + 1), end - start > 1, true});
    }
    start = end;
  }
  std::stable_sort(excluded.begin(), excluded.end(), [&](size_t a, size_t b) {
    return peak_memory_bytes(predictions[a]) < peak_memory_bytes(predictions[b]);
  });
  for (size_t i : excluded) ranked.push_back({i, 0, false, false});
  return ranked;
}

std::string tie_break_reason(const Prediction& first, const Prediction& second) {
  if ((first.staleness > 0) != (second.staleness > 0)) {
    return first.staleness == 0
               ? "no stale gradients (" + second.strategy + "'s are " + stale_text(second.staleness) + ")"
               : "stale gradients (" + first.strategy + "'s are " + stale_text(first.staleness) + ")";
  }
  const double memory_first = peak_memory_bytes(first);
  const double memory_second = peak_memory_bytes(second);
  if (memory_first != memory_second) {
    std::string a = format_bytes(memory_first);
    std::string b = format_bytes(memory_second);
    if (a == b) {  // apart by less than the table shows: in bytes
      a = format_number(memory_first) + " bytes";
      b = format_number(memory_second) + " bytes";
    }
    return std::string(memory_first < memory_second ? "less" : "more") + " memory per device (" + a + " against " +
           second.strategy + "'s " + b + ")";
  }
  if (simplicity_rank(first.strategy) != simplicity_rank(second.strategy)) {
    return "being the simpler strategy (" + second.strategy + " has the same staleness and memory)";
  }
  return "its speed (" + second.strategy + " is alike in staleness, memory and simplicity)";
}

std::string explain_ranking(const std::vector<Prediction>& predictions, const std::vector<RankEntry>& ranked) {
  if (ranked.empty() || !ranked.front().feasible) return "no strategy fits the device memory";
  const Prediction& w = predictions[ranked[0].index];
  if (ranked.size() < 2) return w.strategy + " at " + format_count(w.samples_per_s) + " samples/s, the only one ranked";
  if (!ranked[1].feasible) return w.strategy + " at " + format_count(w.samples_per_s) + " samples/s; nothing else fits";
  size_t group = 1;
  while (group < ranked.size() && ranked[group].feasible && ranked[group].rank == ranked[0].rank) ++group;
  if (group == 1) return explain_lead(w, predictions[ranked[1].index]);
  std::string line = explain_tie(predictions, ranked, group);
  if (group < ranked.size() && ranked[group].feasible) {
    const Prediction& next = predictions[ranked[group].index];
    line += "; next is " + next.strategy + " at " + format_count(next.samples_per_s) + " samples/s, " +
            format_percent(1 - next.samples_per_s / w.samples_per_s) + " slower than " + w.strategy;
  }
  return line;
}

}  // namespace trainsim
