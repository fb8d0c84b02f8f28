// Recursive-descent parser for the Jinja2 subset chat templates use. Operator precedence follows
// jinja2's parser: condexpr < or < and < not < compare < + - < ~ < * / // % < ** < unary < postfix.
#include "chat/ast.h"
#include "chat/lexer.h"

#include <algorithm>
#include <initializer_list>

namespace slab::chat {
namespace {

constexpr int kMaxNesting = 128;    // parser recursion (blocks, parentheses), so parsing cannot exhaust the stack
constexpr int kMaxExprDepth = 200;  // height of an expression tree, so evaluating it cannot either

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  std::shared_ptr<const Template> run() {
    auto t = std::make_shared<Template>();
    std::string ended;
    t->body = parse_body({}, &ended, "");
    return t;
  }

 private:
  std::vector<Token> toks_;
  std::size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
  int varargs_refs_ = 0;  // references seen so far: a macro takes extra arguments only if its body names them
  int kwargs_refs_ = 0;

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxNesting) {
        --p.depth_;
        p.fail("template nested too deeply");
      }
    }
    ~DepthGuard() { --p.depth_; }
  };

  const Token& cur() const { return toks_[i_]; }
  const Token& peek(std::size_t n = 1) const { return toks_[std::min(i_ + n, toks_.size() - 1)]; }
  void next() {
    if (i_ + 1 < toks_.size()) ++i_;
  }

  [[noreturn]] void fail(const std::string& what) const {
    throw TemplateError(what + " (line " + std::to_string(cur().line) + ")");
  }

  static std::string describe(const Token& t) {
    switch (t.type) {
      case Token::Type::End: return "end of template";
      case Token::Type::VarEnd: return "end of print statement";
      case Token::Type::BlockEnd: return "end of statement block";
      case Token::Type::Text: return "template data";
      default: return t.text.empty() ? "token" : t.text;
    }
  }
  [[noreturn]] void unexpected() const { fail("unexpected '" + describe(cur()) + "'"); }

  bool is_op(std::string_view op) const { return cur().type == Token::Type::Op && cur().text == op; }
  bool is_name(std::string_view name) const { return cur().type == Token::Type::Name && cur().text == name; }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    next();
    return true;
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) fail("expected '" + std::string(op) + "', got '" + describe(cur()) + "'");
  }
  std::string expect_name() {
    if (cur().type != Token::Type::Name) fail("expected a name, got '" + describe(cur()) + "'");
    std::string n = cur().text;
    next();
    return n;
  }
  void expect_block_end() {
    if (cur().type != Token::Type::BlockEnd) fail("expected end of statement block, got '" + describe(cur()) + "'");
    next();
  }

  ExprPtr node(Expr::Kind kind) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = cur().line;
    return e;
  }
  ExprPtr sized(ExprPtr e) {
    int d = 0;
    for (const ExprPtr* c : {&e->a, &e->b, &e->c, &e->d})
      if (*c) d = std::max(d, (*c)->depth);
    for (const auto& x : e->args) d = std::max(d, x->depth);
    for (const auto& kv : e->kwargs) d = std::max(d, kv.second->depth);
    e->depth = d + 1;
    if (e->depth > kMaxExprDepth) fail("expression nested too deeply");
    return e;
  }
  StmtPtr stmt(Stmt::Kind kind) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = cur().line;
    return s;
  }

  // Statements until one of `enders` opens a block tag; the ender's name is consumed.
  Body parse_body(std::initializer_list<std::string_view> enders, std::string* ended, const char* block) {
    DepthGuard guard(*this);
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == Token::Type::End) {
        if (enders.size() == 0) return body;
        std::string wanted;
        for (auto e : enders) wanted += (wanted.empty() ? "'" : " or '") + std::string(e) + "'";
        fail("Unexpected end of template. Jinja was looking for the following tags: " + wanted +
             ". The innermost block that needs to be closed is '" + block + "'.");
      }
      if (t.type == Token::Type::Text) {
        auto s = stmt(Stmt::Kind::Text);
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.type == Token::Type::VarBegin) {
        next();
        auto s = stmt(Stmt::Kind::Output);
        s->expr = parse_tuple(true);
        if (cur().type != Token::Type::VarEnd) unexpected();
        next();
        body.push_back(std::move(s));
      } else if (t.type == Token::Type::BlockBegin) {
        next();
        if (cur().type != Token::Type::Name) fail("tag name expected");
        for (auto e : enders) {
          if (cur().text == e) {
            *ended = cur().text;
            next();
            return body;
          }
        }
        body.push_back(parse_statement());
      } else {
        unexpected();
      }
    }
  }

  StmtPtr parse_statement() {
    std::string tag = cur().text;
    next();
    std::string ended;
    if (tag == "if") {
      auto s = stmt(Stmt::Kind::If);
      ExprPtr cond = parse_expr();
      while (true) {
        expect_block_end();
        Body b = parse_body({"elif", "else", "endif"}, &ended, "if");
        s->branches.emplace_back(std::move(cond), std::move(b));
        if (ended == "elif") {
          cond = parse_expr();
          continue;
        }
        if (ended == "else") {
          expect_block_end();
          s->else_body = parse_body({"endif"}, &ended, "if");
        }
        expect_block_end();
        return s;
      }
    }
    if (tag == "for") {
      auto s = stmt(Stmt::Kind::For);
      s->target = parse_target(false);
      if (!skip_name("in")) fail("expected 'in', got '" + describe(cur()) + "'");
      s->expr = parse_tuple(false);
      if (skip_name("if")) s->condition = parse_expr();
      skip_name("recursive");
      expect_block_end();
      ++loop_depth_;
      s->body = parse_body({"else", "endfor"}, &ended, "for");
      --loop_depth_;
      if (ended == "else") {
        expect_block_end();
        s->else_body = parse_body({"endfor"}, &ended, "for");
      }
      expect_block_end();
      return s;
    }
    if (tag == "set") {
      Target target = parse_target(true);
      if (skip_op("=")) {
        auto s = stmt(Stmt::Kind::Set);
        s->target = std::move(target);
        s->expr = parse_tuple(true);
        expect_block_end();
        return s;
      }
      auto s = stmt(Stmt::Kind::SetBlock);
      if (target.unpack || !target.attribute.empty()) fail("block set takes one name");
      s->target = std::move(target);
      s->expr = parse_filter_chain();
      expect_block_end();
      s->body = parse_body({"endset"}, &ended, "set");
      expect_block_end();
      return s;
    }
    if (tag == "macro") {
      auto s = stmt(Stmt::Kind::Macro);
      s->name = expect_name();
      s->params = parse_params();
      expect_block_end();
      int saved_loops = loop_depth_, varargs_before = varargs_refs_, kwargs_before = kwargs_refs_;
      loop_depth_ = 0;
      s->body = parse_body({"endmacro"}, &ended, "macro");
      loop_depth_ = saved_loops;
      s->takes_varargs = varargs_refs_ > varargs_before;
      s->takes_kwargs = kwargs_refs_ > kwargs_before;
      if (cur().type == Token::Type::Name) next();  // {% endmacro name %}
      expect_block_end();
      return s;
    }
    if (tag == "call") {
      auto s = stmt(Stmt::Kind::CallBlock);
      if (is_op("(")) s->params = parse_params();
      s->expr = parse_expr();
      if (s->expr->kind != Expr::Kind::Call) fail("expected call");
      expect_block_end();
      s->body = parse_body({"endcall"}, &ended, "call");
      expect_block_end();
      return s;
    }
    if (tag == "filter") {
      auto s = stmt(Stmt::Kind::FilterBlock);
      s->expr = parse_filter_chain();
      if (!s->expr) fail("expected filter name");
      expect_block_end();
      s->body = parse_body({"endfilter"}, &ended, "filter");
      expect_block_end();
      return s;
    }
    if (tag == "with" || tag == "generation") {  // generation: transformers' assistant-mask marker
      auto s = stmt(Stmt::Kind::With);
      while (tag == "with" && cur().type == Token::Type::Name) {
        std::string name = expect_name();
        expect_op("=");
        s->assignments.emplace_back(name, parse_expr());
        if (!skip_op(",")) break;
      }
      expect_block_end();
      s->body =
          tag == "with" ? parse_body({"endwith"}, &ended, "with") : parse_body({"endgeneration"}, &ended, "generation");
      expect_block_end();
      return s;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) fail("Tried to leave a loop outside of a loop ('" + tag + "')");
      auto s = stmt(tag == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue);
      expect_block_end();
      return s;
    }
    --i_;
    fail("Encountered unknown tag '" + tag + "'.");
  }

  Target parse_target(bool allow_attribute) {
    Target t;
    bool paren = skip_op("(");
    t.names.push_back(expect_name());
    if (allow_attribute && !paren && skip_op(".")) {
      t.attribute = expect_name();
      return t;
    }
    while (skip_op(",")) {
      t.unpack = true;
      if (cur().type != Token::Type::Name) break;
      t.names.push_back(expect_name());
    }
    if (paren) {
      expect_op(")");
      t.unpack = true;
    }
    return t;
  }

  std::vector<MacroParam> parse_params() {
    std::vector<MacroParam> params;
    expect_op("(");
    while (!skip_op(")")) {
      if (!params.empty()) expect_op(",");
      if (skip_op(")")) break;
      MacroParam p;
      p.name = expect_name();
      if (skip_op("=")) p.default_value = parse_expr();
      params.push_back(std::move(p));
    }
    return params;
  }

  // `| f(args) | g` after `set x` or `filter`: a chain whose innermost input is the block body.
  ExprPtr parse_filter_chain() {
    ExprPtr chain;
    bool first = true;
    while (first ? (cur().type == Token::Type::Name || is_op("|")) : is_op("|")) {
      if (!first || is_op("|")) expect_op("|");
      first = false;
      chain = parse_filter(std::move(chain));
    }
    return chain;
  }

  ExprPtr parse_filter(ExprPtr input) {
    auto f = node(Expr::Kind::Filter);
    f->name = expect_name();
    while (skip_op(".")) f->name += "." + expect_name();
    if (!is_known_filter(f->name)) fail("No filter named '" + f->name + "'.");
    f->a = std::move(input);
    if (is_op("(")) parse_call_args(*f);
    return sized(std::move(f));
  }

  // Expressions.
  ExprPtr parse_tuple(bool with_condexpr) {
    ExprPtr first = with_condexpr ? parse_expr() : parse_or();
    if (!is_op(",")) return first;
    auto t = node(Expr::Kind::TupleLit);
    t->args.push_back(std::move(first));
    while (skip_op(",")) {
      if (cur().type == Token::Type::VarEnd || cur().type == Token::Type::BlockEnd || is_name("if")) break;
      t->args.push_back(with_condexpr ? parse_expr() : parse_or());
    }
    return sized(std::move(t));
  }

  ExprPtr parse_expr() {
    DepthGuard guard(*this);
    ExprPtr e = parse_or();
    while (skip_name("if")) {
      auto c = node(Expr::Kind::Cond);
      c->a = parse_or();
      c->b = std::move(e);
      if (skip_name("else")) c->c = parse_expr();
      e = sized(std::move(c));
    }
    return e;
  }

  ExprPtr binary(std::string op, ExprPtr l, ExprPtr r) {
    auto b = node(Expr::Kind::Binary);
    b->name = std::move(op);
    b->a = std::move(l);
    b->b = std::move(r);
    return sized(std::move(b));
  }

  ExprPtr parse_or() {
    ExprPtr l = parse_and();
    while (skip_name("or")) l = binary("or", std::move(l), parse_and());
    return l;
  }
  ExprPtr parse_and() {
    ExprPtr l = parse_not();
    while (skip_name("and")) l = binary("and", std::move(l), parse_not());
    return l;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      next();
      auto u = node(Expr::Kind::Unary);
      u->name = "not";
      u->a = parse_not();
      return sized(std::move(u));
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (cur().type == Token::Type::Op && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                            cur().text == "<=" || cur().text == ">" || cur().text == ">=")) {
        op = cur().text;
        next();
      } else if (is_name("in")) {
        op = "in";
        next();
      } else if (is_name("not") && peek().type == Token::Type::Name && peek().text == "in") {
        op = "not in";
        next();
        next();
      } else {
        break;
      }
      if (!cmp) {
        cmp = node(Expr::Kind::Compare);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parse_math1());
    }
    return cmp ? sized(std::move(cmp)) : std::move(first);
  }
  ExprPtr parse_math1() {
    ExprPtr l = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = cur().text;
      next();
      l = binary(op, std::move(l), parse_concat());
    }
    return l;
  }
  ExprPtr parse_concat() {
    ExprPtr l = parse_math2();
    while (skip_op("~")) l = binary("~", std::move(l), parse_math2());
    return l;
  }
  ExprPtr parse_math2() {
    ExprPtr l = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = cur().text;
      next();
      l = binary(op, std::move(l), parse_pow());
    }
    return l;
  }
  ExprPtr parse_pow() {
    ExprPtr l = parse_unary(true);
    while (skip_op("**")) l = binary("**", std::move(l), parse_unary(true));
    return l;
  }
  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      auto u = node(Expr::Kind::Unary);
      u->name = cur().text;
      next();
      u->a = parse_unary(false);
      e = sized(std::move(u));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filters_and_tests(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    switch (t.type) {
      case Token::Type::Name: {
        auto e = node(Expr::Kind::Literal);
        if (t.text == "true" || t.text == "True")
          e->value = Value::from_bool(true);
        else if (t.text == "false" || t.text == "False")
          e->value = Value::from_bool(false);
        else if (t.text == "none" || t.text == "None")
          e->value = Value::none();
        else {
          e->kind = Expr::Kind::Name;
          e->name = t.text;
          if (t.text == "varargs") ++varargs_refs_;
          if (t.text == "kwargs") ++kwargs_refs_;
        }
        next();
        return e;
      }
      case Token::Type::String: {
        std::string s;
        while (cur().type == Token::Type::String) {  // adjacent literals concatenate
          s += cur().text;
          next();
        }
        auto e = node(Expr::Kind::Literal);
        e->value = Value::from_string(std::move(s));
        return e;
      }
      case Token::Type::Int:
      case Token::Type::Float: {
        auto e = node(Expr::Kind::Literal);
        e->value = t.type == Token::Type::Int ? Value::from_int(t.int_value) : Value::from_float(t.float_value);
        next();
        return e;
      }
      case Token::Type::Op: break;
      default: unexpected();
    }
    if (skip_op("(")) {
      if (skip_op(")")) return node(Expr::Kind::TupleLit);
      ExprPtr first = parse_expr();
      if (skip_op(")")) return first;
      auto tup = node(Expr::Kind::TupleLit);
      tup->args.push_back(std::move(first));
      while (skip_op(",")) {
        if (is_op(")")) break;
        tup->args.push_back(parse_expr());
      }
      expect_op(")");
      return sized(std::move(tup));
    }
    if (skip_op("[")) {
      auto list = node(Expr::Kind::ListLit);
      while (!skip_op("]")) {
        if (!list->args.empty()) expect_op(",");
        if (skip_op("]")) break;
        list->args.push_back(parse_expr());
      }
      return sized(std::move(list));
    }
    if (skip_op("{")) {
      auto dict = node(Expr::Kind::DictLit);
      while (!skip_op("}")) {
        if (!dict->args.empty()) expect_op(",");
        if (skip_op("}")) break;
        dict->args.push_back(parse_expr());
        expect_op(":");
        dict->args.push_back(parse_expr());
      }
      return sized(std::move(dict));
    }
    unexpected();
  }

  ExprPtr parse_postfix(ExprPtr e) {
    while (true) {
      if (skip_op(".")) {
        if (cur().type == Token::Type::Int) {  // foo.0 is foo[0]
          auto idx = node(Expr::Kind::Index);
          auto lit = node(Expr::Kind::Literal);
          lit->value = Value::from_int(cur().int_value);
          next();
          idx->a = std::move(e);
          idx->b = std::move(lit);
          e = sized(std::move(idx));
          continue;
        }
        auto attr = node(Expr::Kind::Attr);
        attr->name = expect_name();
        attr->a = std::move(e);
        e = sized(std::move(attr));
      } else if (skip_op("[")) {
        e = sized(parse_subscript(std::move(e)));
      } else if (is_op("(")) {
        auto call = node(Expr::Kind::Call);
        call->a = std::move(e);
        parse_call_args(*call);
        e = sized(std::move(call));
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr target) {
    ExprPtr start, stop, step;
    if (!is_op(":")) start = parse_expr();
    if (skip_op("]")) {
      auto idx = node(Expr::Kind::Index);
      idx->a = std::move(target);
      idx->b = std::move(start);
      return idx;
    }
    expect_op(":");
    if (!is_op(":") && !is_op("]")) stop = parse_expr();
    if (skip_op(":") && !is_op("]")) step = parse_expr();
    expect_op("]");
    auto s = node(Expr::Kind::Slice);
    s->a = std::move(target);
    s->b = std::move(start);
    s->c = std::move(stop);
    s->d = std::move(step);
    return s;
  }

  void parse_call_args(Expr& call) {
    expect_op("(");
    bool first = true;
    while (!skip_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (skip_op(")")) break;
      if (cur().type == Token::Type::Name && peek().type == Token::Type::Op && peek().text == "=") {
        std::string key = cur().text;
        next();
        next();
        call.kwargs.emplace_back(key, parse_expr());
      } else {
        if (!call.kwargs.empty()) fail("positional argument follows keyword argument");
        call.args.push_back(parse_expr());
      }
    }
  }

  ExprPtr parse_filters_and_tests(ExprPtr e) {
    while (true) {
      if (skip_op("|")) {
        e = parse_filter(std::move(e));
      } else if (skip_name("is")) {
        auto t = node(Expr::Kind::Test);
        t->negate = skip_name("not");
        t->name = expect_name();
        if (!is_known_test(t->name)) fail("No test named '" + t->name + "'.");
        t->a = std::move(e);
        const Token& n = cur();
        if (is_op("(")) {
          parse_call_args(*t);
        } else if ((n.type == Token::Type::Name && n.text != "else" && n.text != "or" && n.text != "and" &&
                    n.text != "if" && n.text != "in" && n.text != "is" && n.text != "not") ||
                   n.type == Token::Type::String || n.type == Token::Type::Int || n.type == Token::Type::Float ||
                   is_op("[") || is_op("{")) {
          DepthGuard guard(*this);
          t->args.push_back(parse_postfix(parse_primary()));
        }
        e = sized(std::move(t));
      } else {
        return e;
      }
    }
  }
};

}  // namespace

std::shared_ptr<const Template> parse_template(std::string_view source) { return Parser(tokenize(source)).run(); }

}  // namespace slab::chat
