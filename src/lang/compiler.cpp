#include "lang/compiler.hpp"

#include "lang/checker.hpp"
#include "lang/lower.hpp"
#include "lang/parser.hpp"

namespace kaio::lang {

bool check_source(std::string_view source, Kernel *out, Diagnostic *error) {
  try {
    Kernel k = parse(source);
    check(k);
    *out = std::move(k);
    return true;
  } catch (const CompileError &e) {
    *error = e.diagnostic;
    return false;
  }
}

bool compile(std::string_view source, Compiled *out, Diagnostic *error) {
  if (!check_source(source, &out->kernel, error)) return false;
  out->ptx = lower_to_ptx(out->kernel);
  out->vector_width = vector_width(out->kernel);
  return true;
}

}  // namespace kaio::lang
