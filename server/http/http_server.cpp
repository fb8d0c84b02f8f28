#include "http/http_server.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <spdlog/spdlog.h>

#include "http/connection.h"
#include "http/exchange.h"

namespace slab::http {
namespace {

// How long a connection whose request was refused may go on sending before it is closed: the
// client reads the error more reliably when its unread bytes are not answered with a reset.
constexpr std::chrono::milliseconds kDrainTime{2000};
// Draining lets a client that is still sending read our error answer before the connection
// resets; a client that sends more than this after the answer is not reading it. Reading a
// refused 50 MB chunked upload to its end tripled honest requests' time to first token in the
// load-and-abuse soak on 2 cores.
constexpr size_t kMaxDrainBytes = 256 << 10;
// Bytes one connection may have read per reactor wake-up, so one fast sender cannot hold the
// reactor while others wait.
constexpr size_t kReadPerWake = 1 << 20;
constexpr int kSweepEveryMs = 100;

}  // namespace

HttpServer::HttpServer(HttpServerOptions options, Router router)
    : options_(std::move(options)), router_(std::move(router)) {
  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0)
    throw std::runtime_error(std::string("cannot create the event loop: ") + std::strerror(errno));
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = wake_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  if (!options_.error_body) {
    options_.error_body = [](int, const std::string& message) { return message; };
  }
}

HttpServer::~HttpServer() {
  for (auto& [fd, c] : connections_) ::close(fd);
  if (listen_fd_ >= 0) ::close(listen_fd_);
  ::close(wake_fd_);
  ::close(epoll_fd_);
  if (spare_fd_ >= 0) ::close(spare_fd_);
}

bool HttpServer::bind(std::string& error) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(options_.port);
  if (int rc = ::getaddrinfo(options_.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    error = options_.host + ": " + ::gai_strerror(rc);
    return false;
  }
  for (addrinfo* a = found; a != nullptr && listen_fd_ < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, options_.listen_backlog) == 0) {
      listen_fd_ = fd;
    } else {
      error = std::strerror(errno);
      ::close(fd);
    }
  }
  ::freeaddrinfo(found);
  if (listen_fd_ < 0) {
    error = options_.host + ":" + port + ": " + (error.empty() ? "no usable address" : error);
    return false;
  }
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
  bound_port_ = addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                           : ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port);
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd_;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  return true;
}

void HttpServer::run() {
  for (int i = 0; i < options_.worker_threads; ++i)
    work_pool_.threads.emplace_back([this] { worker_loop(work_pool_); });
  for (int i = 0; i < options_.light_threads; ++i)
    light_pool_.threads.emplace_back([this] { worker_loop(light_pool_); });
  reactor_loop();
  for (WorkerPool* pool : {&work_pool_, &light_pool_}) {
    {
      std::lock_guard lock(pool->mutex);
      pools_stopping_ = true;
    }
    pool->ready.notify_all();
    for (std::thread& t : pool->threads) t.join();
    pool->threads.clear();
  }
}

void HttpServer::stop() {
  {
    std::lock_guard lock(returned_mutex_);
    stop_requested_ = true;
  }
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void HttpServer::reactor_loop() {
  std::vector<epoll_event> events(256);
  auto next_sweep = Clock::now();
  take_returned();  // a stop() that came before run()
  while (!(stopping_ && connections_.empty())) {
    const int n = ::epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), kSweepEveryMs);
    if (n > 0) {
      last_event_ = Clock::now();
      quiet_reported_ = false;
    }
    for (int i = 0; i < n; ++i) {
      const int fd = events[static_cast<size_t>(i)].data.fd;
      if (fd == listen_fd_) {
        accept_connections();
      } else if (fd == wake_fd_) {
        uint64_t count = 0;
        [[maybe_unused]] const ssize_t r = ::read(wake_fd_, &count, sizeof count);
        take_returned();
      } else if (auto it = connections_.find(fd); it != connections_.end()) {
        const std::shared_ptr<Connection> c = it->second;  // the map entry may go while it is read
        read_from(c);
      }
    }
    if (Clock::now() >= next_sweep) {
      sweep_deadlines();
      report_quiet();
      next_sweep = Clock::now() + std::chrono::milliseconds(kSweepEveryMs);
    }
  }
}

void HttpServer::accept_connections() {
  while (!stopping_) {
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if ((errno == EMFILE || errno == ENFILE) && spare_fd_ >= 0) {
        // Out of descriptors: the pending connection would wake the loop for ever. Give up the
        // spare descriptor for a moment to take it off the queue and close it.
        spdlog::warn("out of file descriptors: refusing a connection (raise the open-files limit)");
        ::close(spare_fd_);
        const int refused = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (refused >= 0) ::close(refused);
        spare_fd_ = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
        continue;
      }
      return;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    auto c = std::make_shared<Connection>(fd, options_.limits);
    connections_[fd] = c;
    if (connections_.size() > options_.max_connections) {
      answer_and_close(c, 503, "the server has too many open connections; try again later");
      continue;
    }
    c->deadline = Clock::now() + options_.idle_timeout;
    watch(*c);
  }
}

void HttpServer::watch(Connection& c) {
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLRDHUP;
  ev.data.fd = c.fd;
  ::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, c.fd, &ev);
}

void HttpServer::unwatch(Connection& c) { ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, c.fd, nullptr); }

void HttpServer::close_connection(const std::shared_ptr<Connection>& c) {
  if (c->phase == Connection::Phase::closed) return;
  const int fd = c->fd;
  c->phase = Connection::Phase::closed;
  ::close(fd);  // also leaves the epoll set
  connections_.erase(fd);
}

void HttpServer::read_from(const std::shared_ptr<Connection>& c) {
  if (c->phase == Connection::Phase::busy || c->phase == Connection::Phase::closed) return;
  char buf[64 << 10];
  size_t total = 0;
  bool closed = false;
  while (total < kReadPerWake) {
    const ssize_t n = ::recv(c->fd, buf, sizeof buf, 0);
    if (n > 0) {
      total += static_cast<size_t>(n);
      if (c->phase == Connection::Phase::draining && (c->drained_bytes += static_cast<size_t>(n)) > kMaxDrainBytes) {
        closed = true;  // a client still pouring a refused body gets a reset, not our cycles
        break;
      }
      if (c->phase == Connection::Phase::reading) c->input.append(buf, static_cast<size_t>(n));
      // Frame as we go, so a body over the limit is refused before it is all buffered.
      if (c->input.size() >= sizeof buf) {
        advance(c);
        if (c->phase != Connection::Phase::reading) break;
      }
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    closed = true;  // EOF or error
    break;
  }
  if (c->phase == Connection::Phase::reading) advance(c);
  // A peer that closed is done unless it left a complete request behind (now busy).
  if (closed && c->phase != Connection::Phase::busy) close_connection(c);
}

void HttpServer::advance(const std::shared_ptr<Connection>& c) {
  while (c->phase == Connection::Phase::reading) {
    const bool was_started = c->parser.started();
    const size_t consumed = c->parser.feed(c->input);
    c->input.erase(0, consumed);
    switch (c->parser.state()) {
      case RequestParser::State::need_more:
        if (!was_started && c->parser.started()) c->deadline = Clock::now() + options_.request_timeout;
        if (c->parser.expects_continue() && !c->sent_continue) {
          c->sent_continue = true;
          static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
          [[maybe_unused]] const ssize_t n = ::send(c->fd, kContinue.data(), kContinue.size(), MSG_NOSIGNAL);
        }
        return;
      case RequestParser::State::failed:
        answer_and_close(c, c->parser.error_status(), c->parser.error_message());
        return;
      case RequestParser::State::complete:
        c->sent_continue = false;
        dispatch(c, c->parser.take_request());
        // A request answered by the reactor itself leaves the connection reading: go on with
        // whatever the client pipelined after it.
        break;
    }
  }
}

namespace {

// A small complete response for the reactor to send without blocking.
std::string error_response(int status, const std::string& body, bool keep_alive, const std::string& extra_headers) {
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + reason_phrase(status) + "\r\n";
  out += "Content-Type: application/json\r\nContent-Length: " + std::to_string(body.size()) + "\r\n";
  out += extra_headers;
  out += keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  return out + body;
}

bool send_without_waiting(int fd, const std::string& data) {
  const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
  return n == static_cast<ssize_t>(data.size());
}

}  // namespace

void HttpServer::dispatch(const std::shared_ptr<Connection>& c, HttpRequest request) {
  const Router::Match match = router_.find(request.method, request.path);
  auto answer_inline = [&](int status, const std::string& message, const std::string& extra_headers = {}) {
    const std::string response =
        error_response(status, options_.error_body(status, message), request.keep_alive && !stopping_, extra_headers);
    if (!send_without_waiting(c->fd, response) || !request.keep_alive || stopping_) return close_connection(c);
    c->deadline = Clock::now() + options_.idle_timeout;
  };
  if (stopping_) return answer_inline(503, "the server is shutting down");
  if (match.handler == nullptr) {
    if (match.status == 405) {
      return answer_inline(
          405, "method " + request.method + " is not allowed on " + request.path + " (allowed: " + match.allow + ")",
          "Allow: " + match.allow + "\r\n");
    }
    return answer_inline(404, "no route " + request.method + " " + request.path);
  }
  WorkerPool& pool = match.kind == RouteKind::light ? light_pool_ : work_pool_;
  {
    std::unique_lock lock(pool.mutex);
    if (&pool == &work_pool_ && pool.jobs.size() >= options_.max_queued) {
      lock.unlock();
      return answer_inline(503, "the server is busy: too many requests are waiting; try again later");
    }
    c->phase = Connection::Phase::busy;
    unwatch(*c);
    pool.jobs.push_back(Job{c, std::move(request), match.handler});
  }
  pool.ready.notify_one();
}

void HttpServer::answer_and_close(const std::shared_ptr<Connection>& c, int status, const std::string& message,
                                  const std::string& extra_headers) {
  send_without_waiting(c->fd, error_response(status, options_.error_body(status, message), false, extra_headers));
  ::shutdown(c->fd, SHUT_WR);
  c->phase = Connection::Phase::draining;
  c->input.clear();
  c->deadline = Clock::now() + kDrainTime;
}

void HttpServer::report_quiet() {
  if (quiet_reported_ || !options_.on_quiet || Clock::now() - last_event_ < options_.quiet_after) return;
  for (const auto& [fd, c] : connections_) {
    if (c->phase == Connection::Phase::busy) return;  // a long stream sends the reactor nothing
  }
  quiet_reported_ = true;
  options_.on_quiet();
}

void HttpServer::sweep_deadlines() {
  const auto now = Clock::now();
  std::vector<std::shared_ptr<Connection>> expired;
  for (const auto& [fd, c] : connections_) {
    if (c->phase != Connection::Phase::busy && now >= c->deadline) expired.push_back(c);
  }
  for (const auto& c : expired) {
    if (c->phase == Connection::Phase::reading && c->parser.started()) {
      // A request still arriving when its time is up (a trickling client): tell it, then close.
      const std::string body = options_.error_body(408, "the request was not received in time; the server waits " +
                                                            std::to_string(options_.request_timeout.count() / 1000) +
                                                            " s for a whole request");
      send_without_waiting(c->fd, error_response(408, body, false, {}));
    }
    close_connection(c);
  }
}

void HttpServer::take_returned() {
  std::vector<std::shared_ptr<Connection>> returned;
  bool stop = false;
  {
    std::lock_guard lock(returned_mutex_);
    returned.swap(returned_);
    stop = stop_requested_;
  }
  if (stop && !stopping_) {
    stopping_ = true;
    if (listen_fd_ >= 0) {
      ::close(listen_fd_);
      listen_fd_ = -1;
    }
    std::vector<std::shared_ptr<Connection>> idle;
    for (const auto& [fd, c] : connections_) {
      c->shut_down.store(true);
      ::shutdown(fd, SHUT_RDWR);  // wakes a worker blocked writing to it
      if (c->phase != Connection::Phase::busy) idle.push_back(c);
    }
    for (const auto& c : idle) close_connection(c);
  }
  for (auto& c : returned) {
    if (stopping_ || c->close_after_response) {
      close_connection(c);
      continue;
    }
    c->phase = Connection::Phase::reading;
    c->deadline = Clock::now() + options_.idle_timeout;
    watch(*c);
    advance(c);  // requests the client pipelined behind the one just answered
  }
}

void HttpServer::worker_loop(WorkerPool& pool) {
  while (true) {
    Job job;
    {
      std::unique_lock lock(pool.mutex);
      pool.ready.wait(lock, [&] { return !pool.jobs.empty() || pools_stopping_; });
      if (pool.jobs.empty()) return;
      job = std::move(pool.jobs.front());
      pool.jobs.pop_front();
    }
    if (!job.connection->shut_down.load()) run_job(job);
    give_back(std::move(job.connection));
  }
}

void HttpServer::run_job(Job& job) {
  Connection& c = *job.connection;
  Exchange exchange(c, std::move(job.request), options_.write_timeout);
  auto fail = [&](const char* what) {
    spdlog::error("{} {}: {}", exchange.request().method, exchange.request().path, what);
    if (!exchange.responded())
      exchange.respond(500, "application/json", options_.error_body(500, std::string("internal error: ") + what));
  };
  try {
    (*job.handler)(exchange);
  } catch (const std::exception& e) {
    fail(e.what());
  } catch (...) {
    fail("unknown exception");
  }
  if (exchange.streaming()) exchange.end_stream();
  if (!exchange.responded()) fail("the handler sent no response");
  c.close_after_response = !exchange.reusable();
}

void HttpServer::give_back(std::shared_ptr<Connection> c) {
  {
    std::lock_guard lock(returned_mutex_);
    returned_.push_back(std::move(c));
  }
  const uint64_t one = 1;
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

}  // namespace slab::http
