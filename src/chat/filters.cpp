// jinja2's builtin filters, with transformers' tojson in place of jinja2's own.
#include "chat/evaluator.h"
#include "chat/text_util.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <unordered_set>

namespace slab::chat {
namespace {

using Filter = Value (*)(Renderer&, const Value&, CallArgs&);

std::string str_of(const Value& v) { return to_str(v); }

// Lowercases strings for the case-insensitive comparisons of sort, unique, dictsort, min, max.
Value fold_case(const Value& v, bool case_sensitive) {
  return (!case_sensitive && v.is_string()) ? Value::from_string(py_lower(v.text)) : v;
}

Value f_abs(Renderer&, const Value& v, CallArgs&) {
  if (v.kind == Value::Kind::Float) return Value::from_float(std::fabs(v.number));
  if (v.is_int()) {
    std::int64_t i = v.kind == Value::Kind::Bool ? v.boolean : v.integer;
    if (i == INT64_MIN) throw TemplateError("integer overflow");
    return Value::from_int(i < 0 ? -i : i);
  }
  if (v.is_undefined()) throw_undefined(v);
  throw TemplateError("TypeError: bad operand type for abs(): '" + type_name(v) + "'");
}

Value f_attr(Renderer& r, const Value& v, CallArgs& args) {
  ArgReader a("attr", args, {"name"});
  return r.get_attr(v, a.get_string(0, ""));
}

Value f_batch(Renderer& r, const Value& v, CallArgs& args) {
  ArgReader a("batch", args, {"linecount", "fill_with"});
  std::int64_t n = a.get_int(0, 1);
  if (n <= 0) throw TemplateError("ValueError: batch size must be positive");
  std::vector<Value> out, cur;
  for (auto& item : iterate(v)) {
    cur.push_back(item);
    if (static_cast<std::int64_t>(cur.size()) == n) out.push_back(Value::from_list(std::exchange(cur, {})));
  }
  if (!cur.empty()) {
    if (const Value* fill = a.get(1); fill && !fill->is_none()) {
      r.check_size(static_cast<std::size_t>(n));
      while (static_cast<std::int64_t>(cur.size()) < n) cur.push_back(*fill);
    }
    out.push_back(Value::from_list(std::move(cur)));
  }
  return Value::from_list(std::move(out));
}

Value f_capitalize(Renderer&, const Value& v, CallArgs&) { return Value::from_string(py_capitalize(str_of(v))); }

Value f_center(Renderer& r, const Value& v, CallArgs& args) {
  ArgReader a("center", args, {"width"});
  std::string s = str_of(v);
  std::int64_t width = a.get_strict_int(0, 80), len = utf8_length(s);
  if (width <= len) return Value::from_string(s);
  r.check_size(static_cast<std::size_t>(width));
  std::int64_t total = width - len, left = total / 2 + (total & width & 1);
  return Value::from_string(std::string(static_cast<std::size_t>(left), ' ') + s +
                            std::string(static_cast<std::size_t>(total - left), ' '));
}

Value f_length(Renderer&, const Value& v, CallArgs&) { return Value::from_int(length_of(v)); }

Value f_default(Renderer&, const Value& v, CallArgs& args) {
  ArgReader a("default", args, {"default_value", "boolean"});
  bool use_default = v.is_undefined() || (a.get_bool(1, false) && !truthy(v));
  return use_default ? a.get_or(0, Value::from_string("")) : v;
}

Value f_dictsort(Renderer&, const Value& v, CallArgs& args) {
  ArgReader a("dictsort", args, {"case_sensitive", "by", "reverse"});
  if (!v.is_mapping()) throw TemplateError("TypeError: dictsort expects a mapping");
  bool cs = a.get_bool(0, false), rev = a.get_bool(2, false);
  std::string by = a.get_string(1, "key");
  if (by != "key" && by != "value")
    throw TemplateError("FilterArgumentError: You can only sort by either \"key\" or \"value\"");
  std::vector<Value> pairs;
  for (const auto& [k, item] : v.dict->entries) pairs.push_back(Value::from_list({Value::from_string(k), item}, true));
  std::size_t pos = by == "key" ? 0 : 1;
  std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& x, const Value& y) {
    int c = compare(fold_case(x.items()[pos], cs), fold_case(y.items()[pos], cs));
    return rev ? c > 0 : c < 0;
  });
  return Value::from_list(std::move(pairs));
}

Value f_escape(Renderer&, const Value& v, CallArgs&) {
  std::string out;
  for (char c : str_of(v)) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return Value::from_string(std::move(out));
}

Value f_first(Renderer&, const Value& v, CallArgs&) {
  if (v.is_list())
    return v.items().empty() ? Value::undefined("No first item, sequence was empty.") : v.items().front();
  std::vector<Value> items = iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(Renderer&, const Value& v, CallArgs&) {
  if (v.is_list()) return v.items().empty() ? Value::undefined("No last item, sequence was empty.") : v.items().back();
  std::vector<Value> items = iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

// Python's float(str): surrounding whitespace and digit underscores allowed.
bool parse_float(std::string s, double& out) {
  s = py_strip(s, nullptr, true, true);
  std::string lower = py_lower(s);
  std::string body = lower[0] == '+' || lower[0] == '-' ? lower.substr(1) : lower;
  if (body == "inf" || body == "infinity" || body == "nan") {
    out = body == "nan" ? NAN : (lower[0] == '-' ? -INFINITY : INFINITY);
    return true;
  }
  if (s.empty() || s.find_first_not_of("0123456789+-.eE_") != std::string::npos) return false;
  s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
  try {
    std::size_t used = 0;
    out = std::stod(s, &used);
    return used == s.size();
  } catch (const std::exception&) {
    return false;
  }
}

bool parse_int(std::string s, std::int64_t base, std::int64_t& out) {
  s = py_strip(s, nullptr, true, true);
  bool neg = false;
  if (!s.empty() && (s[0] == '+' || s[0] == '-')) {
    neg = s[0] == '-';
    s.erase(0, 1);
  }
  std::string lower = py_lower(s);
  auto prefix = [&](const char* p, std::int64_t b) {
    if ((base == 0 || base == b) && lower.rfind(p, 0) == 0) {
      s.erase(0, 2);
      base = b;
    }
  };
  prefix("0x", 16);
  prefix("0o", 8);
  prefix("0b", 2);
  if (base == 0) base = 10;
  if (s.empty() || base < 2 || base > 36) return false;
  std::int64_t value = 0;
  for (char c : s) {
    if (c == '_') continue;
    int d = std::isdigit(static_cast<unsigned char>(c))   ? c - '0'
            : std::isalpha(static_cast<unsigned char>(c)) ? std::tolower(c) - 'a' + 10
                                                          : 99;
    if (d >= base) return false;
    if (__builtin_mul_overflow(value, base, &value) || __builtin_add_overflow(value, d, &value)) return false;
  }
  out = neg ? -value : value;
  return true;
}

// float() and int() of an Undefined raise (its __float__ / __int__ do); the default is for values
// that do not convert.
Value f_float(Renderer&, const Value& v, CallArgs& args) {
  ArgReader a("float", args, {"default"});
  if (v.is_undefined()) throw_undefined(v);
  if (v.is_number()) return Value::from_float(as_double(v));
  double d;
  if (v.is_string() && parse_float(v.text, d)) return Value::from_float(d);
  return a.get_or(0, Value::from_float(0.0));
}

Value f_int(Renderer&, const Value& v, CallArgs& args) {
  ArgReader a("int", args, {"default", "base"});
  if (v.is_undefined()) throw_undefined(v);
  if (v.is_int()) return Value::from_int(v.kind == Value::Kind::Bool ? v.boolean : v.integer);
  if (v.kind == Value::Kind::Float && std::isfinite(v.number) && std::fabs(v.number) < 9.2e18)
    return Value::from_int(static_cast<std::int64_t>(v.number));
  if (v.is_string()) {
    std::int64_t i;
    if (parse_int(v.text, a.get_int(1, 10), i)) return Value::from_int(i);
    double d;
    if (parse_float(v.text, d) && std::isfinite(d) && std::fabs(d) < 9.2e18)
      return Value::from_int(static_cast<std::int64_t>(d));
  }
  return a.get_or(0, Value::from_int(0));
}

Value f_format(Renderer& r, const Value& v, CallArgs& args) {
  if (!args.keyword.empty() && !args.positional.empty())
    throw TemplateError("can't handle positional and keyword arguments at the same time");
  return Value::from_string(percent_format(r, str_of(v), Value::from_list(args.positional, true)));
}

Value f_indent(Renderer& r, const Value& v, CallArgs& args) {
  ArgReader a("indent", args, {"width", "first", "blank"});
  // jinja2 appends "\n" to the value itself: anything but a string fails there.
  if (v.is_undefined()) throw_undefined(v);
  if (!v.is_string())
    throw TemplateError("TypeError: unsupported operand type(s) for +=: '" + type_name(v) + "' and 'str'");
  std::string indention;
  const Value* w = a.get(0);
  if (w && w->is_string())
    indention = w->text;
  else {
    if (w && w->is_undefined()) throw_undefined(*w);
    std::int64_t n = a.get_strict_int(0, 4);
    r.check_size(static_cast<std::size_t>(std::max<std::int64_t>(n, 0)));
    indention.assign(static_cast<std::size_t>(std::max<std::int64_t>(n, 0)), ' ');
  }
  std::vector<std::string> lines = py_splitlines(str_of(v) + "\n");
  std::string out;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    if (i > 0) out += "\n";
    if (i > 0 && (a.get_bool(2, false) || !lines[i].empty())) out += indention;
    out += lines[i];
    r.check_size(out.size());
  }
  if (a.get_bool(1, false)) out = indention + out;
  return Value::from_string(std::move(out));
}

Value f_items(Renderer&, const Value& v, CallArgs&) {
  if (v.is_undefined()) return Value::from_list({});
  if (!v.is_mapping()) throw TemplateError("TypeError: Can only get item pairs from a mapping.");
  std::vector<Value> pairs;
  for (const auto& [k, item] : v.dict->entries) pairs.push_back(Value::from_list({Value::from_string(k), item}, true));
  return Value::from_list(std::move(pairs));
}

Value f_join(Renderer& r, const Value& v, CallArgs& args) {
  ArgReader a("join", args, {"d", "attribute"});
  std::string sep = a.get(0) ? to_str(*a.get(0)) : "", out;  // str(d): None joins with "None"
  const Value* attribute = a.get(1);
  bool first = true;
  for (auto& item : iterate(v)) {
    if (!first) out += sep;
    first = false;
    out += str_of(attribute && !attribute->is_none() ? r.get_path(item, to_str(*attribute)) : item);
    r.check_size(out.size());
  }
  return Value::from_string(std::move(out));
}

Value f_list(Renderer&, const Value& v, CallArgs&) { return Value::from_list(iterate(v)); }
Value f_lower(Renderer&, const Value& v, CallArgs&) { return Value::from_string(py_lower(str_of(v))); }
Value f_upper(Renderer&, const Value& v, CallArgs&) { return Value::from_string(py_upper(str_of(v))); }

// map, select, reject, selectattr and rejectattr start with `if value:` in jinja2: a falsy input
// (none, undefined, 0, "", []) gives an empty sequence before the arguments are even looked at.
Value f_map(Renderer& r, const Value& v, CallArgs& args) {
  std::vector<Value> out;
  if (!truthy(v)) return Value::from_list({});
  if (args.positional.empty()) {  // map(attribute='x', default=...)
    ArgReader a("map", args, {"attribute", "default"});
    const Value* attr = a.get(0);
    std::string attribute = a.get_string(0, "");
    for (auto& item : iterate(v)) {
      // attribute=none maps each item to itself; an undefined attribute finds nothing.
      Value got = attr && attr->is_none()        ? item
                  : attr && attr->is_undefined() ? Value::undefined("no attribute")
                                                 : r.get_path(item, attribute);
      if (got.is_undefined() && a.get(1)) got = *a.get(1);
      out.push_back(std::move(got));
    }
    return Value::from_list(std::move(out));
  }
  std::string filter = to_str(args.positional[0]);
  CallArgs rest;
  rest.positional.assign(args.positional.begin() + 1, args.positional.end());
  rest.keyword = args.keyword;
  for (auto& item : iterate(v)) {
    CallArgs copy = rest;
    out.push_back(apply_filter(r, filter, item, copy));
  }
  return Value::from_list(std::move(out));
}

Value min_max(Renderer& r, const Value& v, CallArgs& args, bool want_max) {
  ArgReader a(want_max ? "max" : "min", args, {"case_sensitive", "attribute"});
  bool cs = a.get_bool(0, false);
  std::string attribute = a.get_string(1, "");
  std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined(std::string("No aggregated item, sequence was empty."));
  auto key = [&](const Value& x) { return fold_case(attribute.empty() ? x : r.get_path(x, attribute), cs); };
  std::size_t best = 0;
  for (std::size_t i = 1; i < items.size(); ++i) {
    int c = compare(key(items[i]), key(items[best]));
    if (want_max ? c > 0 : c < 0) best = i;
  }
  return items[best];
}
Value f_max(Renderer& r, const Value& v, CallArgs& args) { return min_max(r, v, args, true); }
Value f_min(Renderer& r, const Value& v, CallArgs& args) { return min_max(r, v, args, false); }

// select / reject / selectattr / rejectattr.
Value select_items(Renderer& r, const Value& v, CallArgs& args, bool with_attr, bool keep_when) {
  if (!truthy(v)) return Value::from_list({});
  std::size_t first_arg = with_attr ? 1 : 0;
  if (with_attr && args.positional.empty()) throw TemplateError("Missing parameter for attribute name");
  // selectattr(none) tests the items themselves, as jinja2's attribute getter does for None.
  bool by_attr = with_attr && !args.positional[0].is_none();
  std::string attribute = by_attr ? to_str(args.positional[0]) : "";
  std::string test = args.positional.size() > first_arg ? to_str(args.positional[first_arg]) : "";
  if (!test.empty() && !is_known_test(test)) throw TemplateError("No test named '" + test + "'.");
  CallArgs rest;
  if (args.positional.size() > first_arg + 1)
    rest.positional.assign(args.positional.begin() + static_cast<std::ptrdiff_t>(first_arg + 1), args.positional.end());
  rest.keyword = args.keyword;
  std::vector<Value> out;
  for (auto& item : iterate(v)) {
    Value probe = by_attr ? r.get_path(item, attribute) : item;
    CallArgs copy = rest;
    bool passed = test.empty() ? truthy(probe) : apply_test(r, test, probe, copy);
    if (passed == keep_when) out.push_back(item);
  }
  return Value::from_list(std::move(out));
}
Value f_select(Renderer& r, const Value& v, CallArgs& a) { return select_items(r, v, a, false, true); }
Value f_reject(Renderer& r, const Value& v, CallArgs& a) { return select_items(r, v, a, false, false); }
Value f_selectattr(Renderer& r, const Value& v, CallArgs& a) { return select_items(r, v, a, true, true); }
Value f_rejectattr(Renderer& r, const Value& v, CallArgs& a) { return select_items(r, v, a, true, false); }

Value f_replace(Renderer& r, const Value& v, CallArgs& args) {
  ArgReader a("replace", args, {"old", "new", "count"});
  // str(old) and str(new), as jinja2 does: None replaces the text "None".
  auto text_arg = [&](std::size_t i) { return a.get(i) ? to_str(*a.get(i)) : std::string(); };
  std::string s = py_replace(str_of(v), text_arg(0), text_arg(1), a.get_int(2, -1));
  r.check_size(s.size());
  return Value::from_string(std::move(s));
}

Value f_reverse(Renderer&, const Value& v, CallArgs&) {
  if (v.is_string()) {
    std::u32string cps = utf8_decode(v.text);
    std::reverse(cps.begin(), cps.end());
    return Value::from_string(utf8_encode(cps));
  }
  std::vector<Value> items = iterate(v);
  std::reverse(items.begin(), items.end());
  return Value::from_list(std::move(items));
}

Value f_round(Renderer&, const Value& v, CallArgs& args) {
  ArgReader a("round", args, {"precision", "method"});
  std::int64_t precision = a.get_int(0, 0);
  std::string method = a.get_string(1, "common");
  if (method != "common" && method != "ceil" && method != "floor")
    throw TemplateError("FilterArgumentError: method must be common, ceil or floor");
  if (!v.is_number()) throw TemplateError("TypeError: type " + type_name(v) + " doesn't define __round__ method");
  if (method == "common") {
    if (v.is_int()) return Value::from_int(v.kind == Value::Kind::Bool ? v.boolean : v.integer);
    if (precision < 0 || precision > 300 || !std::isfinite(v.number)) return Value::from_float(v.number);
    char buf[400];  // printf rounds the exact binary value half-to-even, as Python's round does
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(precision), v.number);
    return Value::from_float(std::stod(buf));
  }
  double scale = std::pow(10.0, static_cast<double>(precision));
  double x = as_double(v) * scale;
  return Value::from_float((method == "ceil" ? std::ceil(x) : std::floor(x)) / scale);
}

Value f_safe(Renderer&, const Value& v, CallArgs&) { return v.is_string() ? v : Value::from_string(str_of(v)); }
Value f_string(Renderer&, const Value& v, CallArgs&) { return v.is_string() ? v : Value::from_string(str_of(v)); }

Value f_sort(Renderer& r, const Value& v, CallArgs& args) {
  ArgReader a("sort", args, {"reverse", "case_sensitive", "attribute"});
  bool rev = a.get_bool(0, false), cs = a.get_bool(1, false);
  std::string attribute = a.get_string(2, "");
  bool undefined_attribute = a.get(2) && a.get(2)->is_undefined();  // every key is then Undefined
  std::vector<Value> items = iterate(v);
  std::vector<Value> keys;
  for (const auto& item : items)
    keys.push_back(undefined_attribute ? Value::undefined("no attribute")
                                       : fold_case(attribute.empty() ? item : r.get_path(item, attribute), cs));
  std::vector<std::size_t> order(items.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  // jinja2 sorts by one-element key lists: Python compares those with == first, so equal keys
  // (equal dicts, two Undefined) never reach '<'.
  std::stable_sort(order.begin(), order.end(), [&](std::size_t x, std::size_t y) {
    int c = equals(keys[x], keys[y]) ? 0 : compare(keys[x], keys[y]);
    return rev ? c > 0 : c < 0;
  });
  std::vector<Value> out;
  for (std::size_t i : order) out.push_back(items[i]);
  return Value::from_list(std::move(out));
}

Value f_sum(Renderer& r, const Value& v, CallArgs& args) {
  ArgReader a("sum", args, {"attribute", "start"});
  std::string attribute = a.get_string(0, "");
  Value total = a.get_or(1, Value::from_int(0));
  for (auto& item : iterate(v))
    total = binary_op(r, "+", total, attribute.empty() ? item : r.get_path(item, attribute));
  return total;
}

Value f_title(Renderer&, const Value& v, CallArgs&) {
  // jinja2 capitalises each word, words split at whitespace and - ( { [ <
  std::u32string cps = utf8_decode(str_of(v));
  bool at_start = true;
  for (char32_t& c : cps) {
    bool sep = py_isspace(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (sep) {
      at_start = true;
      continue;
    }
    c = at_start ? unicode_upper(c) : unicode_lower(c);
    at_start = false;
  }
  return Value::from_string(utf8_encode(cps));
}

Value f_tojson(Renderer&, const Value& v, CallArgs& args) {
  ArgReader a("tojson", args, {"ensure_ascii", "indent", "separators", "sort_keys"});
  JsonDumpOptions o;
  o.ensure_ascii = a.get_bool(0, false);
  if (const Value* ind = a.get(1); ind && !ind->is_none()) {
    o.has_indent = true;
    if (ind->is_string())
      o.indent = ind->text;
    else
      o.indent.assign(static_cast<std::size_t>(std::clamp<std::int64_t>(a.get_int(1, 0), 0, 256)), ' ');
    o.item_separator = ",";
  }
  if (const Value* sep = a.get(2); sep && !sep->is_none()) {
    std::vector<Value> parts = iterate(*sep);
    if (parts.size() != 2) throw TemplateError("ValueError: separators must be a pair");
    o.item_separator = to_str(parts[0]);
    o.key_separator = to_str(parts[1]);
  }
  o.sort_keys = a.get_bool(3, false);
  return Value::from_string(dump_json(v, o));
}

Value f_trim(Renderer&, const Value& v, CallArgs& args) {
  ArgReader a("trim", args, {"chars"});
  const Value* chars = a.get(0);
  std::string set = a.get_strict_string(0, "", true);  // str.strip(chars): a str or None
  return Value::from_string(py_strip(str_of(v), chars && !chars->is_none() ? &set : nullptr, true, true));
}

Value f_unique(Renderer& r, const Value& v, CallArgs& args) {
  ArgReader a("unique", args, {"case_sensitive", "attribute"});
  bool cs = a.get_bool(0, false);
  std::string attribute = a.get_string(1, "");
  std::vector<Value> out, seen;
  for (auto& item : iterate(v)) {
    Value key = fold_case(attribute.empty() ? item : r.get_path(item, attribute), cs);
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return equals(s, key); })) {
      seen.push_back(key);
      out.push_back(item);
    }
  }
  return Value::from_list(std::move(out));
}

Value f_wordcount(Renderer&, const Value& v, CallArgs&) {
  std::int64_t n = 0;
  bool in_word = false;
  for (char32_t c : utf8_decode(str_of(v))) {
    bool word = py_isalpha(c) || py_isdigit(c) || c == '_';
    if (word && !in_word) ++n;
    in_word = word;
  }
  return Value::from_int(n);
}

struct FilterEntry {
  const char* name;
  Filter fn;  // null: a jinja2 filter this interpreter does not implement
};

const FilterEntry kFilters[] = {
    {"abs", f_abs},
    {"attr", f_attr},
    {"batch", f_batch},
    {"capitalize", f_capitalize},
    {"center", f_center},
    {"count", f_length},
    {"d", f_default},
    {"default", f_default},
    {"dictsort", f_dictsort},
    {"e", f_escape},
    {"escape", f_escape},
    {"filesizeformat", nullptr},
    {"first", f_first},
    {"float", f_float},
    {"forceescape", f_escape},
    {"format", f_format},
    {"groupby", nullptr},
    {"indent", f_indent},
    {"int", f_int},
    {"items", f_items},
    {"join", f_join},
    {"last", f_last},
    {"length", f_length},
    {"list", f_list},
    {"lower", f_lower},
    {"map", f_map},
    {"max", f_max},
    {"min", f_min},
    {"pprint", nullptr},
    {"random", nullptr},
    {"reject", f_reject},
    {"rejectattr", f_rejectattr},
    {"replace", f_replace},
    {"reverse", f_reverse},
    {"round", f_round},
    {"safe", f_safe},
    {"select", f_select},
    {"selectattr", f_selectattr},
    {"slice", nullptr},
    {"sort", f_sort},
    {"string", f_string},
    {"striptags", nullptr},
    {"sum", f_sum},
    {"title", f_title},
    {"tojson", f_tojson},
    {"trim", f_trim},
    {"truncate", nullptr},
    {"unique", f_unique},
    {"upper", f_upper},
    {"urlencode", nullptr},
    {"urlize", nullptr},
    {"wordcount", f_wordcount},
    {"wordwrap", nullptr},
    {"xmlattr", nullptr},
};

const FilterEntry* find_filter(const std::string& name) {
  for (const auto& f : kFilters)
    if (name == f.name) return &f;
  return nullptr;
}

}  // namespace

bool is_known_filter(const std::string& name) { return find_filter(name) != nullptr; }

Value apply_filter(Renderer& r, const std::string& name, const Value& input, CallArgs& args) {
  const FilterEntry* f = find_filter(name);
  if (!f) throw TemplateError("No filter named '" + name + "'.");
  if (!f->fn) throw TemplateError("filter '" + name + "' is not supported by this template engine");
  return f->fn(r, input, args);
}

}  // namespace slab::chat
