// The kernel-language compiler's front door: source text to a checked
// kernel and its PTX. Pure host code: no driver, no device, thread-safe
// (no shared state).
#pragma once

#include <string>
#include <string_view>

#include "lang/ast.hpp"
#include "lang/diagnostic.hpp"

namespace kaio::lang {

struct Compiled {
  Kernel kernel;        // the checked tree (launch metadata, interpreter)
  std::string ptx;      // both entries of the kernel, see lower.hpp
  int vector_width = 1; // elements per 16-byte access of the vector/_cached entries
};

// Returns true and fills *out, or false and fills *error with the first
// problem. Throws only std::bad_alloc.
bool compile(std::string_view source, Compiled *out, Diagnostic *error);

// Parse and check only (no PTX): what the fuzz harness exercises.
bool check_source(std::string_view source, Kernel *out, Diagnostic *error);

}  // namespace kaio::lang
