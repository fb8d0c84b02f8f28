#include "chat/evaluator.h"

#include "chat/text_util.h"

#include <initializer_list>
#include <string_view>

namespace slab::chat {

const Value* Scope::find(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent.get())
    for (const auto& [k, v] : s->vars)
      if (k == name) return &v;
  return nullptr;
}

void Scope::set(const std::string& name, Value value) {
  for (auto& [k, v] : vars)
    if (k == name) {
      v = std::move(value);
      return;
    }
  vars.emplace_back(name, std::move(value));
}

namespace {

// Builds messages by appending: GCC 12 reports a false -Wrestrict on chains of "lit" + string.
std::string join_text(std::initializer_list<std::string_view> parts) {
  std::string out;
  for (auto p : parts) out += p;
  return out;
}

// A macro, or the body of a call block passed to the macro as `caller`.
class MacroFn : public Callable {
 public:
  MacroFn(const Stmt& def, const ScopePtr& closure) : def_(def), closure_(closure) {}
  Value call(Renderer& r, CallArgs& args) const override {
    ScopePtr closure = closure_.lock();
    return r.call_macro(def_, closure ? closure : r.root(), args, nullptr);
  }
  std::string name() const override { return def_.kind == Stmt::Kind::Macro ? def_.name : "caller"; }

 private:
  const Stmt& def_;
  std::weak_ptr<Scope> closure_;  // weak: the scope holds this macro, a strong link would leak
};

class CallerFn : public MacroFn {
  using MacroFn::MacroFn;
};

// loop.cycle(a, b, ...) for one iteration.
class CycleFn : public Callable {
 public:
  explicit CycleFn(std::int64_t index0) : index0_(index0) {}
  Value call(Renderer&, CallArgs& args) const override {
    if (args.positional.empty()) throw TemplateError("no items for cycling given");
    return args.positional[static_cast<std::size_t>(index0_) % args.positional.size()];
  }
  std::string name() const override { return "cycle"; }

 private:
  std::int64_t index0_;
};

}  // namespace

void Renderer::check_size(std::size_t bytes) const {
  if (bytes > limits_.max_output_bytes)
    throw TemplateError("template output exceeds the limit of " + std::to_string(limits_.max_output_bytes) + " bytes");
}

void Renderer::count_iterations(std::uint64_t n) {
  iterations_ += n;
  if (iterations_ > limits_.max_loop_iterations)
    throw TemplateError("template exceeded the limit of " + std::to_string(limits_.max_loop_iterations) +
                        " loop iterations");
}

void Renderer::append(std::string& out, const std::string& text) const {
  check_size(out.size() + text.size());
  out += text;
}

Renderer::~Renderer() {
  root_.reset();
  for (const auto& ns : namespaces_) {
    // Moved out first: what the entries hold may be released (and other namespaces with it) only
    // after this one no longer refers to it.
    auto entries = std::move(ns->entries);
    ns->entries.clear();
  }
}

void Renderer::check_stack() const {
  auto here = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
  std::uintptr_t used = here < stack_base_ ? stack_base_ - here : here - stack_base_;
  if (used > limits_.max_stack_bytes)
    throw TemplateError("template recursion too deep: rendering needs more than " +
                        std::to_string(limits_.max_stack_bytes >> 10) +
                        " KiB of stack (nested blocks, macros or expressions)");
}

std::string Renderer::render(const Template& tmpl, const Value& context) {
  stack_base_ = reinterpret_cast<std::uintptr_t>(__builtin_frame_address(0));
  root_ = std::make_shared<Scope>(nullptr);
  if (context.is_mapping())
    for (const auto& [k, v] : context.dict->entries) root_->set(k, v);
  std::string out;
  exec(tmpl.body, root_, out);
  root_.reset();
  return out;
}

Renderer::Flow Renderer::exec(const Body& body, const ScopePtr& scope, std::string& out) {
  check_stack();
  for (const auto& sp : body) {
    const Stmt& s = *sp;
    switch (s.kind) {
      case Stmt::Kind::Text: append(out, s.text); break;
      case Stmt::Kind::Output: append(out, to_str(eval(*s.expr, scope))); break;
      case Stmt::Kind::If: {
        bool taken = false;
        for (const auto& [cond, branch] : s.branches) {
          if (truthy(eval(*cond, scope))) {
            taken = true;
            if (Flow f = exec(branch, scope, out); f != Flow::Normal) return f;
            break;
          }
        }
        if (!taken)
          if (Flow f = exec(s.else_body, scope, out); f != Flow::Normal) return f;
        break;
      }
      case Stmt::Kind::For: exec_for(s, scope, out); break;
      case Stmt::Kind::Set: {
        Value v = eval(*s.expr, scope);
        if (!s.target.attribute.empty()) {
          const Value* ns = scope->find(s.target.names[0]);
          if (!ns) ns = find_global(s.target.names[0]);
          if (!ns || ns->kind != Value::Kind::Namespace)
            throw TemplateError("cannot assign attribute on non-namespace object");
          if (!s.target.attribute.empty() && s.target.attribute[0] == '_')
            throw TemplateError("Chat templates cannot store underscore-prefixed attributes on a namespace, but got '" +
                                s.target.attribute + "'. Please rename the attribute.");
          ns->dict->set(s.target.attribute, std::move(v));
        } else {
          assign(s.target, std::move(v), scope);
        }
        break;
      }
      case Stmt::Kind::SetBlock: {
        std::string captured;
        exec(s.body, std::make_shared<Scope>(scope), captured);
        Value v = Value::from_string(std::move(captured));
        if (s.expr) v = apply_filter_expr(*s.expr, scope, &v);
        assign(s.target, std::move(v), scope);
        break;
      }
      case Stmt::Kind::Macro: scope->set(s.name, Value::from_callable(std::make_shared<MacroFn>(s, scope))); break;
      case Stmt::Kind::CallBlock: {
        const Expr& call = *s.expr;
        Value callee = eval(*call.a, scope);
        CallArgs args = eval_args(call, scope);
        Value caller = Value::from_callable(std::make_shared<CallerFn>(s, scope));
        if (callee.kind == Value::Kind::Callable) {
          if (auto* macro = dynamic_cast<const MacroFn*>(callee.callable.get());
              macro && !dynamic_cast<const CallerFn*>(macro)) {
            args.keyword.emplace_back("caller", caller);
          }
        }
        append(out, to_str(this->call(callee, args)));
        break;
      }
      case Stmt::Kind::FilterBlock: {
        std::string captured;
        exec(s.body, std::make_shared<Scope>(scope), captured);
        Value v = Value::from_string(std::move(captured));
        append(out, to_str(apply_filter_expr(*s.expr, scope, &v)));
        break;
      }
      case Stmt::Kind::With: {
        auto inner = std::make_shared<Scope>(scope);
        for (const auto& [name, expr] : s.assignments) inner->set(name, eval(*expr, scope));
        if (Flow f = exec(s.body, inner, out); f != Flow::Normal) return f;
        break;
      }
      case Stmt::Kind::Break: return Flow::Break;
      case Stmt::Kind::Continue: return Flow::Continue;
    }
  }
  return Flow::Normal;
}

Renderer::Flow Renderer::exec_for(const Stmt& s, const ScopePtr& scope, std::string& out) {
  Value iterable = eval(*s.expr, scope);
  if (iterable.kind == Value::Kind::None) throw TemplateError("TypeError: 'NoneType' object is not iterable");
  if (iterable.is_string() || iterable.is_list() || iterable.is_mapping())
    count_iterations(static_cast<std::uint64_t>(length_of(iterable)));  // before building the items
  std::vector<Value> items = iterate(iterable);
  if (s.condition) {  // `for x in xs if cond`: filtered before the loop, so loop.length counts the kept ones
    std::vector<Value> kept;
    for (auto& item : items) {
      auto probe = std::make_shared<Scope>(scope);
      assign(s.target, item, probe);
      if (truthy(eval(*s.condition, probe))) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    exec(s.else_body, scope, out);
    return Flow::Normal;
  }
  auto n = static_cast<std::int64_t>(items.size());
  for (std::int64_t i = 0; i < n; ++i) {
    auto iter_scope = std::make_shared<Scope>(scope);  // fresh per iteration, as in jinja2
    auto loop = std::make_shared<DictData>();
    loop->entries.reserve(12);
    loop->entries.emplace_back("index", Value::from_int(i + 1));
    loop->entries.emplace_back("index0", Value::from_int(i));
    loop->entries.emplace_back("revindex", Value::from_int(n - i));
    loop->entries.emplace_back("revindex0", Value::from_int(n - i - 1));
    loop->entries.emplace_back("first", Value::from_bool(i == 0));
    loop->entries.emplace_back("last", Value::from_bool(i == n - 1));
    loop->entries.emplace_back("length", Value::from_int(n));
    loop->entries.emplace_back("depth", Value::from_int(1));
    loop->entries.emplace_back("depth0", Value::from_int(0));
    loop->entries.emplace_back(
        "previtem", i > 0 ? items[static_cast<std::size_t>(i - 1)] : Value::undefined("there is no previous item"));
    loop->entries.emplace_back(
        "nextitem", i + 1 < n ? items[static_cast<std::size_t>(i + 1)] : Value::undefined("there is no next item"));
    loop->entries.emplace_back("cycle", Value::from_callable(std::make_shared<CycleFn>(i)));
    iter_scope->set("loop", Value::from_dict(std::move(loop)));
    assign(s.target, items[static_cast<std::size_t>(i)], iter_scope);
    Flow f = exec(s.body, iter_scope, out);
    if (f == Flow::Break) break;
  }
  return Flow::Normal;
}

void Renderer::assign(const Target& t, Value v, const ScopePtr& scope) {
  if (!t.unpack) {
    scope->set(t.names[0], std::move(v));
    return;
  }
  std::vector<Value> parts = iterate(v);
  if (parts.size() != t.names.size())
    throw TemplateError(std::string("ValueError: ") +
                        (parts.size() > t.names.size() ? "too many values to unpack" : "not enough values to unpack") +
                        " (expected " + std::to_string(t.names.size()) + ", got " + std::to_string(parts.size()) + ")");
  for (std::size_t i = 0; i < parts.size(); ++i) scope->set(t.names[i], std::move(parts[i]));
}

CallArgs Renderer::eval_args(const Expr& e, const ScopePtr& scope) {
  CallArgs args;
  for (const auto& a : e.args) args.positional.push_back(eval(*a, scope));
  for (const auto& [k, a] : e.kwargs) args.keyword.emplace_back(k, eval(*a, scope));
  return args;
}

Value Renderer::apply_filter_expr(const Expr& e, const ScopePtr& scope, const Value* block_value) {
  Value input =
      e.a ? (e.a->kind == Expr::Kind::Filter ? apply_filter_expr(*e.a, scope, block_value) : eval(*e.a, scope))
          : (block_value ? *block_value : Value::undefined("no filter input"));
  CallArgs args = eval_args(e, scope);
  return apply_filter(*this, e.name, input, args);
}

Value Renderer::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) throw_undefined(callee);
  if (callee.kind != Value::Kind::Callable)
    throw TemplateError("TypeError: '" + type_name(callee) + "' object is not callable");
  return callee.callable->call(*this, args);
}

Value Renderer::call_macro(const Stmt& def, const ScopePtr& closure, CallArgs& args, const Value*) {
  if (call_depth_ >= limits_.max_call_depth)
    throw TemplateError("macro recursion deeper than " + std::to_string(limits_.max_call_depth) + " calls");
  struct DepthGuard {
    int& depth;
    explicit DepthGuard(int& d) : depth(d) { ++depth; }
    ~DepthGuard() { --depth; }
  } guard(call_depth_);

  auto scope = std::make_shared<Scope>(closure);
  std::vector<bool> bound(def.params.size(), false);
  std::vector<Value> varargs;
  for (std::size_t i = 0; i < args.positional.size(); ++i) {
    if (i < def.params.size()) {
      scope->set(def.params[i].name, args.positional[i]);
      bound[i] = true;
    } else {
      varargs.push_back(args.positional[i]);
    }
  }
  auto extra = std::make_shared<DictData>();
  bool has_caller = false;
  for (auto& [k, v] : args.keyword) {
    bool matched = false;
    for (std::size_t i = 0; i < def.params.size(); ++i) {
      if (def.params[i].name == k) {
        if (bound[i]) throw TemplateError("macro '" + def.name + "' got multiple values for argument '" + k + "'");
        scope->set(k, v);
        bound[i] = matched = true;
      }
    }
    if (!matched && k == "caller") {
      scope->set("caller", v);
      has_caller = true;
    } else if (!matched) {
      extra->set(k, v);
    }
  }
  if (!varargs.empty() && !def.takes_varargs)
    throw TemplateError("TypeError: macro '" + def.name + "' takes not more than " + std::to_string(def.params.size()) +
                        " argument(s)");
  if (!extra->entries.empty() && !def.takes_kwargs)
    throw TemplateError("TypeError: macro '" + def.name + "' takes no keyword argument '" + extra->entries[0].first +
                        "'");
  for (std::size_t i = 0; i < def.params.size(); ++i) {
    if (bound[i]) continue;
    const auto& p = def.params[i];
    scope->set(p.name,
               p.default_value ? eval(*p.default_value, scope) : Value::undefined("'" + p.name + "' is undefined"));
  }
  scope->set("varargs", Value::from_list(std::move(varargs), true));
  scope->set("kwargs", Value::from_dict(std::move(extra)));
  if (!has_caller && def.kind == Stmt::Kind::Macro) scope->set("caller", Value::undefined("'caller' is undefined"));
  std::string out;
  exec(def.body, scope, out);
  return Value::from_string(std::move(out));
}

Value Renderer::get_attr(const Value& obj, const std::string& name) {
  switch (obj.kind) {
    case Value::Kind::Undefined: throw_undefined(obj);
    case Value::Kind::Namespace:
      if (const Value* v = obj.dict->find(name)) return *v;
      return Value::undefined("'Namespace object' has no attribute '" + name + "'");
    case Value::Kind::Dict:
      if (has_method(obj, name)) break;
      if (const Value* v = obj.dict->find(name)) return *v;
      break;
    default: break;
  }
  if (is_unsafe_method(obj, name))
    return Value::undefined("access to attribute '" + name + "' of '" + type_name(obj) + "' object is unsafe.");
  if (has_method(obj, name)) {
    struct BoundMethod : Callable {
      Value self;
      std::string method;
      Value call(Renderer& r, CallArgs& args) const override { return call_method(r, self, method, args); }
      std::string name() const override { return method; }
    };
    auto m = std::make_shared<BoundMethod>();
    m->self = obj;
    m->method = name;
    return Value::from_callable(std::move(m));
  }
  if (obj.is_none()) return Value::undefined(join_text({"'None' has no attribute '", name, "'"}));
  return Value::undefined(join_text({"'", type_name(obj), " object' has no attribute '", name, "'"}));
}

Value Renderer::get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) throw_undefined(obj);
  if ((obj.is_mapping() || obj.kind == Value::Kind::Namespace) && key.is_string()) {
    if (const Value* v = obj.dict->find(key.text)) return *v;
    return get_attr(obj, key.text);
  }
  if ((obj.is_list() || obj.is_string()) && key.is_int()) {
    std::int64_t i = key.kind == Value::Kind::Bool ? key.boolean : key.integer;
    if (obj.is_list()) {
      auto n = static_cast<std::int64_t>(obj.items().size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return obj.items()[static_cast<std::size_t>(i)];
    } else {
      std::u32string cps = utf8_decode(obj.text);
      auto n = static_cast<std::int64_t>(cps.size());
      if (i < 0) i += n;
      if (i >= 0 && i < n) return Value::from_string(utf8_encode(cps.substr(static_cast<std::size_t>(i), 1)));
    }
    return Value::undefined(join_text({"'", type_name(obj), " object' has no element ", to_str(key)}));
  }
  if (key.is_string()) return get_attr(obj, key.text);
  return Value::undefined(join_text({"'", type_name(obj), " object' has no element ", repr(key)}));
}

Value Renderer::get_path(const Value& obj, const std::string& path) {
  Value cur = obj;
  std::size_t pos = 0;
  while (true) {
    std::size_t dot = path.find('.', pos);
    std::string part = path.substr(pos, dot == std::string::npos ? std::string::npos : dot - pos);
    bool numeric = !part.empty() && part.find_first_not_of("0123456789") == std::string::npos;
    cur = numeric ? get_item(cur, Value::from_int(std::stoll(part))) : get_item(cur, Value::from_string(part));
    if (dot == std::string::npos) return cur;
    if (cur.is_undefined()) return cur;
    pos = dot + 1;
  }
}

}  // namespace slab::chat
