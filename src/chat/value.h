#pragma once
// The runtime value of the template language: Python's JSON-like types plus jinja2's Undefined,
// callables (macros, globals, bound methods) and namespace objects.
#include "chat/chat_template.h"

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace slab::chat {

struct Value;
class Renderer;

// How deeply lists and dicts may nest inside one another. Printing, comparing, serialising and
// destroying a value recurse once per level, so a bound here keeps all of them off the end of the
// stack. Namespaces are not counted: nothing looks inside them recursively, and the renderer
// breaks their links itself when it ends (see Renderer::adopt_namespace).
inline constexpr int kMaxValueNesting = 512;

// Lists are never mutated once built (the sandbox forbids it), so copies share them.
struct ListData {
  std::vector<Value> items;
  int nesting = 1;  // 1 + the deepest list or dict among the items
  bool is_tuple = false;
  const char* view = nullptr;  // "dict_items" etc.: dict.items() prints as dict_items([...])
};

// Keys are strings (JSON objects; templates rarely build other keys). Insertion order kept.
struct DictData {
  std::vector<std::pair<std::string, Value>> entries;
  int nesting = 1;  // set by Value::from_dict (namespaces: not maintained)
  const Value* find(const std::string& key) const;
  void set(const std::string& key, Value value);
};

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> keyword;
};

class Callable {
 public:
  virtual ~Callable() = default;
  virtual Value call(Renderer& renderer, CallArgs& args) const = 0;
  virtual std::string name() const = 0;
};

struct Value {
  enum class Kind : std::uint8_t { Undefined, None, Bool, Int, Float, String, List, Dict, Namespace, Callable };

  Kind kind = Kind::Undefined;
  bool boolean = false;
  std::int64_t integer = 0;
  double number = 0.0;
  std::string text;  // String; for Undefined, the message an error on it reports
  std::shared_ptr<const ListData> list;
  std::shared_ptr<DictData> dict;  // Dict (treated as immutable) and Namespace (mutable)
  std::shared_ptr<const Callable> callable;

  static Value undefined(std::string message) {
    Value v;
    v.text = std::move(message);
    return v;
  }
  static Value none() { return make(Kind::None); }
  static Value from_bool(bool b) {
    Value v = make(Kind::Bool);
    v.boolean = b;
    return v;
  }
  static Value from_int(std::int64_t i) {
    Value v = make(Kind::Int);
    v.integer = i;
    return v;
  }
  static Value from_float(double d) {
    Value v = make(Kind::Float);
    v.number = d;
    return v;
  }
  static Value from_string(std::string s) {
    Value v = make(Kind::String);
    v.text = std::move(s);
    return v;
  }
  static Value from_list(std::vector<Value> items, bool is_tuple = false);
  static Value from_view(std::vector<Value> items, const char* view);
  static Value from_dict(std::shared_ptr<DictData> d);  // throws past kMaxValueNesting
  static Value from_callable(std::shared_ptr<const Callable> c) {
    Value v = make(Kind::Callable);
    v.callable = std::move(c);
    return v;
  }

  bool is_undefined() const { return kind == Kind::Undefined; }
  bool is_none() const { return kind == Kind::None; }
  bool is_string() const { return kind == Kind::String; }
  bool is_int() const { return kind == Kind::Int || kind == Kind::Bool; }  // Python: bool is an int
  bool is_number() const { return is_int() || kind == Kind::Float; }
  bool is_list() const { return kind == Kind::List; }
  bool is_mapping() const { return kind == Kind::Dict; }
  const std::vector<Value>& items() const { return list->items; }

 private:
  static Value make(Kind k) {
    Value v;
    v.kind = k;
    return v;
  }
};

// Python semantics.
bool truthy(const Value& v);
std::string to_str(const Value& v);  // str(): what {{ v }} prints
std::string repr(const Value& v);
std::string repr_string(const std::string& s);
std::string format_float(double d);  // float.__repr__
bool equals(const Value& a, const Value& b);
int compare(const Value& a, const Value& b);  // <0, 0, >0; throws TemplateError when unordered
double as_double(const Value& v);
std::string type_name(const Value& v);  // "dict", "str", ... as Python names the type
// Iterating: lists and tuples by item, dicts by key, strings by code point, Undefined as empty.
std::vector<Value> iterate(const Value& v);
std::int64_t length_of(const Value& v);  // len(); throws when v has none

int nesting_of(const Value& v);                    // 0 for scalars (and namespaces), 1 for a flat list or dict, ...
Value from_json(const nlohmann::ordered_json& j);  // throws TemplateError past kMaxValueNesting

// transformers' tojson: json.dumps(x, ensure_ascii, indent, separators, sort_keys).
struct JsonDumpOptions {
  bool ensure_ascii = false;
  bool has_indent = false;
  std::string indent;
  bool has_separators = false;
  std::string item_separator = ", ";
  std::string key_separator = ": ";
  bool sort_keys = false;
};
std::string dump_json(const Value& v, const JsonDumpOptions& options);

// Undefined values in errors: "'name' is undefined", "'dict object' has no attribute 'x'".
[[noreturn]] void throw_undefined(const Value& v);

}  // namespace slab::chat
