// Bad kernel-language programs: each is rejected with
// KAIO_ERROR_KERNEL_SOURCE and a message giving its exact line:column and
// reason, followed by the source line and a caret. Host only: compiling
// needs no driver.
#include <string>
#include <vector>

#include "support/kaio_test.hpp"

namespace {

struct BadProgram {
  const char *source;
  int line;
  int col;
  const char *message;
};

const BadProgram kBadPrograms[] = {
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = x $ 2.0; }",
     1, 54, "unexpected character '$'"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = x + 1.0 }",
     1, 60, "expected ';' to end the statement, found '}'"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = (x + 1.0; }",
     1, 60, "expected ')' to close the parenthesis, found ';'"},
    {"kernel (x: tensor<f32>, out: tensor<f32>) { out = x; }",
     1, 8, "expected a name as the kernel's name, found '('"},
    {"kernel k(x: tensor<f64>, out: tensor<f32>) { out = x; }",
     1, 20, "unknown element type 'f64'; use f32, f16, bf16, i8, u8, i32 or u32"},
    {"kernel k(x: f16, out: tensor<f32>) { out = x; }",
     1, 13, "'f16' is not a scalar parameter type; use f32, i32, u32 or tensor<...>"},
    {"kernel k(x tensor<f32>, out: tensor<f32>) { out = x; }",
     1, 12, "expected ':' between the parameter's name and its type, found 'tensor'"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = x; } extra",
     1, 57, "unexpected 'extra' after the kernel's closing '}'"},
    {"fn k(x: tensor<f32>, out: tensor<f32>) { out = x; }",
     1, 1, "expected 'kernel' to start the kernel, as in 'kernel name(x: tensor<f32>, ...) { ... }', found 'fn'"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = 1.5e; }",
     1, 56, "exponent has no digits"},
    {"kernel k(x: tensor<f32>, out: tensor<u32>) { out = 99999999999; }",
     1, 52, "integer literal 99999999999 does not fit in 32 bits"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = y; }",
     1, 52, "unknown name 'y'"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = foo(x); }",
     1, 52, "unknown function 'foo'"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = exp(x, x); }",
     1, 52, "'exp' takes 1 argument, got 2"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = fma(x, x); }",
     1, 52, "'fma' takes 3 arguments, got 2"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = min(x); }",
     1, 52, "'min' takes 2 arguments, got 1"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = x + sum(x); }",
     1, 56, "'sum(x)' is a row reduction; write it as 'let name = sum(...);'"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = max(x); }",
     1, 52, "'max(x)' is a row reduction; write it as 'let name = max(...);'"},
    {"kernel k(x: tensor<f32>, n: i32, out: tensor<f32>) { out = x + n; }",
     1, 62, "operands of '+' have different types: f32 and i32; convert one with 'as'"},
    {"kernel k(x: tensor<f32>, out: tensor<i32>) { out = x; }",
     1, 52, "cannot store f32 into 'out' (tensor<i32>, takes i32); convert with 'as i32'"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = x & 1.0; }",
     1, 54, "'&' needs integer operands, not f32; use bits(x) to get an f32's bits"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = x % 2.0; }",
     1, 54, "'%' needs integer operands, not f32"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = x << 1; }",
     1, 54, "'<<' needs integer operands, not f32 and integer"},
    {"kernel k(x: tensor<u32>, out: tensor<u32>) { out = -x; }",
     1, 52, "'-' needs f32 or i32, not u32"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = ~x; }",
     1, 52, "'~' needs an integer, not f32"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = !x; }",
     1, 52, "'!' needs bool, not f32; for bitwise not use '~'"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = if x { 1.0 } else { 0.0 }; }",
     1, 55, "the if's condition is f32; it must be bool (compare with '!= 0')"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = if x > 0.0 { 1.0 } else { 1 as i32 }; }",
     1, 80, "the if's branches have different types: f32 and i32"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = if x > 0.0 { 1.0 }; }",
     1, 70, "expected 'else' after the if's value (an if-expression needs an else), found ';'"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = select(x, 1.0, 0.0); }",
     1, 59, "argument 1 of 'select' must be bool, not f32"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = x[1.5]; }",
     1, 54, "an index must be an integer, not f32; convert with 'as i32'"},
    {"kernel k(x: f32, out: tensor<f32>) { out = x[0]; }",
     1, 44, "'x' is not a tensor; only tensor parameters can be indexed"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = x[0, 1, 2]; }",
     1, 58, "expected ']' to close the index, found ','"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = out + x; }",
     1, 52, "'out' is an output; outputs cannot be read (pass the tensor again as an input parameter)"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = x; out = x; }",
     1, 55, "output 'out' is assigned twice"},
    {"kernel k(x: tensor<f32>, n: f32, out: tensor<f32>) { n = x; out = x; }",
     1, 54, "'n' is not a tensor parameter; only tensor parameters can be assigned"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { let a = x; }",
     1, 8, "kernel 'k' assigns no output; assign a tensor parameter, as in 'out = x * 2.0;'"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { let x = 1.0; out = x; }",
     1, 50, "'x' is already defined at 1:10"},
    {"kernel k(x: tensor<f32>, x: tensor<f32>, out: tensor<f32>) { out = x; }",
     1, 26, "parameter 'x' is declared twice"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { let row = 1; out = x; }",
     1, 50, "'row' is a built-in name; choose another"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = x < 1.0 < 2.0; }",
     1, 60, "comparisons cannot be chained; use parentheses or '&&'"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = x as f16; }",
     1, 57, "cannot cast to 'f16'; cast to f32, i32 or u32"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = f32(col); }",
     1, 52, "to convert, write 'x as f32'"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = x + 1e39; }",
     1, 56, "number does not fit in f32 (largest is about 3.4e38)"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = (x > 0.0) + 1.0; }",
     1, 62, "'+' needs numbers, not bool"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = (x > 0.0) < (x < 1.0); }",
     1, 62, "'<' cannot order bool values"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = x && true; }",
     1, 54, "'&&' needs bool operands, not f32 and bool"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { let s = sum(x > 0.0); out = x; }",
     1, 60, "'sum' reduces numbers; the value is bool"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = f16_bits(col); }",
     1, 61, "argument 1 of 'f16_bits' must be f32, not i32"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) { out = x + 1.0; // unterminated",
     1, 76, "expected '}' to close the kernel's body, found end of input"},
    // positions on later lines
    {"kernel k(x: tensor<f32>, out: tensor<f32>) {\n    let a = x * 2.0;\n    out = a + b;\n}\n",
     3, 15, "unknown name 'b'"},
    {"kernel k(x: tensor<f32>, out: tensor<f32>) {\n    let a = x * 2.0;\n    let a = x;\n    out = a;\n}\n",
     3, 9, "'a' is already defined at 2:9"},
    {"// comment line\nkernel k(q: tensor<i8>, out: tensor<f32>) {\n\tout = q;\n}\n",
     3, 8, "cannot store i32 into 'out' (tensor<f32>, takes f32); convert with 'as f32'"},
};

std::string first_line(const std::string &s) { return s.substr(0, s.find('\n')); }

TEST(LangBadPrograms, EachHasItsExactPositionAndMessage) {
  ASSERT_GE(sizeof kBadPrograms / sizeof kBadPrograms[0], 40u);
  for (const BadProgram &b : kBadPrograms) {
    size_t length = 123;
    kaio_status s = kaio_lang_compile_ptx(b.source, nullptr, 0, &length);
    EXPECT_EQ(s, KAIO_ERROR_KERNEL_SOURCE) << b.source;
    EXPECT_EQ(length, 0u);
    const std::string want = "kaio_lang_compile_ptx: " + std::to_string(b.line) + ":" +
                             std::to_string(b.col) + ": " + b.message;
    const std::string got = kaio_last_error();
    EXPECT_EQ(first_line(got), want) << "source: " << b.source;
    // the excerpt: the offending line, then a caret under the column
    std::string src = b.source;
    size_t start = 0;
    for (int l = 1; l < b.line; ++l) start = src.find('\n', start) + 1;
    std::string line = src.substr(start, src.find('\n', start) - start);
    for (char &c : line)
      if (c == '\t') c = ' ';
    std::string caret = "    " + std::string(static_cast<size_t>(b.col - 1), ' ') + "^";
    EXPECT_NE(got.find("\n    " + line + "\n" + caret), std::string::npos) << got;
  }
}

TEST(LangBadPrograms, NullSourceAndOversizedSource) {
  size_t length = 0;
  EXPECT_EQ(kaio_lang_compile_ptx(nullptr, nullptr, 0, &length), KAIO_ERROR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(kaio_last_error()).find("argument 'source' is NULL"), std::string::npos);
  std::string big(2u << 20, ' ');
  EXPECT_EQ(kaio_lang_compile_ptx(big.c_str(), nullptr, 0, &length), KAIO_ERROR_KERNEL_SOURCE);
  EXPECT_EQ(first_line(kaio_last_error()),
            "kaio_lang_compile_ptx: 1:1: the source is 2097152 bytes; the limit is 1048576");
  std::string deep = "kernel k(x: tensor<f32>, out: tensor<f32>) { out = " + std::string(300, '(') +
                     "x" + std::string(300, ')') + "; }";
  EXPECT_EQ(kaio_lang_compile_ptx(deep.c_str(), nullptr, 0, &length), KAIO_ERROR_KERNEL_SOURCE);
  EXPECT_NE(std::string(kaio_last_error()).find("nested deeper than 200 levels"), std::string::npos);
}

TEST(LangBadPrograms, StatusName) {
  EXPECT_STREQ(kaio_status_name(KAIO_ERROR_KERNEL_SOURCE), "KAIO_ERROR_KERNEL_SOURCE");
  EXPECT_EQ(KAIO_STATUS_CATEGORY(KAIO_ERROR_KERNEL_SOURCE), -400);
}

}  // namespace
