// The real binary over real HTTP on 127.0.0.1, serving the tiny trained stories260K model.
#include <catch2/catch.hpp>

#include <fstream>
#include <functional>
#include <thread>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "integration/server_process.h"
#include "test_paths.h"

using nlohmann::json;
using slab::test::ServerProcess;

namespace {

std::string stories_model() {
  auto dir = slab::test::testdata_or_skip("models/stories260K");
  return dir.empty() ? std::string() : dir.string();
}

json post_json(httplib::Client& c, const std::string& path, const json& body, int expected_status = 200) {
  auto res = c.Post(path.c_str(), body.dump(), "application/json");
  REQUIRE(res);
  INFO(path << " -> " << res->status << " " << res->body);
  REQUIRE(res->status == expected_status);
  return json::parse(res->body);
}

// Splits a server-sent event stream into the JSON payloads; the final "[DONE]" is returned as null.
std::vector<json> sse_events(const std::string& body) {
  std::vector<json> events;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    REQUIRE(end != std::string::npos);
    const std::string payload = body.substr(pos + 6, end - pos - 6);
    events.push_back(payload == "[DONE]" ? json(nullptr) : json::parse(payload));
    pos = end + 2;
  }
  return events;
}

}  // namespace

TEST_CASE("completions: greedy continuation from BOS equals transformers' tokens", "[server]") {
  const std::string model = stories_model();
  if (model.empty()) return;
  std::ifstream f(slab::test::fixtures_dir() / "stories260K_expected.json");
  REQUIRE(f.good());
  const json expected = json::parse(f);
  const std::vector<int> greedy = expected.at("greedy_tokens").get<std::vector<int>>();

  ServerProcess server({"--model", model});
  REQUIRE(server.wait_ready());
  auto c = server.client();

  json models = json::parse(c.Get("/v1/models")->body);
  REQUIRE(models["data"][0]["id"] == "stories260K");

  json r = post_json(c, "/v1/completions", {{"model", "stories260K"}, {"prompt", json::array({1})},
                                              {"max_tokens", greedy.size()}, {"temperature", 0}, {"ignore_eos", true}});
  json detok = post_json(c, "/detokenize", {{"tokens", greedy}});
  CHECK(r["choices"][0]["text"] == detok["prompt"]);
  CHECK(r["choices"][0]["finish_reason"] == "length");
  CHECK(r["usage"]["prompt_tokens"] == 1);
  CHECK(r["usage"]["completion_tokens"] == greedy.size());
  CHECK(r["object"] == "text_completion");
  INFO(r["choices"][0]["text"]);
  CHECK(r["choices"][0]["text"].get<std::string>().find("Lily") != std::string::npos);
}

TEST_CASE("completions: a stream carries the same text with a finish chunk then usage then DONE", "[server]") {
  const std::string model = stories_model();
  if (model.empty()) return;
  ServerProcess server({"--model", model});
  REQUIRE(server.wait_ready());
  auto c = server.client();

  const json request = {{"prompt", "Once upon a time"}, {"max_tokens", 40}, {"temperature", 0}};
  json whole = post_json(c, "/v1/completions", request);

  json stream_request = request;
  stream_request["stream"] = true;
  stream_request["stream_options"] = {{"include_usage", true}};
  auto res = c.Post("/v1/completions", stream_request.dump(), "application/json");
  REQUIRE(res);
  REQUIRE(res->status == 200);
  REQUIRE(res->get_header_value("Content-Type").find("text/event-stream") == 0);
  std::vector<json> events = sse_events(res->body);
  REQUIRE(events.size() >= 4);
  REQUIRE(events.back().is_null());  // [DONE]
  const json& usage_chunk = events[events.size() - 2];
  CHECK(usage_chunk["choices"].empty());
  CHECK(usage_chunk["usage"] == whole["usage"]);
  const json& finish_chunk = events[events.size() - 3];
  CHECK(finish_chunk["choices"][0]["finish_reason"] == whole["choices"][0]["finish_reason"]);
  std::string text;
  for (size_t i = 0; i + 2 < events.size(); ++i) text += events[i]["choices"][0]["text"].get<std::string>();
  CHECK(text == whole["choices"][0]["text"]);
}

TEST_CASE("completions: stop strings end the text before them and n with prompt lists gives every choice", "[server]") {
  const std::string model = stories_model();
  if (model.empty()) return;
  ServerProcess server({"--model", model});
  REQUIRE(server.wait_ready());
  auto c = server.client();

  json free_run = post_json(c, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 60}, {"temperature", 0}});
  const std::string text = free_run["choices"][0]["text"];
  const size_t dot = text.find('.');
  REQUIRE(dot != std::string::npos);
  json stopped = post_json(c, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 60}, {"temperature", 0}, {"stop", "."}});
  CHECK(stopped["choices"][0]["text"] == text.substr(0, dot));
  CHECK(stopped["choices"][0]["finish_reason"] == "stop");

  json many = post_json(c, "/v1/completions", {{"prompt", {"Tom", "Lily"}}, {"n", 2}, {"max_tokens", 8}, {"seed", 5}, {"echo", true}});
  REQUIRE(many["choices"].size() == 4);
  CHECK(many["choices"][0]["text"].get<std::string>().rfind("Tom", 0) == 0);
  CHECK(many["choices"][3]["text"].get<std::string>().rfind("Lily", 0) == 0);
  json again = post_json(c, "/v1/completions", {{"prompt", {"Tom", "Lily"}}, {"n", 2}, {"max_tokens", 8}, {"seed", 5}, {"echo", true}});
  CHECK(again["choices"] == many["choices"]);
}

TEST_CASE("bad requests get the right status and an OpenAI error body and the server keeps serving", "[server]") {
  const std::string model = stories_model();
  if (model.empty()) return;
  ServerProcess server({"--model", model, "--max-request-bytes", "100000"});
  REQUIRE(server.wait_ready());
  auto c = server.client();

  struct Case {
    const char* what;
    std::string path;
    std::string body;
    int status;
  };
  const std::string big(200000, 'a');
  const std::vector<Case> cases = {
      {"malformed JSON", "/v1/completions", "{\"prompt\": ", 400},
      {"body not an object", "/v1/completions", "[1,2]", 400},
      {"missing prompt", "/v1/completions", R"({"max_tokens": 4})", 400},
      {"prompt wrong type", "/v1/completions", R"({"prompt": 5})", 400},
      {"empty prompt list", "/v1/completions", R"({"prompt": []})", 400},
      {"negative token id", "/v1/completions", R"({"prompt": [1, -3]})", 400},
      {"token id beyond vocab", "/v1/completions", R"({"prompt": [1, 999999]})", 400},
      {"negative max_tokens", "/v1/completions", R"({"prompt": "a", "max_tokens": -1})", 400},
      {"huge max_tokens", "/v1/completions", R"({"prompt": "a", "max_tokens": 100000000})", 400},
      {"max_tokens string", "/v1/completions", R"({"prompt": "a", "max_tokens": "5"})", 400},
      {"temperature < 0", "/v1/completions", R"({"prompt": "a", "temperature": -0.5})", 400},
      {"top_p > 1", "/v1/completions", R"({"prompt": "a", "top_p": 1.5})", 400},
      {"n = 0", "/v1/completions", R"({"prompt": "a", "n": 0})", 400},
      {"stop wrong type", "/v1/completions", R"({"prompt": "a", "stop": 3})", 400},
      {"stream not bool", "/v1/completions", R"({"prompt": "a", "stream": "yes"})", 400},
      {"stream_options without stream", "/v1/completions", R"({"prompt": "a", "stream_options": {"include_usage": true}})", 400},
      {"suffix", "/v1/completions", R"({"prompt": "a", "suffix": "b"})", 400},
      {"unknown model", "/v1/completions", R"({"model": "gpt-9", "prompt": "a"})", 404},
      {"prompt over the context", "/v1/completions", json{{"prompt", std::string(3000, 'x') + " once upon"}, {"max_tokens", 1}}.dump(), 400},
      {"non-UTF-8 bytes", "/v1/completions", "{\"prompt\": \"\xff\xfe\"}", 400},
      {"body over the limit", "/v1/completions", json{{"prompt", big}}.dump(), 413},
      {"unknown route", "/v1/embeddings", "{}", 404},
      {"detokenize bad ids", "/detokenize", R"({"tokens": [1, "x"]})", 400},
      {"tokenize without prompt", "/tokenize", R"({})", 400},
  };
  for (const Case& k : cases) {
    INFO(k.what);
    auto res = c.Post(k.path.c_str(), k.body, "application/json");
    REQUIRE(res);
    INFO(res->body);
    CHECK(res->status == k.status);
    json body = json::parse(res->body, nullptr, false);
    REQUIRE(body.is_object());
    CHECK(body["error"]["message"].is_string());
    CHECK(body["error"]["code"] == k.status);
    CHECK(body["error"].contains("type"));
    CHECK(body["error"].contains("param"));
  }
  json ok = post_json(c, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 4}});
  CHECK(ok["usage"]["completion_tokens"] == 4);
}

TEST_CASE("an API key guards /v1 routes and SIGTERM exits cleanly", "[server]") {
  const std::string model = stories_model();
  if (model.empty()) return;
  ServerProcess server({"--model", model, "--api-key", "sekrit"});
  REQUIRE(server.wait_ready());
  auto c = server.client();
  auto denied = c.Get("/v1/models");
  REQUIRE(denied);
  CHECK(denied->status == 401);
  CHECK(json::parse(denied->body)["error"]["code"] == 401);
  auto wrong = c.Get("/v1/models", httplib::Headers{{"Authorization", "Bearer nope"}});
  CHECK(wrong->status == 401);
  auto allowed = c.Get("/v1/models", httplib::Headers{{"Authorization", "Bearer sekrit"}});
  CHECK(allowed->status == 200);
  CHECK(server.terminate() == 0);
}

TEST_CASE("tokenize and detokenize round-trip", "[server]") {
  const std::string model = stories_model();
  if (model.empty()) return;
  ServerProcess server({"--model", model});
  REQUIRE(server.wait_ready());
  auto c = server.client();
  json t = post_json(c, "/tokenize", {{"prompt", "Lily saw a big dog."}, {"return_token_strs", true}});
  CHECK(t["count"] == t["tokens"].size());
  CHECK(t["tokens"][0] == 1);  // BOS
  CHECK(t["token_strs"].size() == t["tokens"].size());
  json d = post_json(c, "/detokenize", {{"tokens", t["tokens"]}});
  CHECK(d["prompt"].get<std::string>().find("Lily saw a big dog.") != std::string::npos);
}

namespace {

// One sample of a Prometheus text page, e.g. metric("vllm:num_requests_running{model_name=\"x\"}").
double metric(const std::string& page, const std::string& series) {
  const size_t at = page.find("\n" + series + " ");
  REQUIRE(at != std::string::npos);
  return std::stod(page.substr(at + series.size() + 2));
}

// Opens a raw connection, sends a streaming request, reads until the first event, and closes:
// a client that goes away mid-generation.
void stream_then_disconnect(int port, const std::string& body) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
  const std::string request = "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                              "Content-Length: " + std::to_string(body.size()) + "\r\n\r\n" + body;
  REQUIRE(::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size()));
  std::string got;
  char buf[4096];
  while (got.find("data: ") == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    REQUIRE(n > 0);
    got.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
}

}  // namespace

TEST_CASE("metrics move as requests complete", "[server][metrics]") {
  const std::string model = stories_model();
  if (model.empty()) return;
  ServerProcess server({"--model", model});
  REQUIRE(server.wait_ready());
  auto c = server.client();
  const std::string labels = "{model_name=\"stories260K\"}";
  const std::string before = c.Get("/metrics")->body;
  post_json(c, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 12}, {"ignore_eos", true}});
  auto res = c.Get("/metrics");
  REQUIRE(res->status == 200);
  CHECK(res->get_header_value("Content-Type").find("text/plain") == 0);
  // Engine gauges and counters are published once per engine step, so they may trail the
  // response by one step.
  auto settled = [&](const std::function<bool(const std::string&)>& ready) {
    std::string page;
    for (int i = 0; i < 100; ++i) {
      page = c.Get("/metrics")->body;
      if (ready(page)) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return page;
  };
  const std::string after = settled([&](const std::string& page) {
    return metric(page, "vllm:generation_tokens_total" + labels) == 12 && metric(page, "vllm:num_requests_running" + labels) == 0;
  });
  CHECK(metric(after, "vllm:generation_tokens_total" + labels) - metric(before, "vllm:generation_tokens_total" + labels) == 12);
  CHECK(metric(after, "vllm:prompt_tokens_total" + labels) > metric(before, "vllm:prompt_tokens_total" + labels));
  CHECK(metric(after, "vllm:request_success_total{model_name=\"stories260K\",finished_reason=\"length\"}") == 1);
  CHECK(metric(after, "vllm:time_to_first_token_seconds_count" + labels) == 1);
  CHECK(metric(after, "vllm:inter_token_latency_seconds_count" + labels) == 11);
  CHECK(metric(after, "vllm:e2e_request_latency_seconds_count" + labels) == 1);
  CHECK(metric(after, "vllm:num_requests_running" + labels) == 0);
  CHECK(metric(after, "vllm:kv_cache_usage_perc" + labels) == 0);
  // The same prompt again is a prefix-cache query; its hits are counted in tokens.
  post_json(c, "/v1/completions", {{"prompt", std::string(200, 'a')}, {"max_tokens", 1}});
  json again = post_json(c, "/v1/completions", {{"prompt", std::string(200, 'a')}, {"max_tokens", 1}});
  CHECK(again["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>() > 0);
  const std::string cached = settled([&](const std::string& page) { return metric(page, "vllm:prefix_cache_hits_total" + labels) > 0; });
  CHECK(metric(cached, "vllm:prefix_cache_hits_total" + labels) == again["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>());
}

TEST_CASE("20 streaming clients dropped mid-generation free their KV blocks", "[server][metrics]") {
  const std::string model = stories_model();
  if (model.empty()) return;
  ServerProcess server({"--model", model});
  REQUIRE(server.wait_ready());
  const std::string body = json{{"prompt", "Once upon a time"}, {"max_tokens", 480}, {"ignore_eos", true}, {"stream", true}}.dump();
  std::vector<std::thread> clients;
  for (int i = 0; i < 20; ++i) clients.emplace_back([&] { stream_then_disconnect(server.port(), body); });
  for (std::thread& t : clients) t.join();

  auto c = server.client();
  const std::string labels = "{model_name=\"stories260K\"}";
  std::string page;
  for (int i = 0; i < 200; ++i) {
    page = c.Get("/metrics")->body;
    if (metric(page, "vllm:kv_cache_usage_perc" + labels) == 0 && metric(page, "vllm:num_requests_running" + labels) == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  CHECK(metric(page, "vllm:kv_cache_usage_perc" + labels) == 0);
  CHECK(metric(page, "vllm:num_requests_running" + labels) == 0);
  CHECK(metric(page, "vllm:num_requests_waiting" + labels) == 0);
  // They were aborted, not run to the end.
  CHECK(metric(page, "vllm:request_success_total{model_name=\"stories260K\",finished_reason=\"abort\"}") == 20);
  CHECK(metric(page, "vllm:generation_tokens_total" + labels) < 20 * 480);
  // And the server still serves.
  CHECK(post_json(c, "/v1/completions", {{"prompt", "Lily"}, {"max_tokens", 4}})["usage"]["completion_tokens"] == 4);
}

TEST_CASE("options come from a --config file and flags win over it", "[server]") {
  const std::string model = stories_model();
  if (model.empty()) return;
  const auto config = std::filesystem::temp_directory_path() / ("slab-config-" + std::to_string(::getpid()) + ".toml");
  std::ofstream(config) << "[serve]\nmodel = \"" << model << "\"\nserved-model-name = \"from-config\"\nmax-model-len = 256\n";
  ServerProcess server({"--config", config.string(), "--max-model-len", "128"});
  REQUIRE(server.wait_ready());
  auto c = server.client();
  json models = json::parse(c.Get("/v1/models")->body);
  CHECK(models["data"][0]["id"] == "from-config");
  CHECK(models["data"][0]["max_model_len"] == 128);
  std::filesystem::remove(config);
}

TEST_CASE("SIGTERM while streams run: every stream ends with DONE and the process exits 0", "[server]") {
  const std::string model = stories_model();
  if (model.empty()) return;
  ServerProcess server({"--model", model, "--shutdown-timeout", "0", "--max-num-seqs", "4"});
  REQUIRE(server.wait_ready());
  const json body = {{"prompt", "Once upon a time"}, {"max_tokens", 480}, {"ignore_eos", true}, {"stream", true}};
  std::vector<std::string> bodies(8);
  std::vector<std::thread> clients;
  for (size_t i = 0; i < bodies.size(); ++i) {
    clients.emplace_back([&, i] {
      auto c = server.client();
      auto res = c.Post("/v1/completions", body.dump(), "application/json");
      if (res) bodies[i] = res->body;
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  CHECK(server.terminate() == 0);
  for (std::thread& t : clients) t.join();
  for (const std::string& b : bodies) {
    // Either it had finished, or it was aborted; both end the stream properly.
    if (b.empty()) continue;  // refused with 503 or connection closed after the drain began
    CHECK(b.size() >= 14);
    CHECK(b.substr(b.size() - 14) == "data: [DONE]\n\n");
  }
}
