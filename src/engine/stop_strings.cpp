#include "engine/stop_strings.h"

#include <algorithm>
#include <utility>

namespace slab {

StopStringMatcher::StopStringMatcher(std::vector<std::string> stop_strings) : stop_strings_(std::move(stop_strings)) {
  std::erase_if(stop_strings_, [](const std::string& s) { return s.empty(); });
}

StopStringMatcher::Output StopStringMatcher::push(std::string_view delta) {
  pending_.append(delta);
  Output out;
  size_t first_match = std::string::npos;
  for (const std::string& stop : stop_strings_) first_match = std::min(first_match, pending_.find(stop));
  if (first_match != std::string::npos) {
    out.text = pending_.substr(0, first_match);
    out.stopped = true;
    pending_.clear();
    return out;
  }
  // Hold back the longest tail that is a proper prefix of some stop string.
  size_t hold = 0;
  for (const std::string& stop : stop_strings_) {
    for (size_t len = std::min(stop.size() - 1, pending_.size()); len > hold; --len) {
      if (std::string_view(pending_).substr(pending_.size() - len) == std::string_view(stop).substr(0, len)) {
        hold = len;
        break;
      }
    }
  }
  out.text = pending_.substr(0, pending_.size() - hold);
  pending_.erase(0, pending_.size() - hold);
  return out;
}

std::string StopStringMatcher::flush() { return std::exchange(pending_, {}); }

}  // namespace slab
