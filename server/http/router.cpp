#include "http/router.h"

namespace slab::http {

void Router::add(std::string method, std::string path, RouteKind kind, Handler handler) {
  Route route{std::move(method), std::move(path), false, kind, std::move(handler)};
  if (!route.path.empty() && route.path.back() == '*') {
    route.path.pop_back();
    route.prefix = true;
  }
  routes_.push_back(std::move(route));
}

Router::Match Router::find(const std::string& method, const std::string& path) const {
  Match match;
  match.status = 404;
  for (const Route& r : routes_) {
    const bool path_matches =
        r.prefix ? path.size() > r.path.size() && path.compare(0, r.path.size(), r.path) == 0 : path == r.path;
    if (!path_matches) continue;
    if (r.method == method) {
      match.handler = &r.handler;
      match.kind = r.kind;
      match.status = 0;
      match.allow.clear();
      return match;
    }
    match.status = 405;
    if (match.allow.find(r.method) == std::string::npos) match.allow += (match.allow.empty() ? "" : ", ") + r.method;
  }
  return match;
}

}  // namespace slab::http
