#include "lang/diagnostic.hpp"

namespace kaio::lang {

void error_at(Pos pos, std::string message) { throw CompileError{{pos, std::move(message)}}; }

std::string format_diagnostic(std::string_view source, const Diagnostic &d) {
  std::string out = std::to_string(d.pos.line) + ":" + std::to_string(d.pos.col) + ": " +
                    d.message;
  // find the line
  size_t start = 0;
  for (int line = 1; line < d.pos.line && start < source.size(); ++line) {
    size_t nl = source.find('\n', start);
    if (nl == std::string_view::npos) return out;
    start = nl + 1;
  }
  size_t end = source.find('\n', start);
  if (end == std::string_view::npos) end = source.size();
  std::string_view text = source.substr(start, end - start);
  if (text.size() > 200) text = text.substr(0, 200);
  out += "\n    ";
  for (char c : text) out += (c == '\t' || static_cast<unsigned char>(c) < 32) ? ' ' : c;
  out += "\n    ";
  for (int i = 1; i < d.pos.col && i <= static_cast<int>(text.size()); ++i) out += ' ';
  out += '^';
  return out;
}

}  // namespace kaio::lang
