// The parse tree of a Jinja template: expressions and statements, each with its source line.
// Filters and tests are resolved to functions when the template is parsed.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "tokenizer/jinja_value.h"

namespace k25::jinja {

class Interpreter;
using FilterFn = Value (*)(Interpreter&, const Value& operand, CallArgs& args);
using TestFn = bool (*)(Interpreter&, const Value& operand, CallArgs& args);

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    Literal,      // literal
    Name,         // name
    ListLit,      // args
    TupleLit,     // args
    DictLit,      // args: key, value, key, value ...
    Not,          // args[0]
    Negate,       // args[0]
    Plus,         // args[0]
    Binary,       // name: the operator; args[0], args[1]
    And,          // args[0], args[1]
    Or,           // args[0], args[1]
    Conditional,  // args: then, condition[, else]
    GetAttr,      // args[0] . name
    GetItem,      // args[0] [ args[1] ]
    Slice,        // args[0] [ args[1] : args[2] : args[3] ] (absent parts are null)
    Call,         // args[0] ( args[1..], kwargs )
    Filter,       // args[0] | name ( args[1..], kwargs ); filter == null: unknown, raises when run
    Test,         // args[0] is [not] name ( args[1..] ); test == null: unknown, raises when run
  };
  Kind kind;
  int line = 0;
  Value literal;
  std::string name;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;
  FilterFn filter = nullptr;
  TestFn test = nullptr;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct FilterCall {
  std::string name;
  FilterFn fn = nullptr;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  int line = 0;
};

struct Stmt {
  enum class Kind {
    Text,         // text
    Print,        // expr
    If,           // conditions[i] -> bodies[i]; else_body
    For,          // targets in expr [if condition]: bodies[0]; else_body
    Set,          // targets = expr (a target is a Name, or GetAttr of a namespace)
    SetBlock,     // targets[0] = captured bodies[0] | filters
    Macro,        // name(params = defaults): bodies[0]
    FilterBlock,  // bodies[0] | filters
    Break,
    Continue,
  };
  Kind kind;
  int line = 0;
  std::string text;  // Text: the template text; Macro: the name
  ExprPtr expr;
  ExprPtr condition;
  std::vector<ExprPtr> targets;
  std::vector<ExprPtr> conditions;
  std::vector<Body> bodies;
  Body else_body;
  std::vector<std::string> params;
  std::vector<ExprPtr> defaults;  // one per param; null when it has none
  std::vector<FilterCall> filters;
};

}  // namespace k25::jinja
