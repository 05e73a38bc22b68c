// Type checker and name resolver: fills the checked fields of a parsed
// Kernel or throws CompileError at the first problem. After check() every
// expression has a concrete type (no int_lit is left), every name is
// resolved, and the kernel's shape (map or row kernel) is known.
#pragma once

#include "lang/ast.hpp"

namespace kaio::lang {

constexpr int kMaxParams = 64;
constexpr int kMaxSites = 4096;

void check(Kernel &kernel);

}  // namespace kaio::lang
