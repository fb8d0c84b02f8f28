// Thread pool, topology, CPU features and aligned allocation: real behaviour, no timing.
#include <sched.h>
#include <sys/mman.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <thread>
#include <vector>

#include "affinity_guard.h"
#include "runtime/aligned_buffer.h"
#include "runtime/cpu_features.h"
#include "runtime/thread_pool.h"
#include "runtime/topology.h"

using namespace slab;
using slab::test::AffinityGuard;

TEST_CASE("cpu features detect consistently and summarise in one line", "[runtime]") {
  const CpuFeatures& f = cpu_features();
  const std::string s = f.summary();
  INFO(s);
  CHECK(!s.empty());
  CHECK(s.find('\n') == std::string::npos);
  // Implications that hold on every x86-64 that reports them.
  if (f.avx512bw || f.avx512vl || f.avx512_bf16) CHECK(f.avx512f);
  if (f.avx512f) CHECK(f.os_zmm);
  if (f.avx2) CHECK(f.os_ymm);
  if (f.has_avx512_bf16_kernels()) CHECK(f.avx512_bf16);
  CHECK(detect_cpu_features().avx512_bf16 == f.avx512_bf16);
#if defined(__GNUC__)
  __builtin_cpu_init();
  CHECK(f.avx2 == static_cast<bool>(__builtin_cpu_supports("avx2")));
  CHECK(f.avx512f == static_cast<bool>(__builtin_cpu_supports("avx512f")));
#endif
}

TEST_CASE("cpu lists parse and format", "[runtime]") {
  CHECK(parse_cpu_list("0-3,8") == std::vector<int>{0, 1, 2, 3, 8});
  CHECK(parse_cpu_list(" 5 ") == std::vector<int>{5});
  CHECK(parse_cpu_list("8,0-1,1") == std::vector<int>{0, 1, 8});
  CHECK(parse_cpu_list("0-7, 16-17") == std::vector<int>{0, 1, 2, 3, 4, 5, 6, 7, 16, 17});
  CHECK_THROWS_AS(parse_cpu_list(""), std::invalid_argument);
  CHECK_THROWS_AS(parse_cpu_list("3-1"), std::invalid_argument);
  CHECK_THROWS_AS(parse_cpu_list("a"), std::invalid_argument);
  CHECK_THROWS_AS(parse_cpu_list("1,,2"), std::invalid_argument);
  CHECK_THROWS_AS(parse_cpu_list("1,"), std::invalid_argument);
  CHECK_THROWS_AS(parse_cpu_list("-1"), std::invalid_argument);
  CHECK(format_cpu_list({0, 1, 2, 3, 8}) == "0-3,8");
  CHECK(format_cpu_list({2}) == "2");
  CHECK(format_cpu_list({}).empty());
  CHECK(format_cpu_list(parse_cpu_list("0-2,4-5,9")) == "0-2,4-5,9");
}

TEST_CASE("topology of the process cpuset", "[runtime]") {
  const TopologyInfo info = Topology::system().process_info();
  INFO(info.summary());
  REQUIRE(!info.cores.empty());
  CHECK(info.n_pus >= static_cast<int>(info.cores.size()));
  CHECK(!info.numa_nodes.empty());
  cpu_set_t mask;
  REQUIRE(sched_getaffinity(0, sizeof(mask), &mask) == 0);
  int pus = 0;
  for (const CoreInfo& core : info.cores) {
    REQUIRE(!core.os_cpus.empty());
    for (int cpu : core.os_cpus) CHECK(CPU_ISSET(cpu, &mask));
    pus += static_cast<int>(core.os_cpus.size());
  }
  CHECK(pus == info.n_pus);
  CHECK(pus == CPU_COUNT(&mask));
  // An explicit list naming the first cpu gives exactly its core.
  const int first = info.cores.front().os_cpus.front();
  const TopologyInfo one = Topology::system().info_for(std::to_string(first));
  REQUIRE(one.cores.size() == 1);
  CHECK(one.cores[0].os_cpus == std::vector<int>{first});
  CHECK_THROWS_AS(Topology::system().info_for("100000"), std::invalid_argument);
}

TEST_CASE("aligned buffers are aligned, zeroed on request and movable", "[runtime]") {
  AlignedBuffer small(100, {.zero = true});
  REQUIRE(small.data() != nullptr);
  CHECK(reinterpret_cast<uintptr_t>(small.data()) % kCacheLine == 0);
  for (size_t i = 0; i < 100; ++i) CHECK(small.as<uint8_t>()[i] == 0);
  AlignedBuffer big(kHugePage + 123, {.numa_node = Topology::system().process_info().numa_nodes[0]});
  CHECK(reinterpret_cast<uintptr_t>(big.data()) % kHugePage == 0);
  big.as<uint8_t>()[kHugePage + 122] = 7;
  AlignedBuffer moved = std::move(big);
  CHECK(big.data() == nullptr);
  CHECK(moved.size() == kHugePage + 123);
  CHECK(moved.as<uint8_t>()[kHugePage + 122] == 7);
  CHECK(aligned_alloc_bytes(0) == nullptr);
}

// Resident 4 KiB pages of [begin, begin + bytes), begin page aligned.
size_t resident_pages(const void* begin, size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  std::vector<unsigned char> pages((bytes + page - 1) / page);
  REQUIRE(mincore(const_cast<void*>(begin), bytes, pages.data()) == 0);
  size_t n = 0;
  for (const unsigned char v : pages) n += v & 1;
  return n;
}

// Huge pages cover a large buffer's whole 2 MiB pages, never the partly used last one (which
// made 6 MiB of every layer of a W4 model resident for nothing).
TEST_CASE("aligned buffers make resident only the bytes asked for", "[runtime]") {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  // 17 whole huge pages and 100 KiB of an 18th: above glibc's largest mmap threshold (32 MiB), so
  // the memory is a fresh mapping, not heap pages an earlier test already touched.
  const size_t bytes = 17 * kHugePage + 100 * 1024;
  for (const bool zero : {false, true}) {
    AlignedBuffer b(bytes, {.zero = zero});
    std::memset(b.data(), 1, bytes);
    const size_t used = (bytes + page - 1) / page * page;
    INFO("zero " << zero);
    CHECK(resident_pages(b.data(), used) == used / page);
    CHECK(resident_pages(b.as<uint8_t>() + used, 18 * kHugePage - used) == 0);
  }
}

TEST_CASE("parallel_for runs every task exactly once", "[runtime]") {
  AffinityGuard guard;
  for (int threads : {1, 2, 3, 5}) {
    ThreadPool pool({.n_threads = threads, .pin = threads <= 2});
    REQUIRE(pool.size() == threads);
    for (int n : {0, 1, 2, 3, 7, 64, 1000}) {
      std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
      std::vector<std::atomic<int>> thread_of(static_cast<size_t>(n));
      pool.parallel_for(n, [&](int task, int thread) {
        hits[static_cast<size_t>(task)].fetch_add(1);
        thread_of[static_cast<size_t>(task)].store(thread);
        CHECK(ThreadPool::current_thread_index() == thread);
      });
      for (int t = 0; t < n; ++t) {
        REQUIRE(hits[static_cast<size_t>(t)].load() == 1);
        // Static chunking: task t ran on the thread whose chunk holds it.
        const int th = thread_of[static_cast<size_t>(t)].load();
        const auto [lo, hi] = ThreadPool::chunk(n, threads, th);
        CHECK(t >= lo);
        CHECK(t < hi);
      }
    }
  }
  CHECK(ThreadPool::current_thread_index() == -1);
}

// The dynamic form: every task once, in runs of `grain` (consecutive tasks of a run on one
// thread), and a thread held up inside a task does not hold the other tasks: while thread 0 sits
// in task 0 the others take every remaining run (a static split would leave thread 0 its chunk).
TEST_CASE("parallel_for_dynamic runs every task once and routes work around a slow thread", "[runtime]") {
  AffinityGuard guard;
  for (int threads : {1, 2, 4}) {
    ThreadPool pool({.n_threads = threads, .pin = false, .pin_caller = false});
    for (int n : {0, 1, 5, 64, 1000}) {
      for (int grain : {0, 1, 3, 16}) {
        INFO("threads " << threads << " tasks " << n << " grain " << grain);
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        std::vector<std::atomic<int>> thread_of(static_cast<size_t>(n));
        pool.parallel_for_dynamic(n, grain, [&](int task, int thread) {
          hits[static_cast<size_t>(task)].fetch_add(1);
          thread_of[static_cast<size_t>(task)].store(thread);
        });
        const int run = grain < 1 ? 1 : grain;
        for (int t = 0; t < n; ++t) {
          REQUIRE(hits[static_cast<size_t>(t)].load() == 1);
          if (t % run != 0)
            CHECK(thread_of[static_cast<size_t>(t)].load() == thread_of[static_cast<size_t>(t - 1)].load());
        }
        // Each thread's first run is its own: the region's start takes nothing from the counter.
        if (n > 1) {
          for (int th = 0; th < threads && th * run < n; ++th)
            CHECK(thread_of[static_cast<size_t>(th * run)].load() == th);
        }
      }
    }
  }
  // Whichever thread takes task 0 waits there until every other task has finished (bounded):
  // with fixed chunks its chunk's other tasks could never finish, so the wait would time out.
  ThreadPool pool({.n_threads = 3, .pin = false, .pin_caller = false});
  const int n = 60;
  std::atomic<int> finished{0};
  std::atomic<bool> others_done{false};
  pool.parallel_for_dynamic(n, 1, [&](int task, int) {
    if (task == 0) {
      const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(20);
      while (finished.load() < n - 1 && std::chrono::steady_clock::now() < until) std::this_thread::yield();
      others_done = finished.load() == n - 1;
    }
    ++finished;
  });
  CHECK(finished == n);
  CHECK(others_done);
  CHECK_THROWS_AS(pool.parallel_for_dynamic(8, 2,
                                            [](int task, int) {
                                              if (task == 5) throw std::runtime_error("boom");
                                            }),
                  std::runtime_error);
  std::atomic<int> count{0};
  pool.parallel_for_dynamic(9, 2, [&](int, int) { ++count; });
  CHECK(count == 9);
}

TEST_CASE("parallel_for accepts std::function and run_on_all visits each thread", "[runtime]") {
  AffinityGuard guard;
  ThreadPool pool({.n_threads = 2});
  std::atomic<int> sum{0};
  const std::function<void(int, int)> fn = [&](int task, int) { sum += task; };
  pool.parallel_for(10, fn);
  CHECK(sum == 45);
  std::vector<int> seen(2, 0);
  pool.run_on_all([&](int thread, int n) {
    CHECK(n == 2);
    seen[static_cast<size_t>(thread)] += 1;
  });
  CHECK(seen == std::vector<int>{1, 1});
}

TEST_CASE("workers are pinned to distinct cores", "[runtime]") {
  AffinityGuard guard;
  const int cores = static_cast<int>(Topology::system().process_info().cores.size());
  ThreadPool pool;
  REQUIRE(pool.size() == cores);
  std::vector<std::vector<int>> observed(static_cast<size_t>(cores));
  pool.run_on_all([&](int thread, int) {
    cpu_set_t mask;
    sched_getaffinity(0, sizeof(mask), &mask);
    for (int c = 0; c < CPU_SETSIZE; ++c) {
      if (CPU_ISSET(c, &mask)) observed[static_cast<size_t>(thread)].push_back(c);
    }
  });
  for (int t = 0; t < cores; ++t) {
    CHECK(observed[static_cast<size_t>(t)] == pool.bindings()[static_cast<size_t>(t)]);
  }
}

TEST_CASE("a pool gives its constructing thread the cpus it had when the pool ends", "[runtime]") {
  const AffinityGuard guard;
  guard.widen();
  const Topology& topo = Topology::system();
  const std::vector<int> before = topo.current_thread_cpus();
  if (topo.process_info().cores.size() < 2) {
    WARN("skipped: one core in this process's cpuset, so pinning the caller changes nothing");
    return;
  }
  {
    ThreadPool pool(ThreadPoolOptions{.n_threads = 2});
    REQUIRE(!pool.bindings()[0].empty());
    CHECK(topo.current_thread_cpus() == pool.bindings()[0]);
  }
  CHECK(topo.current_thread_cpus() == before);
  CHECK(topo.process_info().cores.size() >= 2);
}

TEST_CASE("nested parallel_for runs inline on the calling thread", "[runtime]") {
  AffinityGuard guard;
  ThreadPool pool({.n_threads = 2, .pin = false});
  std::vector<std::atomic<int>> hits(40);
  pool.parallel_for(4, [&](int outer, int thread) {
    pool.parallel_for(10, [&](int inner, int inner_thread) {
      CHECK(inner_thread == thread);
      hits[static_cast<size_t>(outer * 10 + inner)].fetch_add(1);
    });
  });
  for (auto& h : hits) CHECK(h.load() == 1);
}

TEST_CASE("exceptions in tasks reach the caller and the pool stays usable", "[runtime]") {
  AffinityGuard guard;
  const PoolCompletion completion = GENERATE(PoolCompletion::slots, PoolCompletion::counter);
  ThreadPool pool({.n_threads = 2, .pin = false, .completion = completion});
  CHECK_THROWS_AS(pool.parallel_for(8,
                                    [](int task, int) {
                                      if (task == 6) throw std::runtime_error("boom");
                                    }),
                  std::runtime_error);
  std::atomic<int> count{0};
  pool.parallel_for(8, [&](int, int) { ++count; });
  CHECK(count == 8);
}

TEST_CASE("pool stats count each parallel region once and its wall time", "[runtime]") {
  AffinityGuard guard;
  ThreadPool pool({.n_threads = 2, .pin = false});
  CHECK(pool.stats().regions == 0);
  CHECK(pool.stats().parallel_seconds == 0.0);
  // Three regions (one of a single task, one with nested regions, one that throws); the nested
  // ones run inline and are not regions of their own.
  pool.parallel_for(1, [](int, int) {});
  pool.parallel_for(4, [&](int, int) {
    pool.parallel_for(3, [](int, int) {});
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  });
  CHECK_THROWS(pool.run_on_all([](int, int) { throw std::runtime_error("boom"); }));
  const ThreadPoolStats s = pool.stats();
  CHECK(s.regions == 3);
  CHECK(s.dispatched == 2);  // the single task ran inline
  // Four sleeps of 10 ms over two threads: at least 20 ms inside the regions.
  CHECK(s.parallel_seconds >= 0.02);
  CHECK(s.parallel_seconds < 5.0);
}

// Both completion forms (PoolCompletion): every region's results are visible to the caller when
// it returns, with workers and caller spinning, and with both parking every time. Four threads
// (unpinned: more than this machine may have) so that the caller waits on several workers.
TEST_CASE("100k dispatches give correct results and parking and waking", "[runtime]") {
  AffinityGuard guard;
  for (const PoolCompletion completion : {PoolCompletion::slots, PoolCompletion::counter}) {
    for (const int threads : {2, 4}) {
      for (int spin : {1 << 14, 1}) {  // spinning workers, then workers that park every time
        INFO("completion " << (completion == PoolCompletion::slots ? "slots" : "counter") << " threads " << threads
                           << " spin " << spin);
        ThreadPool pool({.n_threads = threads, .pin = false, .spin_iterations = spin, .completion = completion});
        CHECK(pool.completion() == completion);
        // A futex wake costs ~50 us here; four threads on two cores wait for the OS to run them.
        const int rounds = threads == 2 ? (spin == 1 ? 3000 : 100000) : 1000;
        std::vector<int64_t> partial(static_cast<size_t>(threads) * 8, 0);  // one cache line per thread
        int64_t expect = 0;
        int wrong = 0;  // regions whose sums the caller did not see complete on return
        for (int r = 0; r < rounds; ++r) {
          const int n = 1 + r % (threads + 3);
          if (r % 2) {
            pool.parallel_for(n, [&](int task, int thread) { partial[static_cast<size_t>(thread) * 8] += task + r; });
          } else {
            pool.parallel_for_dynamic(
                n, 1 + r % 3, [&](int task, int thread) { partial[static_cast<size_t>(thread) * 8] += task + r; });
          }
          for (int t = 0; t < n; ++t) expect += t + r;
          int64_t got = 0;
          for (int t = 0; t < threads; ++t) got += partial[static_cast<size_t>(t) * 8];
          wrong += got != expect;
        }
        CHECK(wrong == 0);
      }
    }
  }
}

TEST_CASE("pools construct and destroy cleanly, idle or busy", "[runtime]") {
  AffinityGuard guard;
  for (int i = 0; i < 50; ++i) {
    ThreadPool pool({.n_threads = 3,
                     .pin = false,
                     .spin_iterations = i % 2 ? 1 : 1000,
                     .completion = i % 4 < 2 ? PoolCompletion::slots : PoolCompletion::counter});
    if (i % 3 == 0) {
      std::atomic<int> c{0};
      pool.parallel_for(3, [&](int, int) { ++c; });
      CHECK(c == 3);
    }
  }
}
