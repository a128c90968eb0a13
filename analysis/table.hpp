// Text tables: an aligned table for terminals and CSV for scripts, plus the
// prediction table `trainsim predict` prints.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "sim/cost/driver.hpp"

namespace trainsim {

struct TextTable {
  std::vector<std::string> header;
  std::vector<bool> right_aligned;             // per column; numbers right-aligned
  std::vector<std::vector<std::string>> rows;
};

// Columns padded to their widest cell, two spaces apart, a rule under the header.
void print_aligned(std::ostream& out, const TextTable& table);

// RFC 4180 CSV: cells with commas, quotes or newlines are quoted.
void print_csv(std::ostream& out, const TextTable& table);

// strategy, workers, samples/s, speedup, samples and time per iteration,
// dominant cost, peak memory, staleness.
TextTable prediction_table(const PredictionSet& set);

// Every number at full precision, in base units, for scripts.
TextTable prediction_csv_table(const PredictionSet& set);

}  // namespace trainsim
