#pragma once
// Stop strings over streamed text: text that could still turn into a stop string is held back,
// so a stop string is never emitted, even when it spans several tokens.
#include <string>
#include <string_view>
#include <vector>

namespace slab {

class StopStringMatcher {
 public:
  explicit StopStringMatcher(std::vector<std::string> stop_strings);

  struct Output {
    std::string text;      // safe to emit now
    bool stopped = false;  // a stop string matched; `text` ends right before it
  };
  Output push(std::string_view delta);
  // End of generation without a match: releases the held-back text.
  std::string flush();

 private:
  std::vector<std::string> stop_strings_;
  std::string pending_;
};

}  // namespace slab
