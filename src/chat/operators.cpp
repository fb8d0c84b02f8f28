// Python's arithmetic, concatenation, repetition, `in` and printf-style `%` on template values.
#include "chat/evaluator.h"
#include "chat/text_util.h"

#include <cmath>
#include <cstdio>

namespace slab::chat {
namespace {

std::int64_t int_of(const Value& v) { return v.kind == Value::Kind::Bool ? v.boolean : v.integer; }

[[noreturn]] void unsupported(const std::string& op, const Value& a, const Value& b) {
  throw TemplateError("TypeError: unsupported operand type(s) for " + op + ": '" + type_name(a) + "' and '" +
                      type_name(b) + "'");
}

[[noreturn]] void overflow() { throw TemplateError("integer overflow"); }

Value repeat(Renderer& r, const Value& seq, std::int64_t times) {
  if (times < 0) times = 0;
  if (seq.is_string()) {
    r.check_size(seq.text.size() * static_cast<std::size_t>(times));
    std::string out;
    for (std::int64_t i = 0; i < times; ++i) out += seq.text;
    return Value::from_string(std::move(out));
  }
  r.check_size(seq.items().size() * static_cast<std::size_t>(times) * sizeof(Value));
  std::vector<Value> out;
  for (std::int64_t i = 0; i < times; ++i) out.insert(out.end(), seq.items().begin(), seq.items().end());
  return Value::from_list(std::move(out), seq.list->is_tuple);
}

double py_fmod(double a, double b) {
  double m = std::fmod(a, b);
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

}  // namespace

Value binary_op(Renderer& r, const std::string& op, const Value& a, const Value& b) {
  if (op == "~") {
    std::string s = to_str(a) + to_str(b);
    r.check_size(s.size());
    return Value::from_string(std::move(s));
  }
  // str % Undefined formats it (str() of it is ""); every other operator on Undefined raises.
  if (op == "%" && a.is_string()) return Value::from_string(percent_format(r, a.text, b));
  if (a.is_undefined()) throw_undefined(a);
  if (b.is_undefined()) throw_undefined(b);
  bool ints = a.is_int() && b.is_int();
  bool nums = a.is_number() && b.is_number();
  std::int64_t out = 0;
  if (op == "+") {
    if (ints) {
      if (__builtin_add_overflow(int_of(a), int_of(b), &out)) overflow();
      return Value::from_int(out);
    }
    if (nums) return Value::from_float(as_double(a) + as_double(b));
    if (a.is_string() && b.is_string()) {
      r.check_size(a.text.size() + b.text.size());
      return Value::from_string(a.text + b.text);
    }
    if (a.is_list() && b.is_list() && a.list->is_tuple == b.list->is_tuple) {
      r.check_size((a.items().size() + b.items().size()) * sizeof(Value));
      std::vector<Value> items = a.items();
      items.insert(items.end(), b.items().begin(), b.items().end());
      return Value::from_list(std::move(items), a.list->is_tuple);
    }
    if (a.is_string()) throw TemplateError("TypeError: can only concatenate str (not \"" + type_name(b) + "\") to str");
    if (a.is_list() && !a.list->is_tuple)
      throw TemplateError("TypeError: can only concatenate list (not \"" + type_name(b) + "\") to list");
    unsupported("+", a, b);
  }
  if (op == "-") {
    if (ints) {
      if (__builtin_sub_overflow(int_of(a), int_of(b), &out)) overflow();
      return Value::from_int(out);
    }
    if (nums) return Value::from_float(as_double(a) - as_double(b));
    unsupported("-", a, b);
  }
  if (op == "*") {
    if (ints) {
      if (__builtin_mul_overflow(int_of(a), int_of(b), &out)) overflow();
      return Value::from_int(out);
    }
    if (nums) return Value::from_float(as_double(a) * as_double(b));
    if ((a.is_string() || a.is_list()) && b.is_int()) return repeat(r, a, int_of(b));
    if ((b.is_string() || b.is_list()) && a.is_int()) return repeat(r, b, int_of(a));
    unsupported("*", a, b);
  }
  if (op == "/") {
    if (!nums) unsupported("/", a, b);
    if (as_double(b) == 0) throw TemplateError("ZeroDivisionError: division by zero");
    return Value::from_float(as_double(a) / as_double(b));
  }
  if (op == "//") {
    if (!nums) unsupported("//", a, b);
    if (ints) {
      std::int64_t x = int_of(a), y = int_of(b);
      if (y == 0) throw TemplateError("ZeroDivisionError: integer division or modulo by zero");
      if (x == INT64_MIN && y == -1) overflow();
      std::int64_t q = x / y;
      if ((x % y != 0) && ((x < 0) != (y < 0))) --q;
      return Value::from_int(q);
    }
    if (as_double(b) == 0) throw TemplateError("ZeroDivisionError: float floor division by zero");
    return Value::from_float(std::floor(as_double(a) / as_double(b)));
  }
  if (op == "%") {
    if (a.is_string()) return Value::from_string(percent_format(r, a.text, b));
    if (!nums) unsupported("%", a, b);
    if (ints) {
      std::int64_t x = int_of(a), y = int_of(b);
      if (y == 0) throw TemplateError("ZeroDivisionError: integer division or modulo by zero");
      if (y == -1) return Value::from_int(0);
      std::int64_t m = x % y;
      if (m != 0 && ((m < 0) != (y < 0))) m += y;
      return Value::from_int(m);
    }
    if (as_double(b) == 0) throw TemplateError("ZeroDivisionError: float modulo");
    return Value::from_float(py_fmod(as_double(a), as_double(b)));
  }
  if (op == "**") {
    if (!nums) unsupported("** or pow()", a, b);
    if (ints && int_of(b) >= 0) {
      std::int64_t base = int_of(a), e = int_of(b), result = 1;
      while (e > 0) {
        if (e & 1)
          if (__builtin_mul_overflow(result, base, &result)) overflow();
        e >>= 1;
        if (e > 0 && __builtin_mul_overflow(base, base, &base)) overflow();
      }
      return Value::from_int(result);
    }
    return Value::from_float(std::pow(as_double(a), as_double(b)));
  }
  throw TemplateError("unknown operator " + op);
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind) {
    case Value::Kind::Undefined: return false;
    case Value::Kind::String:
      if (item.is_undefined()) throw_undefined(item);
      if (!item.is_string())
        throw TemplateError("TypeError: 'in <string>' requires string as left operand, not " + type_name(item));
      return container.text.find(item.text) != std::string::npos;
    case Value::Kind::List:
      for (const auto& v : container.items())
        if (equals(v, item)) return true;
      return false;
    case Value::Kind::Dict:
    case Value::Kind::Namespace: return item.is_string() && container.dict->find(item.text) != nullptr;
    default: throw TemplateError("TypeError: argument of type '" + type_name(container) + "' is not iterable");
  }
}

// printf-style formatting: %s %r %d %i %f %x %o %e %g %%, with flags, width and precision.
std::string percent_format(Renderer& r, const std::string& fmt, const Value& args) {
  std::vector<Value> values;
  if (args.is_list() && args.list->is_tuple)
    values = args.items();
  else
    values.push_back(args);
  std::size_t next = 0;
  std::string out;
  for (std::size_t i = 0; i < fmt.size(); ++i) {
    if (fmt[i] != '%') {
      out += fmt[i];
      continue;
    }
    std::size_t j = i + 1;
    std::string spec = "%";
    while (j < fmt.size() && std::string_view("-+ #0").find(fmt[j]) != std::string_view::npos) spec += fmt[j++];
    while (j < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[j]))) spec += fmt[j++];
    if (j < fmt.size() && fmt[j] == '.') {
      spec += fmt[j++];
      while (j < fmt.size() && std::isdigit(static_cast<unsigned char>(fmt[j]))) spec += fmt[j++];
    }
    if (j >= fmt.size()) throw TemplateError("ValueError: incomplete format");
    char conv = fmt[j];
    i = j;
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (next >= values.size()) throw TemplateError("TypeError: not enough arguments for format string");
    const Value& v = values[next++];
    if (spec.size() > 24) throw TemplateError("ValueError: format specification too long");
    char buf[512];
    if (conv == 's' || conv == 'r') {
      std::string s = conv == 's' ? to_str(v) : repr(v);
      if (spec == "%") {
        out += s;
      } else {  // width/precision on a string: pad by code points like Python
        std::string width_spec = spec.substr(1);
        bool left = width_spec.find('-') != std::string::npos;
        std::size_t dot = width_spec.find('.');
        std::string w = width_spec.substr(0, dot);
        w.erase(0, w.find_first_not_of("-+ #0"));
        if (w.size() > 9) throw TemplateError("ValueError: width too big");
        std::int64_t width = w.empty() ? 0 : std::stoll(w);
        r.check_size(static_cast<std::size_t>(width));
        if (dot != std::string::npos) {
          std::u32string cps = utf8_decode(s);
          std::size_t prec = static_cast<std::size_t>(std::stoll(width_spec.substr(dot + 1, 9).insert(0, 1, '0')));
          if (cps.size() > prec) s = utf8_encode(cps.substr(0, prec));
        }
        std::int64_t pad = width - utf8_length(s);
        if (pad > 0)
          s = left ? s + std::string(static_cast<std::size_t>(pad), ' ')
                   : std::string(static_cast<std::size_t>(pad), ' ') + s;
        out += s;
      }
    } else if (v.is_undefined()) {  // int() / float() of it raise
      throw_undefined(v);
    } else if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X' || conv == 'o') {
      if (!v.is_number())
        throw TemplateError("TypeError: %" + std::string(1, conv) + " format: a real number is required, not " +
                            type_name(v));
      auto n = static_cast<long long>(v.kind == Value::Kind::Float ? std::trunc(v.number) : int_of(v));
      std::snprintf(buf, sizeof buf, (spec + "ll" + (conv == 'i' ? 'd' : conv)).c_str(), n);
      out += buf;
    } else if (conv == 'f' || conv == 'F' || conv == 'e' || conv == 'E' || conv == 'g' || conv == 'G') {
      if (!v.is_number()) throw TemplateError("TypeError: must be real number, not " + type_name(v));
      std::snprintf(buf, sizeof buf, (spec + conv).c_str(), as_double(v));
      out += buf;
    } else {
      throw TemplateError(std::string("ValueError: unsupported format character '") + conv + "'");
    }
    r.check_size(out.size());
  }
  if (next < values.size() && args.is_list() && args.list->is_tuple)
    throw TemplateError("TypeError: not all arguments converted during string formatting");
  return out;
}

}  // namespace slab::chat
