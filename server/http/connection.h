#pragma once
// One accepted socket, shared by the reactor (which reads and frames requests while the
// connection is idle) and the worker that runs its current request (which writes the response).
// Internal to the HTTP layer. Only the reactor closes the descriptor, so a number the kernel
// reuses is never written to by a worker that still holds the old connection.
#include <atomic>
#include <chrono>
#include <string>
#include <string_view>

#include "http/request_parser.h"

namespace slab::http {

using Clock = std::chrono::steady_clock;

struct Connection {
  enum class Phase {
    reading,   // in the reactor's epoll set, framing a request
    busy,      // a worker runs its request; the reactor leaves it alone
    draining,  // an error answer was sent and the write side shut; unread input is discarded
    closed,    // the descriptor is closed; only stale references remain
  };

  Connection(int socket_fd, ParserLimits limits) : fd(socket_fd), parser(limits) {}

  int fd;
  Phase phase = Phase::reading;
  RequestParser parser;
  std::string input;           // received, not yet framed (pipelined requests wait here)
  bool sent_continue = false;  // "100 Continue" already sent for the request being read
  size_t drained_bytes = 0;    // input discarded since an error answer
  Clock::time_point deadline;  // idle, request-read or drain deadline, by phase
  // Set by the worker: the response could not be written, or the connection must not be reused.
  bool close_after_response = false;
  // Set by the reactor when the server stops, read by the worker's writes and liveness checks.
  std::atomic<bool> shut_down{false};
};

// Writes all of `data` to a non-blocking socket, waiting for room up to `timeout` at a time (a
// client that stops reading for that long is gone). False on error, time-out or shut_down.
bool send_all(Connection& c, std::string_view data, std::chrono::milliseconds timeout);

// Non-blocking: whether the peer closed or reset the connection (POLLRDHUP / POLLHUP / POLLERR).
bool peer_gone(const Connection& c);

}  // namespace slab::http
