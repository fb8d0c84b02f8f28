#pragma once
// Fixed pool of worker threads, one per physical core of the instance's cpuset, each pinned to
// its core. The thread that calls parallel_for takes part as worker 0, so a pool of N threads
// owns N-1 std::threads. Dispatch is a generation counter that idle workers spin on for a bounded
// time and then park on (futex). Completion (PoolCompletion): each worker stores the generation
// it finished in a cache line of its own, and the caller reads them (spins, then parks). Work is
// split statically by parallel_for: with T threads, thread t runs the t-th of T contiguous
// chunks of near-equal size (see chunk()), in order; parallel_for_dynamic instead lets threads
// take runs of tasks from a shared counter (kernels/work_split.h says why), each thread's first
// run its own.
//
// One dispatcher at a time: concurrent parallel_for calls from different threads are serialised
// by a mutex. A parallel_for called from inside a task (nested) runs all its tasks inline on the
// calling thread, passing that thread's index. An exception thrown by a task is rethrown by
// parallel_for on the calling thread after every thread has finished (the first one wins).
#include <atomic>
#include <cstdint>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <type_traits>
#include <utility>
#include <vector>

namespace slab {

// How the caller learns that every worker has finished a region. A parallel region is ~130-200
// per decode step, so on many cores this is a share of the step: a shared counter takes one
// read-modify-write per worker on one cache line, and those run one after another (on the
// 16-core Xeon an empty region cost 2.6 µs with the counter); per-worker slots are written in
// parallel and the caller's reads of them overlap. The counter stays for A/B runs
// (bench_thread_pool).
enum class PoolCompletion { slots, counter };

struct ThreadPoolOptions {
  int n_threads = 0;  // 0: one per physical core of the cpuset
  bool pin = true;    // pin worker t to core t (only when threads <= cores)
  // Also pin the constructing thread to core 0 as worker 0. Threads it creates later inherit
  // that binding, so construct the pool on the thread that will dispatch (the engine loop). The
  // pool gives that thread its earlier cpus back when it ends (if it ends on that thread): a
  // later pool, or Topology::process_info(), would otherwise see one core.
  bool pin_caller = true;
  int spin_iterations = 1 << 14;   // pause iterations (~50-100 us) before a waiter parks
  const char* cpu_list = nullptr;  // null or "": the process's current cpuset; else e.g. "0-3,8"
  PoolCompletion completion = PoolCompletion::slots;
};

// What the pool has run since it started: parallel regions dispatched (parallel_for and
// run_on_all, nested ones not counted) and the wall time the dispatching thread spent inside
// them. A caller's wall time minus parallel_seconds is its serial share: the work that more
// cores do not shorten.
struct ThreadPoolStats {
  uint64_t regions = 0;
  // Of those, the ones the workers ran: a region of one task (or a pool of one thread) runs
  // inline on the caller, with no dispatch to wait for.
  uint64_t dispatched = 0;
  double parallel_seconds = 0;
};

class ThreadPool {
 public:
  explicit ThreadPool(const ThreadPoolOptions& options = {});
  ~ThreadPool();  // wakes and joins every worker
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return n_threads_; }
  PoolCompletion completion() const { return completion_; }
  // The OS cpus each thread is pinned to (empty vectors when unpinned); index = thread.
  const std::vector<std::vector<int>>& bindings() const { return bindings_; }

  // Runs fn(task, thread) for every task in [0, n_tasks), statically chunked over the threads.
  // fn is any callable (lambda, std::function, function pointer); it is not copied.
  template <typename F>
  void parallel_for(int n_tasks, F&& fn) {
    using Fn = std::remove_reference_t<F>;
    dispatch(
        n_tasks, [](void* ctx, int task, int thread) { (*static_cast<Fn*>(ctx))(task, thread); },
        const_cast<void*>(static_cast<const void*>(&fn)));
  }

  // Runs fn(task, thread) for every task in [0, n_tasks); threads take runs of `grain` tasks from
  // a shared counter, so a thread that runs slow for a while (a co-tenant on its core) holds the
  // region up by at most one run. For tasks that keep no per-thread state from one task to the
  // next; which thread runs a task is not fixed.
  template <typename F>
  void parallel_for_dynamic(int n_tasks, int grain, F&& fn) {
    using Fn = std::remove_reference_t<F>;
    dispatch(
        n_tasks, [](void* ctx, int task, int thread) { (*static_cast<Fn*>(ctx))(task, thread); },
        const_cast<void*>(static_cast<const void*>(&fn)), grain < 1 ? 1 : grain);
  }

  // A run length for parallel_for_dynamic over n tasks: about `runs` runs per thread (at least 1
  // task a run).
  int dynamic_grain(int n, int runs = 8) const { return n / (runs * n_threads_) > 1 ? n / (runs * n_threads_) : 1; }

  // Runs fn(thread, n_threads) once on every thread: the form the kernels take.
  template <typename F>
  void run_on_all(F&& fn) {
    const int n = n_threads_;
    parallel_for(n, [&fn, n](int task, int) { fn(task, n); });
  }

  // Readable from any thread (relaxed counters).
  ThreadPoolStats stats() const;

  // Index of the calling thread inside the pool currently dispatching on it, or -1.
  static int current_thread_index();

  // Static chunking used by parallel_for: the half-open range of `part` of `parts` over n items.
  // Sizes differ by at most one, the larger chunks first (so thread 0, the caller, always works).
  static std::pair<int, int> chunk(int n, int parts, int part) {
    const int q = n / parts, r = n % parts;
    const int lo = part * q + (part < r ? part : r);
    return {lo, lo + q + (part < r ? 1 : 0)};
  }

 private:
  using TaskFn = void (*)(void* ctx, int task, int thread);
  void dispatch(int n_tasks, TaskFn fn, void* ctx, int grain = 0);  // grain 0: static chunks
  void run_chunk(int thread);
  void worker_main(int thread);
  void arrive(int thread, uint32_t generation);  // a worker's end of a region
  void wait_for_workers(uint32_t generation);    // the caller's

  struct alignas(64) Arrival {
    std::atomic<uint32_t> generation{0};  // the last region this worker finished
  };

  // Set by the constructor, read by workers every region.
  int n_threads_ = 1;
  int spin_iterations_ = 0;
  PoolCompletion completion_ = PoolCompletion::slots;
  std::unique_ptr<Arrival[]> arrivals_;  // [n_threads]; slots only, worker 0 (the caller) unused
  std::vector<std::thread> workers_;
  std::vector<std::vector<int>> bindings_;
  // The constructing thread's cpus before the pool pinned it (empty when it did not), restored
  // by the destructor on that thread.
  std::vector<int> caller_cpus_before_;
  std::thread::id caller_;
  alignas(64) std::mutex dispatch_mutex_;

  // The job, written by the dispatcher before it bumps generation_ (release), in generation_'s
  // cache line: a worker that sees the bump has the job in the same transfer.
  alignas(64) std::atomic<uint32_t> generation_{0};  // futex word: workers wait for a change
  bool stop_ = false;
  int job_n_ = 0;
  int job_grain_ = 0;  // 0: static chunks; else runs, each thread's first its own, then from job_next_
  TaskFn job_fn_ = nullptr;
  void* job_ctx_ = nullptr;
  alignas(64) std::atomic<int> job_next_{0};
  alignas(64) std::exception_ptr error_;
  std::atomic<bool> has_error_{false};

  alignas(64) std::atomic<int> sleepers_{0};      // workers parked on generation_
  alignas(64) std::atomic<uint32_t> pending_{0};  // counter: workers yet to finish (futex word)
  alignas(64) std::atomic<int> caller_parked_{0};
  alignas(64) std::atomic<uint32_t> caller_wake_{0};  // slots: bumped to wake a parked caller (futex word)
  alignas(64) std::atomic<uint64_t> regions_{0};      // the caller's, once a region
  std::atomic<uint64_t> dispatched_{0};
  std::atomic<uint64_t> parallel_ns_{0};
};

}  // namespace slab
