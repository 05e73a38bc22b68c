#include "support/lang_interpreter.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <optional>
#include <unordered_map>

#include "support/kaio_test.hpp"

namespace kt {
namespace {

using kaio::lang::Builtin;
using kaio::lang::DType;
using kaio::lang::dtype_bytes;
using kaio::lang::Expr;
using kaio::lang::ExprKind;
using kaio::lang::LetInfo;
using kaio::lang::Param;
using kaio::lang::RefKind;
using kaio::lang::Stmt;
using kaio::lang::StmtKind;
using kaio::lang::Tok;
using kaio::lang::Type;
using kaio::lang::value_type;
using LKernel = kaio::lang::Kernel;

struct V {
  Type t = Type::f32;
  float f = 0;
  uint32_t u = 0;  // i32 as its bits
  bool b = false;
};

V fv(float f) { return {Type::f32, f, 0, false}; }
V iv(Type t, uint32_t u) { return {t, 0, u, false}; }
V bv(bool b) { return {Type::boolean, 0, 0, b}; }
int32_t s32(uint32_t u) { return static_cast<int32_t>(u); }

uint32_t f_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float bits_f(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t to_bf16(float f) {
  uint32_t x = f_bits(f);
  if (std::isnan(f)) return 0x7FFF;  // canonical NaN, as cvt.rn.bf16.f32
  return static_cast<uint16_t>((x + 0x7FFFu + ((x >> 16) & 1u)) >> 16);
}

// PTX min/max.f32: a NaN operand yields the other one, and -0 orders below +0.
float fminmax(float a, float b, bool min) {
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  if (a == b) return (std::signbit(a) == min) ? a : b;
  return (a < b) == min ? a : b;
}

float cast_to_f32(const V &a) {
  if (a.t == Type::i32) return static_cast<float>(s32(a.u));
  return static_cast<float>(a.u);
}

uint32_t f32_to_int(float f, bool is_signed) {
  if (std::isnan(f)) return 0;
  double t = std::trunc(static_cast<double>(f));
  if (is_signed) {
    t = std::clamp(t, -2147483648.0, 2147483647.0);
    return static_cast<uint32_t>(static_cast<int32_t>(t));
  }
  t = std::clamp(t, 0.0, 4294967295.0);
  return static_cast<uint32_t>(t);
}

V load_view(const LangView &v, int64_t r, int64_t c) {
  const int size = dtype_bytes(v.dtype);
  const uint8_t *p = v.bytes.data() + (r * v.stride + c) * size;
  switch (v.dtype) {
    case DType::f32: {
      float f;
      std::memcpy(&f, p, 4);
      return fv(f);
    }
    case DType::f16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return fv(kt::f16_to_f32(h));
    }
    case DType::bf16: {
      uint16_t h;
      std::memcpy(&h, p, 2);
      return fv(bits_f(uint32_t{h} << 16));
    }
    case DType::i8: return iv(Type::i32, static_cast<uint32_t>(static_cast<int32_t>(static_cast<int8_t>(*p))));
    case DType::u8: return iv(Type::u32, *p);
    case DType::i32: {
      uint32_t u;
      std::memcpy(&u, p, 4);
      return iv(Type::i32, u);
    }
    case DType::u32: {
      uint32_t u;
      std::memcpy(&u, p, 4);
      return iv(Type::u32, u);
    }
  }
  return {};
}


class Interp {
 public:
  Interp(const LKernel &k, std::vector<LangView> &tensors, const std::vector<double> &scalars)
      : k_(k), tensors_(tensors) {
    int ti = 0, si = 0;
    for (const Param &p : k.params) {
      tensor_of_.push_back(p.tensor ? ti++ : -1);
      if (p.tensor) {
        scalar_.push_back({});
      } else {
        double v = scalars[si++];
        if (p.scalar == Type::f32) scalar_.push_back(fv(static_cast<float>(v)));
        else if (p.scalar == Type::i32) scalar_.push_back(iv(Type::i32, static_cast<uint32_t>(static_cast<int32_t>(v))));
        else scalar_.push_back(iv(Type::u32, static_cast<uint32_t>(v)));
      }
    }
  }

  LangRun run() {
    const LangView &out = tensors_[tensor_of_[k_.outputs[0]]];
    rows_ = static_cast<int32_t>(out.rows);
    cols_ = static_cast<int32_t>(out.cols);
    // outputs are written after all reads of a row (row kernels) or of the
    // element (map kernels): in-place views behave as on the GPU
    std::vector<std::vector<std::pair<int, V>>> pending;
    for (int32_t r = 0; r < rows_; ++r) {
      lets_.assign(k_.lets.size(), std::nullopt);
      row_ = r;
      for (const Stmt &s : k_.body) {
        if (s.reduction == Builtin::none) continue;
        const Expr &arg = *s.value->args[0];
        V acc = arg.type == Type::f32 ? fv(s.reduction == Builtin::max_reduce ? -INFINITY : 0.0f)
                                       : iv(arg.type, s.reduction == Builtin::max_reduce && arg.type == Type::i32 ? 0x80000000u : 0u);
        for (int32_t c = 0; c < cols_; ++c) {
          start_element(c);
          V v = eval(arg);
          if (arg.type == Type::f32)
            acc.f = s.reduction == Builtin::max_reduce ? fminmax(acc.f, v.f, false) : acc.f + v.f;
          else if (s.reduction == Builtin::sum_reduce)
            acc.u += v.u;
          else if (arg.type == Type::i32)
            acc.u = s32(v.u) > s32(acc.u) ? v.u : acc.u;
          else
            acc.u = std::max(acc.u, v.u);
        }
        uniform_[s.index] = acc;
      }
      std::vector<std::pair<int64_t, std::vector<V>>> row_out;
      for (int32_t c = 0; c < cols_; ++c) {
        start_element(c);
        std::vector<V> vals;
        for (const Stmt &s : k_.body) {
          if (s.kind == StmtKind::let) {
            if (s.reduction == Builtin::none) let(s.index);
          } else {
            vals.push_back(eval(*s.value));
          }
        }
        if (!k_.row_kernel) store_all(r, c, vals);
        else row_out.push_back({c, std::move(vals)});
      }
      for (auto &[c, vals] : row_out) store_all(r, static_cast<int32_t>(c), vals);
    }
    LangRun run;
    run.first_bad_site = first_bad_;
    return run;
  }

 private:
  void start_element(int32_t c) {
    col_ = c;
    for (size_t j = 0; j < k_.lets.size(); ++j)
      if (k_.lets[j].varying) lets_[j].reset();
  }

  void store_all(int32_t r, int32_t c, const std::vector<V> &vals) {
    for (size_t o = 0; o < k_.outputs.size(); ++o) store(tensors_[tensor_of_[k_.outputs[o]]], r, c, vals[o]);
  }

  static void store(LangView &v, int64_t r, int64_t c, const V &x) {
    const int size = dtype_bytes(v.dtype);
    uint8_t *p = v.bytes.data() + (r * v.stride + c) * size;
    switch (v.dtype) {
      case DType::f32: std::memcpy(p, &x.f, 4); return;
      case DType::f16: {
        uint16_t h = kt::f32_to_f16(x.f);
        std::memcpy(p, &h, 2);
        return;
      }
      case DType::bf16: {
        uint16_t h = to_bf16(x.f);
        std::memcpy(p, &h, 2);
        return;
      }
      case DType::i8:
      case DType::u8: *p = static_cast<uint8_t>(x.u); return;
      default: std::memcpy(p, &x.u, 4); return;
    }
  }

  V let(int j) {
    const LetInfo &info = k_.lets[j];
    if (info.reduction != Builtin::none) return uniform_[j];
    if (!lets_[j]) lets_[j] = eval(*info.value);
    return *lets_[j];
  }

  V literal(const Expr &e) {
    if (e.type == Type::f32) return fv(static_cast<float>(static_cast<double>(e.int_value)));
    return iv(e.type, static_cast<uint32_t>(e.int_value));
  }

  V eval(const Expr &e, bool live = true) {
    switch (e.kind) {
      case ExprKind::int_lit: return literal(e);
      case ExprKind::float_lit: return fv(static_cast<float>(e.float_value));
      case ExprKind::bool_lit: return bv(e.int_value != 0);
      case ExprKind::name: return name(e);
      case ExprKind::index: return index(e, live);
      case ExprKind::unary: {
        V a = eval(*e.args[0], live);
        if (e.op == Tok::minus) return e.type == Type::f32 ? fv(-a.f) : iv(e.type, 0u - a.u);
        if (e.op == Tok::bang) return bv(!a.b);
        return iv(e.type, ~a.u);
      }
      case ExprKind::binary: return binary(e, live);
      case ExprKind::call: return call(e, live);
      case ExprKind::cast: {
        V a = eval(*e.args[0], live);
        Type to = e.cast_to;
        if (a.t == to) return a;
        if (a.t == Type::boolean) return to == Type::f32 ? fv(a.b ? 1.0f : 0.0f) : iv(to, a.b);
        if (a.t == Type::f32) return iv(to, f32_to_int(a.f, to == Type::i32));
        if (to == Type::f32) return fv(cast_to_f32(a));
        return iv(to, a.u);
      }
      case ExprKind::if_else: return choose(*e.args[0], *e.args[1], *e.args[2], live);
    }
    return {};
  }

  V choose(const Expr &c, const Expr &a, const Expr &b, bool live) {
    V cv = eval(c, live);
    // both sides are evaluated, as on the GPU, but only the taken one may
    // report a bad index
    V av = eval(a, live && cv.b);
    V bvv = eval(b, live && !cv.b);
    return cv.b ? av : bvv;
  }

  V name(const Expr &e) {
    switch (e.ref) {
      case RefKind::row: return iv(Type::i32, static_cast<uint32_t>(row_));
      case RefKind::col: return iv(Type::i32, static_cast<uint32_t>(col_));
      case RefKind::elem: return iv(Type::i32, static_cast<uint32_t>(row_ * cols_ + col_));
      case RefKind::rows: return iv(Type::i32, static_cast<uint32_t>(rows_));
      case RefKind::cols: return iv(Type::i32, static_cast<uint32_t>(cols_));
      case RefKind::let: return let(e.index);
      default: break;
    }
    const Param &p = k_.params[e.index];
    if (!p.tensor) return scalar_[e.index];
    return load_view(tensors_[tensor_of_[e.index]], row_, col_);
  }

  V index(const Expr &e, bool live) {
    const LangView &t = tensors_[tensor_of_[e.index]];
    uint32_t r, c;
    bool inside;
    if (e.args.size() == 1) {
      uint32_t flat = eval(*e.args[0], live).u;
      inside = static_cast<uint64_t>(flat) < static_cast<uint64_t>(t.rows * t.cols);
      r = flat / static_cast<uint32_t>(t.cols);
      c = flat - r * static_cast<uint32_t>(t.cols);
    } else {
      r = eval(*e.args[0], live).u;
      c = eval(*e.args[1], live).u;
      inside = r < t.rows && c < t.cols;
    }
    if (!inside) {
      if (live && (first_bad_ < 0 || e.site < first_bad_)) first_bad_ = e.site;
      V zero = load_zero(t.dtype);
      return zero;
    }
    return load_view(t, r, c);
  }

  static V load_zero(DType d) {
    Type t = value_type(d);
    return t == Type::f32 ? fv(0.0f) : iv(t, 0);
  }

  V binary(const Expr &e, bool live) {
    if (e.op == Tok::andand || e.op == Tok::oror) {
      V a = eval(*e.args[0], live);
      bool need = e.op == Tok::andand ? a.b : !a.b;
      V b = eval(*e.args[1], live && need);
      return bv(e.op == Tok::andand ? (a.b && b.b) : (a.b || b.b));
    }
    V a = eval(*e.args[0], live), b = eval(*e.args[1], live);
    const Type t = e.args[0]->type;
    if (t == Type::boolean) return bv(e.op == Tok::eq ? a.b == b.b : a.b != b.b);
    if (t == Type::f32) {
      switch (e.op) {
        case Tok::eq: return bv(a.f == b.f);
        case Tok::ne: return bv(a.f != b.f);
        case Tok::lt: return bv(a.f < b.f);
        case Tok::le: return bv(a.f <= b.f);
        case Tok::gt: return bv(a.f > b.f);
        case Tok::ge: return bv(a.f >= b.f);
        case Tok::plus: return fv(a.f + b.f);
        case Tok::minus: return fv(a.f - b.f);
        case Tok::star: return fv(a.f * b.f);
        case Tok::slash: return fv(a.f / b.f);
        default: return {};
      }
    }
    const bool sg = t == Type::i32;
    auto lt = [&](uint32_t x, uint32_t y) { return sg ? s32(x) < s32(y) : x < y; };
    switch (e.op) {
      case Tok::eq: return bv(a.u == b.u);
      case Tok::ne: return bv(a.u != b.u);
      case Tok::lt: return bv(lt(a.u, b.u));
      case Tok::le: return bv(!lt(b.u, a.u));
      case Tok::gt: return bv(lt(b.u, a.u));
      case Tok::ge: return bv(!lt(a.u, b.u));
      case Tok::plus: return iv(t, a.u + b.u);
      case Tok::minus: return iv(t, a.u - b.u);
      case Tok::star: return iv(t, a.u * b.u);
      case Tok::slash:
      case Tok::percent: {
        const bool div = e.op == Tok::slash;
        if (b.u == 0) return iv(t, 0);
        if (sg && s32(b.u) == -1) return iv(t, div ? 0u - a.u : 0u);
        if (sg) return iv(t, static_cast<uint32_t>(div ? s32(a.u) / s32(b.u) : s32(a.u) % s32(b.u)));
        return iv(t, div ? a.u / b.u : a.u % b.u);
      }
      case Tok::amp: return iv(t, a.u & b.u);
      case Tok::pipe: return iv(t, a.u | b.u);
      case Tok::caret: return iv(t, a.u ^ b.u);
      case Tok::shl: return iv(t, b.u >= 32 ? 0u : a.u << b.u);
      case Tok::shr: {
        uint32_t n = std::min(b.u, 32u);
        if (sg) return iv(t, static_cast<uint32_t>(n >= 32 ? (s32(a.u) < 0 ? -1 : 0) : s32(a.u) >> n));
        return iv(t, n >= 32 ? 0u : a.u >> n);
      }
      default: return {};
    }
  }

  V call(const Expr &e, bool live) {
    if (e.builtin == Builtin::select) return choose(*e.args[0], *e.args[1], *e.args[2], live);
    std::vector<V> a;
    for (const auto &x : e.args) a.push_back(eval(*x, live));
    auto d = [](float f) { return static_cast<double>(f); };
    switch (e.builtin) {
      case Builtin::exp: return fv(static_cast<float>(std::exp(d(a[0].f))));
      case Builtin::log: return fv(static_cast<float>(std::log(d(a[0].f))));
      case Builtin::sqrt: return fv(std::sqrt(a[0].f));
      case Builtin::rsqrt: return fv(1.0f / std::sqrt(a[0].f));
      case Builtin::tanh: return fv(static_cast<float>(std::tanh(d(a[0].f))));
      case Builtin::erf: return fv(static_cast<float>(std::erf(d(a[0].f))));
      case Builtin::sigmoid: return fv(static_cast<float>(1.0 / (1.0 + std::exp(-d(a[0].f)))));
      case Builtin::abs:
        if (e.type == Type::f32) return fv(std::fabs(a[0].f));
        return iv(e.type, s32(a[0].u) < 0 ? 0u - a[0].u : a[0].u);
      case Builtin::min:
      case Builtin::max: {
        const bool mn = e.builtin == Builtin::min;
        if (e.type == Type::f32) return fv(fminmax(a[0].f, a[1].f, mn));
        bool less = e.type == Type::i32 ? s32(a[0].u) < s32(a[1].u) : a[0].u < a[1].u;
        return iv(e.type, (less == mn) ? a[0].u : a[1].u);
      }
      case Builtin::fma: return fv(std::fma(a[0].f, a[1].f, a[2].f));
      case Builtin::bits: return iv(Type::u32, f_bits(a[0].f));
      case Builtin::f32_from_bits: return fv(bits_f(a[0].u));
      case Builtin::f16_bits: return iv(Type::u32, kt::f32_to_f16(a[0].f));
      case Builtin::bf16_bits: return iv(Type::u32, to_bf16(a[0].f));
      case Builtin::f16_from_bits: return fv(kt::f16_to_f32(static_cast<uint16_t>(a[0].u)));
      case Builtin::bf16_from_bits: return fv(bits_f(a[0].u << 16));
      case Builtin::pack_f16x2:
        return iv(Type::u32, kt::f32_to_f16(a[0].f) | uint32_t{kt::f32_to_f16(a[1].f)} << 16);
      case Builtin::pack_bf16x2: return iv(Type::u32, to_bf16(a[0].f) | uint32_t{to_bf16(a[1].f)} << 16);
      default: return {};
    }
  }

  const LKernel &k_;
  std::vector<LangView> &tensors_;
  std::vector<int> tensor_of_;
  std::vector<V> scalar_;
  std::vector<std::optional<V>> lets_;
  std::unordered_map<int, V> uniform_;
  int32_t row_ = 0, col_ = 0, rows_ = 0, cols_ = 0;
  int first_bad_ = -1;
};

}  // namespace

LangRun interpret(const kaio::lang::Kernel &k, std::vector<LangView> &tensors,
                  const std::vector<double> &scalars) {
  return Interp(k, tensors, scalars).run();
}

double view_value(const LangView &v, int64_t r, int64_t c) {
  V x = load_view(v, r, c);
  if (x.t == Type::f32) return x.f;
  return x.t == Type::i32 ? static_cast<double>(s32(x.u)) : static_cast<double>(x.u);
}

}  // namespace kt
