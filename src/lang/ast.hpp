// The syntax tree of one kernel. The parser fills the syntactic fields; the
// checker fills the ones marked "checked" (types, name resolution, access
// sites), which the PTX lowering and the reference interpreter read.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "lang/diagnostic.hpp"
#include "lang/lexer.hpp"

namespace kaio::lang {

// Element types of tensor parameters: the kaio_dtype set, with the same
// values (KAIO_DTYPE_F32 = 1, ...), so a cast converts between them.
enum class DType { f32 = 1, f16, bf16, i8, u8, i32, u32 };

// Types of values. int_lit is an integer literal that has not met a typed
// operand yet; it settles as i32 when nothing else decides.
enum class Type { f32, i32, u32, boolean, int_lit };

const char *dtype_name(DType d);
const char *type_name(Type t);
int dtype_bytes(DType d);
// The type a tensor element is widened to when read (f16/bf16 -> f32,
// i8 -> i32, u8 -> u32) and must have when written.
Type value_type(DType d);

enum class ExprKind { int_lit, float_lit, bool_lit, name, index, unary, binary, call, cast, if_else };

// What a name refers to (checked).
enum class RefKind { none, let, param, row, col, elem, rows, cols };

// Built-in functions (checked).
enum class Builtin {
  none, exp, log, sqrt, rsqrt, tanh, erf, sigmoid, abs, min, max, fma, select,
  bits, f32_from_bits, f16_bits, bf16_bits, f16_from_bits, bf16_from_bits, pack_f16x2,
  pack_bf16x2, sum_reduce, max_reduce,
};

struct Expr {
  ExprKind kind = ExprKind::int_lit;
  Pos pos;
  std::string name;  // name, callee, or tensor of an index
  Tok op = Tok::end;  // unary/binary operator
  uint64_t int_value = 0;
  double float_value = 0.0;
  Type cast_to = Type::f32;
  std::vector<std::unique_ptr<Expr>> args;  // operands, call arguments, indices, if: cond/then/else
  int depth = 1;  // 1 + the deepest arg's depth (parser); at most kMaxExprDepth
  // checked
  Type type = Type::int_lit;
  bool varying = false;  // depends on the element position (or reads memory)
  RefKind ref = RefKind::none;
  int index = -1;        // let or param index
  Builtin builtin = Builtin::none;
  int site = -1;         // tensor access site (reads of a tensor)
};

struct Param {
  std::string name;
  Pos pos;
  bool tensor = false;
  DType dtype = DType::f32;  // tensor element type
  Type scalar = Type::f32;   // scalar parameter type
  // checked
  bool output = false;
  bool read_plain = false;   // read at the element's own (row, col)
  bool read_indexed = false; // read at computed indices (gather)
};

enum class StmtKind { let, store };

struct Stmt {
  StmtKind kind = StmtKind::let;
  Pos pos;       // of the name
  std::string name;
  std::unique_ptr<Expr> value;
  // checked
  int index = -1;  // let index, or the output's param index
  Builtin reduction = Builtin::none;  // sum_reduce / max_reduce for `let s = sum(e);`
};

// One tensor read in the source, so a device-side bounds error can name it.
struct AccessSite {
  Pos pos;
  int param = -1;
  bool indexed = false;
};

struct LetInfo {
  std::string name;
  Pos pos;
  Type type = Type::f32;
  bool varying = false;
  Builtin reduction = Builtin::none;
  const Expr *value = nullptr;
};

struct Kernel {
  std::string name;
  Pos pos;
  std::vector<Param> params;
  std::vector<Stmt> body;
  // checked
  bool row_kernel = false;        // has at least one reduction
  std::vector<int> outputs;       // param indices, in store order
  std::vector<LetInfo> lets;
  std::vector<AccessSite> sites;
  int tensor_count = 0;
  int scalar_count = 0;
};

}  // namespace kaio::lang
