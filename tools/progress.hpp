// A one-line progress bar on stderr for long commands: drawn only when stderr
// is a terminal and the command was not given --quiet (docs/formats.md).
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace trainsim {

class ProgressBar {
 public:
  // `enabled` false draws nothing (pass !quiet; the terminal check is inside).
  ProgressBar(std::ostream& err, std::string label, bool enabled);
  ~ProgressBar();
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Redraws for `done` of `total` (at most ~20 redraws a second).
  void update(int64_t done, int64_t total);
  // Clears the line.
  void finish();

 private:
  std::ostream& err_;
  std::string label_;
  bool enabled_;
  bool drawn_ = false;
  int64_t last_draw_ns_ = 0;
};

}  // namespace trainsim
