// --threads, --cpuset and --numa-node on the real binary: the pool is placed as asked and the
// start-up log says so; bad values stop the process at once (exit 2) naming the flag, whether
// they come from the command line or a --config file.
#include <catch2/catch.hpp>

#include <sched.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

#include "integration/server_process.h"
#include "runtime/cpu_features.h"
#include "runtime/file_io.h"
#include "test_paths.h"

using Catch::Matchers::Contains;
using slab::test::ServerProcess;

namespace {

std::filesystem::path temp_path(const std::string& name) {
  return std::filesystem::temp_directory_path() / ("slab-placement-" + std::to_string(::getpid()) + "-" + name);
}

// The first cpu this process may run on (cpu 0 on most machines, not in every container).
int first_allowed_cpu() {
  cpu_set_t set;
  CPU_ZERO(&set);
  REQUIRE(::sched_getaffinity(0, sizeof set, &set) == 0);
  for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu) {
    if (CPU_ISSET(cpu, &set)) return cpu;
  }
  FAIL("no allowed cpu");
  return -1;
}

// Runs `serve` with the arguments, expecting it to refuse them before serving; returns its log.
std::string refused_log(std::vector<std::string> args, int expected_exit = 2) {
  const auto log = temp_path("refused.log");
  ServerProcess server(std::move(args), log.string());
  // Fails fast: checked before the model loads and before the port is bound.
  CHECK(server.wait_exit(std::chrono::seconds(15)) == expected_exit);
  const std::string text = slab::read_file(log);
  std::filesystem::remove(log);
  return text;
}

}  // namespace

TEST_CASE("serve --threads 1 --cpuset CPU serves with one pool thread pinned to that cpu", "[server][placement]") {
  const std::string model = slab::test::stories260k_or_skip();
  if (model.empty()) return;
  const std::string cpu = std::to_string(first_allowed_cpu());
  const auto log = temp_path("pinned.log");
  ServerProcess server({"--model", model, "--threads", "1", "--cpuset", cpu, "--kv-cache-tokens", "4096"},
                       log.string());
  REQUIRE(server.wait_ready());
  auto c = server.client();
  auto res = c.Post("/v1/completions", R"({"prompt": "Once", "max_tokens": 4, "temperature": 0})", "application/json");
  REQUIRE(res);
  CHECK(res->status == 200);
  CHECK(server.terminate() == 0);
  const std::string text = slab::read_file(log);
  INFO(text);
  CHECK_THAT(text, Contains("placement: 1 thread pinned to cpu " + cpu + ";"));
  CHECK_THAT(text, Contains("memory not bound to a NUMA node"));
  CHECK_THAT(text, Contains("weights "));
  // Not a terminal: no progress bar drawn into the log.
  CHECK_THAT(text, !Contains("loading weights ["));
  std::filesystem::remove(log);
}

// The start-up log names the kernels ("bf16 avx512_bf16 + amx_bf16 (M >= 9, attention) kernels" where the
// tiles run): --no-amx, given on the command line or as `no-amx = true` in the --config file,
// takes them out. On a CPU without AMX the flag is accepted and changes nothing.
TEST_CASE("serve --no-amx, on the command line or in the --config file, keeps the linears off the AMX tiles",
          "[server][placement]") {
  const std::string model = slab::test::stories260k_or_skip();
  if (model.empty()) return;
  const auto config = temp_path("no-amx.toml");
  std::ofstream(config) << "[serve]\nmodel = \"" << model << "\"\nno-amx = true\n";
  const auto startup_log = [&](std::vector<std::string> args) {
    const auto log = temp_path("amx.log");
    args.insert(args.end(), {"--threads", "1", "--kv-cache-tokens", "4096"});
    {
      ServerProcess server(std::move(args), log.string());
      REQUIRE(server.wait_ready());
      CHECK(server.terminate() == 0);
    }
    std::string text = slab::read_file(log);
    std::filesystem::remove(log);
    return text;
  };
  for (const auto& args : {std::vector<std::string>{"--model", model, "--no-amx"},
                           std::vector<std::string>{"--config", config.string()}}) {
    const std::string text = startup_log(args);
    INFO(text);
    CHECK_THAT(text, Contains(" kernels, 1 thread"));
    CHECK_THAT(text, !Contains("amx_bf16"));
  }
  if (slab::amx_bf16_usable()) {
    CHECK_THAT(startup_log({"--model", model}), Contains("amx_bf16"));
  } else {
    WARN("no AMX tiles on this CPU: --no-amx accepted, its effect not observable here");
  }
  std::filesystem::remove(config);
}

TEST_CASE("serve refuses a cpuset outside the process's cpus, an unknown NUMA node and bad thread counts",
          "[server][placement]") {
  const std::string model = slab::test::stories260k_or_skip();
  if (model.empty()) return;
  // Far beyond this machine's cpus (99-100 on anything smaller than 100 cpus).
  const std::string outside = std::thread::hardware_concurrency() < 99 ? "99-100" : "100000-100001";
  CHECK_THAT(refused_log({"--model", model, "--cpuset", outside}), Contains("--cpuset " + outside + ": "));
  CHECK_THAT(refused_log({"--model", model, "--cpuset", "0-"}), Contains("--cpuset 0-: not a cpu list"));
  CHECK_THAT(refused_log({"--model", model, "--numa-node", "7"}), Contains("--numa-node 7: no such NUMA node"));
  CHECK_THAT(refused_log({"--model", model, "--threads", "-1"}), Contains("--threads -1: "));
  CHECK_THAT(refused_log({"--model", model, "--threads", "100000"}), Contains("--threads 100000: only "));
}

TEST_CASE("placement options come from the --config file and --threads on the command line wins",
          "[server][placement]") {
  const std::string model = slab::test::stories260k_or_skip();
  if (model.empty()) return;
  const std::string cpu = std::to_string(first_allowed_cpu());
  const auto config = temp_path("serve.toml");
  // threads = 2 on a one-cpu cpuset would be refused: serving proves the flag won.
  std::ofstream(config) << "[serve]\nmodel = \"" << model << "\"\ncpuset = \"" << cpu << "\"\nthreads = 2\n";
  const auto log = temp_path("config.log");
  {
    ServerProcess server({"--config", config.string(), "--threads", "1", "--kv-cache-tokens", "4096"}, log.string());
    REQUIRE(server.wait_ready());
    CHECK(server.terminate() == 0);
  }
  CHECK_THAT(slab::read_file(log), Contains("placement: 1 thread pinned to cpu " + cpu + ";"));
  // Without the flag the file's threads = 2 applies, and is refused against its one-cpu cpuset.
  CHECK_THAT(refused_log({"--config", config.string()}),
             Contains("--threads 2: only 1 core(s) selected (cpus " + cpu + ")"));
  std::ofstream(config) << "[serve]\nmodel = \"" << model << "\"\nnuma-node = 7\n";
  CHECK_THAT(refused_log({"--config", config.string()}), Contains("--numa-node 7: "));
  std::filesystem::remove(config);
  std::filesystem::remove(log);
}
