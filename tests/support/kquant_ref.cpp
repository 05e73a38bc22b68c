// CPU reference for the GGUF k-quants; see kquant_ref.hpp. Written from the
// reference algorithms (ggml's quantize_row_*_ref, candle's k_quants.rs). Every float
// expression below is written in the reference's evaluation order (left to
// right, each * and + rounded on its own); the file is compiled with
// -ffp-contract=off so the compiler keeps it that way.
#include "support/kquant_ref.hpp"

#include <climits>
#include <cmath>
#include <cstring>

namespace kqref {
namespace {

constexpr int kQK = 256;        // elements per K-quant superblock
constexpr float kGroupMaxEps = 1e-15f;

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// ggml's nearest_int: adding 1.5·2^23 rounds half to even in the FPU; valid
// for |f| <= 2^22 - 1 (the reference only asserts this).
int ggml_nearest(float f) {
  float t = f + 12582912.0f;
  return static_cast<int>(bits_of(t) & 0x007FFFFF) - 0x00400000;
}

// candle's nearest_int: f32::round (half away from zero), then Rust's
// saturating `as i32` cast, NaN to 0.
int candle_nearest(float f) {
  float r = std::round(f);
  if (std::isnan(r)) return 0;
  if (r >= 2147483648.0f) return INT_MAX;
  if (r < -2147483648.0f) return INT_MIN;
  return static_cast<int>(r);
}

int clampi(int v, int lo, int hi) { return v < lo ? lo : (v > hi ? hi : v); }

void put_f16(uint8_t *p, float v) {
  uint16_t h = f32_to_f16(v);
  p[0] = static_cast<uint8_t>(h & 0xFF);
  p[1] = static_cast<uint8_t>(h >> 8);
}
float get_f16(const uint8_t *p) { return f16_to_f32(static_cast<uint16_t>(p[0] | (p[1] << 8))); }

// ---------------------------------------------------------------- Q8_0 ----
// The modes differ only where 1/d overflows (amax below about 3.7e-37):
// x * id is then ±inf, or NaN for a zero x. ggml's `(int8_t) roundf(v)` is
// undefined there; on x86-64 it is cvttss2si's 0x80000000 cut to a byte,
// 0 (the oracle test pins this). candle's `f32::round(v) as i8` saturates:
// 127 for +inf, -128 for -inf, 0 for NaN.
int8_t q8_0_ggml(float v) {
  const float r = std::round(v);
  if (!(r >= -2147483648.0f && r < 2147483648.0f)) return 0;  // out of int32: 0x80000000
  return static_cast<int8_t>(static_cast<int32_t>(r));
}
int8_t q8_0_candle(float v) {
  const float r = std::round(v);
  if (std::isnan(r)) return 0;
  return static_cast<int8_t>(r >= 127.0f ? 127 : r <= -128.0f ? -128 : static_cast<int>(r));
}

void quantize_q8_0(const float *x, uint8_t *y, Mode mode) {
  float amax = 0.0f;
  for (int j = 0; j < 32; ++j) {
    float a = std::fabs(x[j]);
    amax = amax > a ? amax : a;
  }
  const float d = amax / 127.0f;
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  put_f16(y, d);
  for (int j = 0; j < 32; ++j) {
    float v = x[j] * id;
    y[2 + j] = static_cast<uint8_t>(mode == Mode::ggml ? q8_0_ggml(v) : q8_0_candle(v));
  }
}

// ------------------------------------------------ shared K-quant packing ----
// The 12 scale bytes of Q4_K/Q5_K from the 8 (ls, lm) pairs.
void pack_scales_k4(const uint8_t *ls, const uint8_t *lm, uint8_t *s) {
  for (int j = 0; j < 8; ++j) {
    if (j < 4) {
      s[j] = ls[j];
      s[j + 4] = lm[j];
    } else {
      s[j + 4] = static_cast<uint8_t>((ls[j] & 0xF) | ((lm[j] & 0xF) << 4));
      s[j - 4] |= static_cast<uint8_t>((ls[j] >> 4) << 6);
      s[j] |= static_cast<uint8_t>((lm[j] >> 4) << 6);
    }
  }
}

void scale_min_k4(int j, const uint8_t *s, uint8_t *sc, uint8_t *m) {
  if (j < 4) {
    *sc = s[j] & 63;
    *m = s[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((s[j + 4] >> 4) | ((s[j] >> 6) << 4));
  }
}

// Q4_K: qs[32c + l] = L[64c + l] | L[64c + 32 + l] << 4. Q5_K additionally
// moves bit 4 of each quant into qh.
void pack_q4(const uint8_t *L, uint8_t *qs) {
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l)
      qs[32 * c + l] = static_cast<uint8_t>(L[64 * c + l] | (L[64 * c + 32 + l] << 4));
}

void pack_q5(const uint8_t *L, uint8_t *qh, uint8_t *qs) {
  std::memset(qh, 0, 32);
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      int l1 = L[64 * c + l], l2 = L[64 * c + 32 + l];
      if (l1 > 15) {
        l1 -= 16;
        qh[l] |= static_cast<uint8_t>(1 << (2 * c));
      }
      if (l2 > 15) {
        l2 -= 16;
        qh[l] |= static_cast<uint8_t>(2 << (2 * c));
      }
      qs[32 * c + l] = static_cast<uint8_t>(l1 | (l2 << 4));
    }
}

void pack_q6(const int8_t *L, uint8_t *ql, uint8_t *qh) {
  for (int h = 0; h < 2; ++h) {
    const int8_t *Lh = L + 128 * h;
    for (int l = 0; l < 32; ++l) {
      int q1 = Lh[l] & 0xF, q2 = Lh[l + 32] & 0xF, q3 = Lh[l + 64] & 0xF, q4 = Lh[l + 96] & 0xF;
      ql[64 * h + l] = static_cast<uint8_t>(q1 | (q3 << 4));
      ql[64 * h + l + 32] = static_cast<uint8_t>(q2 | (q4 << 4));
      qh[32 * h + l] = static_cast<uint8_t>((Lh[l] >> 4) | ((Lh[l + 32] >> 4) << 2) |
                                            ((Lh[l + 64] >> 4) << 4) | ((Lh[l + 96] >> 4) << 6));
    }
  }
}

// ------------------------------------------------------ GGML: Q6_K -------
// One make_qx_quants pass over 16 values at iscale: the weighted sums with
// w = x², summed in element order; stores the quants (biased by 32) in L
// unless L is null.
template <int (*Nearest)(float)>
void qx_pass(const float *x, float iscale, float *sumlx, float *suml2, int8_t *L) {
  float slx = 0.0f, sl2 = 0.0f;
  for (int i = 0; i < 16; ++i) {
    int l = clampi(Nearest(iscale * x[i]), -32, 31);
    if (L) L[i] = static_cast<int8_t>(l + 32);
    float w = x[i] * x[i];
    float fl = static_cast<float>(l);
    slx = slx + (w * x[i]) * fl;
    sl2 = sl2 + (w * fl) * fl;
  }
  *sumlx = slx;
  *suml2 = sl2;
}

// The value with the largest |x| among 16 (strict '>': the first wins, and
// its sign is kept); its magnitude in *amax.
float signed_absmax16(const float *x, float *amax) {
  float max = 0.0f, a = 0.0f;
  for (int i = 0; i < 16; ++i) {
    float ax = std::fabs(x[i]);
    if (ax > a) {
      a = ax;
      max = x[i];
    }
  }
  *amax = a;
  return max;
}

// make_qx_quants(16, 32, x, L, rmse_type 1, no weights), ggml's current one.
float ggml_qx_quants(const float *x, int8_t *L) {
  const int nmax = 32;
  float amax;
  const float max = signed_absmax16(x, &amax);
  if (amax < kGroupMaxEps) {
    for (int i = 0; i < 16; ++i) L[i] = 0;
    return 0.0f;
  }
  float iscale = static_cast<float>(-nmax) / max;
  float sumlx, suml2;
  qx_pass<ggml_nearest>(x, iscale, &sumlx, &suml2, L);
  float scale = suml2 != 0.0f ? sumlx / suml2 : 0.0f;
  float best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    qx_pass<ggml_nearest>(x, iscale, &sumlx, &suml2, nullptr);
    if (suml2 > 0.0f && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < 16; ++i)
        L[i] = static_cast<int8_t>(nmax + clampi(ggml_nearest(iscale * x[i]), -nmax, nmax - 1));
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

// ---------------------------------------------------- CANDLE: Q6_K -------
// candle's make_qx_quants(16, 32, x, L, 1): the 2023 algorithm with up to 3
// re-scaling passes and up to 5 coordinate-descent passes.
float candle_qx_quants(const float *x, int8_t *L) {
  const int nmax = 32;
  float amax;
  const float max = signed_absmax16(x, &amax);
  if (amax == 0.0f) {
    for (int i = 0; i < 16; ++i) L[i] = 0;
    return 0.0f;
  }
  float iscale = -static_cast<float>(nmax) / max;
  float sumlx, suml2;
  qx_pass<candle_nearest>(x, iscale, &sumlx, &suml2, L);
  float scale = sumlx / suml2;
  float best = scale * sumlx;
  for (int itry = 0; itry < 3; ++itry) {
    float is = 1.0f / scale;
    float slx = 0.0f, sl2 = 0.0f;
    bool changed = false;
    for (int i = 0; i < 16; ++i) {
      int l = clampi(candle_nearest(is * x[i]), -nmax, nmax - 1);
      if (l + nmax != L[i]) changed = true;
      float w = x[i] * x[i];
      float fl = static_cast<float>(l);
      slx = slx + (w * x[i]) * fl;
      sl2 = sl2 + (w * fl) * fl;
    }
    if (!changed || sl2 == 0.0f || slx * slx <= best * sl2) break;
    for (int i = 0; i < 16; ++i)
      L[i] = static_cast<int8_t>(nmax + clampi(candle_nearest(is * x[i]), -nmax, nmax - 1));
    sumlx = slx;
    suml2 = sl2;
    scale = sumlx / suml2;
    best = scale * sumlx;
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < 16; ++i) {
      float w = x[i] * x[i];
      int l = L[i] - nmax;
      float fl = static_cast<float>(l);
      float slx = sumlx - (w * x[i]) * fl;
      if (slx > 0.0f) {
        float sl2 = suml2 - (w * fl) * fl;
        int new_l = clampi(candle_nearest((x[i] * sl2) / slx), -nmax, nmax - 1);
        if (new_l != l) {
          float fn = static_cast<float>(new_l);
          slx = slx + (w * x[i]) * fn;
          sl2 = sl2 + (w * fn) * fn;
          if (sl2 > 0.0f && (slx * slx) * suml2 > (sumlx * sumlx) * sl2) {
            L[i] = static_cast<int8_t>(nmax + new_l);
            sumlx = slx;
            suml2 = sl2;
            scale = sumlx / suml2;
            best = scale * sumlx;
            ++n_changed;
          }
        }
      }
    }
    if (n_changed == 0) break;
  }
  (void)best;
  return scale;
}

// Q6_K superblock, both modes (they differ in the sub-block search, the
// all-zero shortcut and the integer rounding).
void quantize_q6_k(const float *x, uint8_t *y, Mode mode) {
  const bool ggml = mode == Mode::ggml;
  int8_t L[kQK];
  float scales[16];
  float max_scale = 0.0f, max_abs_scale = 0.0f;
  for (int ib = 0; ib < 16; ++ib) {
    float scale = ggml ? ggml_qx_quants(x + 16 * ib, L + 16 * ib)
                       : candle_qx_quants(x + 16 * ib, L + 16 * ib);
    scales[ib] = scale;
    float abs_scale = std::fabs(scale);
    if (abs_scale > max_abs_scale) {
      max_abs_scale = abs_scale;
      max_scale = scale;
    }
  }
  uint8_t *ql = y, *qh = y + 128, *sc = y + 192, *dp = y + 208;
  if (ggml && max_abs_scale < kGroupMaxEps) {
    std::memset(y, 0, 210);
    return;
  }
  const float iscale = -128.0f / max_scale;
  put_f16(dp, 1.0f / iscale);
  for (int ib = 0; ib < 16; ++ib) {
    float v = iscale * scales[ib];
    int q = ggml ? ggml_nearest(v) : candle_nearest(v);
    q = q < 127 ? q : 127;
    sc[ib] = static_cast<uint8_t>(static_cast<int8_t>(q));
  }
  const float d16 = get_f16(dp);
  for (int j = 0; j < 16; ++j) {
    float d = d16 * static_cast<float>(static_cast<int8_t>(sc[j]));
    if (d == 0.0f) continue;
    for (int i = 0; i < 16; ++i) {
      float v = x[16 * j + i] / d;
      int l = clampi(ggml ? ggml_nearest(v) : candle_nearest(v), -32, 31);
      L[16 * j + i] = static_cast<int8_t>(l + 32);
    }
  }
  pack_q6(L, ql, qh);
}

// -------------------------------------------------- GGML: Q4_K / Q5_K ----
struct Qkx2Params {
  int nmax;
  float rmin, rdelta;
  int nstep;
};

// make_qkx2_quants(32, nmax, x, w, L, &the_min, Laux, rmin, rdelta, nstep,
// use_mad = false). Sequential: a winning candidate changes `min`, which
// every later candidate uses.
float ggml_qkx2_quants(const float *x, const float *w, uint8_t *L, float *the_min,
                       const Qkx2Params &p) {
  const int n = 32, nmax = p.nmax;
  float min = x[0], max = x[0];
  float sum_w = w[0];
  float sum_x = sum_w * x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w = sum_w + w[i];
    sum_x = sum_x + w[i] * x[i];
  }
  if (min > 0.0f) min = 0.0f;
  if (max == min) {
    for (int i = 0; i < n; ++i) L[i] = 0;
    *the_min = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (max - min);
  float scale = 1.0f / iscale;
  float best_error = 0.0f;
  for (int i = 0; i < n; ++i) {
    int l = clampi(ggml_nearest(iscale * (x[i] - min)), 0, nmax);
    L[i] = static_cast<uint8_t>(l);
    float diff = (scale * static_cast<float>(L[i]) + min) - x[i];
    best_error = best_error + w[i] * (diff * diff);
  }
  uint8_t Laux[32];
  for (int is = 0; is <= p.nstep; ++is) {
    iscale = ((p.rmin + p.rdelta * static_cast<float>(is)) + static_cast<float>(nmax)) / (max - min);
    float sum_l = 0.0f, sum_l2 = 0.0f, sum_xl = 0.0f;
    for (int i = 0; i < n; ++i) {
      int l = clampi(ggml_nearest(iscale * (x[i] - min)), 0, nmax);
      Laux[i] = static_cast<uint8_t>(l);
      float fl = static_cast<float>(l);
      sum_l = sum_l + w[i] * fl;
      sum_l2 = sum_l2 + (w[i] * fl) * fl;
      sum_xl = sum_xl + (w[i] * fl) * x[i];
    }
    float D = sum_w * sum_l2 - sum_l * sum_l;
    if (D > 0.0f) {
      float this_scale = (sum_w * sum_xl - sum_x * sum_l) / D;
      float this_min = (sum_l2 * sum_x - sum_l * sum_xl) / D;
      if (this_min > 0.0f) {
        this_min = 0.0f;
        this_scale = sum_xl / sum_l2;
      }
      float cur_error = 0.0f;
      for (int i = 0; i < n; ++i) {
        float diff = (this_scale * static_cast<float>(Laux[i]) + this_min) - x[i];
        cur_error = cur_error + w[i] * (diff * diff);
      }
      if (cur_error < best_error) {
        std::memcpy(L, Laux, 32);
        best_error = cur_error;
        scale = this_scale;
        min = this_min;
      }
    }
  }
  *the_min = -min;
  return scale;
}

// ------------------------------------------------ CANDLE: Q4_K / Q5_K ----
// Rust's a.max(b) (a the receiver) as candle's x86-64 build computes it:
// NaN loses to a number, and a tie, which only +0 and -0 make with
// different bits, returns a (LLVM lowers maxnum to maxss with a as its
// second operand). So candle's `fold(0.0, |max, &val| val.max(max))` over
// mins that are all zeros ends on the sign of the last one, and -0.0 there
// (a min clamped from above zero) stores dmin 0x8000. aarch64's fmaxnm
// returns +0 instead; this follows x86-64. The candle oracle test pins it.
float rust_max(float a, float b) {
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  return b > a ? b : a;
}

// Rust's a.min(b) likewise: a on a tie.
float rust_min(float a, float b) {
  if (std::isnan(a)) return b;
  if (std::isnan(b)) return a;
  return b < a ? b : a;
}

// candle's make_qkx1_quants(nmax, 5, x): unweighted, no candidate search;
// returns (scale, -min). Its quants are not returned (the caller starts the
// final pass from zeros).
float candle_qkx1_quants(const float *x, int nmax, float *the_min) {
  const int n = 32;
  // min_by / max_by with total_cmp: only the value matters below, except
  // that -0 < +0 there; the result differs only in the sign of a zero.
  float mn = x[0], mx = x[0];
  for (int i = 1; i < n; ++i) {
    if (x[i] < mn || (x[i] == mn && std::signbit(x[i]) && !std::signbit(mn))) mn = x[i];
    if (x[i] > mx || (x[i] == mx && !std::signbit(x[i]) && std::signbit(mx))) mx = x[i];
  }
  if (mx == mn) {
    *the_min = 0.0f;
    return 0.0f;
  }
  float min = rust_min(mn, 0.0f);  // -0.0 stays -0.0
  float iscale = static_cast<float>(nmax) / (mx - min);
  float scale = 1.0f / iscale;
  uint8_t L[32] = {0};
  for (int itry = 0; itry < 5; ++itry) {
    float sumlx = 0.0f;
    int suml2 = 0;
    bool did_change = false;
    for (int i = 0; i < n; ++i) {
      int li = clampi(candle_nearest(iscale * (x[i] - min)), 0, nmax);
      if (static_cast<uint8_t>(li) != L[i]) {
        L[i] = static_cast<uint8_t>(li);
        did_change = true;
      }
      sumlx = sumlx + (x[i] - min) * static_cast<float>(li);
      suml2 += li * li;
    }
    scale = sumlx / static_cast<float>(suml2);
    float sum = -0.0f;  // Rust's f32 Sum starts from -0.0
    for (int i = 0; i < n; ++i) sum = sum + (x[i] - scale * static_cast<float>(L[i]));
    min = sum / static_cast<float>(n);
    if (min > 0.0f) min = 0.0f;
    iscale = 1.0f / scale;
    if (!did_change) break;
  }
  *the_min = -min;
  return scale;
}

// Q4_K (nmax 15) and Q5_K (nmax 31) superblock, both modes.
void quantize_q45_k(const float *x, uint8_t *y, Mode mode, bool q5) {
  const bool ggml = mode == Mode::ggml;
  const int nmax = q5 ? 31 : 15;
  const Qkx2Params params = q5 ? Qkx2Params{31, -0.5f, 0.1f, 15} : Qkx2Params{15, -1.0f, 0.1f, 20};
  uint8_t L[kQK];
  std::memset(L, 0, sizeof L);
  float scales[8], mins[8];
  float max_scale = 0.0f, max_min = 0.0f;
  for (int j = 0; j < 8; ++j) {
    const float *xj = x + 32 * j;
    if (ggml) {
      float sum_x2 = 0.0f;
      for (int l = 0; l < 32; ++l) sum_x2 = sum_x2 + xj[l] * xj[l];
      float av_x = std::sqrt(sum_x2 / 32.0f);
      float w[32];
      for (int l = 0; l < 32; ++l) w[l] = av_x + std::fabs(xj[l]);
      scales[j] = ggml_qkx2_quants(xj, w, L + 32 * j, &mins[j], params);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    } else {
      scales[j] = candle_qkx1_quants(xj, nmax, &mins[j]);
      max_scale = rust_max(scales[j], max_scale);
      max_min = rust_max(mins[j], max_min);
    }
  }
  const float inv_scale = max_scale > 0.0f ? 63.0f / max_scale : 0.0f;
  const float inv_min = max_min > 0.0f ? 63.0f / max_min : 0.0f;
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    if (ggml) {  // cast to uint8 first, then min(63, .)
      uint8_t a = static_cast<uint8_t>(ggml_nearest(inv_scale * scales[j]));
      uint8_t b = static_cast<uint8_t>(ggml_nearest(inv_min * mins[j]));
      ls[j] = a < 63 ? a : 63;
      lm[j] = b < 63 ? b : 63;
    } else {  // min(63) on the i32, then the wrapping `as u8`
      int a = candle_nearest(inv_scale * scales[j]);
      int b = candle_nearest(inv_min * mins[j]);
      ls[j] = static_cast<uint8_t>(a < 63 ? a : 63);
      lm[j] = static_cast<uint8_t>(b < 63 ? b : 63);
    }
  }
  uint8_t *s = y + 4;
  pack_scales_k4(ls, lm, s);
  put_f16(y, max_scale / 63.0f);
  put_f16(y + 2, max_min / 63.0f);
  const float d16 = get_f16(y), dmin16 = get_f16(y + 2);
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    scale_min_k4(j, s, &sc, &m);
    const float d = d16 * static_cast<float>(sc);
    if (d == 0.0f) continue;  // GGML keeps the search's L; CANDLE keeps 0
    const float dm = dmin16 * static_cast<float>(m);
    for (int i = 0; i < 32; ++i) {
      float v = (x[32 * j + i] + dm) / d;
      int l = clampi(ggml ? ggml_nearest(v) : candle_nearest(v), 0, nmax);
      L[32 * j + i] = static_cast<uint8_t>(l);
    }
  }
  if (q5)
    pack_q5(L, y + 16, y + 48);
  else
    pack_q4(L, y + 16);
}

// ------------------------------------------------------ dequantize -------
void dequantize_block(Format format, const uint8_t *b, float *y) {
  switch (format) {
    case Format::q8_0: {
      const float d = get_f16(b);
      for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(static_cast<int8_t>(b[2 + j])) * d;
      return;
    }
    case Format::q4_k:
    case Format::q5_k: {
      const bool q5 = format == Format::q5_k;
      const float d = get_f16(b), dmin = get_f16(b + 2);
      const uint8_t *qh = b + 16, *qs = b + (q5 ? 48 : 16);
      for (int j = 0; j < 8; ++j) {
        uint8_t sc, m;
        scale_min_k4(j, b + 4, &sc, &m);
        const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(m);
        const int c = j / 2, hi = j % 2;
        for (int l = 0; l < 32; ++l) {
          int q = (qs[32 * c + l] >> (4 * hi)) & 0xF;
          if (q5 && (qh[l] >> j) & 1) q += 16;
          y[32 * j + l] = d1 * static_cast<float>(q) - m1;
        }
      }
      return;
    }
    case Format::q6_k: {
      const uint8_t *ql = b, *qh = b + 128;
      const float d = get_f16(b + 208);
      for (int e = 0; e < kQK; ++e) {
        const int h = e / 128, r = e % 128, quarter = r / 32, l = r % 32;
        const int lo = (ql[64 * h + l + 32 * (quarter & 1)] >> (4 * (quarter >> 1))) & 0xF;
        const int hi2 = (qh[32 * h + l] >> (2 * quarter)) & 3;
        const int q = (lo | (hi2 << 4)) - 32;
        y[e] = d * static_cast<float>(static_cast<int8_t>(b[192 + e / 16])) * static_cast<float>(q);
      }
      return;
    }
  }
}

}  // namespace

int64_t block_elems(Format format) { return format == Format::q8_0 ? 32 : kQK; }

int64_t block_bytes(Format format) {
  switch (format) {
    case Format::q8_0: return 34;
    case Format::q4_k: return 144;
    case Format::q5_k: return 176;
    case Format::q6_k: return 210;
  }
  return 0;
}

const char *format_name(Format format) {
  switch (format) {
    case Format::q8_0: return "Q8_0";
    case Format::q4_k: return "Q4_K";
    case Format::q5_k: return "Q5_K";
    case Format::q6_k: return "Q6_K";
  }
  return "?";
}

const char *mode_name(Mode mode) { return mode == Mode::ggml ? "GGML" : "CANDLE"; }

void quantize_row(Format format, Mode mode, const float *x, int64_t n, uint8_t *out) {
  const int64_t be = block_elems(format), bb = block_bytes(format);
  for (int64_t b = 0; b < n / be; ++b) {
    const float *xb = x + b * be;
    uint8_t *yb = out + b * bb;
    switch (format) {
      case Format::q8_0: quantize_q8_0(xb, yb, mode); break;
      case Format::q4_k: quantize_q45_k(xb, yb, mode, false); break;
      case Format::q5_k: quantize_q45_k(xb, yb, mode, true); break;
      case Format::q6_k: quantize_q6_k(xb, yb, mode); break;
    }
  }
}

void dequantize_row(Format format, const uint8_t *in, int64_t n, float *out) {
  const int64_t be = block_elems(format), bb = block_bytes(format);
  for (int64_t b = 0; b < n / be; ++b) dequantize_block(format, in + b * bb, out + b * be);
}

// The branch-free conversion ggml uses (fp16 library): scaling by 2^112 and
// 2^-110 makes the FPU do the round-to-nearest-even at the f16 precision.
uint16_t f32_to_f16(float f) {
  float base = (std::fabs(f) * 0x1.0p+112f) * 0x1.0p-110f;
  const uint32_t w = bits_of(f);
  const uint32_t shl1_w = w + w;
  const uint32_t sign = w & 0x80000000u;
  uint32_t bias = shl1_w & 0xFF000000u;
  if (bias < 0x71000000u) bias = 0x71000000u;
  base = float_of((bias >> 1) + 0x07800000u) + base;
  const uint32_t b = bits_of(base);
  const uint32_t exp_bits = (b >> 13) & 0x00007C00u;
  const uint32_t mantissa_bits = b & 0x00000FFFu;
  const uint32_t nonsign = exp_bits + mantissa_bits;
  return static_cast<uint16_t>((sign >> 16) | (shl1_w > 0xFF000000u ? 0x7E00u : nonsign));
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F, man = h & 0x3FF;
  if (exp == 0) {
    float v = std::ldexp(static_cast<float>(man), -24);
    return sign ? -v : v;
  }
  if (exp == 31) return float_of(sign | 0x7F800000u | (man << 13));
  return float_of(sign | ((exp + 112) << 23) | (man << 13));
}

}  // namespace kqref
