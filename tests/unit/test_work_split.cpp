// How kernels deal tasks to threads (kernels/work_split.h): every unit exactly once, in each
// thread's order, and the task announced by TaskStream::next() is the one the thread runs next;
// tasks of one unit (the BF16 linears) and runs of several (quantized decode).
#include <catch2/catch.hpp>

#include <algorithm>
#include <random>
#include <thread>
#include <vector>

#include "kernels/work_split.h"

using slab::kern::detail::chunk;
using slab::kern::detail::TaskStream;

namespace {

// One thread's walk over its stream: asks next() (sometimes twice, sometimes not at all) before
// advancing, and checks that the announced task is the one it gets. Returns the units of its
// tasks in order, and counts tasks longer than `run` or empty as mismatches.
std::vector<int> walk(TaskStream& s, std::mt19937& rng, int run, int* mismatches) {
  std::vector<int> seen;
  for (int task = s.current(); task >= 0;) {
    const int end = s.end(task);
    if (end <= task || end - task > run) ++*mismatches;
    for (int u = task; u < end; ++u) seen.push_back(u);
    const int ask = static_cast<int>(rng() % 3);  // 0: never ask, 1: once, 2: twice
    int announced = -2;
    for (int i = 0; i < ask; ++i) {
      const int n = s.next();
      if (announced != -2 && n != announced) ++*mismatches;
      announced = n;
    }
    task = s.advance();
    if (announced != -2 && task != announced) ++*mismatches;
  }
  return seen;
}

}  // namespace

TEST_CASE("TaskStream without a counter walks the thread's static share", "[kernels]") {
  std::mt19937 rng(5);
  for (const int run : {1, 3, 8}) {
    for (const int units : {0, 1, 7, 10, 64}) {
      for (const int threads : {1, 3, 8}) {
        for (int t = 0; t < threads; ++t) {
          INFO("run " << run << " units " << units << " threads " << threads << " thread " << t);
          TaskStream s(nullptr, t, threads, units, run);
          int mismatches = 0;
          const std::vector<int> seen = walk(s, rng, run, &mismatches);
          const auto r = chunk(units, threads, t);
          std::vector<int> want;
          for (int u = r.lo; u < r.hi; ++u) want.push_back(u);
          CHECK(seen == want);
          CHECK(mismatches == 0);
          CHECK(s.next() == -1);
        }
      }
    }
  }
}

TEST_CASE("TaskStream on a shared counter hands out every task once", "[kernels]") {
  for (const int run : {1, 8}) {
    for (const int units : {0, 1, 5, 97, 1000}) {
      for (const int threads : {1, 2, 4}) {
        INFO("run " << run << " units " << units << " threads " << threads);
        int cursor = 0;
        std::vector<std::vector<int>> seen(threads);
        std::vector<int> mismatches(threads, 0);
        std::vector<std::thread> workers;
        for (int t = 0; t < threads; ++t) {
          workers.emplace_back([&, t] {
            std::mt19937 rng(100 + t);
            TaskStream s(&cursor, t, threads, units, run);
            seen[t] = walk(s, rng, run, &mismatches[t]);
          });
        }
        for (auto& w : workers) w.join();
        std::vector<int> all;
        for (int t = 0; t < threads; ++t) {
          CHECK(mismatches[t] == 0);
          CHECK(std::is_sorted(seen[t].begin(), seen[t].end()));  // claims only move forward
          all.insert(all.end(), seen[t].begin(), seen[t].end());
        }
        std::sort(all.begin(), all.end());
        std::vector<int> want(units);
        for (int u = 0; u < units; ++u) want[u] = u;
        CHECK(all == want);
      }
    }
  }
}

// A region's start: every thread's first run is its own (thread t starts at t · run) without the
// counter, and the counter deals what comes after the first n_threads runs. Walked one thread
// after another: thread 0 empties the counter, and the later threads still get exactly their
// first runs; for_each_share deals the same ranges.
TEST_CASE("under a counter each thread's first run is its own", "[kernels]") {
  std::mt19937 rng(9);
  const int threads = 3, units = 20, run = 2;
  int cursor = 0, for_each_cursor = 0;
  std::vector<std::vector<int>> want = {{0, 1, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19}, {2, 3}, {4, 5}};
  for (int t = 0; t < threads; ++t) {
    INFO("thread " << t);
    TaskStream s(&cursor, t, threads, units, run);
    int mismatches = 0;
    CHECK(walk(s, rng, run, &mismatches) == want[t]);
    CHECK(mismatches == 0);
    std::vector<int> ranges;
    slab::kern::detail::for_each_share(&for_each_cursor, t, threads, units, run, [&](int lo, int hi) {
      for (int u = lo; u < hi; ++u) ranges.push_back(u);
    });
    CHECK(ranges == want[t]);
  }
  // More threads than runs: the ones past the end get nothing, and take nothing from the counter.
  int few = 0;
  for (int t = 0; t < 8; ++t) {
    TaskStream s(&few, t, 8, 5, 2);
    CHECK(s.current() == (t < 3 ? 2 * t : -1));
  }
  CHECK(few == 0);
}
