#include "http/request_parser.h"

#include <algorithm>
#include <charconv>

namespace slab::http {
namespace {

// RFC 9110 tchar: the characters of methods, header names and transfer codings.
bool is_tchar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool is_token(std::string_view s) { return !s.empty() && std::all_of(s.begin(), s.end(), is_tchar); }

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Whether a comma-separated header value lists `token` (case-insensitive), e.g. Connection: close.
bool lists_token(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    if (equals_ignore_case(trim(value.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

// Longest chunk-size line accepted: 16 hex digits plus chunk extensions nobody needs.
constexpr size_t kMaxChunkLine = 1024;

}  // namespace

bool equals_ignore_case(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    const auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
    if (lower(a[i]) != lower(b[i])) return false;
  }
  return true;
}

std::optional<std::string_view> HttpRequest::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (equals_ignore_case(key, name)) return value;
  }
  return std::nullopt;
}

const char* reason_phrase(int status) {
  switch (status) {
    case 100: return "Continue";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 422: return "Unprocessable Content";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

RequestParser::RequestParser(ParserLimits limits) : limits_(limits) {}

void RequestParser::fail(int status, std::string message) {
  state_ = State::failed;
  error_status_ = status;
  error_message_ = std::move(message);
}

bool RequestParser::expects_continue() const {
  if (state_ != State::need_more || request_.minor_version < 1) return false;
  if (phase_ != Phase::body && phase_ != Phase::chunk_size) return false;
  if (phase_ == Phase::chunk_size && !request_.body.empty()) return false;
  const auto expect = request_.header("Expect");
  return expect && equals_ignore_case(trim(*expect), "100-continue");
}

bool RequestParser::take_line(std::string_view data, size_t& pos, std::string_view& line, size_t line_limit,
                              int over_limit_status, const char* what) {
  const size_t newline = data.find('\n', pos);
  const size_t end = newline == std::string_view::npos ? data.size() : newline;
  const size_t piece = end - pos;
  if (line_.size() + piece > line_limit) {
    fail(over_limit_status,
         std::string(what) + " is longer than the server accepts (" + std::to_string(line_limit) + " bytes)");
    return false;
  }
  line_.append(data.substr(pos, piece));
  pos = end;
  if (newline == std::string_view::npos) return false;
  ++pos;  // the LF
  if (!line_.empty() && line_.back() == '\r') line_.pop_back();
  line = line_;
  return true;
}

size_t RequestParser::feed(std::string_view data) {
  size_t pos = 0;
  if (state_ != State::need_more) return 0;
  if (!data.empty()) started_ = true;
  while (state_ == State::need_more && pos < data.size()) {
    switch (phase_) {
      case Phase::request_line:
      case Phase::header_fields:
      case Phase::trailer: {
        const size_t left = limits_.max_header_bytes - std::min(header_bytes_, limits_.max_header_bytes);
        const bool is_request_line = phase_ == Phase::request_line;
        const size_t limit = is_request_line ? std::min(left, limits_.max_target_bytes + 64) : left;
        const size_t before = pos;
        std::string_view line;
        const bool complete = take_line(data, pos, line, limit, is_request_line && limit < left ? 414 : 431,
                                        is_request_line ? "the request line" : "the request header");
        header_bytes_ += pos - before;
        if (!complete) break;
        if (phase_ == Phase::request_line) {
          // RFC 9112 2.2: empty lines before the request line are ignored.
          if (!line.empty()) {
            parse_request_line(line);
            if (state_ == State::need_more) phase_ = Phase::header_fields;
          }
        } else if (line.empty()) {
          if (phase_ == Phase::trailer) {
            phase_ = Phase::done;
            state_ = State::complete;
          } else {
            finish_header();
          }
        } else if (phase_ == Phase::header_fields) {
          parse_header_field(line);
        }  // trailer fields are read and dropped
        line_.clear();
        break;
      }
      case Phase::body:
      case Phase::chunk_data: {
        const size_t take = static_cast<size_t>(std::min<uint64_t>(body_remaining_, data.size() - pos));
        request_.body.append(data.substr(pos, take));
        pos += take;
        body_remaining_ -= take;
        if (body_remaining_ == 0) {
          if (phase_ == Phase::body) {
            phase_ = Phase::done;
            state_ = State::complete;
          } else {
            phase_ = Phase::chunk_data_end;
          }
        }
        break;
      }
      case Phase::chunk_data_end:
      case Phase::chunk_size: {
        std::string_view line;
        if (!take_line(data, pos, line, kMaxChunkLine, 400, "a chunk-size line")) break;
        if (phase_ == Phase::chunk_data_end) {
          if (!line.empty()) fail(400, "chunk data is longer than its chunk size");
          phase_ = Phase::chunk_size;
        } else {
          parse_chunk_size(line);
        }
        line_.clear();
        break;
      }
      case Phase::done: break;
    }
  }
  return pos;
}

void RequestParser::parse_request_line(std::string_view line) {
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return fail(400, "malformed request line");
  }
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!is_token(method)) return fail(400, "malformed request method");
  if (target.size() > limits_.max_target_bytes) {
    return fail(414, "the request target is longer than the server accepts (" +
                         std::to_string(limits_.max_target_bytes) + " bytes)");
  }
  if (target.empty() || std::any_of(target.begin(), target.end(), [](char c) { return c <= ' ' || c == 0x7f; })) {
    return fail(400, "malformed request target");
  }
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || version[6] != '.' || version[5] < '0' ||
      version[5] > '9' || version[7] < '0' || version[7] > '9') {
    return fail(400, "malformed HTTP version");
  }
  if (version[5] != '1') return fail(505, "only HTTP/1.0 and HTTP/1.1 are supported");
  request_.method = method;
  request_.target = target;
  const size_t q = target.find('?');
  request_.path = target.substr(0, q);
  request_.query = q == std::string_view::npos ? std::string() : std::string(target.substr(q + 1));
  request_.minor_version = version[7] - '0';
}

void RequestParser::parse_header_field(std::string_view line) {
  if (line.front() == ' ' || line.front() == '\t') return fail(400, "obsolete header line folding is not accepted");
  const size_t colon = line.find(':');
  if (colon == std::string_view::npos || !is_token(line.substr(0, colon))) return fail(400, "malformed header field");
  if (request_.headers.size() >= limits_.max_headers) {
    return fail(431, "more than " + std::to_string(limits_.max_headers) + " header fields");
  }
  const std::string_view value = trim(line.substr(colon + 1));
  if (std::any_of(value.begin(), value.end(), [](char c) { return c == '\0' || c == '\r' || c == '\n'; })) {
    return fail(400, "malformed header value");
  }
  request_.headers.emplace_back(std::string(line.substr(0, colon)), std::string(value));
}

void RequestParser::finish_header() {
  const HttpRequest& r = request_;
  std::optional<std::string_view> connection = r.header("Connection");
  request_.keep_alive = r.minor_version >= 1 ? !(connection && lists_token(*connection, "close"))
                                             : connection && lists_token(*connection, "keep-alive");
  bool chunked = false;
  bool has_length = false;
  uint64_t length = 0;
  for (const auto& [name, value] : r.headers) {
    if (equals_ignore_case(name, "Transfer-Encoding")) {
      if (chunked || !equals_ignore_case(trim(value), "chunked")) {
        return fail(501, "only the 'chunked' transfer coding is supported");
      }
      chunked = true;
    } else if (equals_ignore_case(name, "Content-Length")) {
      // A list ("5, 5") or repeated fields are accepted only when every value is the same.
      std::string_view rest = value;
      while (true) {
        const size_t comma = rest.find(',');
        const std::string_view item = trim(rest.substr(0, comma));
        uint64_t v = 0;
        const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
        if (item.empty() || ec != std::errc() || end != item.data() + item.size() || item.front() == '+' ||
            item.front() == '-') {
          return fail(400, "Content-Length must be a non-negative decimal number");
        }
        if (has_length && v != length) return fail(400, "conflicting Content-Length values");
        has_length = true;
        length = v;
        if (comma == std::string_view::npos) break;
        rest.remove_prefix(comma + 1);
      }
    }
  }
  if (chunked && has_length) return fail(400, "a request must not carry both Transfer-Encoding and Content-Length");
  if (chunked) {
    if (r.minor_version < 1) return fail(400, "chunked transfer coding needs HTTP/1.1");
    phase_ = Phase::chunk_size;
    return;
  }
  if (length > limits_.max_body_bytes) {
    return fail(413, "the request body (" + std::to_string(length) + " bytes) is larger than the server accepts (" +
                         std::to_string(limits_.max_body_bytes) + " bytes)");
  }
  body_remaining_ = length;
  request_.body.reserve(static_cast<size_t>(length));
  if (length == 0) {
    phase_ = Phase::done;
    state_ = State::complete;
  } else {
    phase_ = Phase::body;
  }
}

void RequestParser::parse_chunk_size(std::string_view line) {
  const std::string_view size_text = trim(line.substr(0, line.find(';')));
  uint64_t size = 0;
  const auto [end, ec] = std::from_chars(size_text.data(), size_text.data() + size_text.size(), size, 16);
  if (size_text.empty() || ec != std::errc() || end != size_text.data() + size_text.size()) {
    return fail(400, "malformed chunk size");
  }
  if (size > limits_.max_body_bytes - request_.body.size()) {
    return fail(413, "the chunked request body is larger than the server accepts (" +
                         std::to_string(limits_.max_body_bytes) + " bytes)");
  }
  if (size == 0) {
    phase_ = Phase::trailer;
    return;
  }
  body_remaining_ = size;
  phase_ = Phase::chunk_data;
}

HttpRequest RequestParser::take_request() {
  HttpRequest out = std::move(request_);
  request_ = HttpRequest{};
  state_ = State::need_more;
  phase_ = Phase::request_line;
  started_ = false;
  header_bytes_ = 0;
  line_.clear();
  body_remaining_ = 0;
  return out;
}

}  // namespace slab::http
