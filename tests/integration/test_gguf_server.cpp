// The binary serving a GGUF file: the stories260K GGUF answers as its safetensors folder does.
#include <catch2/catch.hpp>

#include <string>

#include <nlohmann/json.hpp>

#include "integration/server_process.h"
#include "runtime/file_io.h"
#include "test_paths.h"

using nlohmann::json;
using slab::test::ServerProcess;

namespace {

json post(httplib::Client& c, const std::string& path, const json& body) {
  auto res = c.Post(path.c_str(), body.dump(), "application/json");
  REQUIRE(res);
  INFO(path << " -> " << res->status << " " << res->body);
  REQUIRE(res->status == 200);
  return json::parse(res->body);
}

}  // namespace

TEST_CASE("serve: the stories260K GGUF file completes and tokenizes as the safetensors folder", "[server][gguf]") {
  const auto folder = slab::test::testdata_or_skip("models/stories260K");
  const auto gguf = slab::test::testdata_or_skip("models/stories260K-gguf/stories260K.gguf");
  if (folder.empty() || gguf.empty()) return;
  const std::string log_path =
      (std::filesystem::temp_directory_path() / ("slab_gguf_serve_" + std::to_string(::getpid()) + ".log")).string();
  ServerProcess from_gguf({"--model", gguf.string()}, log_path);
  ServerProcess from_folder({"--model", folder.string()});
  REQUIRE(from_gguf.wait_ready());
  REQUIRE(from_folder.wait_ready());
  auto g = from_gguf.client();
  auto f = from_folder.client();

  const json models = json::parse(g.Get("/v1/models")->body);
  CHECK(models["data"][0]["id"] == "stories260K");  // the file's name without .gguf
  CHECK(models["data"][0]["architecture"] == "llama");
  CHECK(models["data"][0]["weights"] == "GGUF v3: F32 x 48");
  const std::string log = slab::read_file(log_path);
  CHECK(log.find("(llama; GGUF v3: F32 x 48)") != std::string::npos);
  std::filesystem::remove(log_path);

  for (const char* prompt : {"Once upon a time", "The cat sat on the", "Lily and Ben went to the park. They"}) {
    INFO("prompt: " << prompt);
    const json request = {{"prompt", prompt}, {"max_tokens", 48}, {"temperature", 0}};
    const json want = post(f, "/v1/completions", request);
    const json got = post(g, "/v1/completions", request);
    CHECK(got["choices"][0]["text"] == want["choices"][0]["text"]);
    CHECK(got["usage"] == want["usage"]);
    CHECK(post(g, "/tokenize", {{"prompt", prompt}})["tokens"] == post(f, "/tokenize", {{"prompt", prompt}})["tokens"]);
  }
}
