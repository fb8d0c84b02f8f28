#include "tokenizer/bpe.h"

#include <algorithm>
#include <cstdio>

#include "tokenizer/json_file.h"
#include "tokenizer/utf8.h"

namespace slab::tok {

namespace {

struct MergeSymbol {
  int32_t id;
  int32_t prev;  // index of the previous live symbol, -1 at the start
  int32_t next;  // index of the next live symbol, -1 at the end
  bool alive;
};

struct MergeCandidate {
  int32_t rank;
  int32_t left;  // index of the left symbol of the pair
  int32_t merged_id;
};

bool is_null_or_empty_string(const nlohmann::json& model, const char* key) {
  const auto it = model.find(key);
  return it == model.end() || it->is_null() || (it->is_string() && it->get_ref<const std::string&>().empty());
}

bool optional_bool(const nlohmann::json& model, const char* key, const std::string& file) {
  const auto it = model.find(key);
  if (it == model.end() || it->is_null()) return false;
  if (!it->is_boolean()) fail(file, std::string("model.") + key, "not a boolean");
  return it->get<bool>();
}

}  // namespace

void BpeModel::MergeTable::reserve(size_t count) {
  size_t capacity = 16;
  shift_ = 60;
  while (capacity < count * 2) {  // load factor at most 1/2 keeps probe runs short
    capacity *= 2;
    --shift_;
  }
  mask_ = capacity - 1;
  slots_.assign(capacity, Slot{kEmpty, {}});
}

void BpeModel::MergeTable::insert(int32_t left, int32_t right, MergeResult result) {
  const uint64_t key = key_of(left, right);
  for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
    if (slots_[i].key == kEmpty || slots_[i].key == key) {
      slots_[i] = {key, result};
      return;
    }
  }
}

const BpeModel::MergeResult* BpeModel::MergeTable::find(int32_t left, int32_t right) const {
  if (slots_.empty()) return nullptr;
  const uint64_t key = key_of(left, right);
  for (size_t i = slot_of(key);; i = (i + 1) & mask_) {
    if (slots_[i].key == key) return &slots_[i].result;
    if (slots_[i].key == kEmpty) return nullptr;
  }
}

std::unique_ptr<BpeModel> BpeModel::build(const nlohmann::json& model,
                                          std::vector<std::pair<std::string, int32_t>> vocab,
                                          const std::vector<std::pair<std::string, std::string>>& merges,
                                          const std::string& file) {
  if (!model.is_object()) fail(file, "model", "missing");
  const std::string type = model.value("type", std::string("BPE"));
  if (type != "BPE") fail(file, "model.type", "unsupported model type \"" + type + "\" (only BPE)");
  if (const auto dropout = model.find("dropout");
      dropout != model.end() && !dropout->is_null() && !(dropout->is_number() && dropout->get<double>() == 0.0)) {
    fail(file, "model.dropout", "BPE dropout is not supported at inference");
  }
  if (!is_null_or_empty_string(model, "continuing_subword_prefix")) {
    fail(file, "model.continuing_subword_prefix", "unsupported");
  }
  if (!is_null_or_empty_string(model, "end_of_word_suffix")) fail(file, "model.end_of_word_suffix", "unsupported");

  auto bpe = std::unique_ptr<BpeModel>(new BpeModel());
  bpe->byte_fallback_ = optional_bool(model, "byte_fallback", file);
  bpe->fuse_unk_ = optional_bool(model, "fuse_unk", file);
  bpe->ignore_merges_ = optional_bool(model, "ignore_merges", file);

  bpe->vocab_.reserve(vocab.size());
  int32_t max_id = -1;
  for (auto& [token, id] : vocab) {
    max_id = std::max(max_id, id);
    bpe->vocab_.emplace(std::move(token), id);
  }
  bpe->id_to_token_.assign(static_cast<size_t>(max_id + 1), nullptr);
  for (const auto& [token, id] : bpe->vocab_) bpe->id_to_token_[static_cast<size_t>(id)] = &token;

  for (int c = 0; c < 128; ++c) {
    const char text[1] = {static_cast<char>(c)};
    const auto it = bpe->vocab_.find(std::string_view(text, 1));
    bpe->ascii_ids_[c] = it == bpe->vocab_.end() ? -1 : it->second;
  }
  for (int b = 0; b < 256; ++b) {
    char name[8];
    std::snprintf(name, sizeof name, "<0x%02X>", b);
    const auto it = bpe->vocab_.find(std::string_view(name));
    bpe->byte_tokens_[b] = it == bpe->vocab_.end() ? -1 : it->second;
  }

  if (const auto unk = model.find("unk_token"); unk != model.end() && !unk->is_null()) {
    if (!unk->is_string()) fail(file, "model.unk_token", "not a string");
    const auto it = bpe->vocab_.find(unk->get_ref<const std::string&>());
    if (it == bpe->vocab_.end())
      fail(file, "model.unk_token", "\"" + unk->get<std::string>() + "\" is not in the vocabulary");
    bpe->unk_id_ = it->second;
  }

  bpe->merges_.reserve(merges.size());
  for (size_t rank = 0; rank < merges.size(); ++rank) {
    bpe->add_merge(merges[rank].first, merges[rank].second, static_cast<int32_t>(rank), file);
  }
  return bpe;
}

void BpeModel::add_merge(std::string_view left, std::string_view right, int32_t rank, const std::string& file) {
  const auto left_it = vocab_.find(left);
  const auto right_it = vocab_.find(right);
  std::string merged;
  merged.reserve(left.size() + right.size());
  merged.append(left).append(right);
  const auto merged_it = vocab_.find(merged);
  if (left_it == vocab_.end() || right_it == vocab_.end() || merged_it == vocab_.end()) {
    std::string what = "merge of ";
    what.append(left).append(" and ").append(right).append(" uses a token missing from the vocabulary");
    std::string field = "model.merges[";
    field.append(std::to_string(rank)).append("]");
    fail(file, field, what);
  }
  merges_.insert(left_it->second, right_it->second, MergeResult{rank, merged_it->second});
}

std::optional<int32_t> BpeModel::token_to_id(std::string_view token) const {
  const auto it = vocab_.find(token);
  if (it == vocab_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::id_to_token(int32_t id) const {
  if (id < 0 || id >= id_limit()) return nullptr;
  return id_to_token_[static_cast<size_t>(id)];
}

void BpeModel::tokenize(std::string_view piece, std::vector<int32_t>& out) const {
  if (piece.empty()) return;
  if (ignore_merges_) {
    // A piece that is itself a token is emitted whole, whatever the merges would give.
    if (const auto it = vocab_.find(piece); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  merge_word(piece, out);
}

void BpeModel::merge_word(std::string_view piece, std::vector<int32_t>& out) const {
  // Scratch reused across calls on this thread: most pieces are a few characters long and the
  // allocations would cost more than the merging.
  thread_local std::vector<MergeSymbol> symbols;
  thread_local std::vector<MergeCandidate> queue;
  symbols.clear();
  queue.clear();
  const auto add_symbol = [&](int32_t id) {
    const auto index = static_cast<int32_t>(symbols.size());
    symbols.push_back({id, index - 1, index + 1, true});
  };

  // Characters to initial symbols. An unknown character becomes its byte tokens when byte
  // fallback has them all, else the unknown token (runs fused when fuse_unk is set).
  int32_t pending_unk = -1;  // an unknown token not yet emitted (so runs can be fused)
  for (size_t pos = 0; pos < piece.size();) {
    const size_t length = utf8_char_length(piece, pos);
    const std::string_view character = piece.substr(pos, length);
    pos += length;
    int32_t id = -1;
    if (length == 1 && static_cast<unsigned char>(character[0]) < 0x80) {
      id = ascii_ids_[static_cast<unsigned char>(character[0])];
    } else if (const auto it = vocab_.find(character); it != vocab_.end()) {
      id = it->second;
    }
    if (id >= 0) {
      if (pending_unk >= 0) {
        add_symbol(pending_unk);
        pending_unk = -1;
      }
      add_symbol(id);
      continue;
    }
    if (byte_fallback_) {
      bool all_bytes = true;
      for (const char c : character) all_bytes = all_bytes && byte_tokens_[static_cast<unsigned char>(c)] >= 0;
      if (all_bytes) {
        // Hugging Face emits these before a pending unknown token; keep its order.
        for (const char c : character) add_symbol(byte_tokens_[static_cast<unsigned char>(c)]);
        continue;
      }
    }
    if (unk_id_) {
      if (pending_unk >= 0 && !fuse_unk_) add_symbol(pending_unk);
      pending_unk = *unk_id_;
    }
  }
  if (pending_unk >= 0) add_symbol(pending_unk);
  if (symbols.empty()) return;
  symbols.back().next = -1;

  // Min-heap on (rank, position): the lowest-ranked pair merges first, leftmost on ties.
  const auto later = [](const MergeCandidate& a, const MergeCandidate& b) {
    return a.rank != b.rank ? a.rank > b.rank : a.left > b.left;
  };
  const auto push_pair = [&](int32_t left) {
    if (left < 0) return;
    const int32_t right = symbols[static_cast<size_t>(left)].next;
    if (right < 0) return;
    const MergeResult* merge =
        merges_.find(symbols[static_cast<size_t>(left)].id, symbols[static_cast<size_t>(right)].id);
    if (merge != nullptr) {
      queue.push_back({merge->rank, left, merge->merged_id});
      std::push_heap(queue.begin(), queue.end(), later);
    }
  };
  for (int32_t i = 0; i + 1 < static_cast<int32_t>(symbols.size()); ++i) push_pair(i);

  while (!queue.empty()) {
    std::pop_heap(queue.begin(), queue.end(), later);
    const MergeCandidate top = queue.back();
    queue.pop_back();
    MergeSymbol& left = symbols[static_cast<size_t>(top.left)];
    if (!left.alive || left.next < 0) continue;
    MergeSymbol& right = symbols[static_cast<size_t>(left.next)];
    // Stale entry: one side merged with something else since it was queued.
    const MergeResult* merge = merges_.find(left.id, right.id);
    if (merge == nullptr || merge->rank != top.rank || merge->merged_id != top.merged_id) continue;
    left.id = top.merged_id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) symbols[static_cast<size_t>(right.next)].prev = top.left;
    push_pair(left.prev);
    push_pair(top.left);
  }
  for (int32_t i = 0; i >= 0; i = symbols[static_cast<size_t>(i)].next)
    out.push_back(symbols[static_cast<size_t>(i)].id);
}

}  // namespace slab::tok
