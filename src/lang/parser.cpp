#include "lang/parser.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace kaio::lang {
namespace {

bool dtype_from(std::string_view s, DType *out) {
  static constexpr struct {
    const char *name;
    DType d;
  } kTable[] = {{"f32", DType::f32}, {"f16", DType::f16}, {"bf16", DType::bf16},
                {"i8", DType::i8},   {"u8", DType::u8},   {"i32", DType::i32},
                {"u32", DType::u32}};
  for (const auto &e : kTable)
    if (s == e.name) {
      *out = e.d;
      return true;
    }
  return false;
}

bool scalar_from(std::string_view s, Type *out) {
  if (s == "f32") *out = Type::f32;
  else if (s == "i32") *out = Type::i32;
  else if (s == "u32") *out = Type::u32;
  else return false;
  return true;
}

class Parser {
 public:
  explicit Parser(std::string_view src) : toks_(lex(src)) {}

  Kernel kernel() {
    Kernel k;
    expect(Tok::kw_kernel, "to start the kernel, as in 'kernel name(x: tensor<f32>, ...) { ... }'");
    k.pos = peek().pos;
    k.name = std::string(expect(Tok::ident, "as the kernel's name").text);
    expect(Tok::lparen, "after the kernel's name");
    if (peek().kind != Tok::rparen) {
      do k.params.push_back(param());
      while (accept(Tok::comma));
    }
    expect(Tok::rparen, "to close the parameter list");
    expect(Tok::lbrace, "to open the kernel's body");
    while (peek().kind != Tok::rbrace && peek().kind != Tok::end) k.body.push_back(stmt());
    expect(Tok::rbrace, "to close the kernel's body");
    if (peek().kind != Tok::end)
      error_at(peek().pos, "unexpected " + found(peek()) + " after the kernel's closing '}'");
    return k;
  }

 private:
  const Token &peek() const { return toks_[at_]; }
  const Token &next() { return toks_[at_ < toks_.size() - 1 ? at_++ : at_]; }
  bool accept(Tok k) {
    if (peek().kind != k) return false;
    next();
    return true;
  }
  const Token &expect(Tok k, const char *why) {
    if (peek().kind != k)
      error_at(peek().pos, std::string("expected ") + tok_name(k) + " " + why + ", found " +
                               found(peek()));
    return next();
  }
  static std::string found(const Token &t) {
    if (t.kind == Tok::end) return "end of input";
    return "'" + std::string(t.text) + "'";
  }

  Param param() {
    Param p;
    p.pos = peek().pos;
    p.name = std::string(expect(Tok::ident, "as a parameter name").text);
    expect(Tok::colon, "between the parameter's name and its type");
    if (accept(Tok::kw_tensor)) {
      p.tensor = true;
      expect(Tok::lt, "after 'tensor', as in tensor<f16>");
      const Token &t = expect(Tok::ident, "as the tensor's element type");
      if (!dtype_from(t.text, &p.dtype))
        error_at(t.pos, "unknown element type '" + std::string(t.text) +
                            "'; use f32, f16, bf16, i8, u8, i32 or u32");
      expect(Tok::gt, "to close the tensor type");
    } else {
      const Token &t = expect(Tok::ident, "as the parameter's type");
      if (!scalar_from(t.text, &p.scalar))
        error_at(t.pos, "'" + std::string(t.text) +
                            "' is not a scalar parameter type; use f32, i32, u32 or tensor<...>");
    }
    return p;
  }

  Stmt stmt() {
    Stmt s;
    if (accept(Tok::kw_let)) {
      s.kind = StmtKind::let;
      s.pos = peek().pos;
      s.name = std::string(expect(Tok::ident, "after 'let'").text);
      expect(Tok::assign, "after the let's name");
    } else {
      s.kind = StmtKind::store;
      s.pos = peek().pos;
      const Token &t = peek();
      if (t.kind != Tok::ident)
        error_at(t.pos, "expected a statement ('let name = ...;' or 'output = ...;'), found " +
                            found(t));
      s.name = std::string(next().text);
      expect(Tok::assign, "after the output's name");
    }
    s.value = expr(0);
    expect(Tok::semicolon, "to end the statement");
    return s;
  }

  void enter(Pos pos, int depth) {
    if (depth > kMaxDepth)
      error_at(pos, "expression nested deeper than " + std::to_string(kMaxDepth) + " levels");
  }

  // Sets e's depth from its args; `pos` is where a too-deep tree is reported
  // (the operator, 'as' or name that crosses the limit).
  std::unique_ptr<Expr> deepen(std::unique_ptr<Expr> e, Pos pos) {
    int d = 0;
    for (const auto &a : e->args) d = std::max(d, a->depth);
    e->depth = d + 1;
    if (e->depth > kMaxExprDepth) too_deep(pos);
    return e;
  }
  [[noreturn]] static void too_deep(Pos pos) {
    error_at(pos, "expression deeper than " + std::to_string(kMaxExprDepth) +
                      " levels (each operator, cast and call adds one); split it with 'let'");
  }

  std::unique_ptr<Expr> make(ExprKind k, Pos pos) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->pos = pos;
    return e;
  }

  // Binary precedence, higher binds tighter (Rust's order: bitwise above
  // comparisons).
  static int precedence(Tok k) {
    switch (k) {
      case Tok::oror: return 1;
      case Tok::andand: return 2;
      case Tok::eq: case Tok::ne: case Tok::lt: case Tok::le: case Tok::gt: case Tok::ge: return 3;
      case Tok::pipe: return 4;
      case Tok::caret: return 5;
      case Tok::amp: return 6;
      case Tok::shl: case Tok::shr: return 7;
      case Tok::plus: case Tok::minus: return 8;
      case Tok::star: case Tok::slash: case Tok::percent: return 9;
      default: return 0;
    }
  }

  std::unique_ptr<Expr> expr(int depth) {
    enter(peek().pos, depth);
    return binary(1, depth);
  }

  std::unique_ptr<Expr> if_else(int depth) {
    auto e = make(ExprKind::if_else, next().pos);
    e->args.push_back(expr(depth + 1));
    expect(Tok::lbrace, "after the if's condition");
    e->args.push_back(expr(depth + 1));
    expect(Tok::rbrace, "to close the if's value");
    expect(Tok::kw_else, "after the if's value (an if-expression needs an else)");
    if (peek().kind == Tok::kw_if) {
      e->args.push_back(if_else(depth + 1));
      Pos pos = e->pos;
      return deepen(std::move(e), pos);
    }
    expect(Tok::lbrace, "after 'else'");
    e->args.push_back(expr(depth + 1));
    expect(Tok::rbrace, "to close the else value");
    Pos pos = e->pos;
    return deepen(std::move(e), pos);
  }

  std::unique_ptr<Expr> binary(int min_prec, int depth) {
    auto lhs = unary(depth + 1);
    int guard = 0;
    while (true) {
      Tok k = peek().kind;
      int p = precedence(k);
      if (p < min_prec || p == 0) return lhs;
      if (++guard > 100000) error_at(peek().pos, "expression is too long");
      Pos pos = next().pos;
      auto rhs = binary(p + 1, depth + 1);
      if (p == 3 && precedence(peek().kind) == 3)
        error_at(peek().pos, "comparisons cannot be chained; use parentheses or '&&'");
      auto e = make(ExprKind::binary, pos);
      e->op = k;
      e->args.push_back(std::move(lhs));
      e->args.push_back(std::move(rhs));
      lhs = deepen(std::move(e), pos);
    }
  }

  // Prefix operators bind tighter than 'as' (as in Rust: -x as u32 is
  // (-x) as u32), which binds tighter than any binary operator.
  std::unique_ptr<Expr> prefix(int depth) {
    enter(peek().pos, depth);
    // a run of prefix operators is a loop, not a recursion: its length is
    // bounded by the tree depth alone
    std::vector<Token> ops;
    while (peek().kind == Tok::minus || peek().kind == Tok::bang || peek().kind == Tok::tilde) {
      if (static_cast<int>(ops.size()) >= kMaxExprDepth - 1) too_deep(peek().pos);
      ops.push_back(next());
    }
    auto e = postfix(depth + 1);
    for (size_t i = ops.size(); i-- > 0;) {
      auto u = make(ExprKind::unary, ops[i].pos);
      u->op = ops[i].kind;
      u->args.push_back(std::move(e));
      e = deepen(std::move(u), ops[i].pos);
    }
    return e;
  }

  std::unique_ptr<Expr> unary(int depth) {
    auto e = prefix(depth);
    while (peek().kind == Tok::kw_as) {
      auto c = make(ExprKind::cast, next().pos);
      const Token &t = expect(Tok::ident, "after 'as', as in 'x as f32'");
      if (!scalar_from(t.text, &c->cast_to))
        error_at(t.pos, "cannot cast to '" + std::string(t.text) + "'; cast to f32, i32 or u32");
      c->args.push_back(std::move(e));
      Pos pos = c->pos;
      e = deepen(std::move(c), pos);
    }
    return e;
  }

  std::unique_ptr<Expr> postfix(int depth) {
    auto e = primary(depth);
    if (peek().kind == Tok::lbracket) {
      if (e->kind != ExprKind::name)
        error_at(peek().pos, "only a tensor parameter can be indexed");
      auto ix = make(ExprKind::index, e->pos);
      ix->name = e->name;
      next();
      ix->args.push_back(expr(depth + 1));
      if (accept(Tok::comma)) ix->args.push_back(expr(depth + 1));
      expect(Tok::rbracket, "to close the index");
      Pos pos = ix->pos;
      return deepen(std::move(ix), pos);
    }
    return e;
  }

  std::unique_ptr<Expr> primary(int depth) {
    const Token &t = peek();
    switch (t.kind) {
      case Tok::int_lit: {
        auto e = make(ExprKind::int_lit, t.pos);
        e->int_value = next().int_value;
        return e;
      }
      case Tok::float_lit: {
        auto e = make(ExprKind::float_lit, t.pos);
        e->float_value = next().float_value;
        return e;
      }
      case Tok::kw_true:
      case Tok::kw_false: {
        auto e = make(ExprKind::bool_lit, t.pos);
        e->int_value = next().kind == Tok::kw_true;
        return e;
      }
      case Tok::kw_if: return if_else(depth + 1);
      case Tok::lparen: {
        next();
        auto e = expr(depth + 1);
        expect(Tok::rparen, "to close the parenthesis");
        return e;
      }
      case Tok::ident: {
        Pos pos = t.pos;
        std::string name(next().text);
        if (accept(Tok::lparen)) {
          auto e = make(ExprKind::call, pos);
          e->name = name;
          if (peek().kind != Tok::rparen) {
            do e->args.push_back(expr(depth + 1));
            while (accept(Tok::comma));
          }
          expect(Tok::rparen, "to close the call's arguments");
          return deepen(std::move(e), pos);
        }
        auto e = make(ExprKind::name, pos);
        e->name = name;
        return e;
      }
      default:
        error_at(t.pos, "expected an expression, found " + found(t));
    }
  }

  std::vector<Token> toks_;
  size_t at_ = 0;
};

}  // namespace

Kernel parse(std::string_view source) { return Parser(source).kernel(); }

}  // namespace kaio::lang
