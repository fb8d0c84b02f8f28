#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "engine/stop_strings.h"

using slab::StopStringMatcher;

namespace {
// Feeds the pieces; returns everything emitted and whether a stop matched.
std::pair<std::string, bool> feed(std::vector<std::string> stops, const std::vector<std::string>& pieces) {
  StopStringMatcher m(std::move(stops));
  std::string emitted;
  for (const std::string& p : pieces) {
    auto out = m.push(p);
    emitted += out.text;
    if (out.stopped) return {emitted, true};
  }
  return {emitted + m.flush(), false};
}
}  // namespace

TEST_CASE("stop strings are matched across token boundaries and never emitted", "[engine][stop]") {
  CHECK(feed({"END"}, {"hello E", "N", "D more"}) == std::make_pair(std::string("hello "), true));
  CHECK(feed({"\n\n"}, {"a\n", "\nb"}) == std::make_pair(std::string("a"), true));
  CHECK(feed({"xyz"}, {"xy", "a"}) == std::make_pair(std::string("xya"), false));
  CHECK(feed({"stop", "op"}, {"sto", "p"}) == std::make_pair(std::string(""), true));
  CHECK(feed({"op", "top"}, {"s", "to", "p!"}) == std::make_pair(std::string("s"), true));
  CHECK(feed({}, {"a", "b"}) == std::make_pair(std::string("ab"), false));
  CHECK(feed({""}, {"a"}) == std::make_pair(std::string("a"), false));
}

TEST_CASE("text that cannot start a stop string is released at once", "[engine][stop]") {
  StopStringMatcher m({"</s>"});
  CHECK(m.push("abc").text == "abc");
  CHECK(m.push("de<").text == "de");
  CHECK(m.push("/x").text == "</x");
  CHECK(m.push("</").text.empty());
  auto out = m.push("s>tail");
  CHECK(out.stopped);
  CHECK(out.text.empty());
}
