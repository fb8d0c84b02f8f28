#pragma once
// The HTTP/1.1 connection layer: one reactor thread (epoll) accepts connections and frames every
// request under deadlines and size limits; complete requests go to worker threads, which run the
// route's handler and write its answer. A connection holds a thread only while its request
// runs, so clients that trickle bytes, idle keep-alives and half-sent bodies cost a descriptor
// and a buffer, never a worker, and they are closed when their deadline passes.
//
// Why not cpp-httplib's server: the Debian 12 build (0.11.4) cannot bound the time to read a
// request's header (one byte a second holds a thread forever), does not apply its body limit to
// chunked bodies, fixes the listen backlog at 5 in its compiled part, and answers only the first
// of two pipelined requests.
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "http/request_parser.h"
#include "http/router.h"

namespace slab::http {

struct Connection;

struct HttpServerOptions {
  std::string host = "127.0.0.1";
  int port = 8000;
  int listen_backlog = 1024;
  int worker_threads = 64;                           // work routes running at once
  int light_threads = 2;                             // light routes running at once
  size_t max_queued = 1024;                          // complete requests waiting for a worker; 503 beyond
  size_t max_connections = 4096;                     // open connections; beyond, new ones get 503 and are closed
  std::chrono::milliseconds idle_timeout{5000};      // a keep-alive connection with no request byte
  std::chrono::milliseconds request_timeout{30000};  // from a request's first byte to its last
  std::chrono::milliseconds write_timeout{30000};    // a response write that makes no progress
  ParserLimits limits;
  // Called on the reactor thread once the server has been quiet (no socket event, no request
  // running) for `quiet_after` following activity: the place to give memory back after a burst.
  std::function<void()> on_quiet;
  std::chrono::milliseconds quiet_after{2000};
  // The body of an error the layer answers itself (malformed request, 404, 405, 408, 413, 503):
  // a JSON error for an API server. Gets the status and a message.
  std::function<std::string(int, const std::string&)> error_body;
};

class HttpServer {
 public:
  HttpServer(HttpServerOptions options, Router router);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens; false with `error` set when the address cannot be used.
  bool bind(std::string& error);
  // Serves until stop(); returns after every thread has ended and every connection is closed.
  void run();
  // Thread-safe, also before run() (run() then returns at once). Shuts every connection down,
  // so workers' writes and client_gone() see it, waits for the handlers, closes everything.
  void stop();

  int port() const { return bound_port_; }

 private:
  struct Job {
    std::shared_ptr<Connection> connection;
    HttpRequest request;
    const Handler* handler;
  };
  struct WorkerPool {
    std::mutex mutex;
    std::condition_variable ready;
    std::deque<Job> jobs;
    std::vector<std::thread> threads;
  };

  void reactor_loop();
  void accept_connections();
  void read_from(const std::shared_ptr<Connection>& c);
  // Frames what the connection has buffered; dispatches a complete request or answers an error.
  void advance(const std::shared_ptr<Connection>& c);
  void dispatch(const std::shared_ptr<Connection>& c, HttpRequest request);
  // An answer from the reactor itself (errors): non-blocking, then the connection closes.
  void answer_and_close(const std::shared_ptr<Connection>& c, int status, const std::string& message,
                        const std::string& extra_headers = {});
  void sweep_deadlines();
  void report_quiet();
  void take_returned();
  void close_connection(const std::shared_ptr<Connection>& c);
  void watch(Connection& c);
  void unwatch(Connection& c);

  void worker_loop(WorkerPool& pool);
  void run_job(Job& job);
  // A worker hands the connection back to the reactor (to read the next request, or to close).
  void give_back(std::shared_ptr<Connection> c);

  HttpServerOptions options_;
  Router router_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;   // eventfd: returned connections, stop
  int spare_fd_ = -1;  // given up to accept (and close) one connection when out of descriptors
  int bound_port_ = 0;
  std::unordered_map<int, std::shared_ptr<Connection>> connections_;  // reactor thread only

  std::mutex returned_mutex_;
  std::vector<std::shared_ptr<Connection>> returned_;
  bool stop_requested_ = false;                       // under returned_mutex_
  bool stopping_ = false;                             // reactor thread only
  std::chrono::steady_clock::time_point last_event_;  // reactor thread only
  bool quiet_reported_ = true;                        // reactor thread only: on_quiet called since the last event

  WorkerPool work_pool_;
  WorkerPool light_pool_;
  bool pools_stopping_ = false;  // under each pool's mutex
};

}  // namespace slab::http
