#include "support/lang_random.hpp"

#include <vector>

namespace kt {
namespace {

class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed * 0x9E3779B97F4A7C15ull + 0x632BE59BD9B4E019ull) {}
  uint64_t next() {  // splitmix64
    uint64_t z = (s_ += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  int below(int n) { return static_cast<int>(next() % static_cast<uint64_t>(n)); }
  bool chance(int percent) { return below(100) < percent; }
  template <class T>
  const T &pick(const std::vector<T> &v) { return v[below(static_cast<int>(v.size()))]; }

 private:
  uint64_t s_;
};

enum class T { f32, i32, u32, boolean };

struct Var {
  std::string name;
  T type;
};

struct Input {
  std::string name;
  std::string dtype;
  T type;
};

T value_type_of(const std::string &dtype) {
  if (dtype == "f32" || dtype == "f16" || dtype == "bf16") return T::f32;
  if (dtype == "i8" || dtype == "i32") return T::i32;
  return T::u32;
}

class Generator {
 public:
  Generator(uint64_t seed, const RandomProgramOptions &o) : rng_(seed), o_(o) {}

  std::string program() {
    static const std::vector<std::string> dtypes = {"f32", "f16", "bf16", "i8", "u8", "i32", "u32"};
    int n_in = 1 + rng_.below(3);
    const char *in_names[] = {"a", "b", "c"};
    for (int j = 0; j < n_in; ++j) {
      std::string d = rng_.pick(dtypes);
      inputs_.push_back({in_names[j], d, value_type_of(d)});
    }
    int n_out = 1 + rng_.below(2);
    const char *out_names[] = {"out", "out2"};
    std::vector<Input> outs;
    for (int j = 0; j < n_out; ++j) {
      std::string d = rng_.pick(dtypes);
      outs.push_back({out_names[j], d, value_type_of(d)});
    }
    has_s_ = rng_.chance(50);
    has_k_ = rng_.chance(50);
    std::string src = "kernel rnd(";
    for (const Input &in : inputs_) src += in.name + ": tensor<" + in.dtype + ">, ";
    if (has_s_) src += "s: f32, ";
    if (has_k_) src += "k: i32, ";
    for (size_t j = 0; j < outs.size(); ++j)
      src += outs[j].name + ": tensor<" + outs[j].dtype + ">" + (j + 1 < outs.size() ? ", " : "");
    src += ") {\n";
    int n_let = rng_.below(4);
    bool row = o_.row_kernels && rng_.chance(35);
    for (int j = 0; j < n_let; ++j) {
      T t = static_cast<T>(rng_.below(4));
      std::string name = "v" + std::to_string(j);
      // the cast pins the let's type even when the expression is all literals
      src += "  let " + name + " = " + typed(t, expr(t, 0)) + ";\n";
      vars_.push_back({name, t});
      if (row && j == 0) reduction(src);
    }
    if (row && n_let == 0) reduction(src);
    for (const Input &o : outs) src += "  " + o.name + " = " + expr(o.type, 0) + ";\n";
    src += "}\n";
    return src;
  }

 private:
  void reduction(std::string &src) {
    bool use_max = !o_.exact_only || rng_.chance(60);
    T t = use_max ? (rng_.chance(70) ? T::f32 : T::i32) : T::i32;
    if (!o_.exact_only && rng_.chance(50)) t = T::f32;
    std::string name = "r" + std::to_string(vars_.size());
    std::string kind = use_max ? "max" : "sum";
    if (o_.exact_only && t == T::f32) kind = "max";
    src += "  let " + name + " = " + kind + "(" + typed(t, expr(t, 1)) + ");\n";
    vars_.push_back({name, t});
  }

  static std::string typed(T t, const std::string &e) {
    if (t == T::boolean) return e;
    return "((" + e + ") as " + (t == T::f32 ? "f32" : t == T::i32 ? "i32" : "u32") + ")";
  }

  std::string literal(T t) {
    switch (t) {
      case T::f32: {
        static const std::vector<std::string> v = {"0.5", "-1.25", "3.0", "0.001", "2", "-7", "1e3", "0.0"};
        return rng_.pick(v);
      }
      case T::i32: return std::to_string(rng_.below(200) - 50);
      case T::u32: return std::to_string(rng_.below(300));
      case T::boolean: return rng_.chance(50) ? "true" : "false";
    }
    return "0";
  }

  std::string index_expr() {
    switch (rng_.below(7)) {
      case 0: return "[row, col]";
      case 1: return "[i]";
      case 2: return "[i + 1]";  // out of range at the last element
      case 3: return "[row, cols - 1 - col]";
      case 4: return "[i / 2]";
      case 5: return "[col, row]";  // out of range unless square
      default: return "[" + expr(T::i32, 3) + "]";
    }
  }

  std::string leaf(T t) {
    std::vector<std::string> c;
    c.push_back(literal(t));
    for (const Var &v : vars_)
      if (v.type == t) c.push_back(v.name);
    for (const Input &in : inputs_)
      if (in.type == t) {
        c.push_back(in.name);
        c.push_back(in.name + index_expr());
      }
    if (t == T::i32) {
      c.push_back("row");
      c.push_back("col");
      c.push_back("i");
      c.push_back("cols");
      if (has_k_) c.push_back("k");
    }
    if (t == T::f32 && has_s_) c.push_back("s");
    if (t == T::boolean) c.push_back("(col < " + std::to_string(rng_.below(20)) + ")");
    return rng_.pick(c);
  }

  std::string expr(T t, int depth) {
    if (depth >= 4 || rng_.chance(25)) return leaf(t);
    const int d = depth + 1;
    switch (t) {
      case T::f32: {
        int n = o_.exact_only ? 11 : 17;
        switch (rng_.below(n)) {
          case 0: return "(" + expr(t, d) + " + " + expr(t, d) + ")";
          case 1: return "(" + expr(t, d) + " - " + expr(t, d) + ")";
          case 2: return "(" + expr(t, d) + " * " + expr(t, d) + ")";
          case 3: return "(" + expr(t, d) + " / " + expr(t, d) + ")";
          case 4: return "-" + expr(t, d);
          case 5: return std::string(rng_.chance(50) ? "min(" : "max(") + expr(t, d) + ", " + expr(t, d) + ")";
          case 6: return "fma(" + expr(t, d) + ", " + expr(t, d) + ", " + expr(t, d) + ")";
          case 7: return std::string(rng_.chance(50) ? "sqrt(" : "abs(") + expr(t, d) + ")";
          case 8: return "(" + expr(rng_.chance(50) ? T::i32 : T::u32, d) + " as f32)";
          case 9: return "(if " + expr(T::boolean, d) + " { " + expr(t, d) + " } else { " + expr(t, d) + " })";
          case 10: return "select(" + expr(T::boolean, d) + ", " + expr(t, d) + ", " + expr(t, d) + ")";
          case 11: return "exp(" + expr(t, d) + ")";
          case 12: return "log(" + expr(t, d) + ")";
          case 13: return "tanh(" + expr(t, d) + ")";
          case 14: return "erf(" + expr(t, d) + ")";
          case 15: return "sigmoid(" + expr(t, d) + ")";
          default: return "f16_from_bits(f16_bits(" + expr(t, d) + "))";
        }
      }
      case T::i32:
      case T::u32: {
        const T o = t == T::i32 ? T::u32 : T::i32;
        static const std::vector<std::string> ops = {"+", "-", "*", "/", "%", "&", "|", "^", "<<", ">>"};
        switch (rng_.below(8)) {
          case 0:
          case 1:
          case 2: return "(" + expr(t, d) + " " + rng_.pick(ops) + " " + expr(t, d) + ")";
          case 3: return "~" + expr(t, d);
          case 4: return std::string(rng_.chance(50) ? "min(" : "max(") + expr(t, d) + ", " + expr(t, d) + ")";
          case 5: return "(" + expr(rng_.chance(50) ? T::f32 : o, d) + (t == T::i32 ? " as i32)" : " as u32)");
          case 6: return "(if " + expr(T::boolean, d) + " { " + expr(t, d) + " } else { " + expr(t, d) + " })";
          default: return t == T::i32 ? "abs(" + expr(t, d) + ")" : "(" + expr(t, d) + " >> 3)";
        }
      }
      case T::boolean: {
        T n = static_cast<T>(rng_.below(3));
        static const std::vector<std::string> cmp = {"<", "<=", ">", ">=", "==", "!="};
        switch (rng_.below(4)) {
          case 0: return "(" + expr(n, d) + " " + rng_.pick(cmp) + " " + expr(n, d) + ")";
          case 1: return "(" + expr(t, d) + " && " + expr(t, d) + ")";
          case 2: return "(" + expr(t, d) + " || " + expr(t, d) + ")";
          default: return "!" + expr(t, d);
        }
      }
    }
    return "0";
  }

  Rng rng_;
  RandomProgramOptions o_;
  std::vector<Input> inputs_;
  std::vector<Var> vars_;
  bool has_s_ = false, has_k_ = false;
};

}  // namespace

std::string random_program(uint64_t seed, const RandomProgramOptions &options) {
  return Generator(seed, options).program();
}

std::string mutate_program(const std::string &source, uint64_t seed) {
  Rng rng(seed ^ 0xA5A5A5A5ull);
  std::string s = source;
  static const std::vector<std::string> pieces = {
      "(", ")", "{", "}", "[", "]", ",", ";", ":", "let ", "kernel ", "if ", "else ", " as ",
      "tensor<", ">", "=", "==", "<<", "&&", "sum(", "max(", "x", "out", "1.5e", "0x", "9999999999",
      "\xff", "\n", "//", "f16", "row", "@", "'", "-", "!", "~"};
  int edits = 1 + rng.below(4);
  for (int e = 0; e < edits && !s.empty(); ++e) {
    size_t at = static_cast<size_t>(rng.below(static_cast<int>(s.size())));
    switch (rng.below(5)) {
      case 0: s.erase(at, 1 + rng.below(6)); break;
      case 1: s.insert(at, rng.pick(pieces)); break;
      case 2: s[at] = static_cast<char>(rng.below(256)); break;
      case 3: s.insert(at, s.substr(at, rng.below(20))); break;
      default: s = s.substr(0, at); break;
    }
  }
  return s;
}

}  // namespace kt
