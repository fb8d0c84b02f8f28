// Expression evaluation: names, literals, attribute/item access, slices, calls, filters, tests.
#include "chat/evaluator.h"
#include "chat/text_util.h"

namespace slab::chat {
namespace {

std::int64_t slice_arg(const Value& v, const char* what) {
  if (v.is_int()) return v.kind == Value::Kind::Bool ? v.boolean : v.integer;
  throw TemplateError(std::string("TypeError: slice ") + what + " must be an integer or None");
}

// Python's slice.indices + the index sequence it selects.
std::vector<std::size_t> slice_indices(std::int64_t n, const Value* start_v, const Value* stop_v, const Value* step_v) {
  std::int64_t step = step_v ? slice_arg(*step_v, "step") : 1;
  if (step == 0) throw TemplateError("ValueError: slice step cannot be zero");
  auto clamp = [&](const Value* v, std::int64_t dflt) {
    if (!v) return dflt;
    std::int64_t i = slice_arg(*v, "indices");
    if (i < 0) {
      i += n;
      if (i < 0) i = step < 0 ? -1 : 0;
    } else if (i >= n) {
      i = step < 0 ? n - 1 : n;
    }
    return i;
  };
  std::int64_t start = clamp(start_v, step < 0 ? n - 1 : 0);
  std::int64_t stop = clamp(stop_v, step < 0 ? -1 : n);
  std::vector<std::size_t> out;
  if (step > 0)
    for (std::int64_t i = start; i < stop; i += step) out.push_back(static_cast<std::size_t>(i));
  else
    for (std::int64_t i = start; i > stop; i += step) out.push_back(static_cast<std::size_t>(i));
  return out;
}

}  // namespace

Value Renderer::eval_slice(const Expr& e, const ScopePtr& scope) {
  Value obj = eval(*e.a, scope);
  if (obj.is_undefined()) throw_undefined(obj);
  auto opt = [&](const ExprPtr& p, Value& store) -> const Value* {
    if (!p) return nullptr;
    store = eval(*p, scope);
    return store.is_none() ? nullptr : &store;
  };
  Value sv, ev, stv;
  const Value* start = opt(e.b, sv);
  const Value* stop = opt(e.c, ev);
  const Value* step = opt(e.d, stv);
  if (obj.is_list()) {
    std::vector<Value> out;
    for (std::size_t i : slice_indices(static_cast<std::int64_t>(obj.items().size()), start, stop, step))
      out.push_back(obj.items()[i]);
    return Value::from_list(std::move(out), obj.list->is_tuple);
  }
  if (obj.is_string()) {
    std::u32string cps = utf8_decode(obj.text);
    std::u32string out;
    for (std::size_t i : slice_indices(static_cast<std::int64_t>(cps.size()), start, stop, step)) out.push_back(cps[i]);
    return Value::from_string(utf8_encode(out));
  }
  // jinja2's getitem turns the TypeError of slicing none, a number or a dict into an Undefined.
  std::string message = "'";
  message.append(type_name(obj)).append(" object' has no attribute 'slice'");
  return Value::undefined(std::move(message));
}

Value Renderer::eval(const Expr& e, const ScopePtr& scope) {
  constexpr int kMaxEvalDepth = 1000;
  struct DepthGuard {
    int& depth;
    explicit DepthGuard(int& d, const Renderer& r) : depth(d) {
      r.check_stack();
      if (++depth > kMaxEvalDepth) {
        --depth;
        throw TemplateError("template evaluation nested too deeply (recursion?)");
      }
    }
    ~DepthGuard() { --depth; }
  } guard(eval_depth_, *this);
  switch (e.kind) {
    case Expr::Kind::Literal: return e.value;
    case Expr::Kind::Name: {
      if (const Value* v = scope->find(e.name)) return *v;
      if (const Value* g = find_global(e.name)) return *g;
      return Value::undefined("'" + e.name + "' is undefined");
    }
    case Expr::Kind::ListLit:
    case Expr::Kind::TupleLit: {
      std::vector<Value> items;
      items.reserve(e.args.size());
      for (const auto& a : e.args) items.push_back(eval(*a, scope));
      return Value::from_list(std::move(items), e.kind == Expr::Kind::TupleLit);
    }
    case Expr::Kind::DictLit: {
      auto d = std::make_shared<DictData>();
      for (std::size_t i = 0; i + 1 < e.args.size(); i += 2) {
        Value k = eval(*e.args[i], scope);
        d->set(k.is_string() ? k.text : to_str(k), eval(*e.args[i + 1], scope));
      }
      return Value::from_dict(std::move(d));
    }
    case Expr::Kind::Attr: return get_attr(eval(*e.a, scope), e.name);
    case Expr::Kind::Index: {
      Value obj = eval(*e.a, scope);
      return get_item(obj, eval(*e.b, scope));
    }
    case Expr::Kind::Slice: return eval_slice(e, scope);
    case Expr::Kind::Call: {
      Value callee = eval(*e.a, scope);
      CallArgs args = eval_args(e, scope);
      return call(callee, args);
    }
    case Expr::Kind::Filter: return apply_filter_expr(e, scope, nullptr);
    case Expr::Kind::Test: {
      Value input = eval(*e.a, scope);
      CallArgs args = eval_args(e, scope);
      return Value::from_bool(apply_test(*this, e.name, input, args) != e.negate);
    }
    case Expr::Kind::Unary: {
      Value v = eval(*e.a, scope);
      if (e.name == "not") return Value::from_bool(!truthy(v));
      if (v.is_undefined()) throw_undefined(v);
      if (!v.is_number())
        throw TemplateError("TypeError: bad operand type for unary " + e.name + ": '" + type_name(v) + "'");
      if (e.name == "+") return v.kind == Value::Kind::Bool ? Value::from_int(v.boolean) : v;
      if (v.kind == Value::Kind::Float) return Value::from_float(-v.number);
      std::int64_t i = v.kind == Value::Kind::Bool ? v.boolean : v.integer;
      if (i == INT64_MIN) throw TemplateError("integer overflow");
      return Value::from_int(-i);
    }
    case Expr::Kind::Binary: {
      if (e.name == "and") {
        Value l = eval(*e.a, scope);
        return truthy(l) ? eval(*e.b, scope) : l;
      }
      if (e.name == "or") {
        Value l = eval(*e.a, scope);
        return truthy(l) ? l : eval(*e.b, scope);
      }
      Value l = eval(*e.a, scope);
      Value r = eval(*e.b, scope);
      return binary_op(*this, e.name, l, r);
    }
    case Expr::Kind::Compare: {
      Value left = eval(*e.args[0], scope);
      for (std::size_t i = 0; i < e.ops.size(); ++i) {
        Value right = eval(*e.args[i + 1], scope);
        const std::string& op = e.ops[i];
        bool ok;
        if (op == "==")
          ok = equals(left, right);
        else if (op == "!=")
          ok = !equals(left, right);
        else if (op == "in")
          ok = contains(right, left);
        else if (op == "not in")
          ok = !contains(right, left);
        else {
          int c = compare(left, right);
          ok = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
        }
        if (!ok) return Value::from_bool(false);
        left = std::move(right);
      }
      return Value::from_bool(true);
    }
    case Expr::Kind::Cond: {
      if (truthy(eval(*e.a, scope))) return eval(*e.b, scope);
      if (e.c) return eval(*e.c, scope);
      return Value::undefined("the inline if-expression evaluated to false and no else section was defined.");
    }
  }
  return Value::undefined("unknown expression");
}

}  // namespace slab::chat
