// Ranking strategies by predicted speed, the one rule `choose`, `report` and
// the page report.py draws all follow. Two predictions whose samples/s differ
// by less than kTieRelative tie: the cost models resolve no finer (docs/
// results.md, "Ranking and ties"). A tie is broken by what a user prefers: no
// stale gradients, then less memory per device, then the simpler strategy.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/cost/prediction.hpp"

namespace trainsim {

// Relative difference of samples/s, (fast − slow) / fast, below which two
// predictions tie.
inline constexpr double kTieRelative = 0.01;

// The last tie-break, simplest first: one device, then data parallelism by
// how much it adds to plain SGD, then pipelines by how much schedule and
// weight bookkeeping they add, then the schemes that change the optimizer or
// split the model's variables.
const std::vector<std::string>& simplicity_order();

// A strategy's place in simplicity_order(); ids not in it come after all.
size_t simplicity_rank(const std::string& strategy);

// Whether two samples/s figures tie: relative difference below kTieRelative.
bool samples_per_s_tie(double a, double b);

// How ties are shown and broken, for under a ranked table: "1=: ...".
std::string tie_rule_text();

// A rank as printed: "3", or "3=" when tied; "-" when excluded (rank 0).
std::string rank_text(int32_t rank, bool tied);

struct RankEntry {
  size_t index = 0;   // into the predictions ranked
  int32_t rank = 0;   // 1-based, shared by the entries of a tie; 0 when excluded
  bool tied = false;  // shares its rank with another entry
  bool feasible = true;
};

// Feasible predictions first, in tie groups by speed (a group: the fastest
// not yet placed and every other within kTieRelative of it), each group in
// the order of preference; then the excluded ones (feasible[i] false),
// smallest memory first. One entry per prediction.
std::vector<RankEntry> rank_predictions(const std::vector<Prediction>& predictions, const std::vector<bool>& feasible);

// The preference that puts `first` ahead of `second` within a tie, said for
// a user: "no stale gradients (pipesgd's are 1 iteration stale)", "less
// memory per device (8.4 GiB against dualpipe's 9.9 GiB)" or "the simpler
// strategy (before dp-overlap in the simplicity order)".
std::string tie_break_reason(const Prediction& first, const Prediction& second);

// One paragraph on the ranking's head, comparing like with like: a tie at the
// top is named as one, with what broke it; a clear winner is compared with
// the runner-up in samples/s and in time per the same number of samples (the
// winner's iteration), with the part of the breakdown the gap comes from.
// `ranked` in rank_predictions' order with its entries.
std::string explain_ranking(const std::vector<Prediction>& predictions, const std::vector<RankEntry>& ranked);

}  // namespace trainsim
