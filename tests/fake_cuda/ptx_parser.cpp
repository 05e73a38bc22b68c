#include "ptx_parser.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace kaio::fake::ptx {
namespace {

using Tokens = std::vector<std::string_view>;

constexpr std::string_view kJitErrorToken = "KAIO_FAKE_JIT_ERROR";
// The driver's limit on kernel parameter space since CUDA 12.1.
constexpr size_t kMaxParamBytes = 32764;
constexpr size_t kMaxArrayElements = size_t{1} << 20;

bool is_word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '$' ||
         c == '%';
}

bool is_identifier(std::string_view s) {
  if (s.empty()) return false;
  char c = s.front();
  return std::isalpha(static_cast<unsigned char>(c)) || c == '_' || c == '$' || c == '%';
}

bool to_size(std::string_view s, size_t &out) {
  const char *end = s.data() + s.size();
  auto [ptr, ec] = std::from_chars(s.data(), end, out);
  return ec == std::errc() && ptr == end;
}

bool fail(std::string &why, std::string message) {
  why = std::move(message);
  return false;
}

size_t align_up(size_t value, size_t align) { return (value + align - 1) / align * align; }

// Blanks comments so that commented-out directives ("// .entry old(") are
// not parsed, keeping newlines so positions still map to lines.
std::string strip_comments(std::string_view text) {
  std::string out(text);
  for (size_t i = 0; i < out.size(); ++i) {
    if (out[i] == '"') {
      size_t close = out.find('"', i + 1);
      i = close == std::string::npos ? out.size() : close;
    } else if (out.compare(i, 2, "//") == 0) {
      for (; i < out.size() && out[i] != '\n'; ++i) out[i] = ' ';
    } else if (out.compare(i, 2, "/*") == 0) {
      size_t close = out.find("*/", i + 2);
      size_t end = close == std::string::npos ? out.size() : close + 2;
      for (; i < end; ++i)
        if (out[i] != '\n') out[i] = ' ';
      --i;
    }
  }
  return out;
}

Tokens tokenize(std::string_view s) {
  Tokens tokens;
  size_t i = 0;
  while (i < s.size()) {
    if (std::isspace(static_cast<unsigned char>(s[i]))) {
      ++i;
      continue;
    }
    size_t start = i;
    if (is_word_char(s[i])) {
      while (i < s.size() && is_word_char(s[i])) ++i;
    } else if (s[i] == '"') {
      size_t close = s.find('"', i + 1);
      i = close == std::string_view::npos ? s.size() : close + 1;
    } else {
      ++i;
    }
    tokens.push_back(s.substr(start, i - start));
  }
  return tokens;
}

class Cursor {
 public:
  explicit Cursor(const Tokens &tokens) : tokens_(tokens) {}
  bool done() const { return pos_ >= tokens_.size(); }
  std::string_view peek() const { return done() ? std::string_view() : tokens_[pos_]; }
  std::string_view next() { return done() ? std::string_view() : tokens_[pos_++]; }
  bool accept(std::string_view token) {
    if (peek() != token) return false;
    ++pos_;
    return true;
  }

 private:
  const Tokens &tokens_;
  size_t pos_ = 0;
};

size_t type_size(std::string_view type) {
  static constexpr struct {
    std::string_view name;
    size_t size;
  } kTypes[] = {
      {".b8", 1},  {".s8", 1},  {".u8", 1},    {".b16", 2},    {".s16", 2},
      {".u16", 2}, {".f16", 2}, {".bf16", 2},  {".b32", 4},    {".s32", 4},
      {".u32", 4}, {".f32", 4}, {".f16x2", 4}, {".bf16x2", 4}, {".b64", 8},
      {".s64", 8}, {".u64", 8}, {".f64", 8},   {".b128", 16},
  };
  for (const auto &t : kTypes)
    if (t.name == type) return t.size;
  return 0;
}

// One parameter: `.param [.align A] TYPE [.ptr .space [.align P]] NAME[N]...`.
// An .align before the type aligns the parameter; one after .ptr only
// describes the pointee, so it does not affect the layout.
bool parse_param(const Tokens &t, Param &p, std::string &why) {
  size_t k = 0, align = 0;
  auto at = [&](size_t i) { return i < t.size() ? t[i] : std::string_view(); };
  if (at(k++) != ".param") return fail(why, "a kernel parameter must be a .param");
  if (at(k) == ".align") {
    if (!to_size(at(k + 1), align) || align == 0 || (align & (align - 1)) != 0)
      return fail(why, "bad .align on a .param");
    k += 2;
  }
  size_t element = type_size(at(k));
  if (element == 0) return fail(why, "unsupported .param type '" + std::string(at(k)) + "'");
  for (++k; at(k).starts_with('.'); ++k)  // also the joined form .ptr.global.align 16
    if (at(k).ends_with(".align")) ++k;
  if (!is_identifier(at(k++))) return fail(why, "missing .param name");
  size_t count = 1;
  while (at(k) == "[") {
    size_t n = 0;
    if (!to_size(at(k + 1), n) || n == 0 || at(k + 2) != "]" || count > kMaxArrayElements / n)
      return fail(why, "bad .param array size");
    count *= n;
    k += 3;
  }
  if (k != t.size()) return fail(why, "unexpected '" + std::string(at(k)) + "' in a .param");
  p.size = element * count;
  p.align = align ? align : element;
  return true;
}

bool parse_params(Cursor &c, Entry &entry, std::string &why) {
  if (c.accept(")")) return true;
  for (;;) {
    Tokens group;
    while (!c.done() && c.peek() != "," && c.peek() != ")") group.push_back(c.next());
    Param p;
    if (!parse_param(group, p, why)) return false;
    entry.params.push_back(p);
    if (c.accept(")")) break;
    if (!c.accept(",")) return fail(why, "unterminated parameter list");
  }
  size_t end = 0;
  for (Param &p : entry.params) {
    p.offset = align_up(end, p.align);
    end = p.offset + p.size;
  }
  entry.param_bytes = end;
  if (end > kMaxParamBytes) return fail(why, "too much parameter space");
  return true;
}

// A variable after `.shared`: `[.align A] [.v2|.v4] TYPE NAME[N]... ;`.
// Its size is 0 for an unsized array (only .extern ones are legal).
struct SharedVar {
  std::string_view name;
  size_t size = 0, align = 1;
};

bool parse_shared_var(Cursor &c, SharedVar &v, std::string &why) {
  size_t align = 0, lanes = 1;
  if (c.accept(".align") && (!to_size(c.next(), align) || align == 0 || (align & (align - 1))))
    return fail(why, "bad .align on a .shared variable");
  if (c.accept(".v2")) lanes = 2;
  else if (c.accept(".v4")) lanes = 4;
  const size_t element = type_size(c.next()) * lanes;
  if (element == 0) return fail(why, "unsupported .shared type");
  v.name = c.next();
  if (!is_identifier(v.name)) return fail(why, "missing .shared variable name");
  size_t count = 1;
  while (c.accept("[")) {
    size_t n = 0;
    if (c.accept("]")) {
      count = 0;
      continue;
    }
    if (!to_size(c.next(), n) || !c.accept("]") || (n && count > kMaxArrayElements * 256 / n))
      return fail(why, "bad .shared array size");
    count *= n;
  }
  v.size = element * count;
  v.align = align ? align : element;
  return true;
}

// `.maxntid x[, y[, z]]`; missing dimensions are 1.
bool parse_dims(Cursor &c, unsigned dims[3]) {
  for (int i = 0; i < 3; ++i) {
    size_t v = 1;
    if (i == 0 || c.accept(",")) {
      if (!to_size(c.next(), v) || v == 0 || v > 1024) return false;
    }
    dims[i] = static_cast<unsigned>(v);
  }
  return true;
}

bool parse_performance_directives(Cursor &c, Entry &entry, bool &has_body, std::string &why) {
  for (;;) {
    if (c.done()) return fail(why, "entry '" + entry.name + "' has no body");
    std::string_view tok = c.next();
    if (tok == "{" || tok == ";") {
      has_body = tok == "{";
      return true;
    }
    unsigned dims[3];
    if (tok == ".maxntid") {
      if (!parse_dims(c, dims)) return fail(why, "malformed .maxntid");
      entry.maxntid = dims[0] * dims[1] * dims[2];
    } else if (tok == ".reqntid") {
      if (!parse_dims(c, entry.reqntid)) return fail(why, "malformed .reqntid");
    } else if (tok == ".reqnctapercluster") {
      if (!parse_dims(c, entry.cluster)) return fail(why, "malformed .reqnctapercluster");
    }
  }
}

bool parse_entry(Cursor &c, Module &module, std::string &why) {
  Entry entry;
  std::string_view name = c.next();
  if (!is_identifier(name)) return fail(why, "missing .entry name");
  entry.name = name;
  if (c.accept("(") && !parse_params(c, entry, why)) return false;
  bool has_body = false;
  if (!parse_performance_directives(c, entry, has_body, why)) return false;
  if (!has_body) return true;  // a prototype defines nothing
  if (module.find(entry.name))
    return fail(why, "duplicate definition of function '" + entry.name + "'");
  module.entries.push_back(std::move(entry));
  return true;
}

bool parse_version(std::string_view s, int &version) {
  size_t dot = s.find('.');
  size_t major = 0, minor = 0;
  if (dot == std::string_view::npos || !to_size(s.substr(0, dot), major) ||
      !to_size(s.substr(dot + 1), minor) || major == 0 || major > 99 || minor > 9)
    return false;
  version = static_cast<int>(major * 10 + minor);
  return true;
}

// `.target sm_90a[, texmode_..., debug]`: only the SM matters here.
bool parse_target(Cursor &c, Module &module) {
  do {
    std::string_view tok = c.next();
    if (!tok.starts_with("sm_")) continue;
    std::string_view digits = tok.substr(3);
    size_t n = 0;
    while (n < digits.size() && std::isdigit(static_cast<unsigned char>(digits[n]))) ++n;
    std::string_view suffix = digits.substr(n);
    size_t sm = 0;
    if (!to_size(digits.substr(0, n), sm) || sm > 1000 ||
        !(suffix.empty() || suffix == "a" || suffix == "f"))
      return false;
    module.target_sm = static_cast<int>(sm);
    module.arch_specific = suffix == "a";
  } while (c.accept(","));
  return module.target_sm != 0;
}

Result rejected(Failure failure, const std::string &why) {
  Result r;
  r.failure = failure;
  r.log = (failure == Failure::not_ptx ? "error   : " : "ptxas fatal   : ") +
          std::string("fake JIT rejected the module: ") + why;
  return r;
}

}  // namespace

const Entry *Module::find(std::string_view name) const {
  auto it =
      std::find_if(entries.begin(), entries.end(), [&](const Entry &e) { return e.name == name; });
  return it == entries.end() ? nullptr : &*it;
}

Result parse(std::string_view text) {
  if (text.find(kJitErrorToken) != std::string_view::npos) {
    // As ptxas does: one line per error, then the fatal summary, so a module
    // with many errors gives a long log.
    Result r;
    r.failure = Failure::invalid;
    size_t line = 1, start = 0;
    while (start <= text.size()) {
      size_t end = std::min(text.find('\n', start), text.size());
      if (text.substr(start, end - start).find(kJitErrorToken) != std::string_view::npos)
        r.log += "ptxas application ptx input, line " + std::to_string(line) +
                 "; error   : fake JIT rejected the module: line " + std::to_string(line) +
                 " contains " + std::string(kJitErrorToken) + "\n";
      start = end + 1;
      ++line;
    }
    r.log += "ptxas fatal   : Ptx assembly aborted due to errors";
    return r;
  }
  std::string clean = strip_comments(text);
  Tokens tokens = tokenize(clean);
  Result r;
  bool have_version = false, have_target = false;
  std::string error;  // the first, reported only once the image is known to be PTX
  // Static shared memory, as the driver reports it (CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES).
  std::vector<SharedVar> module_shared;
  std::vector<std::vector<std::string_view>> names_used;  // per entry
  int depth = 0;
  bool in_entry = false;  // depth counts a .func body's braces too
  std::string_view previous;
  for (Cursor c(tokens); !c.done();) {
    std::string_view tok = c.next();
    std::string why;
    Entry *current = in_entry ? &r.module.entries.back() : nullptr;
    if (tok == "{") {
      ++depth;
    } else if (tok == "}") {
      depth = std::max(depth - 1, 0);
      in_entry = in_entry && depth > 0;
    } else if (tok == ".shared" && previous != ".extern") {
      SharedVar v;
      if (parse_shared_var(c, v, why)) {
        if (current)
          current->static_shared_bytes = align_up(current->static_shared_bytes, v.align) + v.size;
        else if (depth == 0)
          module_shared.push_back(v);
      }
    } else if (current && is_identifier(tok)) {
      names_used.back().push_back(tok);
    }
    previous = tok;
    if (tok == ".version") {
      have_version = true;
      if (!parse_version(c.next(), r.module.version)) why = "malformed .version directive";
    } else if (tok == ".target") {
      have_target = true;
      if (!parse_target(c, r.module)) why = "malformed .target directive";
    } else if (tok == ".entry") {
      const size_t before = r.module.entries.size();
      parse_entry(c, r.module, why);
      if (r.module.entries.size() > before) {  // a definition: its body is open
        depth = 1;
        in_entry = true;
        names_used.emplace_back();
      }
    }
    if (!why.empty() && error.empty()) error = why;
  }
  for (size_t i = 0; i < r.module.entries.size(); ++i)
    for (const SharedVar &v : module_shared)
      if (std::find(names_used[i].begin(), names_used[i].end(), v.name) != names_used[i].end())
        r.module.entries[i].static_shared_bytes =
            align_up(r.module.entries[i].static_shared_bytes, v.align) + v.size;
  if (!have_version)
    return rejected(Failure::not_ptx, "missing .version directive, the image is not PTX");
  if (!have_target) return rejected(Failure::invalid, "missing .target directive");
  if (!error.empty()) return rejected(Failure::invalid, error);
  return r;
}

}  // namespace kaio::fake::ptx
