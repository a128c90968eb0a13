// Progress bar; see progress.hpp.
#include "tools/progress.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>

namespace trainsim {
namespace {

constexpr int kBarWidth = 30;
constexpr int64_t kRedrawNs = 50'000'000;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

}  // namespace

ProgressBar::ProgressBar(std::ostream& err, std::string label, bool enabled)
    : err_(err), label_(std::move(label)), enabled_(enabled && isatty(fileno(stderr)) != 0) {}

ProgressBar::~ProgressBar() { finish(); }

void ProgressBar::update(int64_t done, int64_t total) {
  if (!enabled_ || total <= 0) return;
  const int64_t t = now_ns();
  if (drawn_ && done < total && t - last_draw_ns_ < kRedrawNs) return;
  last_draw_ns_ = t;
  const auto filled = static_cast<int>(kBarWidth * done / total);
  err_ << '\r' << label_ << " [" << std::string(static_cast<size_t>(filled), '#')
       << std::string(static_cast<size_t>(kBarWidth - filled), ' ') << "] " << done << '/' << total << std::flush;
  drawn_ = true;
}

void ProgressBar::finish() {
  if (!drawn_) return;
  err_ << '\r' << std::string(label_.size() + kBarWidth + 24, ' ') << '\r' << std::flush;
  drawn_ = false;
}

}  // namespace trainsim
