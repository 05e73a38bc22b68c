// Each f32 expression mirrors one torch op on f32 tensors (a Python scalar
// operand is cast to f32 first); Python-side arithmetic stays in double.
// No contraction into fma: torch rounds every op.
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "ops/rope_freq.hpp"

#include <algorithm>
#include <cmath>

namespace kaio {
namespace {

constexpr double kPi = 3.14159265358979323846;

// base ** (arange(0, r, 2).float() / r): the f32 exponent, then the power
// rounded once to f32 (computed in double: correctly rounded but for
// double-rounding ties).
float pos_freq(double theta, int i, int64_t rot) {
  const float e = static_cast<float>(2 * i) / static_cast<float>(rot);
  return static_cast<float>(std::pow(static_cast<double>(static_cast<float>(theta)),
                                     static_cast<double>(e)));
}

void llama3(const kaio_rope_desc &d, RopeFreqs *out) {
  const float factor = static_cast<float>(d.factor);
  const double old_len = static_cast<double>(d.original_max_position_embeddings);
  const float low_wavelen = static_cast<float>(old_len / d.low_freq_factor);
  const float high_wavelen = static_cast<float>(old_len / d.high_freq_factor);
  const float two_pi = static_cast<float>(2 * kPi);
  for (int i = 0; i < out->half; ++i) {
    const float inv = out->inv_freq[i];
    const float wavelen = two_pi / inv;
    const float scaled = wavelen > low_wavelen ? inv / factor : inv;
    const float smooth = (static_cast<float>(old_len) / wavelen -
                          static_cast<float>(d.low_freq_factor)) /
                         static_cast<float>(d.high_freq_factor - d.low_freq_factor);
    const float smoothed = (1.0f - smooth) * scaled / factor + smooth * scaled;
    const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
    out->inv_freq[i] = medium ? smoothed : scaled;
  }
}

double yarn_mscale(double scale, double mscale) {
  return scale <= 1 ? 1.0 : 0.1 * mscale * std::log(scale) + 1.0;
}

double correction_dim(double rotations, int64_t rot, double theta, double max_pos) {
  return (static_cast<double>(rot) * std::log(max_pos / (rotations * 2 * kPi))) /
         (2 * std::log(theta));
}

void yarn(const kaio_rope_desc &d, int64_t rot, RopeFreqs *out) {
  if (d.attention_factor > 0)
    out->attention = static_cast<float>(d.attention_factor);
  else if (d.mscale != 0 && d.mscale_all_dim != 0)
    out->attention = static_cast<float>(yarn_mscale(d.factor, d.mscale) /
                                        yarn_mscale(d.factor, d.mscale_all_dim));
  else
    out->attention = static_cast<float>(yarn_mscale(d.factor, 1.0));
  const double max_pos = static_cast<double>(d.original_max_position_embeddings);
  double low = correction_dim(d.beta_fast, rot, d.theta, max_pos);
  double high = correction_dim(d.beta_slow, rot, d.theta, max_pos);
  if (d.truncate) {
    low = std::floor(low);
    high = std::ceil(high);
  }
  low = std::max(low, 0.0);
  high = std::min(high, static_cast<double>(rot - 1));
  if (low == high) high += 0.001;  // HF's guard against a zero-width ramp
  const float factor = static_cast<float>(d.factor);
  for (int i = 0; i < out->half; ++i) {
    const float p = pos_freq(d.theta, i, rot);
    const float extrapolation = 1.0f / p;
    const float interpolation = 1.0f / (factor * p);
    const float linear = (static_cast<float>(i) - static_cast<float>(low)) /
                         static_cast<float>(high - low);
    const float ramp = std::min(std::max(linear, 0.0f), 1.0f);
    const float extra = 1.0f - ramp;  // inv_freq_extrapolation_factor
    out->inv_freq[i] = interpolation * (1.0f - extra) + extrapolation * extra;
  }
}

}  // namespace

void rope_frequencies(const kaio_rope_desc &d, int64_t rot, RopeFreqs *out) {
  out->half = static_cast<int>(rot / 2);
  out->attention = 1.0f;
  if (d.scaling == KAIO_ROPE_SCALING_YARN) return yarn(d, rot, out);
  for (int i = 0; i < out->half; ++i) out->inv_freq[i] = 1.0f / pos_freq(d.theta, i, rot);
  if (d.scaling == KAIO_ROPE_SCALING_LINEAR)
    for (int i = 0; i < out->half; ++i) out->inv_freq[i] /= static_cast<float>(d.factor);
  if (d.scaling == KAIO_ROPE_SCALING_LLAMA3) llama3(d, out);
}

}  // namespace kaio
