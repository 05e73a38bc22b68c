#include "lang/lexer.hpp"

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace kaio::lang {
namespace {

bool is_ident_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_ident(char c) { return is_ident_start(c) || is_digit(c); }

struct Keyword {
  const char *text;
  Tok kind;
};
constexpr Keyword kKeywords[] = {
    {"kernel", Tok::kw_kernel}, {"let", Tok::kw_let},   {"if", Tok::kw_if},
    {"else", Tok::kw_else},     {"as", Tok::kw_as},     {"true", Tok::kw_true},
    {"false", Tok::kw_false},   {"tensor", Tok::kw_tensor},
};

}  // namespace

const char *tok_name(Tok kind) {
  switch (kind) {
    case Tok::end: return "end of input";
    case Tok::ident: return "a name";
    case Tok::int_lit: return "an integer";
    case Tok::float_lit: return "a number";
    case Tok::kw_kernel: return "'kernel'";
    case Tok::kw_let: return "'let'";
    case Tok::kw_if: return "'if'";
    case Tok::kw_else: return "'else'";
    case Tok::kw_as: return "'as'";
    case Tok::kw_true: return "'true'";
    case Tok::kw_false: return "'false'";
    case Tok::kw_tensor: return "'tensor'";
    case Tok::lparen: return "'('";
    case Tok::rparen: return "')'";
    case Tok::lbrace: return "'{'";
    case Tok::rbrace: return "'}'";
    case Tok::lbracket: return "'['";
    case Tok::rbracket: return "']'";
    case Tok::comma: return "','";
    case Tok::colon: return "':'";
    case Tok::semicolon: return "';'";
    case Tok::dot: return "'.'";
    case Tok::plus: return "'+'";
    case Tok::minus: return "'-'";
    case Tok::star: return "'*'";
    case Tok::slash: return "'/'";
    case Tok::percent: return "'%'";
    case Tok::amp: return "'&'";
    case Tok::pipe: return "'|'";
    case Tok::caret: return "'^'";
    case Tok::tilde: return "'~'";
    case Tok::bang: return "'!'";
    case Tok::shl: return "'<<'";
    case Tok::shr: return "'>>'";
    case Tok::andand: return "'&&'";
    case Tok::oror: return "'||'";
    case Tok::eq: return "'=='";
    case Tok::ne: return "'!='";
    case Tok::lt: return "'<'";
    case Tok::le: return "'<='";
    case Tok::gt: return "'>'";
    case Tok::ge: return "'>='";
    case Tok::assign: return "'='";
  }
  return "?";
}

std::vector<Token> lex(std::string_view src) {
  if (src.size() > kMaxSourceBytes)
    error_at({1, 1}, "the source is " + std::to_string(src.size()) + " bytes; the limit is " +
                         std::to_string(kMaxSourceBytes));
  std::vector<Token> out;
  size_t i = 0;
  int line = 1;
  size_t line_start = 0;
  auto pos_of = [&](size_t at) { return Pos{line, static_cast<int>(at - line_start) + 1}; };
  while (true) {
    // whitespace and comments
    while (i < src.size()) {
      char c = src[i];
      if (c == '\n') {
        ++line;
        line_start = ++i;
      } else if (c == ' ' || c == '\t' || c == '\r') {
        ++i;
      } else if (c == '/' && i + 1 < src.size() && src[i + 1] == '/') {
        while (i < src.size() && src[i] != '\n') ++i;
      } else {
        break;
      }
    }
    Token t;
    t.pos = pos_of(i);
    if (i >= src.size()) {
      t.kind = Tok::end;
      out.push_back(t);
      return out;
    }
    const size_t start = i;
    char c = src[i];
    if (is_ident_start(c)) {
      while (i < src.size() && is_ident(src[i])) ++i;
      t.text = src.substr(start, i - start);
      t.kind = Tok::ident;
      for (const Keyword &k : kKeywords)
        if (t.text == k.text) t.kind = k.kind;
      if (t.text.size() > 64) error_at(t.pos, "name is longer than 64 characters");
      out.push_back(t);
      continue;
    }
    if (is_digit(c) || (c == '.' && i + 1 < src.size() && is_digit(src[i + 1]))) {
      bool is_float = false;
      if (c == '0' && i + 1 < src.size() && (src[i + 1] == 'x' || src[i + 1] == 'X')) {
        i += 2;
        size_t digits = i;
        while (i < src.size() && std::isxdigit(static_cast<unsigned char>(src[i]))) ++i;
        if (i == digits) error_at(t.pos, "hexadecimal literal has no digits");
      } else {
        while (i < src.size() && is_digit(src[i])) ++i;
        if (i < src.size() && src[i] == '.') {
          is_float = true;
          ++i;
          while (i < src.size() && is_digit(src[i])) ++i;
        }
        if (i < src.size() && (src[i] == 'e' || src[i] == 'E')) {
          is_float = true;
          ++i;
          if (i < src.size() && (src[i] == '+' || src[i] == '-')) ++i;
          size_t digits = i;
          while (i < src.size() && is_digit(src[i])) ++i;
          if (i == digits) error_at(pos_of(i), "exponent has no digits");
        }
      }
      if (i < src.size() && is_ident(src[i]))
        error_at(pos_of(i), std::string("unexpected character '") + src[i] + "' in a number");
      t.text = src.substr(start, i - start);
      std::string s(t.text);
      errno = 0;
      if (is_float) {
        t.kind = Tok::float_lit;
        t.float_value = std::strtod(s.c_str(), nullptr);
      } else {
        t.kind = Tok::int_lit;
        t.int_value = std::strtoull(s.c_str(), nullptr, 0);
        if (errno == ERANGE || t.int_value > 0xFFFFFFFFull)
          error_at(t.pos, "integer literal " + s + " does not fit in 32 bits");
      }
      out.push_back(t);
      continue;
    }
    auto two = [&](char next) { return i + 1 < src.size() && src[i + 1] == next; };
    Tok k;
    size_t len = 1;
    switch (c) {
      case '(': k = Tok::lparen; break;
      case ')': k = Tok::rparen; break;
      case '{': k = Tok::lbrace; break;
      case '}': k = Tok::rbrace; break;
      case '[': k = Tok::lbracket; break;
      case ']': k = Tok::rbracket; break;
      case ',': k = Tok::comma; break;
      case ':': k = Tok::colon; break;
      case ';': k = Tok::semicolon; break;
      case '.': k = Tok::dot; break;
      case '+': k = Tok::plus; break;
      case '-': k = Tok::minus; break;
      case '*': k = Tok::star; break;
      case '/': k = Tok::slash; break;
      case '%': k = Tok::percent; break;
      case '^': k = Tok::caret; break;
      case '~': k = Tok::tilde; break;
      case '&': k = two('&') ? (len = 2, Tok::andand) : Tok::amp; break;
      case '|': k = two('|') ? (len = 2, Tok::oror) : Tok::pipe; break;
      case '!': k = two('=') ? (len = 2, Tok::ne) : Tok::bang; break;
      case '=': k = two('=') ? (len = 2, Tok::eq) : Tok::assign; break;
      case '<':
        k = two('<') ? (len = 2, Tok::shl) : two('=') ? (len = 2, Tok::le) : Tok::lt;
        break;
      case '>':
        k = two('>') ? (len = 2, Tok::shr) : two('=') ? (len = 2, Tok::ge) : Tok::gt;
        break;
      default: {
        unsigned char u = static_cast<unsigned char>(c);
        char buf[64];
        if (u >= 32 && u < 127)
          std::snprintf(buf, sizeof buf, "unexpected character '%c'", c);
        else
          std::snprintf(buf, sizeof buf, "unexpected byte 0x%02X", u);
        error_at(t.pos, buf);
      }
    }
    i += len;
    t.kind = k;
    t.text = src.substr(start, len);
    out.push_back(t);
  }
}

}  // namespace kaio::lang
