// Global functions a template can call (jinja2's defaults plus transformers' additions) and the
// Python-style argument reader the builtins share.
#include "chat/evaluator.h"

#include <unordered_map>

namespace slab::chat {

ArgReader::ArgReader(const std::string& function, CallArgs& args, std::vector<std::string> names)
    : function_(function), slots_(names.size(), nullptr) {
  if (args.positional.size() > names.size())
    throw TemplateError("TypeError: " + function + "() takes at most " + std::to_string(names.size()) +
                        " argument(s) (" + std::to_string(args.positional.size()) + " given)");
  for (std::size_t i = 0; i < args.positional.size(); ++i) slots_[i] = &args.positional[i];
  for (const auto& [k, v] : args.keyword) {
    std::size_t i = 0;
    while (i < names.size() && names[i] != k) ++i;
    if (i == names.size())
      throw TemplateError("TypeError: " + function + "() got an unexpected keyword argument '" + k + "'");
    if (slots_[i]) throw TemplateError("TypeError: " + function + "() got multiple values for argument '" + k + "'");
    slots_[i] = &v;
  }
}

const Value* ArgReader::get(std::size_t index) const { return index < slots_.size() ? slots_[index] : nullptr; }

Value ArgReader::get_or(std::size_t index, Value fallback) const {
  const Value* v = get(index);
  return v ? *v : fallback;
}

std::int64_t ArgReader::get_int(std::size_t index, std::int64_t fallback) const {
  const Value* v = get(index);
  if (!v || v->is_none()) return fallback;
  if (v->is_int()) return v->kind == Value::Kind::Bool ? v->boolean : v->integer;
  if (v->kind == Value::Kind::Float) return static_cast<std::int64_t>(v->number);
  throw TemplateError("TypeError: " + function_ + "(): '" + type_name(*v) +
                      "' object cannot be interpreted as an integer");
}

bool ArgReader::get_bool(std::size_t index, bool fallback) const {
  const Value* v = get(index);
  return v ? truthy(*v) : fallback;
}

std::string ArgReader::get_string(std::size_t index, const std::string& fallback) const {
  const Value* v = get(index);
  return v && !v->is_none() ? to_str(*v) : fallback;
}

std::int64_t ArgReader::get_strict_int(std::size_t index, std::int64_t fallback) const {
  const Value* v = get(index);
  if (!v) return fallback;
  if (!v->is_int())
    throw TemplateError("TypeError: '" + type_name(*v) + "' object cannot be interpreted as an integer");
  return v->kind == Value::Kind::Bool ? v->boolean : v->integer;
}

std::string ArgReader::get_strict_string(std::size_t index, const std::string& fallback, bool allow_none) const {
  const Value* v = get(index);
  if (!v || (allow_none && v->is_none())) return fallback;
  if (!v->is_string())
    throw TemplateError("TypeError: " + function_ + "() argument must be str" + (allow_none ? " or None" : "") +
                        ", not " + type_name(*v));
  return v->text;
}

namespace {

using BuiltinFunction = Value (*)(Renderer&, CallArgs&);

class Builtin : public Callable {
 public:
  Builtin(std::string name, BuiltinFunction fn) : name_(std::move(name)), fn_(fn) {}
  Value call(Renderer& r, CallArgs& args) const override { return fn_(r, args); }
  std::string name() const override { return name_; }

 private:
  std::string name_;
  BuiltinFunction fn_;
};

std::int64_t int_arg(const Value& v) {
  if (!v.is_int()) throw TemplateError("TypeError: '" + type_name(v) + "' object cannot be interpreted as an integer");
  return v.kind == Value::Kind::Bool ? v.boolean : v.integer;
}

Value range_fn(Renderer& r, CallArgs& args) {
  std::int64_t start = 0, stop = 0, step = 1;
  const auto& p = args.positional;
  if (!args.keyword.empty()) throw TemplateError("TypeError: range() takes no keyword arguments");
  if (p.size() == 1)
    stop = int_arg(p[0]);
  else if (p.size() == 2 || p.size() == 3) {
    start = int_arg(p[0]);
    stop = int_arg(p[1]);
    if (p.size() == 3) step = int_arg(p[2]);
  } else {
    throw TemplateError("TypeError: range expected 1 to 3 arguments, got " + std::to_string(p.size()));
  }
  if (step == 0) throw TemplateError("ValueError: range() arg 3 must not be zero");
  long double count = step > 0 ? (static_cast<long double>(stop) - start + step - 1) / step
                               : (static_cast<long double>(start) - stop - step - 1) / -step;
  if (count > static_cast<long double>(r.limits().max_range_size))
    throw TemplateError("range too big (limit " + std::to_string(r.limits().max_range_size) + " items)");
  std::vector<Value> items;
  if (step > 0)
    for (std::int64_t i = start; i < stop; i += step) items.push_back(Value::from_int(i));
  else
    for (std::int64_t i = start; i > stop; i += step) items.push_back(Value::from_int(i));
  return Value::from_list(std::move(items));
}

// dict(mapping_or_pairs, **kwargs), also what namespace() is built from.
std::shared_ptr<DictData> dict_from_args(CallArgs& args, const char* function) {
  auto d = std::make_shared<DictData>();
  if (args.positional.size() > 1)
    throw TemplateError(std::string("TypeError: ") + function + " expected at most 1 argument");
  if (!args.positional.empty()) {
    const Value& src = args.positional[0];
    if (src.is_mapping() || src.kind == Value::Kind::Namespace) {
      d->entries = src.dict->entries;
    } else {
      for (const Value& pair : iterate(src)) {
        std::vector<Value> kv = iterate(pair);
        if (kv.size() != 2) throw TemplateError("ValueError: dictionary update sequence element has wrong length");
        d->set(kv[0].is_string() ? kv[0].text : to_str(kv[0]), kv[1]);
      }
    }
  }
  for (auto& [k, v] : args.keyword) d->set(k, v);
  return d;
}

Value dict_fn(Renderer&, CallArgs& args) { return Value::from_dict(dict_from_args(args, "dict")); }

Value namespace_fn(Renderer& r, CallArgs& args) {
  Value ns = Value::from_dict(dict_from_args(args, "namespace"));
  ns.kind = Value::Kind::Namespace;
  r.adopt_namespace(ns.dict);
  for (const auto& [k, v] : ns.dict->entries)
    if (!k.empty() && k[0] == '_')
      throw TemplateError("Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" + k +
                          "'. Please rename the attribute.");
  return ns;
}

Value raise_exception_fn(Renderer&, CallArgs& args) {
  ArgReader a("raise_exception", args, {"message"});
  throw TemplateRaisedError(a.get(0) ? to_str(*a.get(0)) : std::string());
}

Value strftime_now_fn(Renderer& r, CallArgs& args) {
  ArgReader a("strftime_now", args, {"format"});
  std::string fmt = a.get_string(0, "");
  if (fmt.size() > 4096) throw TemplateError("strftime_now format too long");
  std::time_t t = r.now();
  std::tm tm{};
  localtime_r(&t, &tm);
  std::string out;
  // strftime returns 0 both for "too small" and for an empty result: grow a few times, then stop.
  for (std::size_t cap = 64 + fmt.size() * 4; cap <= (1u << 20); cap *= 4) {
    out.assign(cap, '\0');
    std::size_t n = std::strftime(out.data(), cap, fmt.c_str(), &tm);
    if (n > 0 || fmt.empty()) {
      out.resize(n);
      return Value::from_string(out);
    }
  }
  return Value::from_string("");
}

class JoinerFn : public Callable {
 public:
  explicit JoinerFn(std::string sep) : sep_(std::move(sep)) {}
  Value call(Renderer&, CallArgs&) const override {
    if (!used_) {
      used_ = true;
      return Value::from_string("");
    }
    return Value::from_string(sep_);
  }
  std::string name() const override { return "joiner"; }

 private:
  std::string sep_;
  mutable bool used_ = false;  // made per call of joiner(), so it belongs to one render
};

Value joiner_fn(Renderer&, CallArgs& args) {
  ArgReader a("joiner", args, {"sep"});
  return Value::from_callable(std::make_shared<JoinerFn>(a.get_string(0, ", ")));
}

const std::unordered_map<std::string, Value>& globals() {
  static const std::unordered_map<std::string, Value> table = [] {
    std::unordered_map<std::string, Value> t;
    auto add = [&](const char* name, BuiltinFunction fn) {
      t.emplace(name, Value::from_callable(std::make_shared<Builtin>(name, fn)));
    };
    add("range", range_fn);
    add("dict", dict_fn);
    add("namespace", namespace_fn);
    add("raise_exception", raise_exception_fn);
    add("strftime_now", strftime_now_fn);
    add("joiner", joiner_fn);
    return t;
  }();
  return table;
}

}  // namespace

const Value* find_global(const std::string& name) {
  const auto& table = globals();
  auto it = table.find(name);
  return it == table.end() ? nullptr : &it->second;
}

}  // namespace slab::chat
