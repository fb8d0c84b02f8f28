#include "load_progress.h"

#include <unistd.h>

#include <cstdio>
#include <string>

namespace slab::cli {
namespace {

constexpr auto kRedrawInterval = std::chrono::milliseconds(100);
constexpr int kBarWidth = 30;

double mib(size_t bytes) { return static_cast<double>(bytes) / (1 << 20); }

}  // namespace

LoadProgressBar::LoadProgressBar()
    : terminal_(::isatty(STDERR_FILENO) == 1), start_(std::chrono::steady_clock::now()),
      last_draw_(start_ - kRedrawInterval) {}

LoadProgressBar::~LoadProgressBar() {
  if (line_open_) std::fputc('\n', stderr);
}

api::LoadProgressCallback LoadProgressBar::callback() {
  return [this](size_t done_bytes, size_t total_bytes) { update(done_bytes, total_bytes); };
}

void LoadProgressBar::update(size_t done_bytes, size_t total_bytes) {
  if (!terminal_) return;
  const auto now = std::chrono::steady_clock::now();
  const bool complete = done_bytes >= total_bytes;
  if (!complete && now - last_draw_ < kRedrawInterval) return;
  last_draw_ = now;
  const double fraction = total_bytes ? static_cast<double>(done_bytes) / static_cast<double>(total_bytes) : 1.0;
  const int filled = static_cast<int>(fraction * kBarWidth);
  const std::string bar =
      std::string(static_cast<size_t>(filled), '#') + std::string(static_cast<size_t>(kBarWidth - filled), ' ');
  // "\033[K" clears what a longer earlier line (or a log line printed meanwhile) left behind.
  std::fprintf(stderr, "\rloading weights [%s] %3d %%  %.1f/%.1f MiB  %.1f s\033[K", bar.c_str(),
               static_cast<int>(fraction * 100), mib(done_bytes), mib(total_bytes),
               std::chrono::duration<double>(now - start_).count());
  line_open_ = !complete;
  if (complete) std::fputc('\n', stderr);
  std::fflush(stderr);
}

}  // namespace slab::cli
