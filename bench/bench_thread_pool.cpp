// What one parallel region costs the compute pool with no work in it, the two ways the caller
// can learn that the workers are done (PoolCompletion: per-worker slots, the shared counter),
// alternating in one run, at each thread count. A decode step runs ~130-200 regions (bench_model
// prints how many), so on many cores this is a share of every step.
//
// Three empty regions each: parallel_for over the threads; parallel_for_dynamic over 8 runs a
// thread; and a kernel-style region where every thread takes 4 runs from a work counter
// (kernels/work_split.h RunCounter, as the linears at decode do). Beside them, the limit: the
// round trip of one cache line between cpu 0's thread and each other thread (a region needs at
// least one: the job out, the arrival back), median over the threads and the farthest one.
//
// Usage: bench_thread_pool [--threads 1,2,4,...] [--rounds 5] [--regions 20000]
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "kernels/work_split.h"
#include "machine_limits.h"
#include "runtime/cpu_features.h"
#include "runtime/thread_pool.h"
#include "runtime/topology.h"

using namespace slab;

namespace {

struct Config {
  std::vector<int> threads;
  int rounds = 5;
  int regions = 20000;
};

enum class Region { static_for, dynamic_for, kernel_runs };
struct RegionKind {
  Region region;
  const char* name;
};
constexpr RegionKind kRegions[] = {{Region::static_for, "parallel_for, one task a thread"},
                                   {Region::dynamic_for, "parallel_for_dynamic, 8 runs a thread"},
                                   {Region::kernel_runs, "run_on_all + RunCounter, 4 runs a thread"}};

// Microseconds per region, `regions` of them back to back.
double time_regions(ThreadPool& pool, Region kind, int regions) {
  const int t = pool.size();
  std::vector<int> cursors(static_cast<size_t>(regions) + 1, 0);
  const double t0 = bench::now_seconds();
  for (int i = 0; i < regions; ++i) {
    switch (kind) {
      case Region::static_for: pool.parallel_for(t, [](int, int) {}); break;
      case Region::dynamic_for: pool.parallel_for_dynamic(8 * t, 1, [](int, int) {}); break;
      case Region::kernel_runs: {
        int* cursor = &cursors[static_cast<size_t>(i)];
        pool.run_on_all([cursor](int thread, int n) {
          kern::detail::RunCounter runs(cursor, thread, n, 4 * n, 1);
          while (runs.claim() >= 0) {
          }
        });
        break;
      }
    }
  }
  return (bench::now_seconds() - t0) / regions * 1e6;
}

// Round trip of one cache line between the pool's thread 0 and thread `other`, in nanoseconds:
// thread 0 writes an odd value, `other` answers with the next even one.
double round_trip_ns(ThreadPool& pool, int other) {
  struct alignas(64) Line {
    std::atomic<uint32_t> v{0};
  };
  auto line = std::make_unique<Line>();
  constexpr int kTrips = 20000;
  double ns = 0;
  std::atomic<bool> ready{false};
  pool.run_on_all([&](int thread, int) {
    if (thread == other) {
      ready.store(true, std::memory_order_release);
      for (uint32_t k = 1; k < 2 * kTrips; k += 2) {
        while (line->v.load(std::memory_order_acquire) != k) {
        }
        line->v.store(k + 1, std::memory_order_release);
      }
    } else if (thread == 0) {
      while (!ready.load(std::memory_order_acquire)) {
      }
      const double t0 = bench::now_seconds();
      for (uint32_t k = 1; k < 2 * kTrips; k += 2) {
        line->v.store(k, std::memory_order_release);
        while (line->v.load(std::memory_order_acquire) != k + 1) {
        }
      }
      ns = (bench::now_seconds() - t0) / kTrips * 1e9;
    }
  });
  return ns;
}

const char* completion_name(PoolCompletion c) { return c == PoolCompletion::slots ? "slots" : "counter"; }

}  // namespace

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a line at a time: the thread counts take a while
  Config cfg;
  const TopologyInfo topo = Topology::system().process_info();
  const int cores = std::max<int>(1, static_cast<int>(topo.cores.size()));
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--threads" && i + 1 < argc) {
      cfg.threads = bench::parse_int_list(argv[++i]);
    } else if (a == "--rounds" && i + 1 < argc) {
      cfg.rounds = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--regions" && i + 1 < argc) {
      cfg.regions = std::max(100, std::atoi(argv[++i]));
    } else {
      std::fprintf(stderr, "usage: bench_thread_pool [--threads 1,2,4,...] [--rounds 5] [--regions 20000]\n");
      return 2;
    }
  }
  if (cfg.threads.empty()) {
    for (int t = 1; t < cores; t *= 2) cfg.threads.push_back(t);
    cfg.threads.push_back(cores);
  }
  for (int t : cfg.threads) {
    if (t < 1 || t > cores) {
      std::fprintf(stderr, "bench_thread_pool: --threads %d: this process has %d cores (one pinned thread each)\n", t,
                   cores);
      return 2;
    }
  }
  std::printf("cpu:      %s\n", cpu_features().summary().c_str());
  std::printf("topology: %s\n", topo.summary().c_str());
  std::printf("%d regions per sample, %d rounds, the two completions alternating; medians [min..max] in us\n\n",
              cfg.regions, cfg.rounds);

  for (int t : cfg.threads) {
    // Both pools pinned to the same cores, the process's first t (named: a pool pins its caller,
    // so the cpuset a later pool would read is the earlier one's core 0); one runs while the
    // other's workers are parked (they park after their spin budget, ~50-100 us: the sleep
    // below covers it).
    std::vector<int> cpus;
    for (int c = 0; c < t; ++c) {
      const std::vector<int>& os = topo.cores[static_cast<size_t>(c)].os_cpus;
      cpus.insert(cpus.end(), os.begin(), os.end());
    }
    const std::string cpu_list = format_cpu_list(cpus);
    ThreadPool slots({.n_threads = t, .cpu_list = cpu_list.c_str(), .completion = PoolCompletion::slots});
    ThreadPool counter({.n_threads = t, .cpu_list = cpu_list.c_str(), .completion = PoolCompletion::counter});
    ThreadPool* pools[2] = {&slots, &counter};
    std::vector<double> trips;
    for (int other = 1; other < t; ++other) trips.push_back(round_trip_ns(slots, other));
    std::printf("threads %d", t);
    if (!trips.empty()) {
      const bench::Stat rt = bench::summarize(trips);
      std::printf(" | limit: cache-line round trip from thread 0, median %.0f ns, farthest %.0f ns", rt.median, rt.max);
    }
    std::printf("\n");
    for (const auto& [kind, name] : kRegions) {
      std::vector<double> us[2], ratio;
      for (int r = 0; r < cfg.rounds; ++r) {
        double round_us[2];
        for (int p = 0; p < 2; ++p) {
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
          (void)time_regions(*pools[p], kind, cfg.regions / 10);  // wakes and warms the pool
          round_us[p] = time_regions(*pools[p], kind, cfg.regions);
          us[p].push_back(round_us[p]);
        }
        ratio.push_back(round_us[1] / round_us[0]);
      }
      const bench::Stat s = bench::summarize(us[0]), c = bench::summarize(us[1]), q = bench::summarize(ratio);
      std::printf("  %-42s %s %.3f [%.3f..%.3f]  %s %.3f [%.3f..%.3f]  counter/slots %.2fx [%.2f..%.2f]\n", name,
                  completion_name(PoolCompletion::slots), s.median, s.min, s.max,
                  completion_name(PoolCompletion::counter), c.median, c.min, c.max, q.median, q.min, q.max);
    }
  }
  return 0;
}
