#include "tokenizer/same_vocabulary.h"

#include <optional>

namespace slab {
namespace {

std::string id_text(const std::optional<int32_t>& id) { return id ? std::to_string(*id) : std::string("none"); }

}  // namespace

std::string vocabulary_difference(const Tokenizer& a, const std::string& a_name, const Tokenizer& b,
                                  const std::string& b_name) {
  if (a.vocab_size() != b.vocab_size()) {
    return "the vocabulary of " + a_name + " has " + std::to_string(a.vocab_size()) + " tokens, that of " + b_name +
           " " + std::to_string(b.vocab_size());
  }
  if (a.bos_id() != b.bos_id()) {
    return "the BOS id is " + id_text(a.bos_id()) + " in " + a_name + ", " + id_text(b.bos_id()) + " in " + b_name;
  }
  if (a.eos_id() != b.eos_id()) {
    return "the EOS id is " + id_text(a.eos_id()) + " in " + a_name + ", " + id_text(b.eos_id()) + " in " + b_name;
  }
  for (int32_t id = 0; id < a.vocab_size(); ++id) {
    const std::string pa = a.id_to_piece(id), pb = b.id_to_piece(id);
    if (pa != pb) {
      return "token " + std::to_string(id) + " is \"" + pa + "\" in " + a_name + ", \"" + pb + "\" in " + b_name;
    }
    if (a.is_special(id) != b.is_special(id)) {
      return "token " + std::to_string(id) + " (\"" + pa + "\") is special in " + (a.is_special(id) ? a_name : b_name) +
             " only";
    }
  }
  return {};
}

}  // namespace slab
