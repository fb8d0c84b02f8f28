// The real binary over real HTTP on 127.0.0.1, serving the tiny trained stories260K model.
#include <catch2/catch.hpp>

#include <fstream>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "integration/server_process.h"
#include "runtime/cpu_features.h"
#include "test_paths.h"

using nlohmann::json;
using slab::test::ServerProcess;

namespace {

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
  const std::string model = slab::test::stories260k_or_skip();
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

  json r = post_json(c, "/v1/completions",
                     {{"model", "stories260K"},
                      {"prompt", json::array({1})},
                      {"max_tokens", greedy.size()},
                      {"temperature", 0},
                      {"ignore_eos", true}});
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
  const std::string model = slab::test::stories260k_or_skip();
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
  const std::string model = slab::test::stories260k_or_skip();
  if (model.empty()) return;
  ServerProcess server({"--model", model});
  REQUIRE(server.wait_ready());
  auto c = server.client();

  json free_run =
      post_json(c, "/v1/completions", {{"prompt", "Once upon a time"}, {"max_tokens", 60}, {"temperature", 0}});
  const std::string text = free_run["choices"][0]["text"];
  const size_t dot = text.find('.');
  REQUIRE(dot != std::string::npos);
  json stopped = post_json(c, "/v1/completions",
                           {{"prompt", "Once upon a time"}, {"max_tokens", 60}, {"temperature", 0}, {"stop", "."}});
  CHECK(stopped["choices"][0]["text"] == text.substr(0, dot));
  CHECK(stopped["choices"][0]["finish_reason"] == "stop");

  json many = post_json(c, "/v1/completions",
                        {{"prompt", {"Tom", "Lily"}}, {"n", 2}, {"max_tokens", 8}, {"seed", 5}, {"echo", true}});
  REQUIRE(many["choices"].size() == 4);
  CHECK(many["choices"][0]["text"].get<std::string>().rfind("Tom", 0) == 0);
  CHECK(many["choices"][3]["text"].get<std::string>().rfind("Lily", 0) == 0);
  json again = post_json(c, "/v1/completions",
                         {{"prompt", {"Tom", "Lily"}}, {"n", 2}, {"max_tokens", 8}, {"seed", 5}, {"echo", true}});
  CHECK(again["choices"] == many["choices"]);
}

TEST_CASE("bad requests get the right status and an OpenAI error body and the server keeps serving", "[server]") {
  const std::string model = slab::test::stories260k_or_skip();
  if (model.empty()) return;
  const auto templates = slab::test::testdata_or_skip("chat-templates");
  if (templates.empty()) return;
  ServerProcess server({"--model", model, "--max-request-bytes", "100000", "--chat-template",
                        (templates / "microsoft-Phi-3.5-mini-instruct.jinja").string()});
  REQUIRE(server.wait_ready());
  auto c = server.client();

  struct Case {
    const char* what;
    std::string path;
    std::string body;
    int status;
    const char* param;  // the field the error must name, or nullptr
  };
  const std::string big(200000, 'a');
  const std::vector<Case> cases = {
      {"malformed JSON", "/v1/completions", "{\"prompt\": ", 400, nullptr},
      {"empty body", "/v1/completions", "", 400, nullptr},
      {"body not an object", "/v1/completions", "[1,2]", 400, nullptr},
      {"missing prompt", "/v1/completions", R"({"max_tokens": 4})", 400, "prompt"},
      {"prompt wrong type", "/v1/completions", R"({"prompt": 5})", 400, "prompt"},
      {"empty prompt list", "/v1/completions", R"({"prompt": []})", 400, "prompt"},
      {"prompt list of objects", "/v1/completions", R"({"prompt": [{"a": 1}]})", 400, "prompt"},
      {"negative token id", "/v1/completions", R"({"prompt": [1, -3]})", 400, "prompt"},
      {"token id beyond vocab", "/v1/completions", R"({"prompt": [1, 999999]})", 400, "prompt"},
      {"token id beyond int32", "/v1/completions", R"({"prompt": [1, 99999999999999]})", 400, "prompt"},
      {"negative max_tokens", "/v1/completions", R"({"prompt": "a", "max_tokens": -1})", 400, "max_tokens"},
      {"huge max_tokens", "/v1/completions", R"({"prompt": "a", "max_tokens": 100000000})", 400, "max_tokens"},
      {"max_tokens string", "/v1/completions", R"({"prompt": "a", "max_tokens": "5"})", 400, "max_tokens"},
      {"max_tokens float", "/v1/completions", R"({"prompt": "a", "max_tokens": 2.5})", 400, "max_tokens"},
      {"temperature < 0", "/v1/completions", R"({"prompt": "a", "temperature": -0.5})", 400, "temperature"},
      {"temperature string", "/v1/completions", R"({"prompt": "a", "temperature": "hot"})", 400, "temperature"},
      {"top_p > 1", "/v1/completions", R"({"prompt": "a", "top_p": 1.5})", 400, "top_p"},
      {"top_p = 0", "/v1/completions", R"({"prompt": "a", "top_p": 0})", 400, "top_p"},
      {"top_k = -2", "/v1/completions", R"({"prompt": "a", "top_k": -2})", 400, "top_k"},
      {"min_p > 1", "/v1/completions", R"({"prompt": "a", "min_p": 2})", 400, "min_p"},
      {"presence_penalty 3", "/v1/completions", R"({"prompt": "a", "presence_penalty": 3})", 400, "presence_penalty"},
      {"frequency_penalty -3", "/v1/completions", R"({"prompt": "a", "frequency_penalty": -3})", 400,
       "frequency_penalty"},
      {"repetition_penalty 0", "/v1/completions", R"({"prompt": "a", "repetition_penalty": 0})", 400,
       "repetition_penalty"},
      {"n = 0", "/v1/completions", R"({"prompt": "a", "n": 0})", 400, "n"},
      {"n = 17", "/v1/completions", R"({"prompt": "a", "n": 17})", 400, "n"},
      {"seed string", "/v1/completions", R"({"prompt": "a", "seed": "x"})", 400, "seed"},
      {"stop wrong type", "/v1/completions", R"({"prompt": "a", "stop": 3})", 400, "stop"},
      {"17 stop strings", "/v1/completions", json{{"prompt", "a"}, {"stop", std::vector<std::string>(17, "x")}}.dump(),
       400, "stop"},
      {"stop_token_ids with a string", "/v1/completions", R"({"prompt": "a", "stop_token_ids": ["x"]})", 400,
       "stop_token_ids"},
      {"logit_bias not a map", "/v1/completions", R"({"prompt": "a", "logit_bias": [1]})", 400, "logit_bias"},
      {"logit_bias bad key", "/v1/completions", R"({"prompt": "a", "logit_bias": {"abc": 1}})", 400, "logit_bias"},
      {"logit_bias out of range", "/v1/completions", R"({"prompt": "a", "logit_bias": {"5": 500}})", 400, "logit_bias"},
      {"logit_bias id beyond vocab", "/v1/completions", R"({"prompt": "a", "logit_bias": {"99999": 1}})", 400, nullptr},
      {"logprobs 21", "/v1/completions", R"({"prompt": "a", "logprobs": 21})", 400, "logprobs"},
      {"echo not bool", "/v1/completions", R"({"prompt": "a", "echo": 1})", 400, "echo"},
      {"stream not bool", "/v1/completions", R"({"prompt": "a", "stream": "yes"})", 400, "stream"},
      {"stream_options without stream", "/v1/completions",
       R"({"prompt": "a", "stream_options": {"include_usage": true}})", 400, "stream_options"},
      {"suffix", "/v1/completions", R"({"prompt": "a", "suffix": "b"})", 400, "suffix"},
      {"best_of 2", "/v1/completions", R"({"prompt": "a", "best_of": 2})", 400, "best_of"},
      {"model wrong type", "/v1/completions", R"({"model": 7, "prompt": "a"})", 400, "model"},
      {"unknown model", "/v1/completions", R"({"model": "gpt-9", "prompt": "a"})", 404, "model"},
      {"prompt over the context", "/v1/completions",
       json{{"prompt", std::string(3000, 'x') + " once upon"}, {"max_tokens", 1}}.dump(), 400, nullptr},
      {"non-UTF-8 bytes", "/v1/completions", "{\"prompt\": \"\xff\xfe\"}", 400, nullptr},
      {"body over the limit", "/v1/completions", json{{"prompt", big}}.dump(), 413, nullptr},
      {"chat: missing messages", "/v1/chat/completions", R"({"max_tokens": 3})", 400, "messages"},
      {"chat: empty messages", "/v1/chat/completions", R"({"messages": []})", 400, "messages"},
      {"chat: messages not a list", "/v1/chat/completions", R"({"messages": {"role": "user"}})", 400, "messages"},
      {"chat: message not an object", "/v1/chat/completions", R"({"messages": ["hi"]})", 400, "messages"},
      {"chat: invalid role", "/v1/chat/completions", R"({"messages": [{"role": "wizard", "content": "hi"}]})", 400,
       "messages"},
      {"chat: missing role", "/v1/chat/completions", R"({"messages": [{"content": "hi"}]})", 400, "messages"},
      {"chat: content a number", "/v1/chat/completions", R"({"messages": [{"role": "user", "content": 5}]})", 400,
       "messages"},
      {"chat: image part", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})", 400,
       "messages"},
      {"chat: tools not a list", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "hi"}], "tools": {}})", 400, "tools"},
      {"chat: top_logprobs without logprobs", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "hi"}], "top_logprobs": 2})", 400, "top_logprobs"},
      {"chat: negative max_completion_tokens", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": -5})", 400,
       "max_completion_tokens"},
      {"chat: continue_final_message after a user turn", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "hi"}], "continue_final_message": true})", 400,
       "continue_final_message"},
      {"chat: chat_template_kwargs not an object", "/v1/chat/completions",
       R"({"messages": [{"role": "user", "content": "hi"}], "chat_template_kwargs": 3})", 400, "chat_template_kwargs"},
      {"chat: unknown model", "/v1/chat/completions",
       R"({"model": "x", "messages": [{"role": "user", "content": "hi"}]})", 404, "model"},
      {"unknown route", "/v1/embeddings", "{}", 404, nullptr},
      {"detokenize bad ids", "/detokenize", R"({"tokens": [1, "x"]})", 400, "tokens"},
      {"detokenize id beyond vocab", "/detokenize", R"({"tokens": [100000]})", 400, "tokens"},
      {"tokenize without prompt", "/tokenize", R"({})", 400, "prompt"},
      {"tokenize prompt a number", "/tokenize", R"({"prompt": 3})", 400, "prompt"},
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
    if (k.param != nullptr) CHECK(body["error"]["param"] == k.param);
  }
  REQUIRE(cases.size() >= 60);
  json ok = post_json(c, "/v1/completions", {{"prompt", "Once"}, {"max_tokens", 4}});
  CHECK(ok["usage"]["completion_tokens"] == 4);
}

TEST_CASE("an API key guards /v1 routes and SIGTERM exits cleanly", "[server]") {
  const std::string model = slab::test::stories260k_or_skip();
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
  const std::string model = slab::test::stories260k_or_skip();
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
  const std::string request =
      "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
      "Content-Length: " +
      std::to_string(body.size()) + "\r\n\r\n" + body;
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
  const std::string model = slab::test::stories260k_or_skip();
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
    return metric(page, "vllm:generation_tokens_total" + labels) == 12 &&
           metric(page, "vllm:num_requests_running" + labels) == 0;
  });
  CHECK(metric(after, "vllm:generation_tokens_total" + labels) -
            metric(before, "vllm:generation_tokens_total" + labels) ==
        12);
  CHECK(metric(after, "vllm:prompt_tokens_total" + labels) > metric(before, "vllm:prompt_tokens_total" + labels));
  CHECK(metric(after, "vllm:request_success_total{model_name=\"stories260K\",finished_reason=\"length\"}") == 1);
  CHECK(metric(after, "vllm:time_to_first_token_seconds_count" + labels) == 1);
  CHECK(metric(after, "vllm:inter_token_latency_seconds_count" + labels) == 11);
  CHECK(metric(after, "vllm:e2e_request_latency_seconds_count" + labels) == 1);
  CHECK(metric(after, "vllm:num_requests_running" + labels) == 0);
  CHECK(metric(after, "vllm:kv_cache_usage_perc" + labels) == 0);
  // The steps' time, and the compute pool's share of it.
  const double step_s = metric(after, "slabserve:engine_step_seconds_total" + labels);
  const double parallel_s = metric(after, "slabserve:engine_parallel_seconds_total" + labels);
  CHECK(step_s > metric(before, "slabserve:engine_step_seconds_total" + labels));
  // No pool on the scalar reference path (CPUs without AVX2).
  CHECK((parallel_s > 0 || !slab::cpu_features().has_avx2_kernels()));
  CHECK(parallel_s <= step_s * 1.01 + 1e-3);
  // ... and by forward phase: every phase has its series (metric() requires it), the linears and
  // attention ran, and the phases add up to no more than the steps' wall time.
  if (slab::cpu_features().has_avx2_kernels()) {
    auto phase_s = [&](const std::string& phase) {
      return metric(after, "slabserve:forward_phase_seconds_total{model_name=\"stories260K\",phase=\"" + phase + "\"}");
    };
    double phases = 0;
    for (const char* phase : {"embed", "norms", "qkv", "rope+kv", "attention", "o", "gate_up", "down", "head"}) {
      phases += phase_s(phase);
    }
    CHECK(phase_s("qkv") > 0);
    CHECK(phase_s("attention") > 0);
    CHECK(phases <= step_s * 1.01 + 1e-3);
  }
  // The same prompt again is a prefix-cache query; its hits are counted in tokens.
  post_json(c, "/v1/completions", {{"prompt", std::string(200, 'a')}, {"max_tokens", 1}});
  json again = post_json(c, "/v1/completions", {{"prompt", std::string(200, 'a')}, {"max_tokens", 1}});
  CHECK(again["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>() > 0);
  const std::string cached =
      settled([&](const std::string& page) { return metric(page, "vllm:prefix_cache_hits_total" + labels) > 0; });
  CHECK(metric(cached, "vllm:prefix_cache_hits_total" + labels) ==
        again["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>());
}

TEST_CASE("20 streaming clients dropped mid-generation free their KV blocks", "[server][metrics]") {
  const std::string model = slab::test::stories260k_or_skip();
  if (model.empty()) return;
  ServerProcess server({"--model", model});
  REQUIRE(server.wait_ready());
  const std::string body =
      json{{"prompt", "Once upon a time"}, {"max_tokens", 480}, {"ignore_eos", true}, {"stream", true}}.dump();
  std::vector<std::thread> clients;
  for (int i = 0; i < 20; ++i) clients.emplace_back([&] { stream_then_disconnect(server.port(), body); });
  for (std::thread& t : clients) t.join();

  auto c = server.client();
  const std::string labels = "{model_name=\"stories260K\"}";
  std::string page;
  for (int i = 0; i < 200; ++i) {
    page = c.Get("/metrics")->body;
    if (metric(page, "vllm:kv_cache_usage_perc" + labels) == 0 &&
        metric(page, "vllm:num_requests_running" + labels) == 0)
      break;
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
  const std::string model = slab::test::stories260k_or_skip();
  if (model.empty()) return;
  const auto config = std::filesystem::temp_directory_path() / ("slab-config-" + std::to_string(::getpid()) + ".toml");
  std::ofstream(config) << "[serve]\nmodel = \"" << model
                        << "\"\nserved-model-name = \"from-config\"\nmax-model-len = 256\n";
  ServerProcess server({"--config", config.string(), "--max-model-len", "128"});
  REQUIRE(server.wait_ready());
  auto c = server.client();
  json models = json::parse(c.Get("/v1/models")->body);
  CHECK(models["data"][0]["id"] == "from-config");
  CHECK(models["data"][0]["max_model_len"] == 128);
  std::filesystem::remove(config);
}

TEST_CASE("SIGTERM while streams run: every stream ends with DONE and the process exits 0", "[server]") {
  const std::string model = slab::test::stories260k_or_skip();
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
