// Text and virtual registers for one PTX entry. Each value gets a fresh
// register of its class (%p predicate, %r 32-bit integer, %rd 64-bit,
// %f f32, %h 16-bit); ptxas does the allocation. Instructions go to `out`,
// which the lowering points at a phase's preamble or its loop body.
#pragma once

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>

namespace kaio::lang {

class PtxBuilder {
 public:
  PtxBuilder() { body.reserve(1 << 16); }

  std::string body;
  std::string *out = &body;

  std::string p() { return next("%p", n_p_); }
  std::string r() { return next("%r", n_r_); }
  std::string rd() { return next("%rd", n_rd_); }
  std::string f() { return next("%f", n_f_); }
  std::string h() { return next("%h", n_h_); }
  std::string label(const char *prefix) { return std::string("$L_") + prefix + std::to_string(n_label_++); }

  // Appends "\t<text>;\n".
  void ins(const std::string &text) {
    *out += '\t';
    *out += text;
    *out += ";\n";
  }
  void place(const std::string &label) {
    *out += label;
    *out += ":\n";
  }
  // dst = fresh register; emits "<op> dst, <operands>" and returns dst.
  std::string op(std::string dst, std::string_view opcode, std::string_view operands) {
    // appended piece by piece: this is the compiler's hottest path
    *out += '\t';
    *out += opcode;
    *out += ' ';
    *out += dst;
    *out += ", ";
    *out += operands;
    *out += ";\n";
    return dst;
  }

  // ".reg" lines for every class used.
  std::string declarations() const {
    std::string s;
    auto decl = [&](const char *type, const char *name, int n) {
      if (n) s += std::string("\t.reg ") + type + " " + name + "<" + std::to_string(n) + ">;\n";
    };
    decl(".pred", "%p", n_p_);
    decl(".b32", "%r", n_r_);
    decl(".b64", "%rd", n_rd_);
    decl(".f32", "%f", n_f_);
    decl(".b16", "%h", n_h_);
    return s;
  }

  static std::string f32_imm(float v) {
    uint32_t bits;
    std::memcpy(&bits, &v, 4);
    char buf[16];
    std::snprintf(buf, sizeof buf, "0f%08X", bits);
    return buf;
  }

 private:
  static std::string next(const char *prefix, int &n) { return prefix + std::to_string(n++); }
  int n_p_ = 0, n_r_ = 0, n_rd_ = 0, n_f_ = 0, n_h_ = 0, n_label_ = 0;
};

}  // namespace kaio::lang
