#pragma once
// A progress bar for loading and packing the weights, drawn on stderr only when it is a
// terminal: one line rewritten with '\r' ("loading weights [####    ]  42 %  120.5/287.0 MiB  3.1 s"),
// at most every 100 ms, ended with a newline at 100 %. Elsewhere (logs, pipes) it draws nothing.
#include <chrono>
#include <cstddef>

#include "slabserve/options.h"

namespace slab::cli {

class LoadProgressBar {
 public:
  LoadProgressBar();
  // For LoadOptions::on_load_progress; the bar must outlive the load.
  api::LoadProgressCallback callback();
  // Ends a line left unfinished (a load that failed part way).
  ~LoadProgressBar();
  LoadProgressBar(const LoadProgressBar&) = delete;
  LoadProgressBar& operator=(const LoadProgressBar&) = delete;

 private:
  void update(size_t done_bytes, size_t total_bytes);

  bool terminal_ = false;
  bool line_open_ = false;
  std::chrono::steady_clock::time_point start_;
  std::chrono::steady_clock::time_point last_draw_;
};

}  // namespace slab::cli
