// A compile error in kernel-language source: where it is and what is wrong.
// The first error stops compilation, so a diagnostic is one position and one
// message; format() adds the source line and a caret under the column.
#pragma once

#include <string>
#include <string_view>

namespace kaio::lang {

// 1-based line and column (columns count bytes).
struct Pos {
  int line = 1;
  int col = 1;
};

struct Diagnostic {
  Pos pos;
  std::string message;  // without position, e.g. "unknown name 'y'"
};

// Thrown inside the front end and caught by compile(); never escapes it.
struct CompileError {
  Diagnostic diagnostic;
};

[[noreturn]] void error_at(Pos pos, std::string message);

// "3:14: unknown name 'y'\n    let a = y + 1;\n            ^"
std::string format_diagnostic(std::string_view source, const Diagnostic &d);

}  // namespace kaio::lang
