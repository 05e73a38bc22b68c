// Recursive-descent parser: tokens to a Kernel syntax tree. Throws
// CompileError at the first syntax error. Nesting is limited (kMaxDepth) and
// so is the depth of every expression tree (kMaxExprDepth), so hostile input
// cannot overflow the stack here or in the checker and lowering, which
// recurse over the tree.
#pragma once

#include <string_view>

#include "lang/ast.hpp"

namespace kaio::lang {

// Parser recursion: parentheses, prefix operators, ifs, call arguments.
constexpr int kMaxDepth = 200;

// Depth of an expression tree, counted over every operator, cast, call,
// index and if (a chain x+x+...+x of n terms is n deep). The checker and the
// lowering recurse over the tree at up to ~0.9 KiB a level (-O2), ~2.2 KiB
// (-O0) and ~4.4 KiB (-O0 with ASan); 48 keeps a compile at the limit under
// 60 / 115 / 225 KiB of stack, safe on a 256 KiB thread in every build
// (tests/host_lang_depth_test.cpp measures it), and is deeper than real
// kernels get. Raising it needs smaller frames on the recursive paths.
constexpr int kMaxExprDepth = 48;

Kernel parse(std::string_view source);

}  // namespace kaio::lang
