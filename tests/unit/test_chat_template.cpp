// Chat templates against Python jinja2 (fixtures from scripts/make_chat_template_fixtures.py):
// every rendered string byte for byte, every error where jinja2 raised; plus a fuzz test that
// random and broken templates end in a result or a TemplateError, never a crash or a hang.
#include "chat/chat_template.h"
#include "test_paths.h"

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <sstream>
#include <thread>

using slab::chat::ChatTemplate;
using slab::chat::RenderLimits;
using slab::chat::TemplateError;
using ojson = nlohmann::ordered_json;

namespace {

ojson read_json(const std::filesystem::path& p) {
  std::ifstream in(p);
  REQUIRE(in.good());
  return ojson::parse(in);
}

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// .xz files of the shared test data: decompressed by the xz tool; empty when it is unavailable.
std::string read_xz(const std::filesystem::path& p) {
  std::string cmd = "xz -dc '" + p.string() + "' 2>/dev/null";
  FILE* pipe = popen(cmd.c_str(), "r");
  if (!pipe) return {};
  std::string out;
  char buf[65536];
  std::size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, pipe)) > 0) out.append(buf, n);
  pclose(pipe);
  return out;
}

// strftime_now formats local time; the fixtures were made in UTC.
void use_utc() {
  setenv("TZ", "UTC", 1);
  tzset();
}

struct Outcome {
  bool ok = false;
  std::string text;  // output or error message
};

Outcome run(const std::function<std::string()>& fn) {
  try {
    return {true, fn()};
  } catch (const TemplateError& e) {
    return {false, e.what()};
  }
}

// Compares one rendering with what jinja2 did; returns whether it matched.
bool check_case(const ojson& expected, const Outcome& got, const std::string& label) {
  INFO(label);
  if (expected.contains("output")) {
    INFO("error: " << (got.ok ? "" : got.text));
    CHECK(got.ok);
    if (!got.ok) return false;
    CHECK(got.text == expected["output"].get<std::string>());
    return got.text == expected["output"].get<std::string>();
  }
  INFO("jinja2 raised: " << expected["error"].get<std::string>());
  CHECK_FALSE(got.ok);
  if (got.ok) return false;
  if (expected["raise_exception"].get<bool>()) {
    CHECK_THAT(got.text, Catch::Matchers::Contains(expected["error"].get<std::string>()));
    return got.text.find(expected["error"].get<std::string>()) != std::string::npos;
  }
  return true;
}

std::string template_source(const std::filesystem::path& testdata, const std::string& name) {
  if (name == "llama3.1" || name == "qwen3")
    return read_json(testdata / "tokenizers" / name / "tokenizer_config.json")["chat_template"].get<std::string>();
  if (name == "gemma3") {
    std::string text = read_xz(testdata / "tokenizers" / "gemma3" / "tokenizer_config.json.xz");
    if (text.empty()) return {};
    return ojson::parse(text)["chat_template"].get<std::string>();
  }
  return read_text(testdata / "chat-templates" / (name + ".jinja"));
}

}  // namespace

TEST_CASE("chat template language features match jinja2", "[chat]") {
  use_utc();
  ojson fixtures = read_json(slab::test::fixtures_dir() / "chat" / "features.json");
  auto now = fixtures["now"].get<std::time_t>();
  int passed = 0, total = 0;
  for (const auto& f : fixtures["features"]) {
    std::string source = f["template"].get<std::string>();
    Outcome got = run([&] { return ChatTemplate(source).render(f["context"], now); });
    ++total;
    passed += check_case(f, got, f["name"].get<std::string>() + ": " + source);
  }
  WARN("features: " << passed << "/" << total << " match jinja2");
}

TEST_CASE("real chat templates render like transformers", "[chat]") {
  use_utc();
  std::filesystem::path testdata = slab::test::testdata_or_skip("chat-templates");
  if (testdata.empty()) return;
  testdata = testdata.parent_path();
  std::filesystem::path fixtures = slab::test::fixtures_dir() / "chat";
  ojson convs = read_json(fixtures / "conversations.json");
  auto now = convs["now"].get<std::time_t>();
  std::map<std::string, const ojson*> by_name;
  for (const auto& c : convs["conversations"]) by_name[c["name"].get<std::string>()] = &c;

  int fallbacks = 0;
  for (const auto& entry : std::filesystem::directory_iterator(fixtures / "expected")) {
    ojson expected = read_json(entry.path());
    std::string name = expected["template"].get<std::string>();
    std::string source = template_source(testdata, name);
    if (source.empty()) {
      WARN("skipped " << name << ": could not read its template (xz missing?)");
      continue;
    }
    std::unique_ptr<ChatTemplate> tmpl;
    try {
      tmpl = std::make_unique<ChatTemplate>(source);
    } catch (const TemplateError& e) {
      FAIL_CHECK(name << " does not parse: " << e.what());
      continue;
    }
    int passed = 0, total = 0;
    for (const auto& c : expected["cases"]) {
      const ojson& conv = *by_name.at(c["conversation"].get<std::string>());
      bool agp = c["add_generation_prompt"].get<bool>();
      Outcome got = run([&] {
        return slab::chat::render_chat(*tmpl, conv["messages"], conv["tools"], agp, expected["special_tokens"],
                                       conv["kwargs"], now);
      });
      ++total;
      const std::string label = name + " / " + c["conversation"].get<std::string>() + " / agp=" + (agp ? "1" : "0");
      passed += check_case(c, got, label);
      // The server's render_chat_request: the same, except that a conversation without tools the
      // template fails on (not by raise_exception) renders as jinja2 does with `tools` undefined.
      bool falls_back = c.contains("error") && !c["raise_exception"].get<bool>() && c.contains("tools_undefined");
      fallbacks += falls_back && c["tools_undefined"].contains("output");
      Outcome request = run([&] {
        return slab::chat::render_chat_request(*tmpl, conv["messages"], conv["tools"], agp, expected["special_tokens"],
                                               conv["kwargs"], now);
      });
      check_case(falls_back ? c["tools_undefined"] : c, request, label + " (server request)");
    }
    WARN(name << ": " << passed << "/" << total << " match jinja2");
  }
  // Hermes-2-Pro and Command-R tool_use templates: every conversation without tools, both ways.
  CHECK(fallbacks == 40);
}

TEST_CASE("chat template API basics", "[chat]") {
  ChatTemplate t(
      "{{ bos_token }}{% for m in messages %}[{{ m.role }}:{{ m.content }}]{% endfor %}"
      "{% if add_generation_prompt %}>{% endif %}{{ tools is none }}{{ enable_x }}");
  ojson messages = ojson::parse(R"([{"role":"user","content":"hi","tool_calls":null}])");
  std::string out = slab::chat::render_chat(t, messages, nullptr, true, {{"bos_token", "<s>"}}, {{"enable_x", 7}}, 0);
  CHECK(out == "<s>[user:hi]>True7");
  // Plain nlohmann::json converts implicitly (object keys then come sorted, not in request order).
  nlohmann::json plain_messages = nlohmann::json::array({{{"role", "user"}, {"content", "x"}}});
  CHECK(slab::chat::render_chat(t, plain_messages, nullptr, false, nlohmann::json{{"bos_token", "<s>"}},
                                nlohmann::json::object(), 0) == "<s>[user:x]True");
  CHECK_THROWS_AS(ChatTemplate("{% for %}"), TemplateError);
  CHECK_THROWS_WITH(ChatTemplate("{{ raise_exception('nope') }}").render(ojson::object()), "nope");
  CHECK_THROWS_AS(ChatTemplate("{{ raise_exception('nope') }}").render(ojson::object()),
                  slab::chat::TemplateRaisedError);
  // render_chat_request retries a tool-less conversation with `tools` undefined, but never one the
  // template refused on purpose, nor one that came with tools.
  ChatTemplate refuses("{% if tools is none %}{{ raise_exception('needs tools') }}{% endif %}{{ tools | length }}");
  CHECK_THROWS_WITH(
      slab::chat::render_chat_request(refuses, messages, nullptr, false, ojson::object(), ojson::object(), 0),
      "needs tools");
  ChatTemplate loops("{% for t in tools %}{{ t }}{% endfor %}[{{ tools is defined }}]");
  CHECK_THROWS_AS(slab::chat::render_chat(loops, messages, nullptr, false, ojson::object(), ojson::object(), 0),
                  TemplateError);
  CHECK(slab::chat::render_chat_request(loops, messages, nullptr, false, ojson::object(), ojson::object(), 0) ==
        "[False]");
  CHECK(slab::chat::render_chat_request(loops, messages, ojson::array({"a"}), false, ojson::object(), ojson::object(),
                                        0) == "a[True]");
  CHECK_THROWS_WITH(slab::chat::render_chat_request(ChatTemplate("{{ tools | list }}{{ nothing.x }}"), messages,
                                                    nullptr, false, ojson::object(), ojson::object(), 0),
                    Catch::Matchers::Contains("NoneType"));  // both attempts fail: the first error
  // Thread safety: the same parsed template rendered from several threads.
  std::vector<std::thread> threads;
  std::atomic<int> good{0};
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&] {
      for (int k = 0; k < 50; ++k)
        good += slab::chat::render_chat(t, messages, nullptr, true, {{"bos_token", "<s>"}}, {{"enable_x", 7}}, 0) ==
                "<s>[user:hi]>True7";
    });
  for (auto& th : threads) th.join();
  CHECK(good == 200);
}

TEST_CASE("chat template limits stop runaway templates", "[chat]") {
  ojson ctx = ojson::object();
  auto fails = [&](const std::string& src) {
    INFO(src);
    CHECK_THROWS_AS(ChatTemplate(src).render(ctx), TemplateError);
  };
  fails("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}");
  fails("{{ range(100000000) | length }}");
  fails("{% set s = 'x' * 1000 %}{% for i in range(100) %}{% set s = s ~ s %}{% endfor %}{{ s * 100000 }}");
  // Loop budget: a small limit here keeps the test fast under sanitizers; the default is 10M.
  RenderLimits small;
  small.max_loop_iterations = 100000;
  CHECK_THROWS_WITH(ChatTemplate("{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}")
                        .render(ctx, 0, small),
                    Catch::Matchers::Contains("loop iterations"));
  fails("{{ 'x' * 100000000 }}");
  fails("{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}{{ ns.s }}");
  fails("{{ " + std::string(5000, '(') + "1" + std::string(5000, ')') + " }}");
  fails("{{ " + std::string(5000, '[') + std::string(5000, ']') + " }}");
  std::string chain = "{{ 1";
  for (int i = 0; i < 5000; ++i) chain += " + 1";
  fails(chain + " }}");
  std::string filters = "{{ 'a'";
  for (int i = 0; i < 5000; ++i) filters += "|upper";
  fails(filters + " }}");
  std::string nested;
  for (int i = 0; i < 5000; ++i) nested += "{% if true %}";
  fails(nested);
  fails("{{ " + std::string(5000, '-') + "1 }}");
  fails("{{ " + [] {
    std::string s;
    for (int i = 0; i < 5000; ++i) s += "not ";
    return s;
  }() + "x }}");
}

TEST_CASE("chat template fuzz: random and broken templates never crash or hang", "[chat]") {
  use_utc();
  RenderLimits limits;
  limits.max_output_bytes = 1 << 20;
  limits.max_loop_iterations = 20000;
  limits.max_range_size = 1000;
  limits.max_call_depth = 50;
  ojson ctx = ojson::parse(R"({"messages":[{"role":"system","content":"s"},{"role":"user","content":"héllo 🙂"},
      {"role":"assistant","content":"a","tool_calls":[{"function":{"name":"f","arguments":{"x":1}}}]}],
      "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],
      "add_generation_prompt":true,"bos_token":"<s>","eos_token":"</s>","n":3,"l":[1,2,3],"d":{"k":"v"}})");

  static const char* const pieces[] = {"{{",
                                       "}}",
                                       "{%",
                                       "%}",
                                       "{%-",
                                       "-%}",
                                       "{#",
                                       "#}",
                                       "{{-",
                                       "-}}",
                                       " ",
                                       "\n",
                                       "if",
                                       "elif",
                                       "else",
                                       "endif",
                                       "for",
                                       "in",
                                       "endfor",
                                       "set",
                                       "endset",
                                       "=",
                                       "macro",
                                       "endmacro",
                                       "call",
                                       "endcall",
                                       "caller()",
                                       "break",
                                       "continue",
                                       "namespace(",
                                       "ns.x",
                                       "(",
                                       ")",
                                       "[",
                                       "]",
                                       "{",
                                       "}",
                                       ",",
                                       ":",
                                       ".",
                                       "|",
                                       "~",
                                       "+",
                                       "-",
                                       "*",
                                       "/",
                                       "//",
                                       "%",
                                       "**",
                                       "==",
                                       "!=",
                                       "<",
                                       ">",
                                       "not",
                                       "and",
                                       "or",
                                       "is",
                                       "defined",
                                       "none",
                                       "string",
                                       "true",
                                       "'s'",
                                       "\"t\"",
                                       "0",
                                       "1",
                                       "-1",
                                       "2.5",
                                       "messages",
                                       "m",
                                       "x",
                                       "loop.index",
                                       "loop",
                                       "l",
                                       "d",
                                       "n",
                                       "tools",
                                       "upper",
                                       "trim",
                                       "join",
                                       "length",
                                       "tojson",
                                       "items",
                                       "map(attribute='role')",
                                       "selectattr('role')",
                                       "range(",
                                       "range(n)",
                                       "f(",
                                       "f(x)",
                                       "raise_exception('boom')",
                                       "[::-1]",
                                       "[1:]",
                                       "[0]",
                                       ".content",
                                       ".strip()",
                                       ".split(',')",
                                       "text",
                                       "{% for x in l %}",
                                       "{% endfor %}",
                                       "{% if x %}",
                                       "{% endif %}",
                                       "{% macro f(x) %}{{ f(x) }}{% endmacro %}",
                                       "{{ f(1) }}",
                                       "{% set x = x ~ x %}",
                                       "{% raw %}",
                                       "{% endraw %}"};
  std::mt19937 rng(12345);
  auto random_template = [&] {
    std::string s;
    std::size_t n = 1 + rng() % 40;
    for (std::size_t i = 0; i < n; ++i) s += pieces[rng() % (sizeof pieces / sizeof pieces[0])];
    return s;
  };
  int parsed = 0, rendered = 0;
  auto attempt = [&](const std::string& src) {
    try {
      ChatTemplate t(src);
      ++parsed;
      std::string out = t.render(ctx, 0, limits);
      ++rendered;
      CHECK(out.size() <= limits.max_output_bytes);
    } catch (const TemplateError&) {
    }
  };

  auto start = std::chrono::steady_clock::now();
  for (int i = 0; i < 10000; ++i) attempt(random_template());
  // Structurally plausible templates: random statements wrapped in a real loop.
  for (int i = 0; i < 3000; ++i)
    attempt("{% for m in messages %}{{ " + random_template() + " }}{% endfor %}" + random_template());
  // Truncations and byte flips of real templates.
  std::filesystem::path dir = slab::test::testdata_or_skip("chat-templates");
  if (!dir.empty()) {
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      std::string src = read_text(entry.path());
      for (int k = 0; k < 40; ++k) attempt(src.substr(0, rng() % (src.size() + 1)));
      for (int k = 0; k < 40; ++k) {
        std::string mutated = src;
        for (int j = 0; j < 3; ++j) mutated[rng() % mutated.size()] = static_cast<char>(rng() % 128);
        attempt(mutated);
      }
    }
  }
  // Real templates on malformed conversations: wrong types, missing keys, odd roles.
  static const char* const odd_messages[] = {
      R"([])",
      R"([{"role":"user"}])",
      R"([{"content":"no role"}])",
      R"([{"role":"user","content":7}])",
      R"([{"role":"user","content":[{"type":"text","text":"part"},{"type":"image"}]}])",
      R"([{"role":"assistant","tool_calls":[{"function":{"name":"f","arguments":"{}"}}]}])",
      R"([{"role":"tool","content":{"a":1}}])",
      R"([{"role":"system","content":null},{"role":"user","content":""}])",
      R"([{"role":"user","content":"a"},{"role":"assistant","content":"b","tool_calls":[{}]}])",
      R"([1, "x", null])"};
  if (!dir.empty()) {
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
      ChatTemplate t(read_text(entry.path()));
      for (const char* m : odd_messages) {
        for (const char* tools : {"null", "[]", R"([{"type":"function","function":{"name":"f"}}])", R"(["x"])"}) {
          try {
            slab::chat::render_chat(t, ojson::parse(m), ojson::parse(tools), true, {{"bos_token", "<s>"}},
                                    ojson::object(), 0);
          } catch (const TemplateError&) {
          }
        }
      }
    }
  }
  WARN("fuzz: " << parsed << " templates parsed, " << rendered << " rendered without error");
  auto seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  CHECK(seconds < 10.0);
}
