#include "chat/value.h"

#include "chat/text_util.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace slab::chat {

const Value* DictData::find(const std::string& key) const {
  for (const auto& [k, v] : entries)
    if (k == key) return &v;
  return nullptr;
}

void DictData::set(const std::string& key, Value value) {
  for (auto& [k, v] : entries)
    if (k == key) {
      v = std::move(value);
      return;
    }
  entries.emplace_back(key, std::move(value));
}

int nesting_of(const Value& v) {
  if (v.kind == Value::Kind::List) return v.list->nesting;
  if (v.kind == Value::Kind::Dict) return v.dict->nesting;
  return 0;
}

namespace {

int nesting_above(int deepest_child) {
  if (deepest_child >= kMaxValueNesting)
    throw TemplateError("a list or dict nested deeper than " + std::to_string(kMaxValueNesting) + " levels");
  return deepest_child + 1;
}

std::shared_ptr<ListData> list_data(std::vector<Value> items) {
  auto data = std::make_shared<ListData>();
  int deepest = 0;
  for (const Value& item : items) deepest = std::max(deepest, nesting_of(item));
  data->nesting = nesting_above(deepest);
  data->items = std::move(items);
  return data;
}

}  // namespace

Value Value::from_list(std::vector<Value> items, bool is_tuple) {
  Value v = make(Kind::List);
  auto data = list_data(std::move(items));
  data->is_tuple = is_tuple;
  v.list = std::move(data);
  return v;
}

Value Value::from_view(std::vector<Value> items, const char* view) {
  Value v = make(Kind::List);
  auto data = list_data(std::move(items));
  data->view = view;
  v.list = std::move(data);
  return v;
}

Value Value::from_dict(std::shared_ptr<DictData> d) {
  int deepest = 0;
  for (const auto& entry : d->entries) deepest = std::max(deepest, nesting_of(entry.second));
  d->nesting = nesting_above(deepest);
  Value v = make(Kind::Dict);
  v.dict = std::move(d);
  return v;
}

void throw_undefined(const Value& v) { throw TemplateError(v.text.empty() ? "value is undefined" : v.text); }

bool truthy(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return false;
    case Value::Kind::Bool: return v.boolean;
    case Value::Kind::Int: return v.integer != 0;
    case Value::Kind::Float: return v.number != 0.0;
    case Value::Kind::String: return !v.text.empty();
    case Value::Kind::List: return !v.list->items.empty();
    case Value::Kind::Dict: return !v.dict->entries.empty();
    case Value::Kind::Namespace:
    case Value::Kind::Callable: return true;
  }
  return false;
}

std::string format_float(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  std::string sci(buf, res.ptr);
  std::string sign;
  if (sci[0] == '-') {
    sign = "-";
    sci.erase(0, 1);
  }
  std::size_t e_pos = sci.find('e');
  std::string digits = sci.substr(0, e_pos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  int exponent = std::stoi(sci.substr(e_pos + 1));
  if (exponent < -4 || exponent >= 16) return sign + sci;  // Python's repr switches to e-notation here
  std::string out;
  if (exponent >= 0) {
    auto int_len = static_cast<std::size_t>(exponent + 1);
    if (digits.size() <= int_len) {
      out = digits + std::string(int_len - digits.size(), '0') + ".0";
    } else {
      out = digits.substr(0, int_len) + "." + digits.substr(int_len);
    }
  } else {
    out = "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
  }
  return sign + out;
}

std::string repr_string(const std::string& s) {
  bool has_single = s.find('\'') != std::string::npos;
  bool has_double = s.find('"') != std::string::npos;
  char quote = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, quote);
  for (char32_t c : utf8_decode(s)) {
    char esc[16];
    if (c == '\\') {
      out += "\\\\";
    } else if (c == static_cast<char32_t>(quote)) {
      out += '\\';
      out += quote;
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (c < 0x20 || (c >= 0x7F && c <= 0xA0) || c == 0xAD) {
      std::snprintf(esc, sizeof esc, "\\x%02x", static_cast<unsigned>(c));
      out += esc;
    } else if ((c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) || (c >= 0x205F && c <= 0x2064) ||
               c == 0x3000 || c == 0xFEFF || c == 0x1680 || (c >= 0xD800 && c <= 0xDFFF)) {
      std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(c));
      out += esc;
    } else {
      utf8_append(out, c);
    }
  }
  out += quote;
  return out;
}

std::string repr(const Value& v) {
  switch (v.kind) {
    case Value::Kind::String: return repr_string(v.text);
    case Value::Kind::List: {
      const auto& items = v.list->items;
      std::string out = v.list->is_tuple ? "(" : "[";
      for (std::size_t i = 0; i < items.size(); ++i) {
        if (i) out += ", ";
        out += repr(items[i]);
      }
      if (v.list->is_tuple && items.size() == 1) out += ",";
      out += v.list->is_tuple ? ")" : "]";
      return v.list->view ? std::string(v.list->view) + "(" + out + ")" : out;
    }
    case Value::Kind::Dict: {
      std::string out = "{";
      bool first = true;
      for (const auto& [k, item] : v.dict->entries) {
        if (!first) out += ", ";
        first = false;
        out += repr_string(k) + ": " + repr(item);
      }
      return out + "}";
    }
    case Value::Kind::Undefined: return "Undefined";  // repr(jinja2.Undefined()); str() of it is ""
    default: return to_str(v);
  }
}

std::string to_str(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return "";
    case Value::Kind::None: return "None";
    case Value::Kind::Bool: return v.boolean ? "True" : "False";
    case Value::Kind::Int: return std::to_string(v.integer);
    case Value::Kind::Float: return format_float(v.number);
    case Value::Kind::String: return v.text;
    case Value::Kind::List:
    case Value::Kind::Dict: return repr(v);
    case Value::Kind::Namespace: return "<Namespace>";
    case Value::Kind::Callable: return "<function " + v.callable->name() + ">";
  }
  return "";
}

double as_double(const Value& v) {
  if (v.kind == Value::Kind::Float) return v.number;
  if (v.kind == Value::Kind::Bool) return v.boolean ? 1.0 : 0.0;
  return static_cast<double>(v.integer);
}

static std::int64_t as_int(const Value& v) { return v.kind == Value::Kind::Bool ? v.boolean : v.integer; }

bool equals(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return as_int(a) == as_int(b);
    return as_double(a) == as_double(b);
  }
  if (a.kind != b.kind) return false;
  switch (a.kind) {
    case Value::Kind::Undefined:
    case Value::Kind::None: return true;
    case Value::Kind::String: return a.text == b.text;
    case Value::Kind::List: {
      if (a.list->is_tuple != b.list->is_tuple || a.items().size() != b.items().size()) return false;
      for (std::size_t i = 0; i < a.items().size(); ++i)
        if (!equals(a.items()[i], b.items()[i])) return false;
      return true;
    }
    case Value::Kind::Dict: {
      if (a.dict->entries.size() != b.dict->entries.size()) return false;
      for (const auto& [k, item] : a.dict->entries) {
        const Value* other = b.dict->find(k);
        if (!other || !equals(item, *other)) return false;
      }
      return true;
    }
    case Value::Kind::Namespace: return a.dict == b.dict;
    case Value::Kind::Callable: return a.callable == b.callable;
    default: return false;
  }
}

int compare(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) {
    if (a.is_int() && b.is_int()) return as_int(a) < as_int(b) ? -1 : as_int(a) > as_int(b) ? 1 : 0;
    double x = as_double(a), y = as_double(b);
    return x < y ? -1 : x > y ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) return a.text.compare(b.text) < 0 ? -1 : a.text == b.text ? 0 : 1;
  if (a.is_list() && b.is_list() && a.list->is_tuple == b.list->is_tuple) {
    std::size_t n = std::min(a.items().size(), b.items().size());
    for (std::size_t i = 0; i < n; ++i) {
      if (equals(a.items()[i], b.items()[i])) continue;
      return compare(a.items()[i], b.items()[i]);
    }
    return a.items().size() < b.items().size() ? -1 : a.items().size() > b.items().size() ? 1 : 0;
  }
  if (a.is_undefined()) throw_undefined(a);
  if (b.is_undefined()) throw_undefined(b);
  throw TemplateError("TypeError: '<' not supported between instances of '" + type_name(a) + "' and '" + type_name(b) +
                      "'");
}

std::string type_name(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return "Undefined";
    case Value::Kind::None: return "NoneType";
    case Value::Kind::Bool: return "bool";
    case Value::Kind::Int: return "int";
    case Value::Kind::Float: return "float";
    case Value::Kind::String: return "str";
    case Value::Kind::List: return v.list->is_tuple ? "tuple" : "list";
    case Value::Kind::Dict: return "dict";
    case Value::Kind::Namespace: return "Namespace";
    case Value::Kind::Callable: return "function";
  }
  return "object";
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::List: return v.list->items;
    case Value::Kind::Dict: {
      std::vector<Value> keys;
      keys.reserve(v.dict->entries.size());
      for (const auto& entry : v.dict->entries) keys.push_back(Value::from_string(entry.first));
      return keys;
    }
    case Value::Kind::String: {
      if (v.text.size() > (1u << 20)) throw TemplateError("string too long to iterate over");
      std::vector<Value> chars;
      for (char32_t c : utf8_decode(v.text)) {
        std::string one;
        utf8_append(one, c);
        chars.push_back(Value::from_string(std::move(one)));
      }
      return chars;
    }
    default: throw TemplateError("TypeError: '" + type_name(v) + "' object is not iterable");
  }
}

std::int64_t length_of(const Value& v) {
  switch (v.kind) {
    case Value::Kind::Undefined: return 0;
    case Value::Kind::String: return utf8_length(v.text);
    case Value::Kind::List: return static_cast<std::int64_t>(v.items().size());
    case Value::Kind::Dict: return static_cast<std::int64_t>(v.dict->entries.size());
    default: throw TemplateError("TypeError: object of type '" + type_name(v) + "' has no len()");
  }
}

namespace {

Value from_json_at(const nlohmann::ordered_json& j, int level);

}  // namespace

Value from_json(const nlohmann::ordered_json& j) { return from_json_at(j, 0); }

namespace {

// `level` bounds the recursion before from_list / from_dict could: a deep document never gets to
// recurse past kMaxValueNesting.
Value from_json_at(const nlohmann::ordered_json& j, int level) {
  using T = nlohmann::ordered_json::value_t;
  if (level > kMaxValueNesting)
    throw TemplateError("a list or dict nested deeper than " + std::to_string(kMaxValueNesting) + " levels");
  switch (j.type()) {
    case T::null: return Value::none();
    case T::boolean: return Value::from_bool(j.get<bool>());
    case T::number_integer: return Value::from_int(j.get<std::int64_t>());
    case T::number_unsigned: {
      auto u = j.get<std::uint64_t>();
      if (u > static_cast<std::uint64_t>(INT64_MAX)) return Value::from_float(static_cast<double>(u));
      return Value::from_int(static_cast<std::int64_t>(u));
    }
    case T::number_float: return Value::from_float(j.get<double>());
    case T::string: return Value::from_string(j.get<std::string>());
    case T::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& item : j) items.push_back(from_json_at(item, level + 1));
      return Value::from_list(std::move(items));
    }
    case T::object: {
      auto d = std::make_shared<DictData>();
      d->entries.reserve(j.size());
      for (const auto& [k, item] : j.items()) d->entries.emplace_back(k, from_json_at(item, level + 1));
      return Value::from_dict(std::move(d));
    }
    default: return Value::none();
  }
}

}  // namespace

static void dump_json_string(std::string& out, const std::string& s, bool ensure_ascii) {
  out += '"';
  for (char32_t c : utf8_decode(s)) {
    char esc[16];
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20 || (ensure_ascii && c >= 0x7F)) {
          if (c >= 0x10000) {
            char32_t v = c - 0x10000;
            std::snprintf(esc, sizeof esc, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                          static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
          } else {
            std::snprintf(esc, sizeof esc, "\\u%04x", static_cast<unsigned>(c));
          }
          out += esc;
        } else {
          utf8_append(out, c);
        }
    }
  }
  out += '"';
}

static void dump_json_into(std::string& out, const Value& v, const JsonDumpOptions& o, int level) {
  auto newline = [&](int lvl) {
    out += '\n';
    for (int i = 0; i < lvl; ++i) out += o.indent;
  };
  switch (v.kind) {
    case Value::Kind::None: out += "null"; return;
    case Value::Kind::Bool: out += v.boolean ? "true" : "false"; return;
    case Value::Kind::Int: out += std::to_string(v.integer); return;
    case Value::Kind::Float:
      if (std::isnan(v.number))
        out += "NaN";
      else if (std::isinf(v.number))
        out += v.number < 0 ? "-Infinity" : "Infinity";
      else
        out += format_float(v.number);
      return;
    case Value::Kind::String: dump_json_string(out, v.text, o.ensure_ascii); return;
    case Value::Kind::List: {
      if (v.items().empty()) {
        out += "[]";
        return;
      }
      out += '[';
      if (o.has_indent) newline(level + 1);
      bool first = true;
      for (const auto& item : v.items()) {
        if (!first) {
          out += o.item_separator;
          if (o.has_indent) newline(level + 1);
        }
        first = false;
        dump_json_into(out, item, o, level + 1);
      }
      if (o.has_indent) newline(level);
      out += ']';
      return;
    }
    case Value::Kind::Dict: {
      if (v.dict->entries.empty()) {
        out += "{}";
        return;
      }
      std::vector<const std::pair<std::string, Value>*> entries;
      for (const auto& entry : v.dict->entries) entries.push_back(&entry);
      if (o.sort_keys)
        std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return a->first < b->first; });
      out += '{';
      if (o.has_indent) newline(level + 1);
      bool first = true;
      for (const auto* entry : entries) {
        if (!first) {
          out += o.item_separator;
          if (o.has_indent) newline(level + 1);
        }
        first = false;
        dump_json_string(out, entry->first, o.ensure_ascii);
        out += o.key_separator;
        dump_json_into(out, entry->second, o, level + 1);
      }
      if (o.has_indent) newline(level);
      out += '}';
      return;
    }
    default: throw TemplateError("TypeError: Object of type " + type_name(v) + " is not JSON serializable");
  }
}

std::string dump_json(const Value& v, const JsonDumpOptions& options) {
  std::string out;
  dump_json_into(out, v, options, 0);
  return out;
}

}  // namespace slab::chat
