// Chat through the real server: /tokenize with messages gives the ids of exactly the text Python
// jinja2 renders, --chat-template overrides the checkpoint, chat completions stream like vLLM.
#include <catch2/catch.hpp>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "integration/server_process.h"
#include "test_paths.h"

using json = nlohmann::ordered_json;
using slab::test::ServerProcess;

namespace {

json read_json(const std::filesystem::path& p) {
  std::ifstream f(p);
  REQUIRE(f.good());
  return json::parse(f);
}

httplib::Result post(httplib::Client& c, const std::string& path, const json& body) {
  return c.Post(path.c_str(), body.dump(), "application/json");
}

}  // namespace

TEST_CASE("tokenize with messages returns the ids of the text jinja2 renders", "[server][chat]") {
  const auto model = slab::test::testdata_or_skip("models/stories260K");
  const auto templates = slab::test::testdata_or_skip("chat-templates");
  if (model.empty() || templates.empty()) return;
  const json conversations = read_json(slab::test::fixtures_dir() / "chat" / "conversations.json")["conversations"];

  for (const char* name : {"microsoft-Phi-3.5-mini-instruct", "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use"}) {
    INFO(name);
    ServerProcess server(
        {"--model", model.string(), "--chat-template", (templates / (std::string(name) + ".jinja")).string()});
    REQUIRE(server.wait_ready());
    auto c = server.client();
    const json expected = read_json(slab::test::fixtures_dir() / "chat" / "expected" / (std::string(name) + ".json"));
    int rendered = 0;
    for (const json& k : expected["cases"]) {
      const json* conversation = nullptr;
      for (const json& conv : conversations) {
        if (conv["name"] == k["conversation"]) conversation = &conv;
      }
      REQUIRE(conversation != nullptr);
      INFO(k["conversation"].get<std::string>() << " add_generation_prompt=" << k["add_generation_prompt"]);
      json body = {{"messages", (*conversation)["messages"]},
                   {"add_generation_prompt", k["add_generation_prompt"]},
                   {"chat_template_kwargs", (*conversation)["kwargs"]}};
      if (!(*conversation)["tools"].is_null()) body["tools"] = (*conversation)["tools"];
      auto res = post(c, "/tokenize", body);
      REQUIRE(res);
      // A request without tools that the template fails on with tools=None is rendered with
      // `tools` undefined (chat::render_chat_request): the fixtures record that rendering too.
      const bool falls_back = k.contains("error") && !k["raise_exception"].get<bool>() && k.contains("tools_undefined");
      const json& want = falls_back ? k["tools_undefined"] : k;
      if (want.contains("error")) {
        CHECK(res->status == 400);
        CHECK(json::parse(res->body)["error"]["message"].get<std::string>().find("chat template") != std::string::npos);
        continue;
      }
      REQUIRE(res->status == 200);
      auto text = post(c, "/tokenize", {{"prompt", want["output"]}, {"add_special_tokens", false}});
      REQUIRE(text->status == 200);
      CHECK(json::parse(res->body)["tokens"] == json::parse(text->body)["tokens"]);
      ++rendered;
    }
    CHECK(rendered > 0);
  }
}

TEST_CASE("chat completions: a model without a template refuses, a template file serves it", "[server][chat]") {
  const auto model = slab::test::testdata_or_skip("models/stories260K");
  const auto templates = slab::test::testdata_or_skip("chat-templates");
  if (model.empty() || templates.empty()) return;
  const json messages = json::array({{{"role", "user"}, {"content", "Tell me a story."}}});
  {
    ServerProcess server({"--model", model.string()});
    REQUIRE(server.wait_ready());
    auto c = server.client();
    auto res = post(c, "/v1/chat/completions", {{"messages", messages}});
    REQUIRE(res);
    CHECK(res->status == 400);
    CHECK(json::parse(res->body)["error"]["message"].get<std::string>().find("chat template") != std::string::npos);
  }
  ServerProcess server(
      {"--model", model.string(), "--chat-template", (templates / "microsoft-Phi-3.5-mini-instruct.jinja").string()});
  REQUIRE(server.wait_ready());
  auto c = server.client();
  json request = {
      {"messages", messages}, {"max_tokens", 24}, {"temperature", 0}, {"logprobs", true}, {"top_logprobs", 2}};
  auto whole = post(c, "/v1/chat/completions", request);
  REQUIRE(whole->status == 200);
  const json r = json::parse(whole->body);
  CHECK(r["object"] == "chat.completion");
  CHECK(r["choices"][0]["message"]["role"] == "assistant");
  const std::string text = r["choices"][0]["message"]["content"];
  CHECK(r["usage"]["completion_tokens"] == 24);
  REQUIRE(r["choices"][0]["logprobs"]["content"].size() == 24);
  CHECK(r["choices"][0]["logprobs"]["content"][0]["top_logprobs"].size() == 2);
  CHECK(r["choices"][0]["logprobs"]["content"][0]["logprob"].get<double>() <= 0.0);

  request["stream"] = true;
  request["stream_options"] = {{"include_usage", true}};
  request.erase("logprobs");
  request.erase("top_logprobs");
  auto streamed = post(c, "/v1/chat/completions", request);
  REQUIRE(streamed->status == 200);
  std::vector<json> events;
  size_t pos = 0;
  while ((pos = streamed->body.find("data: ", pos)) != std::string::npos) {
    const size_t end = streamed->body.find("\n\n", pos);
    const std::string payload = streamed->body.substr(pos + 6, end - pos - 6);
    events.push_back(payload == "[DONE]" ? json(nullptr) : json::parse(payload));
    pos = end + 2;
  }
  REQUIRE(events.size() >= 4);
  CHECK(events.front()["choices"][0]["delta"]["role"] == "assistant");
  CHECK(events.back().is_null());
  CHECK(events[events.size() - 2]["usage"]["completion_tokens"] == 24);
  CHECK(events[events.size() - 3]["choices"][0]["finish_reason"] == "length");
  std::string streamed_text;
  for (size_t i = 1; i + 3 < events.size(); ++i)
    streamed_text += events[i]["choices"][0]["delta"]["content"].get<std::string>();
  CHECK(streamed_text == text);
}

TEST_CASE("the checkpoint's chat template is used by default and --chat-template overrides it", "[server][chat]") {
  const auto model = slab::test::testdata_or_skip("models/stories260K");
  const auto templates = slab::test::testdata_or_skip("chat-templates");
  if (model.empty() || templates.empty()) return;
  // A copy of the model folder whose tokenizer_config.json carries a template of its own.
  const auto dir = std::filesystem::temp_directory_path() / ("slab-chat-model-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (const auto& entry : std::filesystem::directory_iterator(model)) {
    if (entry.path().filename() != "tokenizer_config.json")
      std::filesystem::create_symlink(entry.path(), dir / entry.path().filename());
  }
  json config = read_json(model / "tokenizer_config.json");
  config["chat_template"] =
      "{% for m in messages %}[{{ m.role }}] {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}[assistant]{% "
      "endif %}";
  std::ofstream(dir / "tokenizer_config.json") << config.dump();

  const json body = {{"messages", json::array({{{"role", "user"}, {"content", "Hi"}}})},
                     {"add_generation_prompt", true}};
  auto ids_of = [&](httplib::Client& c, const std::string& text) {
    return json::parse(post(c, "/tokenize", {{"prompt", text}, {"add_special_tokens", false}})->body)["tokens"];
  };
  {
    ServerProcess server({"--model", dir.string()});
    REQUIRE(server.wait_ready());
    auto c = server.client();
    CHECK(json::parse(post(c, "/tokenize", body)->body)["tokens"] == ids_of(c, "[user] Hi\n[assistant]"));
  }
  {
    ServerProcess server(
        {"--model", dir.string(), "--chat-template", (templates / "microsoft-Phi-3.5-mini-instruct.jinja").string()});
    REQUIRE(server.wait_ready());
    auto c = server.client();
    CHECK(json::parse(post(c, "/tokenize", body)->body)["tokens"] == ids_of(c, "<|user|>\nHi<|end|>\n<|assistant|>\n"));
  }
  std::filesystem::remove_all(dir);
}
