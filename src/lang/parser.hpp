// Recursive-descent parser: tokens to a Kernel syntax tree. Throws
// CompileError at the first syntax error. Nesting is limited (kMaxDepth) so
// hostile input cannot overflow the stack.
#pragma once

#include <string_view>

#include "lang/ast.hpp"

namespace kaio::lang {

constexpr int kMaxDepth = 200;

Kernel parse(std::string_view source);

}  // namespace kaio::lang
