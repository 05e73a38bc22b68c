#include "lang/checker.hpp"

#include <cfloat>
#include <cmath>
#include <string>
#include <unordered_map>

namespace kaio::lang {
namespace {

struct BuiltinSig {
  const char *name;
  Builtin builtin;
  int arity;
};

// Functions with fixed signatures are checked in call(); this table only
// maps names and arities.
constexpr BuiltinSig kBuiltins[] = {
    {"exp", Builtin::exp, 1},         {"log", Builtin::log, 1},
    {"sqrt", Builtin::sqrt, 1},       {"rsqrt", Builtin::rsqrt, 1},
    {"tanh", Builtin::tanh, 1},       {"erf", Builtin::erf, 1},
    {"sigmoid", Builtin::sigmoid, 1}, {"abs", Builtin::abs, 1},
    {"min", Builtin::min, 2},         {"max", Builtin::max, 2},
    {"fma", Builtin::fma, 3},         {"select", Builtin::select, 3},
    {"bits", Builtin::bits, 1},       {"f32_from_bits", Builtin::f32_from_bits, 1},
    {"f16_bits", Builtin::f16_bits, 1}, {"bf16_bits", Builtin::bf16_bits, 1},
    {"f16_from_bits", Builtin::f16_from_bits, 1},
    {"bf16_from_bits", Builtin::bf16_from_bits, 1},
    {"pack_f16x2", Builtin::pack_f16x2, 2}, {"pack_bf16x2", Builtin::pack_bf16x2, 2},
    {"sum", Builtin::sum_reduce, 1},
};

bool is_numeric(Type t) { return t == Type::f32 || t == Type::i32 || t == Type::u32 || t == Type::int_lit; }
bool is_integer(Type t) { return t == Type::i32 || t == Type::u32 || t == Type::int_lit; }

std::string quote(const std::string &s) { return "'" + s + "'"; }

class Checker {
 public:
  explicit Checker(Kernel &k) : k_(k) {}

  void run() {
    for (size_t i = 0; i < k_.params.size(); ++i) {
      Param &p = k_.params[i];
      if (i >= static_cast<size_t>(kMaxParams))
        error_at(p.pos, "too many parameters; the limit is " + std::to_string(kMaxParams));
      if (reserved(p.name)) error_at(p.pos, quote(p.name) + " is a built-in name; rename the parameter");
      auto [it, fresh] = names_.emplace(p.name, Name{RefKind::param, static_cast<int>(i), p.pos});
      if (!fresh) error_at(p.pos, "parameter " + quote(p.name) + " is declared twice");
      (p.tensor ? k_.tensor_count : k_.scalar_count)++;
    }
    // Pre-pass: which tensors are outputs, and is this a row kernel.
    for (Stmt &s : k_.body) {
      if (s.kind == StmtKind::store) {
        auto it = names_.find(s.name);
        if (it != names_.end() && it->second.kind == RefKind::param &&
            k_.params[it->second.index].tensor)
          k_.params[it->second.index].output = true;
      } else if (reduction_of(*s.value) != Builtin::none) {
        k_.row_kernel = true;
      }
    }
    for (Stmt &s : k_.body) stmt(s);
    if (k_.outputs.empty())
      error_at(k_.pos, "kernel " + quote(k_.name) +
                           " assigns no output; assign a tensor parameter, as in 'out = x * 2.0;'");
  }

 private:
  struct Name {
    RefKind kind;
    int index;
    Pos pos;
  };

  static bool reserved(const std::string &n) {
    return n == "row" || n == "col" || n == "i" || n == "rows" || n == "cols";
  }

  static Builtin reduction_of(const Expr &e) {
    if (e.kind != ExprKind::call || e.args.size() != 1) return Builtin::none;
    if (e.name == "sum") return Builtin::sum_reduce;
    if (e.name == "max") return Builtin::max_reduce;
    return Builtin::none;
  }

  void stmt(Stmt &s) {
    if (s.kind == StmtKind::let) {
      if (reserved(s.name)) error_at(s.pos, quote(s.name) + " is a built-in name; choose another");
      if (auto it = names_.find(s.name); it != names_.end())
        error_at(s.pos, quote(s.name) + " is already defined at " + where(it->second.pos));
      Builtin red = reduction_of(*s.value);
      LetInfo info;
      info.name = s.name;
      info.pos = s.pos;
      if (red != Builtin::none) {
        Expr &arg = *s.value->args[0];
        expr(arg);
        settle(arg, Type::i32, true);
        if (arg.type == Type::boolean)
          error_at(arg.pos, std::string("'") + s.value->name + "' reduces numbers; the value is bool");
        s.value->builtin = red;
        s.value->type = arg.type;
        s.value->varying = false;
        info.type = arg.type;
        info.varying = false;
      } else {
        expr(*s.value);
        settle(*s.value, Type::i32, true);
        info.type = s.value->type;
        info.varying = s.value->varying;
      }
      s.reduction = red;
      info.reduction = red;
      info.value = s.value.get();
      s.index = static_cast<int>(k_.lets.size());
      k_.lets.push_back(info);
      names_.emplace(s.name, Name{RefKind::let, s.index, s.pos});
      return;
    }
    auto it = names_.find(s.name);
    if (it == names_.end()) error_at(s.pos, "unknown name " + quote(s.name) + "; assign a tensor parameter");
    if (it->second.kind != RefKind::param || !k_.params[it->second.index].tensor)
      error_at(s.pos, quote(s.name) + " is not a tensor parameter; only tensor parameters can be assigned");
    Param &p = k_.params[it->second.index];
    for (int o : k_.outputs)
      if (o == it->second.index)
        error_at(s.pos, "output " + quote(s.name) + " is assigned twice");
    expr(*s.value);
    Type want = value_type(p.dtype);
    settle(*s.value, want, false);
    if (s.value->type != want)
      error_at(s.value->pos, "cannot store " + std::string(type_name(s.value->type)) + " into " +
                                 quote(s.name) + " (tensor<" + dtype_name(p.dtype) + ">, takes " +
                                 type_name(want) + "); convert with 'as " + type_name(want) + "'");
    s.index = it->second.index;
    k_.outputs.push_back(s.index);
  }

  static std::string where(Pos p) { return std::to_string(p.line) + ":" + std::to_string(p.col); }

  // Gives an untyped integer expression the type `t` (recursively).
  void settle(Expr &e, Type t, bool default_only) {
    if (e.type != Type::int_lit) return;
    if (default_only && t != Type::i32 && t != Type::f32) t = Type::i32;
    if (t == Type::boolean) t = Type::i32;
    if (t == Type::f32 && integer_only(e)) t = Type::i32;
    if (t == Type::u32 && takes_abs(e)) t = Type::i32;
    e.type = t;
    for (auto &a : e.args) {
      if (a->type != Type::int_lit) continue;
      settle(*a, t, false);
      if (a->type != t)
        error_at(a->pos, std::string("this integer expression cannot be ") + type_name(t) +
                             "; convert it with 'as " + type_name(t) + "'");
    }
  }

  // Whether an untyped integer expression takes an abs somewhere: abs has
  // no u32 form, so settle makes the whole expression i32 where u32 was
  // asked. A cast or a shift amount takes that; a u32 operand or store then
  // reports the mismatch and asks for 'as u32'.
  static bool takes_abs(const Expr &e) {
    if (e.type != Type::int_lit) return false;
    if (e.kind == ExprKind::call && e.builtin == Builtin::abs) return true;
    for (const auto &a : e.args)
      if (takes_abs(*a)) return true;
    return false;
  }

  // Operators that only exist on integers: an untyped literal expression
  // built with them stays an integer even where an f32 is wanted.
  static bool integer_only(const Expr &e) {
    if (e.kind == ExprKind::unary) return e.op == Tok::tilde;
    if (e.kind != ExprKind::binary) return false;
    switch (e.op) {
      case Tok::amp: case Tok::pipe: case Tok::caret: case Tok::percent: case Tok::shl: case Tok::shr:
        return true;
      default: return false;
    }
  }

  void unify(Expr &a, Expr &b) {
    if (a.type == Type::int_lit && b.type != Type::int_lit) settle(a, b.type, false);
    if (b.type == Type::int_lit && a.type != Type::int_lit) settle(b, a.type, false);
  }

  static std::string op_text(Tok k) { return tok_name(k); }

  void expr(Expr &e) {
    switch (e.kind) {
      case ExprKind::int_lit: e.type = Type::int_lit; return;
      case ExprKind::float_lit:
        if (!(std::fabs(e.float_value) <= FLT_MAX))
          error_at(e.pos, "number does not fit in f32 (largest is about 3.4e38)");
        e.type = Type::f32;
        return;
      case ExprKind::bool_lit: e.type = Type::boolean; return;
      case ExprKind::name: return name(e);
      case ExprKind::index: return index(e);
      case ExprKind::unary: return unary(e);
      case ExprKind::binary: return binary(e);
      case ExprKind::call: return call(e);
      case ExprKind::cast: {
        Expr &a = *e.args[0];
        expr(a);
        // an untyped integer operand is an integer: (7 / 2) as f32 is 3.0
        settle(a, e.cast_to == Type::f32 ? Type::i32 : e.cast_to, false);
        e.type = e.cast_to;
        e.varying = a.varying;
        return;
      }
      case ExprKind::if_else: {
        Expr &c = *e.args[0], &a = *e.args[1], &b = *e.args[2];
        expr(c);
        if (c.type != Type::boolean)
          error_at(c.pos, "the if's condition is " + std::string(type_name(c.type)) +
                              "; it must be bool (compare with '!= 0')");
        expr(a);
        expr(b);
        unify(a, b);
        if (a.type != b.type)
          error_at(b.pos, "the if's branches have different types: " + std::string(type_name(a.type)) +
                              " and " + type_name(b.type));
        e.type = a.type;
        e.varying = c.varying || a.varying || b.varying;
        return;
      }
    }
  }

  void name(Expr &e) {
    if (e.name == "row" || e.name == "col" || e.name == "i") {
      e.ref = e.name == "row" ? RefKind::row : e.name == "col" ? RefKind::col : RefKind::elem;
      e.type = Type::i32;
      e.varying = !(k_.row_kernel && e.ref == RefKind::row);
      return;
    }
    if (e.name == "rows" || e.name == "cols") {
      e.ref = e.name == "rows" ? RefKind::rows : RefKind::cols;
      e.type = Type::i32;
      return;
    }
    auto it = names_.find(e.name);
    if (it == names_.end()) error_at(e.pos, "unknown name " + quote(e.name));
    const Name &n = it->second;
    e.ref = n.kind;
    e.index = n.index;
    if (n.kind == RefKind::let) {
      e.type = k_.lets[n.index].type;
      e.varying = k_.lets[n.index].varying;
      return;
    }
    Param &p = k_.params[n.index];
    if (!p.tensor) {
      e.type = p.scalar;
      return;
    }
    read_tensor(e, p, false);
  }

  void read_tensor(Expr &e, Param &p, bool indexed) {
    if (p.output)
      error_at(e.pos, quote(p.name) + " is an output; outputs cannot be read (pass the tensor "
                                      "again as an input parameter)");
    (indexed ? p.read_indexed : p.read_plain) = true;
    e.type = value_type(p.dtype);
    e.varying = true;
    if (static_cast<int>(k_.sites.size()) >= kMaxSites)
      error_at(e.pos, "too many tensor reads; the limit is " + std::to_string(kMaxSites));
    e.site = static_cast<int>(k_.sites.size());
    k_.sites.push_back({e.pos, e.index, indexed});
  }

  void index(Expr &e) {
    auto it = names_.find(e.name);
    if (it == names_.end()) error_at(e.pos, "unknown name " + quote(e.name));
    if (it->second.kind != RefKind::param || !k_.params[it->second.index].tensor)
      error_at(e.pos, quote(e.name) + " is not a tensor; only tensor parameters can be indexed");
    e.ref = RefKind::param;
    e.index = it->second.index;
    for (auto &a : e.args) {
      expr(*a);
      settle(*a, Type::i32, false);
      if (!is_integer(a->type))
        error_at(a->pos, "an index must be an integer, not " + std::string(type_name(a->type)) +
                             "; convert with 'as i32'");
    }
    read_tensor(e, k_.params[e.index], true);
  }

  void unary(Expr &e) {
    Expr &a = *e.args[0];
    expr(a);
    e.varying = a.varying;
    e.type = a.type;
    switch (e.op) {
      case Tok::minus:
        if (a.type != Type::f32 && a.type != Type::i32 && a.type != Type::int_lit)
          error_at(e.pos, "'-' needs f32 or i32, not " + std::string(type_name(a.type)));
        return;
      case Tok::bang:
        if (a.type != Type::boolean)
          error_at(e.pos, "'!' needs bool, not " + std::string(type_name(a.type)) +
                              "; for bitwise not use '~'");
        return;
      default:  // tilde
        if (!is_integer(a.type))
          error_at(e.pos, "'~' needs an integer, not " + std::string(type_name(a.type)));
        return;
    }
  }

  void binary(Expr &e) {
    Expr &a = *e.args[0], &b = *e.args[1];
    expr(a);
    expr(b);
    e.varying = a.varying || b.varying;
    const std::string op = op_text(e.op);
    auto mismatch = [&] {
      error_at(e.pos, "operands of " + op + " have different types: " + type_name(a.type) +
                          " and " + type_name(b.type) + "; convert one with 'as'");
    };
    switch (e.op) {
      case Tok::andand:
      case Tok::oror:
        if (a.type != Type::boolean || b.type != Type::boolean)
          error_at(e.pos, op + " needs bool operands, not " + type_name(a.type) + " and " +
                              type_name(b.type));
        e.type = Type::boolean;
        return;
      case Tok::shl:
      case Tok::shr:
        if (!is_integer(a.type) || !is_integer(b.type))
          error_at(e.pos, op + " needs integer operands, not " + type_name(a.type) + " and " +
                              type_name(b.type));
        if (a.type == Type::int_lit && b.type != Type::int_lit) settle(a, b.type, false);
        settle(b, Type::u32, false);
        e.type = a.type;
        return;
      case Tok::eq: case Tok::ne: case Tok::lt: case Tok::le: case Tok::gt: case Tok::ge:
        unify(a, b);
        settle(a, Type::i32, false);
        settle(b, Type::i32, false);
        if (a.type != b.type) mismatch();
        if (a.type == Type::boolean && e.op != Tok::eq && e.op != Tok::ne)
          error_at(e.pos, op + " cannot order bool values");
        e.type = Type::boolean;
        return;
      default: break;
    }
    unify(a, b);
    if (a.type == Type::boolean || b.type == Type::boolean)
      error_at(e.pos, op + " needs numbers, not bool" +
                          std::string(e.op == Tok::amp || e.op == Tok::pipe ? "; for logic use '&&' or '||'" : ""));
    if (a.type != b.type) mismatch();
    bool bitwise = e.op == Tok::amp || e.op == Tok::pipe || e.op == Tok::caret;
    if ((bitwise || e.op == Tok::percent) && a.type == Type::f32)
      error_at(e.pos, op + " needs integer operands, not f32" +
                          std::string(bitwise ? "; use bits(x) to get an f32's bits" : ""));
    e.type = a.type;
  }

  void arg_type(Expr &e, Expr &a, Type want, int which) {
    settle(a, want, false);
    if (a.type != want)
      error_at(a.pos, "argument " + std::to_string(which) + " of " + quote(e.name) + " must be " +
                          type_name(want) + ", not " + type_name(a.type));
  }

  void call(Expr &e) {
    const BuiltinSig *sig = nullptr;
    bool name_known = false;
    for (const BuiltinSig &s : kBuiltins) {
      if (e.name != s.name) continue;
      name_known = true;
      if (s.arity == static_cast<int>(e.args.size())) sig = &s;
    }
    if (e.name == "max" && e.args.size() == 1) {
      name_known = true;
      error_at(e.pos, "'max(x)' is a row reduction; write it as 'let name = max(...);'");
    }
    if (!name_known) {
      if (e.name == "f32" || e.name == "i32" || e.name == "u32")
        error_at(e.pos, "to convert, write 'x as " + e.name + "'");
      error_at(e.pos, "unknown function " + quote(e.name));
    }
    if (!sig) {
      int arity = 0;
      for (const BuiltinSig &s : kBuiltins)
        if (e.name == s.name) arity = s.arity;
      error_at(e.pos, quote(e.name) + " takes " + std::to_string(arity) + " argument" +
                          (arity == 1 ? "" : "s") + ", got " + std::to_string(e.args.size()));
    }
    if (sig->builtin == Builtin::sum_reduce)
      error_at(e.pos, "'sum(x)' is a row reduction; write it as 'let name = sum(...);'");
    e.builtin = sig->builtin;
    for (auto &a : e.args) {
      expr(*a);
      e.varying = e.varying || a->varying;
    }
    switch (e.builtin) {
      case Builtin::exp: case Builtin::log: case Builtin::sqrt: case Builtin::rsqrt:
      case Builtin::tanh: case Builtin::erf: case Builtin::sigmoid:
        arg_type(e, *e.args[0], Type::f32, 1);
        e.type = Type::f32;
        return;
      case Builtin::abs: {
        Expr &a = *e.args[0];
        if (a.type != Type::f32 && a.type != Type::i32 && a.type != Type::int_lit)
          error_at(a.pos, "'abs' takes f32 or i32, not " + std::string(type_name(a.type)));
        e.type = a.type;
        return;
      }
      case Builtin::min: case Builtin::max: {
        Expr &a = *e.args[0], &b = *e.args[1];
        unify(a, b);
        if (!is_numeric(a.type) || a.type != b.type)
          error_at(e.pos, quote(e.name) + " needs two numbers of one type, not " +
                              type_name(a.type) + " and " + type_name(b.type));
        e.type = a.type;
        return;
      }
      case Builtin::fma:
        for (int j = 0; j < 3; ++j) arg_type(e, *e.args[j], Type::f32, j + 1);
        e.type = Type::f32;
        return;
      case Builtin::select: {
        Expr &c = *e.args[0], &a = *e.args[1], &b = *e.args[2];
        if (c.type != Type::boolean)
          error_at(c.pos, "argument 1 of 'select' must be bool, not " + std::string(type_name(c.type)));
        unify(a, b);
        if (a.type != b.type)
          error_at(b.pos, "'select' needs its last two arguments of one type, not " +
                              std::string(type_name(a.type)) + " and " + type_name(b.type));
        e.type = a.type;
        return;
      }
      case Builtin::bits: case Builtin::f16_bits: case Builtin::bf16_bits:
        arg_type(e, *e.args[0], Type::f32, 1);
        e.type = Type::u32;
        return;
      case Builtin::f32_from_bits: case Builtin::f16_from_bits: case Builtin::bf16_from_bits:
        arg_type(e, *e.args[0], Type::u32, 1);
        e.type = Type::f32;
        return;
      case Builtin::pack_f16x2: case Builtin::pack_bf16x2:
        arg_type(e, *e.args[0], Type::f32, 1);
        arg_type(e, *e.args[1], Type::f32, 2);
        e.type = Type::u32;
        return;
      default: return;
    }
  }

  Kernel &k_;
  std::unordered_map<std::string, Name> names_;
};

}  // namespace

void check(Kernel &kernel) { Checker(kernel).run(); }

}  // namespace kaio::lang
