#pragma once
// Executes a parsed template against a context. One Renderer per render call, so rendering the
// same Template from several threads at once is safe.
#include "chat/ast.h"
#include "chat/value.h"

#include <cstdint>
#include <ctime>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace slab::chat {

// Variables of one level: the template, a loop iteration, a macro call, a with block.
struct Scope {
  explicit Scope(std::shared_ptr<Scope> parent_scope) : parent(std::move(parent_scope)) {}
  const Value* find(const std::string& name) const;
  void set(const std::string& name, Value value);

  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;
};
using ScopePtr = std::shared_ptr<Scope>;

class Renderer {
 public:
  Renderer(const RenderLimits& limits, std::time_t now) : limits_(limits), now_(now) {}
  ~Renderer();
  Renderer(const Renderer&) = delete;
  Renderer& operator=(const Renderer&) = delete;

  std::string render(const Template& tmpl, const Value& context);

  Value eval(const Expr& e, const ScopePtr& scope);
  Value call(const Value& callee, CallArgs& args);
  Value call_macro(const Stmt& def, const ScopePtr& closure, CallArgs& args, const Value* caller);

  // jinja2's environment.getattr (attribute first, then item) and getitem (item first).
  Value get_attr(const Value& obj, const std::string& name);
  Value get_item(const Value& obj, const Value& key);
  // "a.b.0" paths of the attribute= arguments of map, selectattr, sort, ...
  Value get_path(const Value& obj, const std::string& path);

  void check_size(std::size_t bytes) const;  // throws past max_output_bytes
  void check_stack() const;                  // throws past max_stack_bytes below render()
  // Namespaces are the one mutable value, so they can reference themselves or chain without end
  // (`set ns.x = ns`, `set ns = namespace(x=ns)` in a loop); the renderer empties every one it
  // made when it ends, so no cycle leaks and no chain is destroyed recursively.
  void adopt_namespace(std::shared_ptr<DictData> ns) { namespaces_.push_back(std::move(ns)); }
  void count_iterations(std::uint64_t n);
  std::time_t now() const { return now_; }
  const RenderLimits& limits() const { return limits_; }
  const ScopePtr& root() const { return root_; }

 private:
  enum class Flow { Normal, Break, Continue };

  Flow exec(const Body& body, const ScopePtr& scope, std::string& out);
  Flow exec_for(const Stmt& s, const ScopePtr& scope, std::string& out);
  void assign(const Target& t, Value v, const ScopePtr& scope);
  void append(std::string& out, const std::string& text) const;
  Value eval_binary(const Expr& e, const ScopePtr& scope);
  Value eval_slice(const Expr& e, const ScopePtr& scope);
  Value apply_filter_expr(const Expr& e, const ScopePtr& scope, const Value* block_value);
  CallArgs eval_args(const Expr& e, const ScopePtr& scope);

  const RenderLimits& limits_;
  std::time_t now_;
  ScopePtr root_;
  std::uintptr_t stack_base_ = 0;  // frame address of render()
  std::vector<std::shared_ptr<DictData>> namespaces_;
  std::uint64_t iterations_ = 0;
  int call_depth_ = 0;
  int eval_depth_ = 0;  // nested eval() calls: bounds stack use whatever the macros and expressions do
};

// Python operators on values (operators.cpp).
Value binary_op(Renderer& r, const std::string& op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);
std::string percent_format(Renderer& r, const std::string& fmt, const Value& args);

// Filters (filters.cpp), tests and methods of str/dict/list (tests_and_methods.cpp), globals
// (globals.cpp).
Value apply_filter(Renderer& r, const std::string& name, const Value& input, CallArgs& args);
bool apply_test(Renderer& r, const std::string& name, const Value& input, CallArgs& args);
bool has_method(const Value& self, const std::string& name);
bool is_unsafe_method(const Value& self, const std::string& name);
Value call_method(Renderer& r, const Value& self, const std::string& name, CallArgs& args);
const Value* find_global(const std::string& name);

// Reads call arguments by position or keyword, Python style.
class ArgReader {
 public:
  ArgReader(const std::string& function, CallArgs& args, std::vector<std::string> names);
  const Value* get(std::size_t index) const;  // null when not given
  Value get_or(std::size_t index, Value fallback) const;
  std::int64_t get_int(std::size_t index, std::int64_t fallback) const;
  bool get_bool(std::size_t index, bool fallback) const;
  std::string get_string(std::size_t index, const std::string& fallback) const;
  // Arguments of Python's own str methods, which convert nothing: an integer where None is
  // refused too, and a str (where allow_none, None means the fallback).
  std::int64_t get_strict_int(std::size_t index, std::int64_t fallback) const;
  std::string get_strict_string(std::size_t index, const std::string& fallback, bool allow_none = false) const;

 private:
  std::string function_;
  std::vector<const Value*> slots_;
};

}  // namespace slab::chat
