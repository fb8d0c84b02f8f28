// jinja2's tests (`x is defined`) and the Python methods templates call on str, dict and list,
// with the sandbox's refusal of methods that mutate.
#include "chat/evaluator.h"
#include "chat/text_util.h"

#include <algorithm>
#include <cstdio>

namespace slab::chat {
namespace {

std::int64_t int_value(const Value& v) {
  if (v.is_undefined()) throw_undefined(v);
  if (!v.is_number()) throw TemplateError("TypeError: not all arguments converted during string formatting");
  return v.kind == Value::Kind::Bool    ? v.boolean
         : v.kind == Value::Kind::Float ? static_cast<std::int64_t>(v.number)
                                        : v.integer;
}

bool cased_all(const std::string& s, bool upper) {
  bool any = false;
  for (char c : s) {
    if (std::islower(static_cast<unsigned char>(c))) {
      if (upper) return false;
      any = true;
    } else if (std::isupper(static_cast<unsigned char>(c))) {
      if (!upper) return false;
      any = true;
    }
  }
  return any;
}

const char* const kTests[] = {
    "boolean",     "callable", "defined", "divisibleby", "eq",   "equalto",   "==",     "escaped",
    "even",        "false",    "filter",  "float",       "ge",   ">=",        "gt",     ">",
    "greaterthan", "in",       "integer", "iterable",    "le",   "<=",        "lower",  "lt",
    "<",           "lessthan", "mapping", "ne",          "!=",   "none",      "number", "odd",
    "sameas",      "sequence", "string",  "test",        "true", "undefined", "upper"};

}  // namespace

bool is_known_test(const std::string& name) {
  return std::any_of(std::begin(kTests), std::end(kTests), [&](const char* t) { return name == t; });
}

bool apply_test(Renderer& r, const std::string& name, const Value& v, CallArgs& args) {
  using K = Value::Kind;
  auto arg = [&]() -> const Value& {
    if (args.positional.empty()) throw TemplateError("TypeError: test '" + name + "' needs an argument");
    return args.positional[0];
  };
  if (name == "defined") return !v.is_undefined();
  if (name == "undefined") return v.is_undefined();
  if (name == "none") return v.is_none();
  if (name == "boolean") return v.kind == K::Bool;
  if (name == "true") return v.kind == K::Bool && v.boolean;
  if (name == "false") return v.kind == K::Bool && !v.boolean;
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_mapping();
  if (name == "number") return v.is_number();
  if (name == "integer") return v.kind == K::Int;
  if (name == "float") return v.kind == K::Float;
  if (name == "iterable") return v.is_undefined() || v.is_string() || v.is_list() || v.is_mapping();
  if (name == "sequence") return v.is_undefined() || v.is_string() || v.is_list() || v.is_mapping();
  if (name == "callable") return v.kind == K::Callable || v.is_undefined();  // Undefined has __call__
  if (name == "escaped") return false;
  if (name == "lower") return cased_all(to_str(v), false);
  if (name == "upper") return cased_all(to_str(v), true);
  if (name == "odd") return int_value(v) % 2 != 0;
  if (name == "even") return int_value(v) % 2 == 0;
  if (name == "divisibleby") {
    std::int64_t d = int_value(arg());
    if (d == 0) throw TemplateError("ZeroDivisionError: integer division or modulo by zero");
    return d == -1 || int_value(v) % d == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return equals(v, arg());
  if (name == "ne" || name == "!=") return !equals(v, arg());
  if (name == "gt" || name == ">" || name == "greaterthan") return compare(v, arg()) > 0;
  if (name == "ge" || name == ">=") return compare(v, arg()) >= 0;
  if (name == "lt" || name == "<" || name == "lessthan") return compare(v, arg()) < 0;
  if (name == "le" || name == "<=") return compare(v, arg()) <= 0;
  if (name == "in") return contains(arg(), v);
  if (name == "sameas") {
    const Value& o = arg();
    if (v.kind != o.kind) return false;
    if (v.is_list()) return v.list == o.list;
    if (v.is_mapping() || v.kind == K::Namespace) return v.dict == o.dict;
    return equals(v, o);
  }
  if (name == "filter") return is_known_filter(to_str(v));
  if (name == "test") return is_known_test(to_str(v));
  (void)r;
  throw TemplateError("No test named '" + name + "'.");
}

namespace {

const char* const kStringMethods[] = {
    "strip",     "lstrip",     "rstrip",   "split",        "rsplit",       "splitlines", "startswith", "endswith",
    "replace",   "upper",      "lower",    "title",        "capitalize",   "format",     "join",       "find",
    "rfind",     "index",      "rindex",   "count",        "isdigit",      "isnumeric",  "isdecimal",  "isalpha",
    "isalnum",   "isspace",    "islower",  "isupper",      "center",       "ljust",      "rjust",      "zfill",
    "partition", "rpartition", "swapcase", "removeprefix", "removesuffix", "casefold"};
const char* const kDictMethods[] = {"items", "keys", "values", "get", "copy"};
const char* const kListMethods[] = {"index", "count", "copy"};
const char* const kUnsafeDict[] = {"clear", "pop", "popitem", "setdefault", "update"};
const char* const kUnsafeList[] = {"append", "clear", "pop", "reverse", "insert", "sort", "extend", "remove"};

template <std::size_t N>
bool listed(const char* const (&names)[N], const std::string& name) {
  return std::any_of(std::begin(names), std::end(names), [&](const char* n) { return name == n; });
}

std::vector<Value> strings(const std::vector<std::string>& parts) {
  std::vector<Value> out;
  for (const auto& p : parts) out.push_back(Value::from_string(p));
  return out;
}

bool prefix_or_suffix(const std::string& s, const Value& test, bool prefix, std::int64_t start) {
  std::u32string cps = utf8_decode(s);
  if (start < 0) start = std::max<std::int64_t>(0, start + static_cast<std::int64_t>(cps.size()));
  if (start > static_cast<std::int64_t>(cps.size())) return false;
  std::string tail = utf8_encode(std::u32string_view(cps).substr(static_cast<std::size_t>(start)));
  auto one = [&](const Value& t) {
    if (!t.is_string()) throw TemplateError("TypeError: startswith first arg must be str or a tuple of str");
    if (t.text.size() > tail.size()) return false;
    return prefix ? tail.compare(0, t.text.size(), t.text) == 0
                  : tail.compare(tail.size() - t.text.size(), t.text.size(), t.text) == 0;
  };
  if (test.is_list()) return std::any_of(test.items().begin(), test.items().end(), one);
  return one(test);
}

// format(value, spec): [[fill]align][sign][0][width][.precision][type] of Python's mini-language.
std::string apply_format_spec(const Value& v, const std::string& spec) {
  if (spec.empty()) return to_str(v);
  std::size_t i = 0;
  std::string fill = " ";
  char align = '\0', sign = '-';
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  std::u32string cps = utf8_decode(spec);
  if (cps.size() >= 2 && cps[1] < 128 && is_align(static_cast<char>(cps[1]))) {
    fill = utf8_encode(cps.substr(0, 1));
    align = static_cast<char>(cps[1]);
    i = utf8_encode(cps.substr(0, 2)).size();
  } else if (is_align(spec[0])) {
    align = spec[0];
    i = 1;
  }
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) sign = spec[i++];
  if (i < spec.size() && spec[i] == '0') {
    if (!align) {
      fill = "0";
      align = '=';
    }
    ++i;
  }
  std::int64_t width = 0;
  while (i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i])) && width < 100000)
    width = width * 10 + (spec[i++] - '0');
  char grouping = '\0';
  if (i < spec.size() && (spec[i] == ',' || spec[i] == '_')) grouping = spec[i++];
  int precision = -1;
  if (i < spec.size() && spec[i] == '.') {
    precision = 0;
    ++i;
    while (i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i])) && precision < 1000)
      precision = precision * 10 + (spec[i++] - '0');
  }
  char type = i < spec.size() ? spec[i++] : '\0';
  if (i != spec.size()) throw TemplateError("ValueError: Invalid format specifier '" + spec + "'");
  std::string body;
  bool numeric = v.is_number();
  if (v.is_string() || (!numeric && (type == '\0' || type == 's'))) {
    if (type != '\0' && type != 's')
      throw TemplateError("ValueError: Unknown format code '" + std::string(1, type) + "' for object of type 'str'");
    body = to_str(v);
    if (precision >= 0) {
      std::u32string b = utf8_decode(body);
      if (b.size() > static_cast<std::size_t>(precision))
        body = utf8_encode(b.substr(0, static_cast<std::size_t>(precision)));
    }
    numeric = false;
  } else if (numeric) {
    char buf[1200];
    double d = as_double(v);
    bool is_integer = v.is_int();
    if (type == 'd' || type == 'x' || type == 'X' || type == 'o' || type == 'b') {
      if (!is_integer)
        throw TemplateError("ValueError: Unknown format code '" + std::string(1, type) +
                            "' for object of type 'float'");
      long long n = v.kind == Value::Kind::Bool ? v.boolean : v.integer;
      unsigned long long mag = n < 0 ? 0ULL - static_cast<unsigned long long>(n) : static_cast<unsigned long long>(n);
      if (type == 'b') {
        body = mag == 0 ? "0" : "";
        for (; mag; mag >>= 1) body.insert(body.begin(), static_cast<char>('0' + (mag & 1)));
      } else {
        std::snprintf(buf, sizeof buf,
                      type == 'd'   ? "%llu"
                      : type == 'o' ? "%llo"
                      : type == 'x' ? "%llx"
                                    : "%llX",
                      mag);
        body = buf;
      }
      if (n < 0) body.insert(0, "-");
    } else if (type == 'f' || type == 'F' || type == 'e' || type == 'E' || type == 'g' || type == 'G' || type == '%') {
      double x = type == '%' ? d * 100 : d;
      char conv = type == '%' ? 'f' : type;
      std::snprintf(buf, sizeof buf, (std::string("%.*") + conv).c_str(), precision < 0 ? 6 : precision, x);
      body = buf;
      if (type == '%') body += '%';
    } else if (type == '\0' && !(is_integer && precision < 0)) {
      if (precision >= 0) {
        std::snprintf(buf, sizeof buf, "%.*g", precision == 0 ? 1 : precision, d);
        body = buf;
      } else {
        body = to_str(v);
      }
    } else if (type == '\0') {
      body = to_str(Value::from_int(v.kind == Value::Kind::Bool ? v.boolean : v.integer));
    } else {
      throw TemplateError("ValueError: Unknown format code '" + std::string(1, type) + "'");
    }
    if (grouping && (type == '\0' || type == 'd' || type == 'f' || type == 'F' || type == '%')) {
      std::size_t begin = body[0] == '-' ? 1 : 0;
      std::size_t end = body.find_first_not_of("0123456789", begin);
      if (end == std::string::npos) end = body.size();
      for (std::size_t k = end; k > begin + 3; k -= 3) body.insert(k - 3, 1, grouping);
    }
    if (sign != '-' && !body.empty() && body[0] != '-') body.insert(0, 1, sign);
  } else {
    body = to_str(v);
  }
  if (!align) align = numeric ? '>' : '<';
  std::int64_t pad = width - utf8_length(body);
  if (pad <= 0) return body;
  std::string left, right;
  std::int64_t nleft = align == '<' ? 0 : align == '^' ? pad / 2 : pad;
  for (std::int64_t k = 0; k < nleft; ++k) left += fill;
  for (std::int64_t k = 0; k < pad - nleft; ++k) right += fill;
  if (align == '=' && !body.empty() && (body[0] == '-' || body[0] == '+' || body[0] == ' '))
    return body.substr(0, 1) + left + body.substr(1);
  return left + body + right;
}

// str.format: {} {0} {name} {0.attr}-free fields, !r / !s conversions and format specs.
std::string str_format(Renderer& r, const std::string& fmt, CallArgs& args) {
  std::string out;
  std::size_t auto_index = 0;
  for (std::size_t i = 0; i < fmt.size(); ++i) {
    char c = fmt[i];
    if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') {
      out += '{';
      ++i;
    } else if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') {
      out += '}';
      ++i;
    } else if (c == '{') {
      std::size_t close = fmt.find('}', i);
      if (close == std::string::npos) throw TemplateError("ValueError: Single '{' encountered in format string");
      std::string field = fmt.substr(i + 1, close - i - 1);
      std::string spec, conversion;
      if (std::size_t colon = field.find(':'); colon != std::string::npos) {
        spec = field.substr(colon + 1);
        field.resize(colon);
      }
      if (std::size_t bang = field.find('!'); bang != std::string::npos) {
        conversion = field.substr(bang + 1);
        field.resize(bang);
      }
      const Value* v = nullptr;
      if (field.empty()) {
        if (auto_index >= args.positional.size()) throw TemplateError("IndexError: Replacement index out of range");
        v = &args.positional[auto_index++];
      } else if (field.find_first_not_of("0123456789") == std::string::npos) {
        std::size_t idx = std::stoul(field.substr(0, 9));
        if (idx >= args.positional.size()) throw TemplateError("IndexError: Replacement index out of range");
        v = &args.positional[idx];
      } else {
        for (const auto& [k, kv] : args.keyword)
          if (k == field) v = &kv;
        if (!v) throw TemplateError("KeyError: '" + field + "'");
      }
      if (conversion == "r")
        out += apply_format_spec(Value::from_string(repr(*v)), spec);
      else if (conversion == "s")
        out += apply_format_spec(Value::from_string(to_str(*v)), spec);
      else
        out += apply_format_spec(*v, spec);
      r.check_size(out.size());
      i = close;
    } else if (c == '}') {
      throw TemplateError("ValueError: Single '}' encountered in format string");
    } else {
      out += c;
    }
  }
  return out;
}

Value pad(Renderer& r, const std::string& s, std::int64_t width, const std::string& fill, int align) {
  std::int64_t len = utf8_length(s);
  if (width <= len) return Value::from_string(s);
  r.check_size(static_cast<std::size_t>(width) * std::max<std::size_t>(fill.size(), 1));
  std::int64_t total = width - len;
  std::int64_t left = align < 0 ? 0 : align > 0 ? total : total / 2 + (total & width & 1);
  std::string out;
  for (std::int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (std::int64_t i = 0; i < total - left; ++i) out += fill;
  return Value::from_string(std::move(out));
}

Value string_method(Renderer& r, const std::string& s, const std::string& name, CallArgs& args) {
  // strip's chars and split's sep: a str, or None (or nothing) for whitespace.
  auto chars_arg = [&](ArgReader& a, std::string& store) -> const std::string* {
    const Value* c = a.get(0);
    if (!c || c->is_none()) return nullptr;
    store = a.get_strict_string(0, "");
    return &store;
  };
  std::string store;
  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    ArgReader a(name, args, {"chars"});
    return Value::from_string(py_strip(s, chars_arg(a, store), name != "rstrip", name != "lstrip"));
  }
  if (name == "split" || name == "rsplit") {
    ArgReader a(name, args, {"sep", "maxsplit"});
    const std::string* sep = chars_arg(a, store);
    if (sep && sep->empty()) throw TemplateError("ValueError: empty separator");
    std::int64_t maxsplit = a.get_strict_int(1, -1);
    auto parts = name == "split" ? py_split(s, sep, maxsplit) : py_rsplit(s, sep, maxsplit);
    return Value::from_list(strings(parts));
  }
  if (name == "splitlines") {
    ArgReader a(name, args, {"keepends"});
    if (a.get_strict_int(0, 0) != 0)
      throw TemplateError("splitlines(keepends=True) is not supported by this template engine");
    return Value::from_list(strings(py_splitlines(s)));
  }
  if (name == "startswith" || name == "endswith") {
    ArgReader a(name, args, {"prefix", "start"});
    if (!a.get(0)) throw TemplateError("TypeError: " + name + "() takes at least 1 argument (0 given)");
    return Value::from_bool(prefix_or_suffix(s, *a.get(0), name == "startswith", a.get_int(1, 0)));
  }
  if (name == "replace") {
    ArgReader a(name, args, {"old", "new", "count"});
    std::string out = py_replace(s, a.get_strict_string(0, ""), a.get_strict_string(1, ""), a.get_strict_int(2, -1));
    r.check_size(out.size());
    return Value::from_string(std::move(out));
  }
  if (name == "upper") return Value::from_string(py_upper(s));
  if (name == "lower" || name == "casefold") return Value::from_string(py_lower(s));
  if (name == "title") return Value::from_string(py_title(s));
  if (name == "capitalize") return Value::from_string(py_capitalize(s));
  if (name == "swapcase") {
    std::string out = s;
    for (char& c : out)
      c = std::isupper(static_cast<unsigned char>(c)) ? static_cast<char>(std::tolower(c))
                                                      : static_cast<char>(std::toupper(c));
    return Value::from_string(std::move(out));
  }
  if (name == "format") return Value::from_string(str_format(r, s, args));
  if (name == "join") {
    ArgReader a(name, args, {"iterable"});
    std::string out;
    bool first = true;
    for (const auto& item : iterate(a.get_or(0, Value::from_list({})))) {
      if (!item.is_string())
        throw TemplateError("TypeError: sequence item: expected str instance, " + type_name(item) + " found");
      if (!first) out += s;
      first = false;
      out += item.text;
      r.check_size(out.size());
    }
    return Value::from_string(std::move(out));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex") {
    ArgReader a(name, args, {"sub"});
    std::int64_t at = py_find(s, a.get_strict_string(0, ""), name[0] == 'r');
    if (at < 0 && name.find("index") != std::string::npos) throw TemplateError("ValueError: substring not found");
    return Value::from_int(at);
  }
  if (name == "count") {
    ArgReader a(name, args, {"sub"});
    return Value::from_int(py_count(s, a.get_strict_string(0, "")));
  }
  if (name.rfind("is", 0) == 0) {
    std::u32string cps = utf8_decode(s);
    if (name == "islower" || name == "isupper") return Value::from_bool(cased_all(s, name == "isupper"));
    if (cps.empty()) return Value::from_bool(false);
    auto all = [&](auto pred) { return Value::from_bool(std::all_of(cps.begin(), cps.end(), pred)); };
    if (name == "isspace") return all(py_isspace);
    if (name == "isalpha") return all(py_isalpha);
    if (name == "isalnum") return all([](char32_t c) { return py_isalpha(c) || py_isdigit(c); });
    return all(py_isdigit);  // isdigit, isnumeric, isdecimal
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    ArgReader a(name, args, {"width", "fillchar"});
    std::string fill = a.get_strict_string(1, " ");
    if (utf8_length(fill) != 1) throw TemplateError("TypeError: The fill character must be exactly one character long");
    return pad(r, s, a.get_strict_int(0, 0), fill, name == "ljust" ? -1 : name == "rjust" ? 1 : 0);
  }
  if (name == "zfill") {
    ArgReader a(name, args, {"width"});
    std::int64_t width = a.get_strict_int(0, 0);
    bool sign = !s.empty() && (s[0] == '-' || s[0] == '+');
    Value padded = pad(r, sign ? s.substr(1) : s, width - (sign ? 1 : 0), "0", 1);
    return Value::from_string((sign ? s.substr(0, 1) : "") + padded.text);
  }
  if (name == "partition" || name == "rpartition") {
    ArgReader a(name, args, {"sep"});
    std::string sep = a.get_strict_string(0, "");
    if (sep.empty()) throw TemplateError("ValueError: empty separator");
    std::size_t at = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (at == std::string::npos)
      return name == "partition" ? Value::from_list(strings({s, "", ""}), true)
                                 : Value::from_list(strings({"", "", s}), true);
    return Value::from_list(strings({s.substr(0, at), sep, s.substr(at + sep.size())}), true);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    ArgReader a(name, args, {"affix"});
    std::string affix = a.get_strict_string(0, "");
    if (name == "removeprefix" && s.rfind(affix, 0) == 0) return Value::from_string(s.substr(affix.size()));
    if (name == "removesuffix" && !affix.empty() && s.size() >= affix.size() &&
        s.compare(s.size() - affix.size(), affix.size(), affix) == 0)
      return Value::from_string(s.substr(0, s.size() - affix.size()));
    return Value::from_string(s);
  }
  throw TemplateError("'str object' has no attribute '" + name + "'");
}

}  // namespace

bool has_method(const Value& self, const std::string& name) {
  if (self.is_string()) return listed(kStringMethods, name);
  if (self.is_mapping()) return listed(kDictMethods, name);
  if (self.is_list()) return listed(kListMethods, name) && !(self.list->is_tuple && name == "copy");
  return false;
}

bool is_unsafe_method(const Value& self, const std::string& name) {
  if (self.is_mapping()) return listed(kUnsafeDict, name);
  if (self.is_list()) return !self.list->is_tuple && listed(kUnsafeList, name);
  return false;
}

Value call_method(Renderer& r, const Value& self, const std::string& name, CallArgs& args) {
  if (self.is_string()) return string_method(r, self.text, name, args);
  if (self.is_mapping()) {
    if (name == "get") {
      ArgReader a(name, args, {"key", "default"});
      if (!a.get(0)) throw TemplateError("TypeError: get expected at least 1 argument, got 0");
      const Value* found = a.get(0)->is_string() ? self.dict->find(a.get(0)->text) : nullptr;
      return found ? *found : a.get_or(1, Value::none());
    }
    ArgReader a(name, args, {});
    if (name == "copy") return Value::from_dict(std::make_shared<DictData>(*self.dict));
    std::vector<Value> out;
    for (const auto& [k, v] : self.dict->entries) {
      if (name == "keys")
        out.push_back(Value::from_string(k));
      else if (name == "values")
        out.push_back(v);
      else
        out.push_back(Value::from_list({Value::from_string(k), v}, true));
    }
    return Value::from_view(std::move(out), name == "keys"     ? "dict_keys"
                                            : name == "values" ? "dict_values"
                                                               : "dict_items");
  }
  if (self.is_list()) {
    if (name == "copy") return Value::from_list(self.items());
    ArgReader a(name, args, {"value"});
    if (!a.get(0)) throw TemplateError("TypeError: " + name + "() takes exactly one argument (0 given)");
    std::int64_t count = 0;
    for (std::size_t i = 0; i < self.items().size(); ++i) {
      if (!equals(self.items()[i], *a.get(0))) continue;
      if (name == "index") return Value::from_int(static_cast<std::int64_t>(i));
      ++count;
    }
    if (name == "index") throw TemplateError("ValueError: " + repr(*a.get(0)) + " is not in list");
    return Value::from_int(count);
  }
  throw TemplateError("'" + type_name(self) + " object' has no attribute '" + name + "'");
}

}  // namespace slab::chat
