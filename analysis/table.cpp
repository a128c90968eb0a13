// Aligned and CSV tables; the prediction tables of `trainsim predict`.
#include "analysis/table.hpp"

#include <algorithm>
#include <cstdio>

#include "model/units.hpp"

namespace trainsim {
namespace {

std::string csv_cell(const std::string& cell) {
  if (cell.find_first_of(",\"\n") == std::string::npos) return cell;
  std::string quoted = "\"";
  for (char c : cell) {
    if (c == '"') quoted += '"';
    quoted += c;
  }
  return quoted + "\"";
}

const char* dominant_label(const std::string& part) {
  if (part == "exposed_comm") return "communication";
  if (part == "idle_transfer") return "waiting on transfers";
  if (part == "idle_imbalance") return "imbalance";
  return "compute";
}

}  // namespace

void print_aligned(std::ostream& out, const TextTable& table) {
  std::vector<size_t> width(table.header.size(), 0);
  for (size_t c = 0; c < table.header.size(); ++c) width[c] = table.header[c].size();
  for (const auto& row : table.rows) {
    for (size_t c = 0; c < row.size() && c < width.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  auto print_row = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t c = 0; c < width.size(); ++c) {
      const std::string cell = c < row.size() ? row[c] : "";
      const std::string pad(width[c] - cell.size(), ' ');
      const bool right = c < table.right_aligned.size() && table.right_aligned[c];
      line += (c ? "  " : "") + (right ? pad + cell : cell + pad);
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out << line << "\n";
  };
  print_row(table.header);
  size_t total = 0;
  for (size_t w : width) total += w;
  out << std::string(total + 2 * (width.empty() ? 0 : width.size() - 1), '-') << "\n";
  for (const auto& row : table.rows) print_row(row);
}

void print_csv(std::ostream& out, const TextTable& table) {
  auto print_row = [&](const std::vector<std::string>& row) {
    for (size_t c = 0; c < row.size(); ++c) out << (c ? "," : "") << csv_cell(row[c]);
    out << "\n";
  };
  print_row(table.header);
  for (const auto& row : table.rows) print_row(row);
}

TextTable prediction_table(const PredictionSet& set) {
  // A method column only when simulated results are present.
  const bool mixed = std::any_of(set.results.begin(), set.results.end(),
                                 [](const Prediction& p) { return p.method != "analytic"; });
  TextTable t;
  // An iteration is a global step for data parallelism but one mini-batch per
  // replica for pipelines: its samples are shown beside its time.
  t.header = {"strategy", "workers", "samples/s", "speedup", "samples/iter", "time/iter", "dominant cost",
              "memory/device", "staleness"};
  t.right_aligned = {false, true, true, true, true, true, false, true, true};
  if (mixed) {
    t.header.insert(t.header.begin() + 1, "method");
    t.right_aligned.insert(t.right_aligned.begin() + 1, false);
  }
  for (const Prediction& p : set.results) {
    const double peak = peak_memory_bytes(p);
    const bool fits = peak <= set.device_memory_bytes;
    std::vector<std::string> row = {p.strategy, std::to_string(p.workers), format_count(p.samples_per_s),
                                    format_ratio(p.speedup_vs_single), format_count(p.samples_per_iteration),
                                    format_seconds(p.iteration_s), dominant_label(dominant_cost(p.breakdown)),
                                    format_bytes(peak) + (fits ? "" : " (OOM)"), std::to_string(p.staleness)};
    if (mixed) row.insert(row.begin() + 1, p.method);
    t.rows.push_back(std::move(row));
  }
  return t;
}

TextTable prediction_csv_table(const PredictionSet& set) {
  TextTable t;
  t.header = {"model", "cluster", "batch_size", "strategy", "method", "workers", "samples_per_iteration",
              "iteration_s", "samples_per_s",
              "speedup_vs_single", "compute_s", "exposed_comm_s", "idle_transfer_s", "idle_imbalance_s",
              "dominant", "peak_memory_bytes", "fits_memory", "staleness", "config"};
  for (const Prediction& p : set.results) {
    const double peak = peak_memory_bytes(p);
    t.rows.push_back({set.model, set.cluster, std::to_string(set.batch_size), p.strategy, p.method,
                      std::to_string(p.workers), format_number(p.samples_per_iteration),
                      format_number(p.iteration_s), format_number(p.samples_per_s),
                      format_number(p.speedup_vs_single), format_number(p.breakdown.compute_s),
                      format_number(p.breakdown.exposed_comm_s), format_number(p.breakdown.idle_transfer_s),
                      format_number(p.breakdown.idle_imbalance_s), dominant_cost(p.breakdown),
                      format_number(peak), peak <= set.device_memory_bytes ? "true" : "false",
                      std::to_string(p.staleness), p.config.dump()});
  }
  return t;
}

}  // namespace trainsim
