#pragma once
// Method + path to handler. A path that exists under another method is 405 with its Allow list;
// one that exists under none is 404.
#include <functional>
#include <string>
#include <vector>

namespace slab::http {

class Exchange;
using Handler = std::function<void(Exchange&)>;

// Light routes answer at once from in-memory state (health, metrics, model list) and run on
// their own small pool, so they answer while every worker is busy streaming. Work routes may
// block for as long as a generation runs.
enum class RouteKind { light, work };

class Router {
 public:
  struct Match {
    const Handler* handler = nullptr;  // null: no route; see status
    RouteKind kind = RouteKind::work;
    int status = 0;     // 404 or 405 when handler is null
    std::string allow;  // with 405: the methods the path takes, "GET, POST"
  };

  // `path` is matched exactly, or as a prefix when it ends with '*' ("/v1/models/*").
  void add(std::string method, std::string path, RouteKind kind, Handler handler);
  Match find(const std::string& method, const std::string& path) const;

 private:
  struct Route {
    std::string method;
    std::string path;
    bool prefix = false;
    RouteKind kind = RouteKind::work;
    Handler handler;
  };
  std::vector<Route> routes_;
};

}  // namespace slab::http
