#include "tokenizer/tokenizer_json_reader.h"

#include "runtime/file_io.h"

#include <fstream>
#include <stdexcept>

namespace slab::tok {
namespace {

using json = nlohmann::json;

// SAX consumer: builds the DOM like nlohmann's own DOM parser, except under model.vocab and
// model.merges, whose entries are appended to the flat vectors instead.
class Reader final : public nlohmann::json_sax<json> {
 public:
  explicit Reader(TokenizerJson& out) : out_(out) {}

  const std::string& error() const { return error_; }

  bool null() override { return plain_value(json(nullptr)); }
  bool boolean(bool value) override { return plain_value(json(value)); }
  bool number_integer(number_integer_t value) override {
    if (mode_ == Mode::kVocab) return vocab_id(value);
    return plain_value(json(value));
  }
  bool number_unsigned(number_unsigned_t value) override {
    if (mode_ == Mode::kVocab) return vocab_id(value > INT32_MAX ? -1 : static_cast<int64_t>(value));
    return plain_value(json(value));
  }
  bool number_float(number_float_t value, const string_t&) override { return plain_value(json(value)); }
  bool binary(binary_t&) override { return fail_at("binary values are not JSON"); }

  bool string(string_t& value) override {
    if (mode_ == Mode::kMerges) {
      // "left right": exactly one space separates the two tokens.
      const size_t space = value.find(' ');
      if (space == std::string::npos || value.find(' ', space + 1) != std::string::npos) {
        return fail_at("model.merges[" + std::to_string(out_.merges.size()) + "]: expected \"left right\", got \"" +
                       value + "\"");
      }
      out_.merges.emplace_back(value.substr(0, space), value.substr(space + 1));
      return true;
    }
    if (mode_ == Mode::kMergePair) {
      merge_parts_.push_back(std::move(value));
      return true;
    }
    if (mode_ == Mode::kVocab) return fail_at("model.vocab[\"" + vocab_key_ + "\"]: id is not an integer");
    return plain_value(json(std::move(value)));
  }

  bool start_object(std::size_t) override {
    if (mode_ != Mode::kDom)
      return fail_at(mode_ == Mode::kVocab ? "model.vocab: id is not an integer" : "model.merges: unexpected object");
    if (next_ == Next::kVocab) {
      mode_ = Mode::kVocab;
      out_.has_vocab = true;
      next_ = Next::kNone;
      return true;
    }
    next_ = Next::kNone;
    stack_.push_back(add_value(json(json::value_t::object)));
    return true;
  }

  bool key(string_t& name) override {
    if (mode_ == Mode::kVocab) {
      vocab_key_ = std::move(name);
      return true;
    }
    next_ = Next::kNone;
    if (stack_.size() == 1) top_level_key_ = name;
    if (stack_.size() == 2 && top_level_key_ == "model") {
      if (name == "vocab") next_ = Next::kVocab;
      if (name == "merges") next_ = Next::kMerges;
    }
    object_slot_ = &(*stack_.back())[name];
    return true;
  }

  bool end_object() override {
    if (mode_ == Mode::kVocab) {
      mode_ = Mode::kDom;
      return true;
    }
    stack_.pop_back();
    return true;
  }

  bool start_array(std::size_t) override {
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kMergePair;
      merge_parts_.clear();
      return true;
    }
    if (mode_ != Mode::kDom) return fail_at("unexpected array in model.vocab or model.merges");
    if (next_ == Next::kMerges) {
      mode_ = Mode::kMerges;
      out_.has_merges = true;
      next_ = Next::kNone;
      return true;
    }
    next_ = Next::kNone;
    stack_.push_back(add_value(json(json::value_t::array)));
    return true;
  }

  bool end_array() override {
    if (mode_ == Mode::kMergePair) {
      if (merge_parts_.size() != 2) {
        return fail_at("model.merges[" + std::to_string(out_.merges.size()) + "]: expected a pair of strings");
      }
      out_.merges.emplace_back(std::move(merge_parts_[0]), std::move(merge_parts_[1]));
      mode_ = Mode::kMerges;
      return true;
    }
    if (mode_ == Mode::kMerges) {
      mode_ = Mode::kDom;
      return true;
    }
    stack_.pop_back();
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error_ = std::string("malformed JSON: ") + e.what();
    return false;
  }

 private:
  enum class Mode { kDom, kVocab, kMerges, kMergePair };
  enum class Next { kNone, kVocab, kMerges };  // what the value after the current key is

  bool vocab_id(int64_t id) {
    if (id < 0 || id > INT32_MAX)
      return fail_at("model.vocab[\"" + vocab_key_ + "\"]: id is not a non-negative integer");
    out_.vocab.emplace_back(std::move(vocab_key_), static_cast<int32_t>(id));
    return true;
  }

  bool plain_value(json value) {
    if (mode_ == Mode::kMerges || mode_ == Mode::kMergePair) {
      return fail_at("model.merges[" + std::to_string(out_.merges.size()) +
                     "]: expected a string or a pair of strings");
    }
    if (mode_ == Mode::kVocab) return fail_at("model.vocab[\"" + vocab_key_ + "\"]: id is not an integer");
    next_ = Next::kNone;
    add_value(std::move(value));
    return true;
  }

  json* add_value(json value) {
    if (stack_.empty()) {
      out_.document = std::move(value);
      return &out_.document;
    }
    if (stack_.back()->is_array()) {
      stack_.back()->push_back(std::move(value));
      return &stack_.back()->back();
    }
    *object_slot_ = std::move(value);
    return object_slot_;
  }

  bool fail_at(std::string what) {
    error_ = std::move(what);
    return false;
  }

  TokenizerJson& out_;
  std::vector<json*> stack_;
  json* object_slot_ = nullptr;
  std::string top_level_key_;
  Mode mode_ = Mode::kDom;
  Next next_ = Next::kNone;
  std::string vocab_key_;
  std::vector<std::string> merge_parts_;
  std::string error_;
};

}  // namespace

TokenizerJson read_tokenizer_json(const std::filesystem::path& path) {
  const std::string text = read_file(path);

  TokenizerJson out;
  Reader reader(out);
  if (!json::sax_parse(text, &reader)) {
    throw std::runtime_error(path.string() + ": " + (reader.error().empty() ? "malformed JSON" : reader.error()));
  }
  return out;
}

}  // namespace slab::tok
