#pragma once
// The parsed template: expression and statement trees, immutable once built (rendering shares
// them across threads).
#include "chat/value.h"

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace slab::chat {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,   // value
    Name,      // name
    ListLit,   // args
    TupleLit,  // args
    DictLit,   // args: key, value, key, value, ...
    Attr,      // a.name
    Index,     // a[b]
    Slice,     // a[b:c:d]; absent parts are null
    Call,      // a(args, kwargs)
    Filter,    // a|name(args, kwargs); a null: the body of a filter/set block
    Test,      // a is name(args); negated when `negate`
    Unary,     // op a: "-", "+", "not"
    Binary,    // a op b: + - * / // % ** ~ == != < <= > >= in "not in" and or
    Cond,      // b if a else c (c may be null)
    Compare,   // args[0] ops[0] args[1] ops[1] args[2] ...: chained comparisons
  };
  Kind kind;
  int line = 0;
  int depth = 1;  // height of this subtree; bounded so evaluation cannot exhaust the stack
  Value value;
  std::string name;  // Name, Attr, Filter, Test, operator of Unary/Binary
  bool negate = false;
  ExprPtr a, b, c, d;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;  // Compare
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

// Names a for/set statement assigns: one name, or several unpacked from a sequence.
struct Target {
  std::vector<std::string> names;
  bool unpack = false;
  std::string attribute;  // set ns.attribute = ... (names[0] is the namespace)
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct Stmt {
  enum class Kind { Text, Output, If, For, Set, SetBlock, Macro, CallBlock, FilterBlock, With, Break, Continue };
  Kind kind;
  int line = 0;
  std::string text;                                // Text
  ExprPtr expr;                                    // Output, For iterable, Set value, CallBlock call, filters
  std::vector<std::pair<ExprPtr, Body>> branches;  // If: condition and body, in order
  Body body;                                       // For, SetBlock, Macro, CallBlock, FilterBlock, With
  Body else_body;                                  // If, For
  Target target;                                   // For, Set, SetBlock
  ExprPtr condition;                               // For ... if condition
  std::string name;                                // Macro name
  std::vector<MacroParam> params;                  // Macro, CallBlock (caller's parameters)
  bool takes_varargs = true;                       // Macro: its body names varargs / kwargs
  bool takes_kwargs = true;
  std::vector<std::pair<std::string, ExprPtr>> assignments;  // With
};

struct Template {
  Body body;
};

std::shared_ptr<const Template> parse_template(std::string_view source);  // throws TemplateError

bool is_known_filter(const std::string& name);
bool is_known_test(const std::string& name);

}  // namespace slab::chat
