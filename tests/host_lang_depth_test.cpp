// Expression depth in the kernel language: every chain (x+x+...+x, casts,
// comparisons, &&/||, prefix operators, calls, indexing, ifs) counts toward
// one tree-depth limit (48, lang/parser.hpp's kMaxExprDepth). Programs at
// the limit compile, through the C ABI, on a thread with a 256 KiB stack
// (1 MiB under ASan); one level more is KAIO_ERROR_KERNEL_SOURCE at the
// line:col where the limit is crossed; the issue's reproducers (a
// 21,820-term sum, a 100,000-long cast chain) are rejected quickly instead
// of overflowing the stack. Each compile on the small stack measures its
// high-water mark.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "lang/parser.hpp"
#include "support/kaio_test.hpp"
#include "support/small_stack.hpp"

namespace {

constexpr int kLimit = 48;
static_assert(kLimit == kaio::lang::kMaxExprDepth, "README and tests state 48");
constexpr size_t kStack = kt::kSmallStack;

struct Result {
  kaio_status status = KAIO_OK;
  std::string error;
  size_t stack = 0;
  double seconds = 0;
};

Result compile_small(const std::string &src) {
  Result r;
  auto t0 = std::chrono::steady_clock::now();
  r.stack = kt::run_on_small_stack([&] {
    size_t length = 0;
    r.status = kaio_lang_compile_ptx(src.c_str(), nullptr, 0, &length);
    if (r.status != KAIO_OK) r.error = kaio_last_error();  // thread-local
  });
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

// 1-based column of the n-th (1-based) occurrence of `needle` in `s`
// (single-line sources).
int col_of(const std::string &s, const std::string &needle, int n) {
  size_t at = std::string::npos;
  for (int k = 0; k < n; ++k) at = s.find(needle, at == std::string::npos ? 0 : at + 1);
  return static_cast<int>(at) + 1;
}

std::string repeat(const std::string &s, int n) {
  std::string out;
  for (int k = 0; k < n; ++k) out += s;
  return out;
}

// x OP x OP ... OP x: n terms, depth n
std::string chain(const std::string &term, const std::string &op, int n) {
  std::string out = term;
  for (int k = 1; k < n; ++k) out += " " + op + " " + term;
  return out;
}

struct Case {
  const char *name;
  // source with a tree of depth `depth`
  std::function<std::string(int depth)> source;
  // where depth kLimit + 1 is reported: (needle, occurrence) in that source
  const char *needle;
  std::function<int(int depth)> occurrence;
};

const char *const kF32 = "kernel k(x: tensor<f32>, out: tensor<f32>) { ";
const char *const kI32 = "kernel k(x: tensor<i32>, out: tensor<i32>) { ";
const char *const kIdx = "kernel k(x: tensor<f32>, n: i32, out: tensor<f32>) { ";

std::vector<Case> cases() {
  std::vector<Case> c;
  auto nth_op = [](int) { return kLimit; };  // the 48th operator makes depth 49
  for (const char *op : {"+", "-", "*", "/"})
    c.push_back({op, [op](int d) { return std::string(kF32) + "out = " + chain("x", op, d) + "; }"; },
                 op, nth_op});
  for (const char *op : {"%", "&", "|", "^", "<<", ">>"})
    c.push_back({op, [op](int d) { return std::string(kI32) + "out = " + chain("x", op, d) + "; }"; },
                 op, nth_op});
  // x as f32 as f32 ...: depth = casts + 1
  c.push_back({"as", [](int d) { return std::string(kF32) + "out = x" + repeat(" as f32", d - 1) + "; }"; },
               "as f32", nth_op});
  // (x+...+x) < x: a comparison over a chain of depth d - 1
  c.push_back({"<", [](int d) {
                 return std::string(kF32) + "let c = " + chain("x", "+", d - 1) +
                        " < x; out = if c { x } else { 0.0 }; }";
               },
               "<", [](int) { return 3; }});  // the first two are tensor<f32>'s
  // x > 0.0 && x > 0.0 && ...: n comparisons, depth n + 1
  for (const char *op : {"&&", "||"})
    c.push_back({op, [op](int d) {
                   return std::string(kF32) + "let c = " + chain("x > 0.0", op, d - 1) +
                          "; out = if c { x } else { 0.0 }; }";
                 },
                 op, [](int) { return kLimit - 1; }});
  // - - ... - x: depth = operators + 1; the 48th operator crosses
  c.push_back({"unary -", [](int d) { return std::string(kF32) + "out = " + repeat("- ", d - 1) + "x; }"; },
               "- ", nth_op});
  c.push_back({"~", [](int d) { return std::string(kI32) + "out = " + repeat("~", d - 1) + "x; }"; },
               "~", nth_op});
  // !...!(x > 0.0): depth = operators + 2; the outermost (first) '!' crosses
  c.push_back({"!", [](int d) {
                 return std::string(kF32) + "let c = " + repeat("!", d - 2) +
                        "(x > 0.0); out = if c { x } else { 0.0 }; }";
               },
               "!", [](int) { return 1; }});
  // a call, an index and an if over a chain of depth d - 1
  c.push_back({"call", [](int d) { return std::string(kF32) + "out = exp(" + chain("x", "+", d - 1) + "); }"; },
               "exp", [](int) { return 1; }});
  c.push_back({"index", [](int d) {
                 return std::string(kIdx) + "out = x[" + chain("n", "+", d - 1) + "]; }";
               },
               "x[", [](int) { return 1; }});
  c.push_back({"if", [](int d) {
                 return std::string(kF32) + "out = if x > 0.0 { " + chain("x", "*", d - 1) +
                        " } else { x }; }";
               },
               "if x", [](int) { return 1; }});
  return c;
}

TEST(LangDepth, EachChainAtTheLimitCompilesOnA256KiBStackAndOneMoreIsRejected) {
  size_t worst = 0;
  for (const Case &c : cases()) {
    const std::string at = c.source(kLimit);
    Result ok = compile_small(at);
    EXPECT_EQ(ok.status, KAIO_OK) << c.name << ": " << ok.error;
    std::printf("[ depth    ] %-8s at the limit: %6zu bytes of stack\n", c.name, ok.stack);
    worst = std::max(worst, ok.stack);

    const std::string past = c.source(kLimit + 1);
    Result bad = compile_small(past);
    EXPECT_EQ(bad.status, KAIO_ERROR_KERNEL_SOURCE) << c.name;
    const std::string want = "kaio_lang_compile_ptx: 1:" +
                             std::to_string(col_of(past, c.needle, c.occurrence(kLimit + 1))) +
                             ": expression deeper than 48 levels (each operator, cast and call "
                             "adds one); split it with 'let'";
    EXPECT_EQ(bad.error.substr(0, bad.error.find('\n')), want) << c.name;
    worst = std::max(worst, bad.stack);
  }
  std::printf("[ depth    ] worst: %zu of %zu bytes\n", worst, kStack);
  // room to spare, so a fatter frame shows up here before it crashes anyone
  EXPECT_LT(worst, kStack * 15 / 16);
}

TEST(LangDepth, TheIssuesReproducersAreRejectedQuickly) {
  // 21,820 terms overflowed an 8 MiB stack, 5,445 a 2 MiB one
  for (int terms : {5445, 21820}) {
    const std::string src = std::string(kF32) + "out = " + chain("x", "+", terms) + "; }";
    Result r = compile_small(src);
    EXPECT_EQ(r.status, KAIO_ERROR_KERNEL_SOURCE);
    EXPECT_NE(r.error.find("1:" + std::to_string(col_of(src, "+", kLimit)) +
                           ": expression deeper than 48 levels"),
              std::string::npos)
        << r.error.substr(0, 200);
    EXPECT_LT(r.seconds, 2.0);
  }
  const std::string casts = std::string(kF32) + "out = x" + repeat(" as f32", 100000) + "; }";
  Result r = compile_small(casts);
  EXPECT_EQ(r.status, KAIO_ERROR_KERNEL_SOURCE);
  EXPECT_NE(r.error.find("expression deeper than 48 levels"), std::string::npos);
  EXPECT_LT(r.seconds, 2.0);
  const std::string minus = std::string(kF32) + "out = " + repeat("-", 100000) + "x; }";
  r = compile_small(minus);
  EXPECT_EQ(r.status, KAIO_ERROR_KERNEL_SOURCE);
  EXPECT_NE(r.error.find("1:" + std::to_string(col_of(minus, "-", kLimit)) + ": expression deeper"),
            std::string::npos);
}

// Parentheses do not add depth, so a long sum split into parenthesised
// groups is still one tree: the limit counts the tree, not the text.
TEST(LangDepth, ParenthesesAndLetsSplitNothingButLetsDo) {
  std::string grouped = std::string(kF32) + "out = ";
  for (int g = 0; g < 4; ++g) grouped += "(" + chain("x", "+", 40) + ") + ";
  grouped += "x; }";
  EXPECT_EQ(compile_small(grouped).status, KAIO_OK);  // depth 40 + 4
  std::string nested = std::string(kF32) + "out = (((x" + repeat(repeat(" + x", 20) + ")", 3) + "; }";
  Result r = compile_small(nested);
  EXPECT_EQ(r.status, KAIO_ERROR_KERNEL_SOURCE);  // depth 61
  EXPECT_NE(r.error.find("deeper than 48 levels"), std::string::npos);
  // a chain of 2,000 lets, each one level over the last, and a reduction
  // that meets all of them unlowered: compiles on the small stack
  std::string lets = "kernel k(x: tensor<f32>, out: tensor<f32>) { let a0 = x;";
  for (int j = 1; j < 2000; ++j)
    lets += " let a" + std::to_string(j) + " = a" + std::to_string(j - 1) + " * 0.5 + x;";
  lets += " let s = sum(a1999); out = a1999 / s; }";
  r = compile_small(lets);
  EXPECT_EQ(r.status, KAIO_OK) << r.error;
  std::printf("[ depth    ] 2000 chained lets and a sum: %zu bytes of stack\n", r.stack);
  EXPECT_LT(r.stack, kStack * 15 / 16);
}

// Random expression trees mixing every way of getting deeper, around the
// limit: each compiles exactly when its depth is at most 48, else gives the
// depth error, and never needs more than the small stack.
TEST(LangFuzz, RandomChainsAroundTheDepthLimit) {
  std::mt19937 rng(20240524);
  int accepted = 0, rejected = 0;
  size_t worst = 0;
  for (int round = 0; round < 60; ++round) {
    const int target = kLimit - 30 + static_cast<int>(rng() % 60);  // 18..77
    // grow an f32 expression one level at a time; `binary`: its top is a
    // binary operator (a cast or prefix operator over it needs parentheses);
    // `nest`: parentheses, calls and ifs around it (the parser's nesting
    // limit is 200 of its own levels, a few per parenthesis)
    std::string e = "x";
    int depth = 1, nest = 0;
    bool binary = false;
    while (depth < target) {
      int pick = static_cast<int>(rng() % 8);
      if (nest >= 20 && (pick == 1 || pick >= 4 || binary)) pick = 0;
      if (pick == 1 || pick >= 4 || ((pick == 2 || pick == 3) && binary)) ++nest;
      switch (pick) {
        case 0: e = e + " + x"; binary = true; break;
        case 1: e = "x * (" + e + ")"; binary = true; break;
        case 2: e = (binary ? "(" + e + ")" : e) + " as f32"; binary = false; break;
        case 3: e = "- " + (binary ? "(" + e + ")" : e); binary = false; break;
        case 4: e = "exp(" + e + ")"; binary = false; break;
        case 5: e = "min(x, " + e + ")"; binary = false; break;
        case 6: e = "if x > 0.0 { " + e + " } else { x }"; binary = false; break;
        default: e = "(" + e + ") as i32 as f32"; ++depth; binary = false; break;
      }
      ++depth;
    }
    const std::string src = std::string(kF32) + "out = " + e + "; }";
    Result r = compile_small(src);
    worst = std::max(worst, r.stack);
    if (depth <= kLimit) {
      EXPECT_EQ(r.status, KAIO_OK) << "depth " << depth << ": " << r.error.substr(0, 300);
      ++accepted;
    } else {
      EXPECT_EQ(r.status, KAIO_ERROR_KERNEL_SOURCE) << "depth " << depth;
      // deep parentheses may hit the nesting limit first
      const bool depth_error = r.error.find("deeper than 48 levels") != std::string::npos;
      const bool nesting_error = r.error.find("nested deeper than 200 levels") != std::string::npos;
      EXPECT_TRUE(depth_error || nesting_error) << r.error.substr(0, 300);
      ++rejected;
    }
  }
  std::printf("[ depth    ] random chains: %d at or under the limit compiled, %d over it "
              "rejected; worst stack %zu bytes\n", accepted, rejected, worst);
  EXPECT_GT(accepted, 5);
  EXPECT_GT(rejected, 5);
  EXPECT_LT(worst, kStack * 15 / 16);
}

}  // namespace
