// Expression lowering shared by the map- and row-kernel skeletons
// (lower_kernel.cpp). An ElemContext is one output element being computed;
// uniform expressions (no dependence on the element) are emitted once into
// the current phase's preamble instead of the loop body.
#pragma once

#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "lang/ast.hpp"
#include "lang/lower.hpp"
#include "lang/ptx_builder.hpp"

namespace kaio::lang {

struct Val {
  std::string reg;
  Type type = Type::f32;
};

struct TensorRegs {
  std::string ptr, rows, cols, stride;  // ptr/stride %rd, rows/cols %r
};

struct ElemContext {
  std::string row, col, i;  // %r, i32
  std::string guard;        // "" or a predicate: the element exists
  std::unordered_map<int, Val> lets;          // varying lets already lowered
  std::unordered_map<int, std::string> addr;  // param -> address of (row, col)
  std::unordered_map<int, Val> plain;         // param -> value read at (row, col)
};

class ExprLowerer {
 public:
  ExprLowerer(const Kernel &k, PtxBuilder &b) : k_(k), b_(b), uniform_lets_(k.lets.size()) {}

  // Kernel-level registers, set by the skeleton.
  std::vector<TensorRegs> tensors;        // by param index (empty for scalars)
  std::vector<std::string> scalars;       // by param index
  std::string err;                        // %rd, global address of the flag
  std::string uniform_row;                // row kernels: the block's/warp's row
  std::string out_rows, out_cols;         // %r
  std::string *preamble = nullptr;        // where uniform code goes

  // Lowers e for the element `elem` (nullptr: a uniform expression, into
  // the current stream). `guard` is the predicate under which e is
  // evaluated ("" = always): bounds-checked reads only read, and only
  // raise the error flag, where it holds, so an if's untaken side or the
  // right side of a short-circuit never reports.
  Val lower(const Expr &e, ElemContext *elem, const std::string &guard);
  Val let_value(int let, ElemContext *elem);
  void set_uniform_let(int let, Val v) { uniform_lets_[let] = v; }

  // Address of (row, col) of tensor param `p` (64-bit, global).
  std::string element_address(int p, const std::string &row, const std::string &col);
  // Plain load / store of one element of dtype d at `addr`, predicated on guard.
  Val load_element(DType d, const std::string &addr, const std::string &guard);
  void store_element(DType d, const std::string &addr, const Val &v, const std::string &guard);
  // A fresh register of type t holding the immediate `imm`.
  std::string materialize(const std::string &imm, Type t);
  // a && b as a predicate; an empty operand means "true".
  std::string and_pred(const std::string &a, const std::string &b);

 private:
  bool let_ready(int let, const ElemContext *elem) const;
  void lower_let(int let, ElemContext *elem);  // its lets are ready
  Val lower_varying(const Expr &e, ElemContext *elem, const std::string &guard);
  Val name(const Expr &e, ElemContext *elem, const std::string &guard);
  Val index(const Expr &e, ElemContext *elem, const std::string &guard);
  Val unary(const Expr &e, ElemContext *elem, const std::string &guard);
  Val binary(const Expr &e, ElemContext *elem, const std::string &guard);
  Val call(const Expr &e, ElemContext *elem, const std::string &guard);
  Val cast(const Expr &e, ElemContext *elem, const std::string &guard);
  Val choose(const Expr &c, const Expr &a, const Expr &b, ElemContext *elem,
             const std::string &guard);
  std::string not_pred(const std::string &a);
  std::string f(float v) { return materialize(PtxBuilder::f32_imm(v), Type::f32); }

  // f32 math helpers
  std::string exp_f(const std::string &x);
  std::string tanh_f(const std::string &x);
  std::string erf_f(const std::string &x);
  std::string sigmoid_f(const std::string &x);
  std::string horner(const float *c, int n, const std::string &t);

  const Kernel &k_;
  PtxBuilder &b_;
  std::vector<std::optional<Val>> uniform_lets_;
};

}  // namespace kaio::lang
