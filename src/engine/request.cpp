#include "engine/request.h"

namespace slab {

const char* finish_reason_name(FinishReason reason) {
  switch (reason) {
    case FinishReason::stop: return "stop";
    case FinishReason::length: return "length";
    case FinishReason::abort: return "abort";
    case FinishReason::error: return "error";
  }
  return "stop";
}

void RequestStream::push(RequestOutput output) {
  {
    std::lock_guard lock(mutex_);
    events_.push_back(std::move(output));
  }
  ready_.notify_one();
}

std::optional<RequestOutput> RequestStream::next(std::chrono::milliseconds timeout) {
  std::unique_lock lock(mutex_);
  if (!ready_.wait_for(lock, timeout, [this] { return !events_.empty(); })) return std::nullopt;
  RequestOutput out = std::move(events_.front());
  events_.pop_front();
  return out;
}

}  // namespace slab
