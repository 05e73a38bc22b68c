// The project's own CPU reference for the GGUF k-quants Q8_0, Q4_K, Q5_K and
// Q6_K: quantize in two modes (GGML: ggml's current quantize_row_*_ref;
// CANDLE: candle's QTensor::quantize, a 2023 port of llama.cpp's k_quants.c)
// and dequantize (identical in both). Byte layouts are ggml's block_q*
// structs; the algorithms follow the two references line by line.
//
// Bit-exactness with the references needs strict IEEE f32: this file's .cpp
// must be compiled with -ffp-contract=off (no FMA contraction) and without
// fast-math; tests/meson.build and bench/meson.build do so.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kqref {

enum class Format { q8_0, q4_k, q5_k, q6_k };
enum class Mode { ggml, candle };

// Elements and bytes per block: Q8_0 32 / 34; Q4_K 256 / 144; Q5_K 256 / 176;
// Q6_K 256 / 210.
int64_t block_elems(Format format);
int64_t block_bytes(Format format);
const char *format_name(Format format);
const char *mode_name(Mode mode);

// Quantizes one row of n values (n a multiple of block_elems) into
// n / block_elems blocks at out.
void quantize_row(Format format, Mode mode, const float *x, int64_t n, uint8_t *out);

// Dequantizes n values (n a multiple of block_elems) from the blocks at in.
void dequantize_row(Format format, const uint8_t *in, int64_t n, float *out);

// IEEE binary16 conversions: f32 -> f16 rounds to nearest even, keeps
// subnormals, overflows to infinity and maps NaN to 0x7E00 (ggml's rule).
uint16_t f32_to_f16(float x);
float f16_to_f32(uint16_t h);

}  // namespace kqref
