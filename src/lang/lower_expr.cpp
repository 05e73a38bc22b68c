#include "lang/lower_expr.hpp"

#include <cmath>

namespace kaio::lang {
namespace {

std::string ty(Type t) { return t == Type::f32 ? "f32" : t == Type::u32 ? "u32" : "s32"; }
bool is_float(Type t) { return t == Type::f32; }
int log2_bytes(DType d) { return dtype_bytes(d) == 4 ? 2 : dtype_bytes(d) == 2 ? 1 : 0; }

}  // namespace

std::string ExprLowerer::materialize(const std::string &imm, Type t) {
  if (t == Type::f32) return b_.op(b_.f(), "mov.f32", imm);
  if (t == Type::boolean) return b_.op(b_.p(), "setp.ne.u32", imm + ", 0");
  return b_.op(b_.r(), "mov.b32", imm);
}

std::string ExprLowerer::and_pred(const std::string &a, const std::string &b) {
  if (a.empty()) return b;
  if (b.empty()) return a;
  return b_.op(b_.p(), "and.pred", a + ", " + b);
}

std::string ExprLowerer::not_pred(const std::string &a) { return b_.op(b_.p(), "not.pred", a); }

Val ExprLowerer::lower(const Expr &e, ElemContext *elem, const std::string &guard) {
  if (elem && !e.varying) {
    // uniform: computed once per phase, before its loop
    std::string *saved = b_.out;
    b_.out = preamble;
    Val v = lower(e, nullptr, "");
    b_.out = saved;
    return v;
  }
  return lower_varying(e, elem, guard);
}

bool ExprLowerer::let_ready(int let, const ElemContext *elem) const {
  if (!k_.lets[let].varying) return uniform_lets_[let].has_value();
  return elem && elem->lets.count(let);
}

Val ExprLowerer::let_value(int let, ElemContext *elem) {
  if (!let_ready(let, elem)) {
    // Lower the lets this one needs first, in source order, so lowering a
    // let never recurses into another one: a long chain of lets (a reduction
    // of the last of them meets them all unlowered) costs no stack.
    std::vector<char> need(static_cast<size_t>(let) + 1, 0);
    need[let] = 1;
    std::vector<const Expr *> todo;
    for (int j = let; j >= 0; --j) {
      if (!need[j] || let_ready(j, elem) || k_.lets[j].reduction != Builtin::none) continue;
      todo.push_back(k_.lets[j].value);
      while (!todo.empty()) {
        const Expr *e = todo.back();
        todo.pop_back();
        if (e->kind == ExprKind::name && e->ref == RefKind::let && e->index < j) need[e->index] = 1;
        for (const auto &a : e->args) todo.push_back(a.get());
      }
    }
    for (int j = 0; j <= let; ++j)
      if (need[j] && !let_ready(j, elem)) lower_let(j, elem);
  }
  const LetInfo &info = k_.lets[let];
  if (!info.varying) return *uniform_lets_[let];
  return elem->lets.find(let)->second;
}

void ExprLowerer::lower_let(int let, ElemContext *elem) {
  const LetInfo &info = k_.lets[let];
  if (!info.varying) {
    std::string *saved = b_.out;
    if (elem) b_.out = preamble;
    uniform_lets_[let] = lower(*info.value, nullptr, "");
    b_.out = saved;
    return;
  }
  // a let is evaluated for every element, whatever branch first uses it
  Val v = lower(*info.value, elem, elem->guard);
  elem->lets[let] = v;
}

Val ExprLowerer::lower_varying(const Expr &e, ElemContext *elem, const std::string &guard) {
  switch (e.kind) {
    case ExprKind::int_lit:
      if (e.type == Type::f32)
        return {f(static_cast<float>(static_cast<double>(e.int_value))), Type::f32};
      return {materialize(std::to_string(static_cast<uint32_t>(e.int_value)), e.type), e.type};
    case ExprKind::float_lit: return {f(static_cast<float>(e.float_value)), Type::f32};
    case ExprKind::bool_lit: return {materialize(e.int_value ? "1" : "0", Type::boolean), Type::boolean};
    case ExprKind::name: return name(e, elem, guard);
    case ExprKind::index: return index(e, elem, guard);
    case ExprKind::unary: return unary(e, elem, guard);
    case ExprKind::binary: return binary(e, elem, guard);
    case ExprKind::call: return call(e, elem, guard);
    case ExprKind::cast: return cast(e, elem, guard);
    case ExprKind::if_else: return choose(*e.args[0], *e.args[1], *e.args[2], elem, guard);
  }
  return {};
}

Val ExprLowerer::name(const Expr &e, ElemContext *elem, const std::string &guard) {
  switch (e.ref) {
    case RefKind::row: return {elem ? elem->row : uniform_row, Type::i32};
    case RefKind::col: return {elem->col, Type::i32};
    case RefKind::elem: return {elem->i, Type::i32};
    case RefKind::rows: return {out_rows, Type::i32};
    case RefKind::cols: return {out_cols, Type::i32};
    case RefKind::let: return let_value(e.index, elem);
    case RefKind::param: break;
    case RefKind::none: return {};
  }
  const Param &p = k_.params[e.index];
  if (!p.tensor) return {scalars[e.index], p.scalar};
  if (auto it = elem->plain.find(e.index); it != elem->plain.end()) return it->second;
  std::string &addr = elem->addr[e.index];
  if (addr.empty()) addr = element_address(e.index, elem->row, elem->col);
  // The host checked that this view has the output's shape, so the read is
  // in bounds and has no side effect: it is done once per element, under
  // the element's guard rather than a branch's, and shared by every use.
  (void)guard;
  Val v = load_element(p.dtype, addr, elem->guard);
  elem->plain[e.index] = v;
  return v;
}

std::string ExprLowerer::element_address(int p, const std::string &row, const std::string &col) {
  const TensorRegs &t = tensors[p];
  std::string r64 = b_.op(b_.rd(), "cvt.u64.u32", row);
  std::string c64 = b_.op(b_.rd(), "cvt.u64.u32", col);
  std::string off = b_.op(b_.rd(), "mad.lo.u64", r64 + ", " + t.stride + ", " + c64);
  int shift = log2_bytes(k_.params[p].dtype);
  if (shift) off = b_.op(b_.rd(), "shl.b64", off + ", " + std::to_string(shift));
  return b_.op(b_.rd(), "add.u64", t.ptr + ", " + off);
}

Val ExprLowerer::load_element(DType d, const std::string &addr, const std::string &guard) {
  const std::string g = guard.empty() ? "" : "@" + guard + " ";
  switch (d) {
    case DType::f32: {
      std::string v = b_.f();
      if (!guard.empty()) b_.ins("mov.f32 " + v + ", 0f00000000");
      b_.ins(g + "ld.global.f32 " + v + ", [" + addr + "]");
      return {v, Type::f32};
    }
    case DType::f16: {
      std::string h = b_.h();
      if (!guard.empty()) b_.ins("mov.b16 " + h + ", 0");
      b_.ins(g + "ld.global.b16 " + h + ", [" + addr + "]");
      return {b_.op(b_.f(), "cvt.f32.f16", h), Type::f32};
    }
    case DType::bf16: {
      std::string r = b_.r();
      if (!guard.empty()) b_.ins("mov.b32 " + r + ", 0");
      b_.ins(g + "ld.global.u16 " + r + ", [" + addr + "]");
      std::string s = b_.op(b_.r(), "shl.b32", r + ", 16");
      return {b_.op(b_.f(), "mov.b32", s), Type::f32};
    }
    default: {
      const char *op = d == DType::i8 ? "s8" : d == DType::u8 ? "u8" : "u32";
      std::string r = b_.r();
      if (!guard.empty()) b_.ins("mov.b32 " + r + ", 0");
      b_.ins(g + "ld.global." + op + " " + r + ", [" + addr + "]");
      return {r, value_type(d)};
    }
  }
}

void ExprLowerer::store_element(DType d, const std::string &addr, const Val &v,
                                const std::string &guard) {
  const std::string g = guard.empty() ? "" : "@" + guard + " ";
  switch (d) {
    case DType::f32: b_.ins(g + "st.global.f32 [" + addr + "], " + v.reg); return;
    case DType::f16:
    case DType::bf16: {
      std::string h = b_.op(b_.h(), d == DType::f16 ? "cvt.rn.f16.f32" : "cvt.rn.bf16.f32", v.reg);
      b_.ins(g + "st.global.b16 [" + addr + "], " + h);
      return;
    }
    case DType::i8:
    case DType::u8: b_.ins(g + "st.global.u8 [" + addr + "], " + v.reg); return;
    default: b_.ins(g + "st.global.u32 [" + addr + "], " + v.reg); return;
  }
}

Val ExprLowerer::index(const Expr &e, ElemContext *elem, const std::string &guard) {
  const Param &p = k_.params[e.index];
  const TensorRegs &t = tensors[e.index];
  std::string row, col, inside, bad_index, which;
  if (e.args.size() == 1) {
    std::string flat = lower(*e.args[0], elem, guard).reg;
    std::string n = b_.op(b_.rd(), "mul.wide.u32", t.rows + ", " + t.cols);
    std::string f64 = b_.op(b_.rd(), "cvt.u64.u32", flat);
    inside = b_.op(b_.p(), "setp.lt.u64", f64 + ", " + n);
    row = b_.op(b_.r(), "div.u32", flat + ", " + t.cols);
    std::string back = b_.op(b_.r(), "mul.lo.u32", row + ", " + t.cols);
    col = b_.op(b_.r(), "sub.u32", flat + ", " + back);
    bad_index = flat;
  } else {
    row = lower(*e.args[0], elem, guard).reg;
    col = lower(*e.args[1], elem, guard).reg;
    std::string in_r = b_.op(b_.p(), "setp.lt.u32", row + ", " + t.rows);
    std::string in_c = b_.op(b_.p(), "setp.lt.u32", col + ", " + t.cols);
    inside = b_.op(b_.p(), "and.pred", in_r + ", " + in_c);
    // name the row when it is out of range, else the column
    bad_index = b_.op(b_.r(), "selp.b32", col + ", " + row + ", " + in_r);
    which = b_.op(b_.r(), "selp.b32", std::to_string(kFlagCol) + ", " + std::to_string(kFlagRow) +
                                          ", " + in_r);
  }
  std::string ok = and_pred(guard, inside);
  std::string outside = not_pred(inside);
  std::string bad = and_pred(guard, outside);
  // flag = (kSiteBase - site) << 34 | which << 32 | index: the max keeps
  // the lowest failing site
  const std::string site_bits = std::to_string((kSiteBase - e.site) << 2);
  std::string hi = which.empty() ? materialize(std::to_string(((kSiteBase - e.site) << 2) | kFlagFlat), Type::u32)
                                 : b_.op(b_.r(), "or.b32", which + ", " + site_bits);
  if (bad_index[0] != '%') bad_index = materialize(bad_index, Type::u32);
  std::string code = b_.op(b_.rd(), "mov.b64", "{" + bad_index + ", " + hi + "}");
  b_.ins("@" + bad + " red.global.max.u64 [" + err + "], " + code);
  std::string addr = element_address(e.index, row, col);
  return load_element(p.dtype, addr, ok);
}

Val ExprLowerer::unary(const Expr &e, ElemContext *elem, const std::string &guard) {
  Val a = lower(*e.args[0], elem, guard);
  switch (e.op) {
    case Tok::minus:
      return {b_.op(is_float(e.type) ? b_.f() : b_.r(), is_float(e.type) ? "neg.f32" : "neg.s32", a.reg), e.type};
    case Tok::bang: return {not_pred(a.reg), Type::boolean};
    default: return {b_.op(b_.r(), "not.b32", a.reg), e.type};
  }
}

Val ExprLowerer::binary(const Expr &e, ElemContext *elem, const std::string &guard) {
  const Expr &ea = *e.args[0], &eb = *e.args[1];
  if (e.op == Tok::andand || e.op == Tok::oror) {
    // the right side only runs (and only reports bad indices) when needed
    Val a = lower(ea, elem, guard);
    std::string g = and_pred(guard, e.op == Tok::andand ? a.reg : not_pred(a.reg));
    Val c = lower(eb, elem, g);
    return {b_.op(b_.p(), e.op == Tok::andand ? "and.pred" : "or.pred", a.reg + ", " + c.reg),
            Type::boolean};
  }
  Val a = lower(ea, elem, guard);
  Val c = lower(eb, elem, guard);
  const Type t = ea.type;
  const std::string ops = a.reg + ", " + c.reg;
  auto cmp = [&](const char *fop, const char *iop) {
    if (t == Type::boolean) {
      std::string x = b_.op(b_.p(), "xor.pred", ops);
      return Val{e.op == Tok::ne ? x : not_pred(x), Type::boolean};
    }
    std::string opc = std::string("setp.") + (is_float(t) ? fop : iop) + "." + ty(t);
    return Val{b_.op(b_.p(), opc, ops), Type::boolean};
  };
  std::string (PtxBuilder::*fresh)() = is_float(t) ? &PtxBuilder::f : &PtxBuilder::r;
  auto arith = [&](const char *name) {
    std::string opc = std::string(name) + (is_float(t) ? ".rn.f32" : (t == Type::u32 ? ".u32" : ".s32"));
    return Val{b_.op((b_.*fresh)(), opc, ops), t};
  };
  switch (e.op) {
    case Tok::eq: return cmp("eq", "eq");
    case Tok::ne: return cmp("neu", "ne");
    case Tok::lt: return cmp("lt", "lt");
    case Tok::le: return cmp("le", "le");
    case Tok::gt: return cmp("gt", "gt");
    case Tok::ge: return cmp("ge", "ge");
    case Tok::plus: return arith("add");
    case Tok::minus: return arith("sub");
    case Tok::star:
      if (is_float(t)) return arith("mul");
      return {b_.op(b_.r(), std::string("mul.lo.") + ty(t), ops), t};
    case Tok::slash:
    case Tok::percent: {
      if (is_float(t)) return arith("div");
      // defined results where the hardware's are not: x / 0 = x % 0 = 0,
      // and i32 MIN / -1 wraps to MIN with remainder 0
      const bool div = e.op == Tok::slash;
      std::string q = b_.op(b_.r(), std::string(div ? "div." : "rem.") + ty(t), ops);
      if (t == Type::i32) {
        std::string m1 = b_.op(b_.p(), "setp.eq.s32", c.reg + ", -1");
        std::string alt = div ? b_.op(b_.r(), "neg.s32", a.reg) : materialize("0", Type::i32);
        q = b_.op(b_.r(), "selp.b32", alt + ", " + q + ", " + m1);
      }
      std::string z = b_.op(b_.p(), "setp.eq.u32", c.reg + ", 0");
      return {b_.op(b_.r(), "selp.b32", "0, " + q + ", " + z), t};
    }
    case Tok::amp: return {b_.op(b_.r(), "and.b32", ops), t};
    case Tok::pipe: return {b_.op(b_.r(), "or.b32", ops), t};
    case Tok::caret: return {b_.op(b_.r(), "xor.b32", ops), t};
    case Tok::shl: return {b_.op(b_.r(), "shl.b32", ops), t};  // amounts >= 32 give 0
    case Tok::shr:
      return {b_.op(b_.r(), t == Type::i32 ? "shr.s32" : "shr.u32", ops), t};
    default: return {};
  }
}

Val ExprLowerer::choose(const Expr &ce, const Expr &ae, const Expr &be, ElemContext *elem,
                        const std::string &guard) {
  Val c = lower(ce, elem, guard);
  // each side is evaluated under its own condition, so only the side taken
  // can report an out-of-range index
  Val a = lower(ae, elem, and_pred(guard, c.reg));
  Val b = lower(be, elem, and_pred(guard, not_pred(c.reg)));
  if (a.type == Type::boolean) {
    std::string x = b_.op(b_.p(), "and.pred", c.reg + ", " + a.reg);
    std::string y = b_.op(b_.p(), "and.pred", not_pred(c.reg) + ", " + b.reg);
    return {b_.op(b_.p(), "or.pred", x + ", " + y), Type::boolean};
  }
  const bool fl = is_float(a.type);
  return {b_.op(fl ? b_.f() : b_.r(), fl ? "selp.f32" : "selp.b32", a.reg + ", " + b.reg + ", " + c.reg),
          a.type};
}

Val ExprLowerer::cast(const Expr &e, ElemContext *elem, const std::string &guard) {
  Val a = lower(*e.args[0], elem, guard);
  const Type from = a.type, to = e.cast_to;
  if (from == to) return a;
  if (from == Type::boolean) {
    if (to == Type::f32) return {b_.op(b_.f(), "selp.f32", "0f3F800000, 0f00000000, " + a.reg), to};
    return {b_.op(b_.r(), "selp.b32", "1, 0, " + a.reg), to};
  }
  if (from == Type::f32)  // toward zero, saturating, NaN -> 0
    return {b_.op(b_.r(), std::string("cvt.rzi.") + ty(to) + ".f32", a.reg), to};
  if (to == Type::f32) return {b_.op(b_.f(), std::string("cvt.rn.f32.") + ty(from), a.reg), to};
  return {a.reg, to};  // i32 <-> u32 keep their bits
}

std::string ExprLowerer::exp_f(const std::string &x) {
  std::string y = b_.op(b_.f(), "mul.rn.f32", x + ", " + f(1.4426950408889634f));
  return b_.op(b_.f(), "ex2.approx.ftz.f32", y);
}

std::string ExprLowerer::sigmoid_f(const std::string &x) {
  std::string t = exp_f(b_.op(b_.f(), "neg.f32", x));
  std::string d = b_.op(b_.f(), "add.rn.f32", t + ", 0f3F800000");
  return b_.op(b_.f(), "div.rn.f32", "0f3F800000, " + d);
}

// c[0] + c[1]·t + ... + c[n−1]·t^(n−1), one fma per coefficient.
std::string ExprLowerer::horner(const float *c, int n, const std::string &t) {
  std::string acc = f(c[n - 1]);
  for (int j = n - 2; j >= 0; --j) acc = b_.op(b_.f(), "fma.rn.f32", acc + ", " + t + ", " + f(c[j]));
  return acc;
}

std::string ExprLowerer::tanh_f(const std::string &x) {
  // |x| < 0.4: odd Taylor series to x^11 (error < 1e-7 relative);
  // else sign(x) * (1 - t) / (1 + t), t = e^(-2|x|) <= 0.45 (no cancellation)
  std::string ax = b_.op(b_.f(), "abs.f32", x);
  std::string x2 = b_.op(b_.f(), "mul.rn.f32", x + ", " + x);
  const float c[] = {-1.0f / 3, 2.0f / 15, -17.0f / 315, 62.0f / 2835, -1382.0f / 155925};
  std::string acc = horner(c, 5, x2);
  std::string x3 = b_.op(b_.f(), "mul.rn.f32", x2 + ", " + x);
  std::string small = b_.op(b_.f(), "fma.rn.f32", x3 + ", " + acc + ", " + x);
  std::string t = exp_f(b_.op(b_.f(), "mul.rn.f32", ax + ", 0fC0000000"));
  std::string num = b_.op(b_.f(), "sub.rn.f32", "0f3F800000, " + t);
  std::string den = b_.op(b_.f(), "add.rn.f32", "0f3F800000, " + t);
  std::string big = b_.op(b_.f(), "div.rn.f32", num + ", " + den);
  big = b_.op(b_.f(), "copysign.f32", x + ", " + big);
  std::string is_small = b_.op(b_.p(), "setp.lt.f32", ax + ", 0f3ECCCCCD");
  return b_.op(b_.f(), "selp.f32", small + ", " + big + ", " + is_small);
}

std::string ExprLowerer::erf_f(const std::string &y) {
  // |y| < 1: erf = y·P(y²); 1 <= |y|: erf = ±(1 − 2^Q(u)), log2 erfc(|y|) as
  // a polynomial of u = (|y| − 2.45) / 1.45 over [1, 3.9] (|y| clamped there:
  // erfc(3.9) = 3.5e-8). Chebyshev fits of the f64 functions, rounded to f32
  // (the method of ptx/gen_elementwise.py's --refit); maximum absolute error
  // 1.2e-7 in an f32 emulation over [−5, 5]. No division and one ex2, about 22
  // instructions: the Abramowitz-Stegun form with div.rn took some 35 and
  // left f16/bf16 GELU 10% under the built-in (both are issue-bound there).
  static const float p[] = {0x1.20dd74p+0f,  -0x1.812684p-2f, 0x1.ce0b32p-4f,
                            -0x1.b5b8a4p-6f, 0x1.42a6e4p-8f,  -0x1.287020p-11f};
  static const float q[] = {-0x1.5c2a2p+3f,  -0x1.600046p+3f, -0x1.6dd3e2p+1f, -0x1.9738bep-5f,
                            0x1.d92a4ap-7f,  -0x1.0d29dap-8f, 0x1.38b496p-10f, -0x1.1c15bp-12f};
  std::string s = b_.op(b_.f(), "abs.f32", y);
  std::string y2 = b_.op(b_.f(), "mul.rn.f32", y + ", " + y);
  std::string central = b_.op(b_.f(), "mul.rn.f32", y + ", " + horner(p, 6, y2));
  // min.NaN keeps erf(NaN) NaN; +-inf clamp to 3.9 like any large |y|
  std::string sc = b_.op(b_.f(), "min.NaN.f32", s + ", " + f(3.9f));
  std::string u = b_.op(b_.f(), "fma.rn.f32", sc + ", " + f(0x1.611a7cp-1f) + ", " + f(-0x1.b08d3ep+0f));
  std::string tail = b_.op(b_.f(), "ex2.approx.ftz.f32", horner(q, 8, u));
  tail = b_.op(b_.f(), "sub.rn.f32", "0f3F800000, " + tail);
  tail = b_.op(b_.f(), "copysign.f32", y + ", " + tail);
  std::string is_central = b_.op(b_.p(), "setp.lt.f32", s + ", 0f3F800000");
  return b_.op(b_.f(), "selp.f32", central + ", " + tail + ", " + is_central);
}

Val ExprLowerer::call(const Expr &e, ElemContext *elem, const std::string &guard) {
  if (e.builtin == Builtin::select) return choose(*e.args[0], *e.args[1], *e.args[2], elem, guard);
  std::vector<Val> a;
  for (const auto &arg : e.args) a.push_back(lower(*arg, elem, guard));
  const Type t = e.type;
  auto f1 = [&](const char *opc) { return Val{b_.op(b_.f(), opc, a[0].reg), Type::f32}; };
  switch (e.builtin) {
    case Builtin::exp: return {exp_f(a[0].reg), t};
    case Builtin::log: {
      std::string l = b_.op(b_.f(), "lg2.approx.ftz.f32", a[0].reg);
      return {b_.op(b_.f(), "mul.rn.f32", l + ", " + f(0.6931471805599453f)), t};
    }
    case Builtin::sqrt: return f1("sqrt.rn.f32");
    case Builtin::rsqrt: {
      std::string s = b_.op(b_.f(), "sqrt.rn.f32", a[0].reg);
      return {b_.op(b_.f(), "rcp.rn.f32", s), t};
    }
    case Builtin::tanh: return {tanh_f(a[0].reg), t};
    case Builtin::erf: return {erf_f(a[0].reg), t};
    case Builtin::sigmoid: return {sigmoid_f(a[0].reg), t};
    case Builtin::abs:
      if (t == Type::f32) return f1("abs.f32");
      return {b_.op(b_.r(), "abs.s32", a[0].reg), t};
    case Builtin::min:
    case Builtin::max: {
      const std::string opc = std::string(e.builtin == Builtin::min ? "min." : "max.") + ty(t);
      return {b_.op(t == Type::f32 ? b_.f() : b_.r(), opc, a[0].reg + ", " + a[1].reg), t};
    }
    case Builtin::fma:
      return {b_.op(b_.f(), "fma.rn.f32", a[0].reg + ", " + a[1].reg + ", " + a[2].reg), t};
    case Builtin::bits: return {b_.op(b_.r(), "mov.b32", a[0].reg), t};
    case Builtin::f32_from_bits: return {b_.op(b_.f(), "mov.b32", a[0].reg), t};
    case Builtin::f16_bits:
    case Builtin::bf16_bits: {
      std::string zero = f(0.0f);
      const char *opc = e.builtin == Builtin::f16_bits ? "cvt.rn.f16x2.f32" : "cvt.rn.bf16x2.f32";
      return {b_.op(b_.r(), opc, zero + ", " + a[0].reg), t};
    }
    case Builtin::f16_from_bits: {
      std::string lo = b_.h(), hi = b_.h();
      b_.ins("mov.b32 {" + lo + ", " + hi + "}, " + a[0].reg);
      return {b_.op(b_.f(), "cvt.f32.f16", lo), t};
    }
    case Builtin::bf16_from_bits: {
      std::string s = b_.op(b_.r(), "shl.b32", a[0].reg + ", 16");
      return {b_.op(b_.f(), "mov.b32", s), t};
    }
    case Builtin::pack_f16x2:
    case Builtin::pack_bf16x2: {
      const char *opc = e.builtin == Builtin::pack_f16x2 ? "cvt.rn.f16x2.f32" : "cvt.rn.bf16x2.f32";
      return {b_.op(b_.r(), opc, a[1].reg + ", " + a[0].reg), t};  // first source -> upper half
    }
    default: return {};
  }
}

}  // namespace kaio::lang
