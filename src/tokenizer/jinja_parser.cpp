#include "tokenizer/jinja_parser.h"

#include <charconv>
#include <cstdlib>
#include <initializer_list>

#include "tokenizer/jinja_builtins.h"
#include "tokenizer/jinja_error.h"
#include "tokenizer/jinja_lexer.h"

namespace k25::jinja {

namespace {

constexpr int kMaxNesting =
    200;  // expression and block nesting (bounds parser and evaluator recursion)

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  Body parse() {
    Body body = parse_body({});
    check_unknown(body, false);
    return body;
  }

 private:
  // ---- token helpers
  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void next() {
    if (i_ + 1 < t_.size()) ++i_;
  }
  bool is_op(std::string_view op) const {
    return cur().kind == TokenKind::Operator && cur().text == op;
  }
  bool is_name(std::string_view n) const {
    return cur().kind == TokenKind::Name && cur().text == n;
  }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(std::string_view n) {
    if (!is_name(n)) return false;
    next();
    return true;
  }
  [[noreturn]] void error(std::string_view what) const {
    std::string got = cur().text;
    switch (cur().kind) {
      case TokenKind::End:
        got = "end of template";
        break;
      case TokenKind::BlockEnd:
        got = "'%}'";
        break;
      case TokenKind::VarEnd:
        got = "'}}'";
        break;
      case TokenKind::Data:
        got = "template text";
        break;
      default:
        got = "'" + got + "'";
    }
    throw TemplateError(ErrorKind::Syntax, concat(what, ", got ", got), cur().line);
  }
  void expect_op(std::string_view op) {
    if (!skip_op(op)) error(concat("expected '", op, "'"));
  }
  std::string expect_name() {
    if (cur().kind != TokenKind::Name) error("expected a name");
    std::string n = cur().text;
    next();
    return n;
  }
  // A filter's or test's name, dotted ones included (`a.b`).
  std::string expect_dotted_name() {
    std::string n = expect_name();
    while (skip_op(".")) n.append(".").append(expect_name());
    return n;
  }
  void expect_block_end() {
    if (cur().kind != TokenKind::BlockEnd) error("expected the end of the statement block");
    next();
  }
  struct DepthGuard {
    explicit DepthGuard(Parser& p) : p_(p) {
      if (++p_.depth_ > kMaxNesting) {
        throw TemplateError(ErrorKind::Syntax, "the template nests too deeply", p_.cur().line);
      }
    }
    ~DepthGuard() { --p_.depth_; }
    Parser& p_;
  };

  ExprPtr make(Expr::Kind kind, int line) {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    return e;
  }

  // ---- statements
  // Parses until a {% name %} with name in `end_tags`; stops with cur() at that name.
  Body parse_body(std::initializer_list<std::string_view> end_tags) {
    DepthGuard guard(*this);
    Body body;
    for (;;) {
      const Token& tok = cur();
      if (tok.kind == TokenKind::End) {
        if (end_tags.size() != 0) {
          error(concat("unexpected end of template, expected '", *end_tags.begin(), "'"));
        }
        return body;
      }
      if (tok.kind == TokenKind::Data) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Text;
        s->line = tok.line;
        s->text = tok.text;
        body.push_back(std::move(s));
        next();
      } else if (tok.kind == TokenKind::VarBegin) {
        auto s = std::make_unique<Stmt>();
        s->kind = Stmt::Kind::Print;
        s->line = tok.line;
        next();
        s->expr = parse_tuple(true);
        if (cur().kind != TokenKind::VarEnd) error("expected the end of the print statement");
        next();
        body.push_back(std::move(s));
      } else if (tok.kind == TokenKind::BlockBegin) {
        next();
        if (cur().kind == TokenKind::Name) {
          for (std::string_view end : end_tags) {
            if (cur().text == end) return body;
          }
        }
        body.push_back(parse_statement());
      } else {
        error("unexpected token");
      }
    }
  }

  StmtPtr new_stmt(Stmt::Kind kind) {
    auto s = std::make_unique<Stmt>();
    s->kind = kind;
    s->line = cur().line;
    return s;
  }

  StmtPtr parse_statement() {
    if (cur().kind != TokenKind::Name) error("expected a statement name");
    const std::string name = cur().text;
    if (name == "if") return parse_if();
    if (name == "for") return parse_for();
    if (name == "set") return parse_set();
    if (name == "macro") return parse_macro();
    if (name == "filter") return parse_filter_block();
    if (name == "generation") return parse_generation();
    if (name == "break" || name == "continue") {
      if (loop_depth_ == 0) error(concat("'", name, "' outside of a loop"));
      auto s = new_stmt(name == "break" ? Stmt::Kind::Break : Stmt::Kind::Continue);
      next();
      expect_block_end();
      return s;
    }
    throw TemplateError(ErrorKind::Syntax, concat("unknown or unsupported tag '", name, "'"),
                        cur().line);
  }

  StmtPtr parse_if() {
    auto s = new_stmt(Stmt::Kind::If);
    next();  // if / elif
    for (;;) {
      s->conditions.push_back(parse_tuple(true));
      expect_block_end();
      s->bodies.push_back(parse_body({"elif", "else", "endif"}));
      if (skip_name("elif")) continue;
      if (skip_name("else")) {
        expect_block_end();
        s->else_body = parse_body({"endif"});
      }
      break;
    }
    next();  // endif
    expect_block_end();
    return s;
  }

  ExprPtr parse_assign_target(bool allow_attr, bool allow_tuple) {
    const int line = cur().line;
    std::vector<ExprPtr> names;
    bool comma = false;
    for (;;) {
      auto n = make(Expr::Kind::Name, cur().line);
      n->name = expect_name();
      if (allow_attr && is_op(".")) {
        next();
        auto a = make(Expr::Kind::GetAttr, n->line);
        a->name = expect_name();
        a->args.push_back(std::move(n));
        n = std::move(a);
      }
      names.push_back(std::move(n));
      if (!allow_tuple || !is_op(",")) break;
      next();
      comma = true;
      if (cur().kind != TokenKind::Name) break;
    }
    if (names.size() == 1 && !comma) return std::move(names[0]);
    auto tuple = make(Expr::Kind::TupleLit, line);
    tuple->args = std::move(names);
    return tuple;
  }

  StmtPtr parse_for() {
    auto s = new_stmt(Stmt::Kind::For);
    next();
    s->targets.push_back(parse_assign_target(false, true));
    if (!skip_name("in")) error("expected 'in'");
    s->expr = parse_tuple(false);
    if (skip_name("if")) s->condition = parse_tuple(true);
    if (is_name("recursive")) error("recursive loops are not supported");
    expect_block_end();
    ++loop_depth_;
    s->bodies.push_back(parse_body({"endfor", "else"}));
    --loop_depth_;
    if (skip_name("else")) {
      expect_block_end();
      s->else_body = parse_body({"endfor"});
    }
    next();  // endfor
    expect_block_end();
    return s;
  }

  std::vector<FilterCall> parse_filter_chain(bool first_has_pipe) {
    std::vector<FilterCall> chain;
    bool first = true;
    while ((first && !first_has_pipe) || skip_op("|")) {
      first = false;
      FilterCall f;
      f.line = cur().line;
      f.name = expect_dotted_name();
      f.fn = find_filter(f.name);
      if (is_op("(")) parse_call_args(f.args, f.kwargs);
      chain.push_back(std::move(f));
    }
    return chain;
  }

  StmtPtr parse_set() {
    auto s = new_stmt(Stmt::Kind::Set);
    next();
    s->targets.push_back(parse_assign_target(true, true));
    if (skip_op("=")) {
      s->expr = parse_tuple(true);
      expect_block_end();
      return s;
    }
    s->kind = Stmt::Kind::SetBlock;
    if (s->targets[0]->kind != Expr::Kind::Name) error("a block set assigns one name");
    s->filters = parse_filter_chain(true);
    expect_block_end();
    const int saved = loop_depth_;
    loop_depth_ = 0;
    s->bodies.push_back(parse_body({"endset"}));
    loop_depth_ = saved;
    next();
    expect_block_end();
    return s;
  }

  StmtPtr parse_macro() {
    auto s = new_stmt(Stmt::Kind::Macro);
    next();
    s->text = expect_name();
    expect_op("(");
    while (!is_op(")")) {
      if (!s->params.empty()) expect_op(",");
      if (is_op(")")) break;
      s->params.push_back(expect_name());
      s->defaults.push_back(skip_op("=") ? parse_expression(true) : nullptr);
    }
    next();
    expect_block_end();
    const int saved = loop_depth_;
    loop_depth_ = 0;
    s->bodies.push_back(parse_body({"endmacro"}));
    loop_depth_ = saved;
    next();
    expect_block_end();
    return s;
  }

  StmtPtr parse_filter_block() {
    auto s = new_stmt(Stmt::Kind::FilterBlock);
    next();
    s->filters = parse_filter_chain(false);
    expect_block_end();
    s->bodies.push_back(parse_body({"endfilter"}));
    next();
    expect_block_end();
    return s;
  }

  // transformers' {% generation %}: marks assistant text for its mask; the body renders as is.
  StmtPtr parse_generation() {
    auto s = new_stmt(Stmt::Kind::If);
    next();
    expect_block_end();
    auto always = make(Expr::Kind::Literal, s->line);
    always->literal = Value::boolean(true);
    s->conditions.push_back(std::move(always));
    s->bodies.push_back(parse_body({"endgeneration"}));
    next();
    expect_block_end();
    return s;
  }

  // ---- expressions
  ExprPtr parse_tuple(bool with_condexpr) {
    const int line = cur().line;
    ExprPtr first = parse_expression(with_condexpr);
    if (!is_op(",")) return first;
    auto tuple = make(Expr::Kind::TupleLit, line);
    tuple->args.push_back(std::move(first));
    while (skip_op(",")) {
      if (cur().kind == TokenKind::VarEnd || cur().kind == TokenKind::BlockEnd || is_op(")") ||
          is_op("=")) {
        break;
      }
      tuple->args.push_back(parse_expression(with_condexpr));
    }
    return tuple;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard guard(*this);
    if (!with_condexpr) return parse_or();
    ExprPtr e = parse_or();
    while (is_name("if")) {
      const int line = cur().line;
      next();
      auto c = make(Expr::Kind::Conditional, line);
      c->args.push_back(std::move(e));
      c->args.push_back(parse_or());
      if (skip_name("else")) c->args.push_back(parse_expression(true));
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(Expr::Kind kind, std::string op, ExprPtr l, ExprPtr r, int line) {
    auto e = make(kind, line);
    e->name = std::move(op);
    e->args.push_back(std::move(l));
    e->args.push_back(std::move(r));
    return e;
  }

  // One left-associative precedence level: operands from `operand`, joined for as long as
  // `take_op` finds one of the level's operators at the cursor (it consumes it and returns its
  // text; empty for none).
  template <typename Operand, typename TakeOp>
  ExprPtr left_associative(Expr::Kind kind, Operand operand, TakeOp take_op) {
    ExprPtr l = operand();
    for (;;) {
      const int line = cur().line;
      std::string op = take_op();
      if (op.empty()) return l;
      l = binary(kind, std::move(op), std::move(l), operand(), line);
    }
  }

  std::string take_op(std::initializer_list<std::string_view> ops) {
    for (std::string_view op : ops) {
      if (skip_op(op)) return std::string(op);
    }
    return {};
  }

  std::string take_name(std::string_view name) { return skip_name(name) ? std::string(name) : ""; }

  ExprPtr parse_or() {
    return left_associative(
        Expr::Kind::Or, [&] { return parse_and(); }, [&] { return take_name("or"); });
  }

  ExprPtr parse_and() {
    return left_associative(
        Expr::Kind::And, [&] { return parse_not(); }, [&] { return take_name("and"); });
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard guard(*this);
      auto e = make(Expr::Kind::Not, cur().line);
      next();
      e->args.push_back(parse_not());
      return e;
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
    return left_associative(
        Expr::Kind::Binary, [&] { return parse_math1(); },
        [&] {
          if (std::string op = take_op({"==", "!=", "<", "<=", ">", ">="}); !op.empty()) return op;
          if (is_name("not") && peek().kind == TokenKind::Name && peek().text == "in") {
            next();
            next();
            return std::string("not in");
          }
          return take_name("in");
        });
  }

  ExprPtr parse_math1() {
    return left_associative(
        Expr::Kind::Binary, [&] { return parse_concat(); },
        [&] {
          return take_op({"+", "-"});
        });
  }

  ExprPtr parse_concat() {
    return left_associative(
        Expr::Kind::Binary, [&] { return parse_math2(); }, [&] { return take_op({"~"}); });
  }

  ExprPtr parse_math2() {
    return left_associative(
        Expr::Kind::Binary, [&] { return parse_pow(); },
        [&] {
          return take_op({"*", "/", "//", "%"});
        });
  }

  ExprPtr parse_pow() {
    return left_associative(
        Expr::Kind::Binary, [&] { return parse_unary(true); }, [&] { return take_op({"**"}); });
  }

  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    ExprPtr e;
    if (is_op("-") || is_op("+")) {
      e = make(is_op("-") ? Expr::Kind::Negate : Expr::Kind::Plus, cur().line);
      next();
      e->args.push_back(parse_unary(false));
    } else {
      e = parse_primary();
    }
    e = parse_postfix(std::move(e));
    if (with_filter) e = parse_filter_expr(std::move(e));
    return e;
  }

  ExprPtr parse_primary() {
    const Token& tok = cur();
    const int line = tok.line;
    switch (tok.kind) {
      case TokenKind::Name: {
        auto e = make(Expr::Kind::Literal, line);
        if (tok.text == "true" || tok.text == "True") {
          e->literal = Value::boolean(true);
        } else if (tok.text == "false" || tok.text == "False") {
          e->literal = Value::boolean(false);
        } else if (tok.text == "none" || tok.text == "None") {
          e->literal = Value::none();
        } else {
          e->kind = Expr::Kind::Name;
          e->name = tok.text;
        }
        next();
        return e;
      }
      case TokenKind::String: {
        std::string s;
        while (cur().kind == TokenKind::String) {
          s += cur().text;
          next();
        }
        auto e = make(Expr::Kind::Literal, line);
        e->literal = Value::string(std::move(s));
        return e;
      }
      case TokenKind::Integer: {
        auto e = make(Expr::Kind::Literal, line);
        int64_t v = 0;
        const auto res = std::from_chars(tok.text.data(), tok.text.data() + tok.text.size(), v);
        e->literal = res.ec == std::errc() ? Value::integer(v)
                                           : Value::real(std::strtod(tok.text.c_str(), nullptr));
        next();
        return e;
      }
      case TokenKind::Float: {
        auto e = make(Expr::Kind::Literal, line);
        e->literal = Value::real(std::strtod(tok.text.c_str(), nullptr));
        next();
        return e;
      }
      case TokenKind::Operator:
        if (tok.text == "(") {
          next();
          if (skip_op(")")) return make(Expr::Kind::TupleLit, line);
          ExprPtr first = parse_expression(true);
          if (skip_op(")")) return first;
          auto tuple = make(Expr::Kind::TupleLit, line);
          tuple->args.push_back(std::move(first));
          while (skip_op(",")) {
            if (is_op(")")) break;
            tuple->args.push_back(parse_expression(true));
          }
          expect_op(")");
          return tuple;
        }
        if (tok.text == "[") {
          next();
          auto list = make(Expr::Kind::ListLit, line);
          while (!is_op("]")) {
            if (!list->args.empty()) expect_op(",");
            if (is_op("]")) break;
            list->args.push_back(parse_expression(true));
          }
          next();
          return list;
        }
        if (tok.text == "{") {
          next();
          auto dict = make(Expr::Kind::DictLit, line);
          while (!is_op("}")) {
            if (!dict->args.empty()) expect_op(",");
            if (is_op("}")) break;
            dict->args.push_back(parse_expression(true));
            expect_op(":");
            dict->args.push_back(parse_expression(true));
          }
          next();
          return dict;
        }
        break;
      default:
        break;
    }
    error("expected an expression");
  }

  ExprPtr parse_postfix(ExprPtr e) {
    for (;;) {
      const int line = cur().line;
      if (is_op(".")) {
        next();
        if (cur().kind == TokenKind::Integer) {
          auto g = make(Expr::Kind::GetItem, line);
          auto idx = make(Expr::Kind::Literal, line);
          idx->literal = Value::integer(std::atoll(cur().text.c_str()));
          next();
          g->args.push_back(std::move(e));
          g->args.push_back(std::move(idx));
          e = std::move(g);
          continue;
        }
        auto g = make(Expr::Kind::GetAttr, line);
        g->name = expect_name();
        g->args.push_back(std::move(e));
        e = std::move(g);
      } else if (is_op("[")) {
        next();
        e = parse_subscript(std::move(e), line);
      } else if (is_op("(")) {
        auto c = make(Expr::Kind::Call, line);
        c->args.push_back(std::move(e));
        parse_call_args(c->args, c->kwargs);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr obj, int line) {
    ExprPtr parts[3];
    bool is_slice = false;
    if (!is_op(":")) parts[0] = parse_expression(true);
    if (skip_op(":")) {
      is_slice = true;
      if (!is_op("]") && !is_op(":")) parts[1] = parse_expression(true);
      if (skip_op(":") && !is_op("]")) parts[2] = parse_expression(true);
    }
    expect_op("]");
    auto g = make(is_slice ? Expr::Kind::Slice : Expr::Kind::GetItem, line);
    g->args.push_back(std::move(obj));
    if (!is_slice) {
      g->args.push_back(std::move(parts[0]));
      return g;
    }
    for (auto& p : parts) g->args.push_back(std::move(p));
    return g;
  }

  // ( positional..., name=value... ); appends positional arguments to `args`.
  void parse_call_args(std::vector<ExprPtr>& args,
                       std::vector<std::pair<std::string, ExprPtr>>& kwargs) {
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) expect_op(",");
      first = false;
      if (is_op(")")) break;
      if (cur().kind == TokenKind::Name && peek().kind == TokenKind::Operator &&
          peek().text == "=") {
        std::string name = cur().text;
        next();
        next();
        kwargs.emplace_back(std::move(name), parse_expression(true));
      } else {
        if (!kwargs.empty()) error("positional argument after keyword argument");
        args.push_back(parse_expression(true));
      }
    }
    next();
  }

  ExprPtr parse_filter_expr(ExprPtr e) {
    for (;;) {
      const int line = cur().line;
      if (is_op("|")) {
        next();
        auto f = make(Expr::Kind::Filter, line);
        f->name = expect_dotted_name();
        f->filter = find_filter(f->name);
        f->args.push_back(std::move(e));
        if (is_op("(")) parse_call_args(f->args, f->kwargs);
        e = parse_postfix(std::move(f));
      } else if (is_name("is")) {
        next();
        auto t = make(Expr::Kind::Test, line);
        t->negated = skip_name("not");
        t->name = expect_dotted_name();
        t->test = find_test(t->name);
        t->args.push_back(std::move(e));
        if (is_op("(")) {
          parse_call_args(t->args, t->kwargs);
        } else if ((cur().kind == TokenKind::Name || cur().kind == TokenKind::String ||
                    cur().kind == TokenKind::Integer || cur().kind == TokenKind::Float ||
                    is_op("[") || is_op("{")) &&
                   !is_name("else") && !is_name("or") && !is_name("and")) {
          if (is_name("is")) error("you cannot chain multiple tests with 'is'");
          t->args.push_back(parse_postfix(parse_primary()));
        }
        e = std::move(t);
      } else if (is_op("(")) {
        auto c = make(Expr::Kind::Call, line);
        c->args.push_back(std::move(e));
        parse_call_args(c->args, c->kwargs);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }

  // ---- unknown filters and tests: a compile error unless inside an if (or a conditional
  // expression), where Jinja2 defers the error until the code runs.
  void check_unknown(const Expr* e, bool soft) {
    if (!e) return;
    if (e->kind == Expr::Kind::Conditional) soft = true;
    if (!soft && e->kind == Expr::Kind::Filter && !e->filter) {
      throw TemplateError(ErrorKind::Syntax, concat("No filter named '", e->name, "'."), e->line);
    }
    if (!soft && e->kind == Expr::Kind::Test && !e->test) {
      throw TemplateError(ErrorKind::Syntax, concat("No test named '", e->name, "'."), e->line);
    }
    for (const ExprPtr& a : e->args) check_unknown(a.get(), soft);
    for (const auto& kw : e->kwargs) check_unknown(kw.second.get(), soft);
  }

  void check_unknown(const std::vector<FilterCall>& filters, bool soft) {
    for (const FilterCall& f : filters) {
      if (!soft && !f.fn) {
        throw TemplateError(ErrorKind::Syntax, concat("No filter named '", f.name, "'."), f.line);
      }
      for (const ExprPtr& a : f.args) check_unknown(a.get(), soft);
      for (const auto& kw : f.kwargs) check_unknown(kw.second.get(), soft);
    }
  }

  void check_unknown(const Body& body, bool soft) {
    for (const StmtPtr& s : body) {
      switch (s->kind) {
        case Stmt::Kind::If:
          for (const ExprPtr& c : s->conditions) check_unknown(c.get(), true);
          for (const Body& b : s->bodies) check_unknown(b, true);
          check_unknown(s->else_body, true);
          break;
        case Stmt::Kind::For:
          check_unknown(s->expr.get(), soft);
          check_unknown(s->condition.get(), false);
          check_unknown(s->bodies[0], false);
          check_unknown(s->else_body, false);
          break;
        case Stmt::Kind::Macro:
          for (const ExprPtr& d : s->defaults) check_unknown(d.get(), false);
          check_unknown(s->bodies[0], false);
          break;
        case Stmt::Kind::SetBlock:
        case Stmt::Kind::FilterBlock:
          check_unknown(s->filters, soft);
          check_unknown(s->bodies[0], false);
          break;
        default:
          check_unknown(s->expr.get(), soft);
          for (const ExprPtr& t : s->targets) check_unknown(t.get(), soft);
      }
    }
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Body parse_template(std::string_view source) {
  return Parser(lex_template(source)).parse();
}

}  // namespace k25::jinja
