// `none` and undefined values through every filter, test, method and operator the template engine
// implements, against Python jinja2 in transformers' sandbox
// (tests/fixtures/chat/none_undefined.json, from scripts/make_chat_none_undefined_fixtures.py):
// the same output, or an error where jinja2 raised.
#include "chat/chat_template.h"
#include "test_paths.h"

#include <fstream>

using slab::chat::ChatTemplate;
using slab::chat::TemplateError;
using ojson = nlohmann::ordered_json;

TEST_CASE("none and undefined behave as in jinja2 in every filter, test and method", "[chat][none]") {
  std::ifstream in(slab::test::fixtures_dir() / "chat" / "none_undefined.json");
  REQUIRE(in.good());
  const ojson fixture = ojson::parse(in);
  const ojson& context = fixture["context"];
  int matched = 0, total = 0;
  for (const auto& row : fixture["rows"]) {
    const std::string tmpl = row["template"].get<std::string>();
    INFO(row["name"].get<std::string>() << ": " << tmpl);
    bool ok = false;
    std::string text;
    try {
      text = ChatTemplate(tmpl).render(context, 0);
      ok = true;
    } catch (const TemplateError& e) {
      text = e.what();
    }
    ++total;
    if (row.contains("output")) {
      INFO("slabserve raised: " << (ok ? "" : text));
      CHECK(ok);
      CHECK(text == (ok ? row["output"].get<std::string>() : text));
      matched += ok && text == row["output"].get<std::string>();
    } else {
      INFO("jinja2 raised " << row["error"].get<std::string>() << "; slabserve printed: " << text);
      CHECK_FALSE(ok);
      matched += !ok;
    }
  }
  CHECK(total > 400);  // the table is all there
  WARN("none/undefined: " << matched << "/" << total << " match jinja2");
}
