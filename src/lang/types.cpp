// Names and sizes of the language's element and value types.
#include "lang/ast.hpp"

namespace kaio::lang {

const char *dtype_name(DType d) {
  switch (d) {
    case DType::f32: return "f32";
    case DType::f16: return "f16";
    case DType::bf16: return "bf16";
    case DType::i8: return "i8";
    case DType::u8: return "u8";
    case DType::i32: return "i32";
    case DType::u32: return "u32";
  }
  return "?";
}

const char *type_name(Type t) {
  switch (t) {
    case Type::f32: return "f32";
    case Type::i32: return "i32";
    case Type::u32: return "u32";
    case Type::boolean: return "bool";
    case Type::int_lit: return "integer";
  }
  return "?";
}

int dtype_bytes(DType d) {
  switch (d) {
    case DType::f32: case DType::i32: case DType::u32: return 4;
    case DType::f16: case DType::bf16: return 2;
    case DType::i8: case DType::u8: return 1;
  }
  return 0;
}

Type value_type(DType d) {
  switch (d) {
    case DType::f32: case DType::f16: case DType::bf16: return Type::f32;
    case DType::i8: case DType::i32: return Type::i32;
    case DType::u8: case DType::u32: return Type::u32;
  }
  return Type::f32;
}

}  // namespace kaio::lang
