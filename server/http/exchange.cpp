#include "http/exchange.h"

#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstdio>

#include "http/connection.h"

namespace slab::http {

bool send_all(Connection& c, std::string_view data, std::chrono::milliseconds timeout) {
  while (!data.empty()) {
    if (c.shut_down.load(std::memory_order_relaxed)) return false;
    const ssize_t n = ::send(c.fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{c.fd, POLLOUT, 0};
      const int ready = ::poll(&p, 1, static_cast<int>(timeout.count()));
      if (ready <= 0 || (p.revents & (POLLERR | POLLHUP)) != 0) return false;
      continue;
    }
    return false;
  }
  return true;
}

bool peer_gone(const Connection& c) {
  if (c.shut_down.load(std::memory_order_relaxed)) return true;
  pollfd p{c.fd, POLLRDHUP, 0};
  if (::poll(&p, 1, 0) < 0) return false;
  return (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}

Exchange::Exchange(Connection& connection, HttpRequest request, std::chrono::milliseconds write_timeout)
    : connection_(connection), request_(std::move(request)), write_timeout_(write_timeout) {}

bool Exchange::client_gone() const { return failed_ || peer_gone(connection_); }

bool Exchange::send(std::string_view data) {
  if (failed_) return false;
  if (!send_all(connection_, data, write_timeout_)) failed_ = true;
  return !failed_;
}

std::string Exchange::status_head(int status, std::string_view content_type, const HeaderList& headers) const {
  std::string head = "HTTP/1." + std::to_string(request_.minor_version >= 1 ? 1 : 0) + " " + std::to_string(status) +
                     " " + reason_phrase(status) + "\r\n";
  if (!content_type.empty()) head.append("Content-Type: ").append(content_type).append("\r\n");
  for (const auto& [name, value] : headers) head.append(name).append(": ").append(value).append("\r\n");
  return head;
}

bool Exchange::respond(int status, std::string_view content_type, std::string_view body, const HeaderList& headers) {
  if (state_ != State::none) return false;
  state_ = State::done;
  std::string out = status_head(status, content_type, headers);
  out += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  out += request_.keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  // One send for head and body: with TCP_NODELAY a separate head would go out as its own packet.
  out.append(body);
  return send(out);
}

bool Exchange::begin_stream(int status, std::string_view content_type, const HeaderList& headers) {
  if (state_ != State::none) return false;
  state_ = State::streaming;
  chunked_ = request_.minor_version >= 1;
  std::string out = status_head(status, content_type, headers);
  if (chunked_) {
    out += "Transfer-Encoding: chunked\r\n";
    out += request_.keep_alive ? "Connection: keep-alive\r\n\r\n" : "Connection: close\r\n\r\n";
  } else {
    out += "Connection: close\r\n\r\n";  // the end of the body is the end of the connection
    request_.keep_alive = false;
  }
  return send(out);
}

bool Exchange::write(std::string_view data) {
  if (state_ != State::streaming) return false;
  if (data.empty()) return !failed_;
  if (!chunked_) return send(data);
  char size_line[32];
  const int n = std::snprintf(size_line, sizeof size_line, "%zx\r\n", data.size());
  std::string out(size_line, static_cast<size_t>(n));
  out.append(data).append("\r\n");
  return send(out);
}

void Exchange::end_stream() {
  if (state_ != State::streaming) return;
  state_ = State::done;
  if (chunked_) send("0\r\n\r\n");
}

}  // namespace slab::http
