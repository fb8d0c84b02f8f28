#include "runtime/thread_pool.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <stdexcept>

#include "runtime/topology.h"

namespace slab {
namespace {

thread_local const ThreadPool* tls_pool = nullptr;
thread_local int tls_thread = -1;

void futex_wait(std::atomic<uint32_t>* word, uint32_t expected) {
  // Returns at once (EAGAIN) when *word != expected; spurious wake-ups are re-checked by callers.
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT_PRIVATE, expected, nullptr, nullptr, 0);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE_PRIVATE, INT_MAX, nullptr, nullptr, 0);
}

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// Marks the current thread as thread `index` of `pool` for the lifetime of the guard.
// Counts a parallel region and adds its wall time, however it ends (an exception included).
class RegionTimer {
 public:
  RegionTimer(std::atomic<uint64_t>& regions, std::atomic<uint64_t>& ns)
      : regions_(regions), ns_(ns), start_(std::chrono::steady_clock::now()) {}
  ~RegionTimer() {
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_);
    regions_.fetch_add(1, std::memory_order_relaxed);
    ns_.fetch_add(static_cast<uint64_t>(ns.count()), std::memory_order_relaxed);
  }
  RegionTimer(const RegionTimer&) = delete;
  RegionTimer& operator=(const RegionTimer&) = delete;

 private:
  std::atomic<uint64_t>& regions_;
  std::atomic<uint64_t>& ns_;
  std::chrono::steady_clock::time_point start_;
};

struct ThreadMark {
  const ThreadPool* prev_pool;
  int prev_thread;
  ThreadMark(const ThreadPool* pool, int index) : prev_pool(tls_pool), prev_thread(tls_thread) {
    tls_pool = pool;
    tls_thread = index;
  }
  ~ThreadMark() {
    tls_pool = prev_pool;
    tls_thread = prev_thread;
  }
  ThreadMark(const ThreadMark&) = delete;
  ThreadMark& operator=(const ThreadMark&) = delete;
};

}  // namespace

static_assert(std::atomic<uint32_t>::is_always_lock_free && sizeof(std::atomic<uint32_t>) == 4,
              "futex needs a plain 32-bit word");

int ThreadPool::current_thread_index() { return tls_thread; }

ThreadPool::ThreadPool(const ThreadPoolOptions& options)
    : spin_iterations_(options.spin_iterations), completion_(options.completion) {
  const Topology& topo = Topology::system();
  const TopologyInfo info =
      (!options.cpu_list || !*options.cpu_list) ? topo.process_info() : topo.info_for(options.cpu_list);
  const int n_cores = static_cast<int>(info.cores.size());
  n_threads_ = options.n_threads > 0 ? options.n_threads : (n_cores > 0 ? n_cores : 1);
  const bool pin = options.pin && n_threads_ <= n_cores;
  bindings_.assign(static_cast<size_t>(n_threads_), {});
  if (pin) {
    for (int t = 0; t < n_threads_; ++t) bindings_[static_cast<size_t>(t)] = info.cores[static_cast<size_t>(t)].os_cpus;
  }
  if (completion_ == PoolCompletion::slots) arrivals_ = std::make_unique<Arrival[]>(static_cast<size_t>(n_threads_));
  workers_.reserve(static_cast<size_t>(n_threads_ - 1));
  for (int t = 1; t < n_threads_; ++t) {
    workers_.emplace_back([this, t] { worker_main(t); });
  }
  if (pin && options.pin_caller) {
    caller_cpus_before_ = topo.current_thread_cpus();
    caller_ = std::this_thread::get_id();
    if (!topo.bind_current_thread(bindings_[0])) caller_cpus_before_.clear();
  } else {
    bindings_[0].clear();
  }
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(dispatch_mutex_);
    stop_ = true;
    generation_.fetch_add(1, std::memory_order_seq_cst);
    futex_wake_all(&generation_);
  }
  for (auto& w : workers_) w.join();
  if (!caller_cpus_before_.empty() && std::this_thread::get_id() == caller_) {
    (void)Topology::system().bind_current_thread(caller_cpus_before_);
  }
}

void ThreadPool::worker_main(int thread) {
  if (!bindings_[static_cast<size_t>(thread)].empty()) {
    (void)Topology::system().bind_current_thread(bindings_[static_cast<size_t>(thread)]);
  }
  ThreadMark mark(this, thread);
  uint32_t seen = 0;
  for (;;) {
    uint32_t g = generation_.load(std::memory_order_acquire);
    int spins = 0;
    while (g == seen) {
      if (++spins < spin_iterations_) {
        cpu_relax();
      } else {
        // Park. The seq_cst increment of sleepers_ pairs with the dispatcher's seq_cst bump of
        // generation_ then load of sleepers_: one of the two sees the other.
        sleepers_.fetch_add(1, std::memory_order_seq_cst);
        if (generation_.load(std::memory_order_seq_cst) == seen) futex_wait(&generation_, seen);
        sleepers_.fetch_sub(1, std::memory_order_relaxed);
        spins = 0;
      }
      g = generation_.load(std::memory_order_acquire);
    }
    seen = g;
    if (stop_) return;
    run_chunk(thread);
    arrive(thread, g);
  }
}

// The parking handshake (both forms): the worker's seq_cst store (or decrement) then load of
// caller_parked_, against the caller's seq_cst store of caller_parked_ then re-check of the
// worker's word: one of the two sees the other, so a parked caller is always woken.
void ThreadPool::arrive(int thread, uint32_t generation) {
  if (completion_ == PoolCompletion::counter) {
    if (pending_.fetch_sub(1, std::memory_order_seq_cst) == 1 && caller_parked_.load(std::memory_order_seq_cst) != 0) {
      futex_wake_all(&pending_);
    }
    return;
  }
  arrivals_[static_cast<size_t>(thread)].generation.store(generation, std::memory_order_seq_cst);
  if (caller_parked_.load(std::memory_order_seq_cst) != 0) {
    caller_wake_.fetch_add(1, std::memory_order_seq_cst);
    futex_wake_all(&caller_wake_);
  }
}

void ThreadPool::wait_for_workers(uint32_t generation) {
  int spins = 0;
  auto spin_or_park = [&](auto done, std::atomic<uint32_t>* word) {
    // Returns once done() holds: pause for the pool's spin budget (shared by every wait of the
    // region), then park on the futex word, which arrive() bumps or zeroes.
    while (!done(std::memory_order_acquire)) {
      if (++spins < spin_iterations_) {
        cpu_relax();
        continue;
      }
      caller_parked_.store(1, std::memory_order_seq_cst);
      const uint32_t seen = word->load(std::memory_order_seq_cst);
      if (!done(std::memory_order_seq_cst)) futex_wait(word, seen);
      caller_parked_.store(0, std::memory_order_relaxed);
      spins = 0;
    }
  };
  if (completion_ == PoolCompletion::counter) {
    spin_or_park([this](std::memory_order o) { return pending_.load(o) == 0; }, &pending_);
    return;
  }
  for (int t = 1; t < n_threads_; ++t) {
    const std::atomic<uint32_t>& slot = arrivals_[static_cast<size_t>(t)].generation;
    spin_or_park([&slot, generation](std::memory_order o) { return slot.load(o) == generation; }, &caller_wake_);
  }
}

void ThreadPool::run_chunk(int thread) {
  try {
    if (job_grain_ > 0) {
      // Runs of job_grain_ tasks: this thread's first one is its own, the rest come from the
      // counter past the first n_threads_ (kernels/work_split.h, RunCounter, says why).
      const int64_t grain = job_grain_, dealt_from = grain * n_threads_;
      for (int64_t lo = grain * thread; lo < job_n_;
           lo = dealt_from + job_next_.fetch_add(job_grain_, std::memory_order_relaxed)) {
        const int hi = static_cast<int>(std::min<int64_t>(job_n_, lo + grain));
        for (int task = static_cast<int>(lo); task < hi; ++task) job_fn_(job_ctx_, task, thread);
      }
      return;
    }
    const auto [lo, hi] = chunk(job_n_, n_threads_, thread);
    for (int task = lo; task < hi; ++task) job_fn_(job_ctx_, task, thread);
  } catch (...) {
    bool expected = false;
    if (has_error_.compare_exchange_strong(expected, true)) error_ = std::current_exception();
  }
}

ThreadPoolStats ThreadPool::stats() const {
  return {regions_.load(std::memory_order_relaxed), dispatched_.load(std::memory_order_relaxed),
          1e-9 * static_cast<double>(parallel_ns_.load(std::memory_order_relaxed))};
}

void ThreadPool::dispatch(int n_tasks, TaskFn fn, void* ctx, int grain) {
  if (n_tasks <= 0) return;
  if (tls_pool == this) {  // nested call from one of our tasks: run inline
    const int thread = tls_thread;
    for (int task = 0; task < n_tasks; ++task) fn(ctx, task, thread);
    return;
  }
  std::lock_guard<std::mutex> lock(dispatch_mutex_);
  ThreadMark mark(this, 0);
  RegionTimer timer(regions_, parallel_ns_);
  if (n_threads_ == 1 || n_tasks == 1) {
    for (int task = 0; task < n_tasks; ++task) fn(ctx, task, 0);
    return;
  }
  dispatched_.fetch_add(1, std::memory_order_relaxed);
  job_fn_ = fn;
  job_ctx_ = ctx;
  job_n_ = n_tasks;
  job_grain_ = grain;
  job_next_.store(0, std::memory_order_relaxed);  // published with the job by the bump below
  has_error_.store(false, std::memory_order_relaxed);
  error_ = nullptr;
  pending_.store(static_cast<uint32_t>(n_threads_ - 1), std::memory_order_relaxed);
  // Publishes the job (release); the region's generation is what workers then arrive with.
  const uint32_t generation = generation_.fetch_add(1, std::memory_order_seq_cst) + 1;
  if (sleepers_.load(std::memory_order_seq_cst) > 0) futex_wake_all(&generation_);

  run_chunk(0);
  wait_for_workers(generation);
  if (has_error_.load(std::memory_order_acquire)) {
    std::exception_ptr e = std::exchange(error_, nullptr);
    std::rethrow_exception(e);
  }
}

}  // namespace slab
