// The built-in named chat templates (--chat-template chatml, ...): each renders as Python jinja2
// renders the same source (tests/fixtures/chat/builtin.json, scripts/make_chat_builtin_fixtures.py),
// and as the real template of its family renders plain conversations (the real templates'
// fixtures in tests/fixtures/chat/expected/, made from ../shared/testdata).
#include "chat/builtin_templates.h"
#include "chat/chat_template.h"
#include "chat/template_source.h"
#include "test_paths.h"

#include <fstream>
#include <map>
#include <set>

using slab::chat::ChatTemplate;
using slab::chat::TemplateError;
using ojson = nlohmann::ordered_json;

namespace {

ojson read_fixture(const std::string& relative) {
  std::ifstream in(slab::test::fixtures_dir() / "chat" / relative);
  REQUIRE(in.good());
  return ojson::parse(in);
}

std::map<std::string, ojson> conversations_by_name() {
  std::map<std::string, ojson> out;
  const ojson fixture = read_fixture("conversations.json");
  for (const auto& c : fixture["conversations"]) out[c["name"].get<std::string>()] = c;
  return out;
}

std::string render(const ChatTemplate& t, const ojson& conv, bool agp, const ojson& special_tokens) {
  return slab::chat::render_chat(t, conv["messages"], nullptr, agp, special_tokens, conv["kwargs"], 0);
}

}  // namespace

TEST_CASE("built-in chat templates are the seven llama-server names", "[chat][builtin]") {
  CHECK(slab::chat::builtin_chat_template_names() ==
        std::vector<std::string>{"chatml", "llama2", "llama3", "mistral", "gemma", "phi3", "qwen"});
  CHECK(slab::chat::builtin_chat_template_list() == "chatml, llama2, llama3, mistral, gemma, phi3, qwen");
  CHECK_FALSE(slab::chat::builtin_chat_template("vicuna"));
  CHECK_FALSE(slab::chat::builtin_chat_template("ChatML"));
  for (const auto& name : slab::chat::builtin_chat_template_names()) {
    INFO(name);
    CHECK_NOTHROW(ChatTemplate(*slab::chat::builtin_chat_template(name)));
  }
}

TEST_CASE("the --chat-template option takes a built-in name or a file", "[chat][builtin]") {
  CHECK(slab::chat::read_chat_template_option("chatml") == *slab::chat::builtin_chat_template("chatml"));
  const auto file = std::filesystem::temp_directory_path() / "slab_chat_template_option_test.jinja";
  std::ofstream(file) << "{{ messages | length }}";
  CHECK(slab::chat::read_chat_template_option(file.string()) == "{{ messages | length }}");
  std::filesystem::remove(file);
  CHECK_THROWS_WITH(slab::chat::read_chat_template_option("no-such-template"),
                    Catch::Matchers::Contains("no-such-template") &&
                        Catch::Matchers::Contains("chatml, llama2, llama3, mistral, gemma, phi3, qwen"));
}

TEST_CASE("built-in chat templates render like jinja2", "[chat][builtin]") {
  const ojson fixture = read_fixture("builtin.json");
  const auto convs = conversations_by_name();
  std::set<std::string> seen;
  for (const auto& t : fixture["templates"]) {
    const std::string name = t["name"].get<std::string>();
    INFO(name);
    seen.insert(name);
    auto source = slab::chat::builtin_chat_template(name);
    REQUIRE(source);
    CHECK(std::string(*source) == t["source"].get<std::string>());  // the fixture is of this source
    ChatTemplate tmpl(*source);
    for (const auto& c : t["cases"]) {
      const std::string conv = c["conversation"].get<std::string>();
      const bool agp = c["add_generation_prompt"].get<bool>();
      INFO(conv << " agp=" << agp);
      REQUIRE(c.contains("output"));  // the built-ins render every conversation
      CHECK(render(tmpl, convs.at(conv), agp, t["special_tokens"]) == c["output"].get<std::string>());
    }
  }
  CHECK(seen.size() == slab::chat::builtin_chat_template_names().size());
}

TEST_CASE("built-in chat templates render plain conversations like their family's real template", "[chat][builtin]") {
  const auto convs = conversations_by_name();
  // Conversations of system, user and assistant turns only (with qwen's reasoning ones for qwen).
  const std::set<std::string> plain = {"user_only",     "system_user", "multi_turn",      "multi_turn_no_system",
                                       "empty_content", "unicode",     "non_alternating", "assistant_first"};
  struct Family {
    const char* builtin;
    const char* real;                    // fixture under expected/
    std::set<std::string> also, except;  // conversations added to / taken from `plain`
  };
  const Family families[] = {
      {"llama3", "llama3.1", {}, {}},
      {"qwen", "qwen3", {"reasoning", "kwargs_thinking_on"}, {}},
      // Qwen 3 is ChatML plus <think> blocks, which plain ChatML does not write.
      {"chatml", "qwen3", {}, {"multi_turn_no_system"}},
      {"gemma", "gemma3", {}, {}},
      {"gemma", "google-gemma-2-2b-it", {}, {}},
      {"phi3", "microsoft-Phi-3.5-mini-instruct", {}, {}},
      {"mistral", "mistralai-Mistral-Nemo-Instruct-2407", {}, {}},
  };
  for (const auto& f : families) {
    INFO(f.builtin << " vs " << f.real);
    const ojson expected = read_fixture(std::string("expected/") + f.real + ".json");
    ChatTemplate tmpl(*slab::chat::builtin_chat_template(f.builtin));
    int compared = 0;
    for (const auto& c : expected["cases"]) {
      const std::string conv = c["conversation"].get<std::string>();
      if ((!plain.count(conv) && !f.also.count(conv)) || f.except.count(conv)) continue;
      if (!c.contains("output"))
        continue;  // the real template refuses it (gemma: a system turn, roles not alternating)
      const bool agp = c["add_generation_prompt"].get<bool>();
      INFO(conv << " agp=" << agp);
      CHECK(render(tmpl, convs.at(conv), agp, expected["special_tokens"]) == c["output"].get<std::string>());
      ++compared;
    }
    CHECK(compared >= 4);  // gemma 2 renders the fewest: no system turns, strictly alternating roles
  }
}
