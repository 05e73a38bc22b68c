#include "support/lang_chains.hpp"

#include <vector>

namespace kt {
namespace {

uint64_t splitmix(uint64_t &s) {
  uint64_t z = (s += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

struct Rng {
  uint64_t s;
  int below(int n) { return static_cast<int>(splitmix(s) % static_cast<uint64_t>(n)); }
  int between(int lo, int hi) { return lo + below(hi - lo + 1); }
  const char *pick(const std::vector<const char *> &v) { return v[below(static_cast<int>(v.size()))]; }
};

const char *const kF32 = "kernel k(x: tensor<f32>, out: tensor<f32>) {\n    ";
const char *const kI32 = "kernel k(x: tensor<i32>, n: i32, out: tensor<i32>) {\n    ";
const char *const kUseBool = "out = if c { x } else { 0.0 };\n}\n";

// term op term op ... term: n terms, depth n (left-associative, one
// precedence level); each op drawn from ops.
std::string chain(Rng &r, const std::string &term, const std::vector<const char *> &ops, int n) {
  std::string out = term;
  for (int k = 1; k < n; ++k) out += std::string(" ") + r.pick(ops) + " " + term;
  return out;
}

// Mostly around the limit (1..80), sometimes far beyond it.
int length(Rng &r) {
  const int p = r.below(10);
  if (p < 7) return r.between(1, 80);
  if (p < 9) return r.between(81, 2000);
  return r.between(2001, 40000);
}

}  // namespace

RandomChain random_chain(uint64_t seed) {
  Rng r{seed * 0xD1B54A32D192ED03ull + 7};
  const int n = length(r);  // links in the chain
  RandomChain c;
  switch (r.below(12)) {
    case 0:  // + and -, mixed (one precedence level)
      c = {"+-", std::string(kF32) + "out = " + chain(r, "x", {"+", "-"}, n) + ";\n}\n", n};
      break;
    case 1:  // * and /, mixed
      c = {"*/", std::string(kF32) + "out = " + chain(r, "x", {"*", "/"}, n) + ";\n}\n", n};
      break;
    case 2: {  // one integer operator
      const char *op = r.pick({"%", "&", "|", "^", "<<", ">>"});
      c = {op, std::string(kI32) + "out = " + chain(r, "x", {op}, n) + ";\n}\n", n};
      break;
    }
    case 3: {  // x as T as T ... as f32: n casts, depth n + 1
      std::string e = "x";
      for (int k = 1; k < n; ++k) e += std::string(" as ") + r.pick({"f32", "i32", "u32"});
      c = {"as", std::string(kF32) + "out = " + e + " as f32;\n}\n", n + 1};
      break;
    }
    case 4: {  // (x op ... op x) CMP x: a comparison over a sum of depth n
      const char *cmp = r.pick({"<", "<=", ">", ">=", "==", "!="});
      c = {cmp, std::string(kF32) + "let c = " + chain(r, "x", {"+", "-"}, n) + " " + cmp + " x;\n    " + kUseBool,
           n + 1};
      break;
    }
    case 5: {  // x > 0.0 && x > 0.0 ...: n comparisons, depth n + 1
      const char *op = r.pick({"&&", "||"});
      c = {op, std::string(kF32) + "let c = " + chain(r, "x > 0.0", {op}, n) + ";\n    " + kUseBool, n + 1};
      break;
    }
    case 6: {  // - - ... - x, or a mix of - and ~ on i32: n operators, depth n + 1
      const bool i32 = r.below(2) == 0;
      std::string e;
      for (int k = 0; k < n; ++k) e += i32 ? r.pick({"-", "~"}) : "-";
      c = {"unary", std::string(i32 ? kI32 : kF32) + "out = " + e + " x;\n}\n", n + 1};
      break;
    }
    case 7:  // !...!(x > 0.0): n operators, depth n + 2
      c = {"!", std::string(kF32) + "let c = " + std::string(static_cast<size_t>(n), '!') + "(x > 0.0);\n    " +
                    kUseBool,
           n + 2};
      break;
    case 8: {  // f(g(...(x))): n nested calls, depth n + 1
      std::string open, close;
      for (int k = 0; k < n; ++k) {
        const int which = r.below(3);
        open += which == 0 ? "abs(" : which == 1 ? "min(x, " : "fma(x, x, ";
        close += ")";
      }
      c = {"call", std::string(kF32) + "out = " + open + "x" + close + ";\n}\n", n + 1};
      break;
    }
    case 9: {  // x[x[...x[n]...]]: n nested reads, depth n + 1
      std::string open, close;
      for (int k = 0; k < n; ++k) {
        open += "x[";
        close += "]";
      }
      c = {"index", std::string(kI32) + "out = " + open + "n" + close + ";\n}\n", n + 1};
      break;
    }
    case 10:  // x[n + n + ... + n]: an index over a sum of depth n
      c = {"index+", std::string(kI32) + "out = x[" + chain(r, "n", {"+", "-"}, n) + "];\n}\n", n + 1};
      break;
    default:  // a call over a product: exp(x * x ... * x), depth n + 1
      c = {"call*", std::string(kF32) + "out = exp(" + chain(r, "x", {"*"}, n) + ");\n}\n", n + 1};
      break;
  }
  return c;
}

}  // namespace kt
