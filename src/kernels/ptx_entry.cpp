#include "kernels/ptx_entry.hpp"

#include <cstring>

namespace kaio {
namespace {

// The end of the brace-delimited body that starts at or after `from`: the
// position just past its closing brace, or npos. Braces in // and /* */
// comments are skipped (PTX has no string literals).
size_t body_end(const std::string &s, size_t from) {
  int depth = 0;
  bool opened = false;
  for (size_t i = from; i < s.size(); ++i) {
    if (s.compare(i, 2, "//") == 0) {
      i = s.find('\n', i);
      if (i == std::string::npos) return i;
      continue;
    }
    if (s.compare(i, 2, "/*") == 0) {
      i = s.find("*/", i + 2);
      if (i == std::string::npos) return i;
      ++i;
      continue;
    }
    if (s[i] == '{') {
      ++depth;
      opened = true;
    } else if (s[i] == '}' && opened && --depth == 0) {
      return i + 1;
    }
  }
  return std::string::npos;
}

// The name after `.entry` at position `at` (which points at ".entry").
std::string entry_name(const std::string &s, size_t at) {
  size_t b = at + std::strlen(".entry");
  while (b < s.size() && (s[b] == ' ' || s[b] == '\t')) ++b;
  size_t e = b;
  while (e < s.size() && s[e] != '(' && s[e] != ' ' && s[e] != '\t' && s[e] != '\n') ++e;
  return s.substr(b, e - b);
}

}  // namespace

std::string ptx_single_entry(const char *ptx, const char *entry) {
  const std::string s(ptx);
  std::string out;
  out.reserve(s.size() / 4);
  bool found = false;
  size_t pos = 0;
  for (;;) {
    // Entries are top-level directives: `.entry` or `.visible .entry` at the
    // start of a line.
    size_t at = s.find(".entry", pos);
    while (at != std::string::npos) {
      size_t line = s.rfind('\n', at);
      line = line == std::string::npos ? 0 : line + 1;
      const std::string lead = s.substr(line, at - line);
      if (lead.empty() || lead == ".visible " || lead == ".weak ") break;
      at = s.find(".entry", at + 1);
    }
    if (at == std::string::npos) {
      out.append(s, pos, std::string::npos);
      break;
    }
    size_t line = s.rfind('\n', at);
    line = line == std::string::npos ? 0 : line + 1;
    const size_t end = body_end(s, at);
    if (end == std::string::npos) return "";  // unbalanced: let the JIT of the whole file report it
    out.append(s, pos, line - pos);
    if (entry_name(s, at) == entry) {
      out.append(s, line, end - line);
      found = true;
    }
    pos = end;
  }
  return found ? out : std::string();
}

}  // namespace kaio
