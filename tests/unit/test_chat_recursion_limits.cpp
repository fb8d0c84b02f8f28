// Templates and inputs nested 100k deep end in a TemplateError, never a stack overflow: the parser
// bounds block and expression nesting, the renderer bounds its own stack use (macros, blocks and
// expressions together), values bound how deeply lists and dicts nest, and the chat inputs are
// checked before anything recursive touches them.
#include "chat/chat_template.h"
#include "test_paths.h"

#include <pthread.h>

#include <functional>
#include <string>

using slab::chat::ChatTemplate;
using slab::chat::RenderLimits;
using slab::chat::TemplateError;
using ojson = nlohmann::ordered_json;

namespace {

constexpr int kDeep = 100000;

std::string repeat(const std::string& s, int n) {
  std::string out;
  out.reserve(s.size() * static_cast<std::size_t>(n));
  for (int i = 0; i < n; ++i) out += s;
  return out;
}

// The error a template ends in ("" when it rendered), parse and render alike.
std::string error_of(const std::string& source, const ojson& context = ojson::object(),
                     const RenderLimits& limits = {}) {
  try {
    ChatTemplate(source).render(context, 0, limits);
    return "";
  } catch (const TemplateError& e) {
    return e.what();
  }
}

}  // namespace

TEST_CASE("templates nested 100k deep fail to parse with a clear error", "[chat][limits]") {
  const std::string nested_too_deeply = "nested too deeply";
  struct Case {
    const char* name;
    std::string source;
  };
  const Case cases[] = {
      {"parentheses", "{{ " + repeat("(", kDeep) + "1" + repeat(")", kDeep) + " }}"},
      {"list literals", "{{ " + repeat("[", kDeep) + repeat("]", kDeep) + " }}"},
      {"dict literals", "{{ " + repeat("{'a': ", kDeep) + "1" + repeat("}", kDeep) + " }}"},
      {"if blocks", repeat("{% if true %}", kDeep) + "x" + repeat("{% endif %}", kDeep)},
      {"unclosed if blocks", repeat("{% if true %}", kDeep)},
      {"for blocks", repeat("{% for x in [1] %}", kDeep) + repeat("{% endfor %}", kDeep)},
      {"macro definitions", repeat("{% macro m() %}", kDeep) + repeat("{% endmacro %}", kDeep)},
      {"set blocks", repeat("{% set x %}", kDeep) + repeat("{% endset %}", kDeep)},
      {"not", "{{ " + repeat("not ", kDeep) + "x }}"},
      {"unary minus", "{{ " + repeat("-", kDeep) + "1 }}"},
      {"conditional expressions", "{{ " + repeat("1 if x else (", kDeep) + "1" + repeat(")", kDeep) + " }}"},
      {"additions", "{{ 1" + repeat(" + 1", kDeep) + " }}"},
      {"powers", "{{ 2" + repeat(" ** 1", kDeep) + " }}"},
      {"filters", "{{ 'a'" + repeat(" | upper", kDeep) + " }}"},
      {"attributes", "{{ x" + repeat(".a", kDeep) + " }}"},
      {"calls", "{{ x" + repeat("()", kDeep) + " }}"},
      {"subscripts", "{{ x" + repeat("[0]", kDeep) + " }}"},
  };
  for (const auto& c : cases) {
    INFO(c.name);
    bool parsed = true;
    std::string message;
    try {
      ChatTemplate t(c.source);
    } catch (const TemplateError& e) {
      parsed = false;
      message = e.what();
    }
    CHECK_FALSE(parsed);
    CHECK_THAT(message, Catch::Matchers::Contains(nested_too_deeply));
  }
  // A flat chain of comparisons is a loop, not nesting: it parses and renders.
  CHECK(ChatTemplate("{{ 1" + repeat(" < 2", kDeep) + " }}").render(ojson::object()) == "False");
}

TEST_CASE("runaway recursion while rendering fails with a clear error", "[chat][limits]") {
  // Plain recursion: the macro call limit (200 calls), or, where frames are large (sanitizer
  // builds), the stack budget before it; both say recursion.
  CHECK_THAT(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"),
             Catch::Matchers::Contains("recursion"));
  CHECK_THAT(error_of("{% macro f() %}{% call f() %}{% endcall %}{% endmacro %}{{ f() }}"),
             Catch::Matchers::Contains("recursion"));
  RenderLimits few_calls;
  few_calls.max_call_depth = 20;
  CHECK_THAT(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", ojson::object(), few_calls),
             Catch::Matchers::Contains("macro recursion deeper than 20 calls"));
  // Each call nested 120 blocks deep: far more stack per call; the stack budget stops it first.
  const std::string blocks = "{% macro f(n) %}" + repeat("{% if true %}{% for x in [1] %}", 60) + "{{ f(n + 1) }}" +
                             repeat("{% endfor %}{% endif %}", 60) + "{% endmacro %}{{ f(0) }}";
  CHECK_THAT(error_of(blocks), Catch::Matchers::Contains("recursion too deep"));
  const std::string expressions =
      "{% macro g(n) %}{{ " + repeat("(", 120) + "g(n + 1)" + repeat(")", 120) + " }}{% endmacro %}{{ g(0) }}";
  CHECK_THAT(error_of(expressions), Catch::Matchers::Contains("too deep"));
  // The budget is what it says: a smaller one stops a shallower recursion.
  RenderLimits tight;
  tight.max_stack_bytes = 64 << 10;
  CHECK_THAT(error_of("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", ojson::object(), tight),
             Catch::Matchers::Contains("more than 64 KiB of stack"));
  // An ordinary recursive macro (a JSON schema printer's shape) is nowhere near either limit.
  CHECK(ChatTemplate("{% macro f(n) %}{% if n > 0 %}{{ f(n - 1) }}{% endif %}{{ n }}{% endmacro %}{{ f(50) }}")
            .render(ojson::object())
            .size() > 50);
}

namespace {

// Runs fn on a thread with the given stack size and returns what it returned.
std::string on_thread_with_stack(std::size_t stack_bytes, const std::function<std::string()>& fn) {
  struct Job {
    const std::function<std::string()>* fn;
    std::string result;
  } job{&fn, {}};
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, stack_bytes);
  pthread_t thread;
  auto run = [](void* p) -> void* {
    auto* j = static_cast<Job*>(p);
    j->result = (*j->fn)();
    return nullptr;
  };
  REQUIRE(pthread_create(&thread, &attr, run, &job) == 0);
  pthread_join(thread, nullptr);
  pthread_attr_destroy(&attr);
  return job.result;
}

}  // namespace

TEST_CASE("the render stack budget holds on a thread with a 2 MiB stack", "[chat][limits]") {
  // Twice the budget: 2 MiB in a plain build, scaled like the budget in a sanitizer build.
  const std::string blocks = "{% macro f(n) %}" + repeat("{% if true %}{% for x in [1] %}", 60) + "{{ f(n + 1) }}" +
                             repeat("{% endfor %}{% endif %}", 60) + "{% endmacro %}{{ f(0) }}";
  CHECK_THAT(on_thread_with_stack(slab::chat::kStackScale * (2u << 20), [&] { return error_of(blocks); }),
             Catch::Matchers::Contains("recursion too deep"));
}

TEST_CASE("values nested 100k deep are refused, built or given", "[chat][limits]") {
  const std::string too_deep = "nested deeper than";
  CHECK_THAT(error_of("{% set ns = namespace(x=[]) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}{% endfor %}"
                      "{{ ns.x }}"),
             Catch::Matchers::Contains(too_deep));
  CHECK_THAT(error_of("{% set ns = namespace(x={}) %}{% for i in range(100000) %}{% set ns.x = {'a': ns.x} %}"
                      "{% endfor %}{{ ns.x | tojson }}"),
             Catch::Matchers::Contains(too_deep));
  // 500 levels are fine: printed, compared, serialised.
  CHECK(ChatTemplate("{% set ns = namespace(x=[]) %}{% for i in range(500) %}{% set ns.x = [ns.x] %}{% endfor %}"
                     "{{ (ns.x | tojson | length) }} {{ ns.x == ns.x }}")
            .render(ojson::object()) == "1002 True");

  ojson deep = 1;
  for (int i = 0; i < kDeep; ++i) deep = ojson::array({std::move(deep)});
  ojson context = ojson::object();
  context["x"] = std::move(deep);
  CHECK_THAT(error_of("{{ x | length }}", context), Catch::Matchers::Contains(too_deep));
  ojson messages = ojson::array();
  messages.push_back({{"role", "user"}, {"content", "hi"}});
  messages[0]["content"] = std::move(context["x"]);
  std::string message;
  try {
    slab::chat::render_chat(ChatTemplate("{{ messages | length }}"), messages, nullptr, false, ojson::object(),
                            ojson::object(), 0);
  } catch (const TemplateError& e) {
    message = e.what();
  }
  CHECK_THAT(message, Catch::Matchers::Contains("the messages nest lists and objects deeper than"));
}

TEST_CASE("namespaces that refer to themselves or chain 100k deep are released without recursing", "[chat][limits]") {
  CHECK(ChatTemplate("{% set ns = namespace(x=1) %}{% set ns.x = ns %}{{ ns.x.x.x is defined }}")
            .render(ojson::object()) == "True");
  // Destroying a chain of 100k namespaces must not recurse through it (on a 512 KiB stack it would
  // overflow if it did).
  CHECK(on_thread_with_stack(512u << 10, [] {
          return ChatTemplate(
                     "{% set h = namespace(n=none) %}{% for i in range(100000) %}"
                     "{% set h.n = namespace(x=h.n) %}{% endfor %}{{ h.n.x.x is defined }}")
              .render(ojson::object());
        }) == "True");
}
