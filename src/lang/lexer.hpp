// Splits kernel-language source into tokens, each with its position. Only
// ASCII is accepted outside comments; a source is at most kMaxSourceBytes.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "lang/diagnostic.hpp"

namespace kaio::lang {

constexpr size_t kMaxSourceBytes = 1 << 20;

enum class Tok {
  end, ident, int_lit, float_lit,
  // keywords
  kw_kernel, kw_let, kw_if, kw_else, kw_as, kw_true, kw_false, kw_tensor,
  // punctuation
  lparen, rparen, lbrace, rbrace, lbracket, rbracket, comma, colon, semicolon, dot,
  // operators
  plus, minus, star, slash, percent, amp, pipe, caret, tilde, bang, shl, shr,
  andand, oror, eq, ne, lt, le, gt, ge, assign,
};

struct Token {
  Tok kind = Tok::end;
  Pos pos;
  std::string_view text;  // points into the source
  uint64_t int_value = 0;
  double float_value = 0.0;
};

// Spelling of a token kind for messages: "';'", "identifier", ...
const char *tok_name(Tok kind);

// Throws CompileError at the first bad character or malformed number.
std::vector<Token> lex(std::string_view source);

}  // namespace kaio::lang
