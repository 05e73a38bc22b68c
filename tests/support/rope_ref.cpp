#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

#include "support/rope_ref.hpp"

#include <algorithm>
#include <cmath>

namespace kt {
namespace {

// T is float (torch's f32 tensors) or double (exact-ish reference).
template <class T>
RopeRef compute(const kaio_rope_desc &d) {
  const int64_t dim = d.rotary_dim ? d.rotary_dim : d.head_dim;
  const int64_t n = dim / 2;
  const T base = static_cast<T>(d.theta);
  std::vector<T> pos_freqs(n), inv(n);
  for (int64_t i = 0; i < n; ++i) {
    const T e = static_cast<T>(2 * i) / static_cast<T>(dim);
    pos_freqs[i] = static_cast<T>(std::pow(static_cast<double>(base), static_cast<double>(e)));
    inv[i] = T(1) / pos_freqs[i];
  }
  RopeRef r;
  const T factor = static_cast<T>(d.factor);
  if (d.scaling == KAIO_ROPE_SCALING_LINEAR) {
    for (auto &v : inv) v = v / factor;
  } else if (d.scaling == KAIO_ROPE_SCALING_LLAMA3) {
    const double old_len = static_cast<double>(d.original_max_position_embeddings);
    const T low_wl = static_cast<T>(old_len / d.low_freq_factor);
    const T high_wl = static_cast<T>(old_len / d.high_freq_factor);
    for (auto &v : inv) {
      const T wavelen = static_cast<T>(2 * M_PI) / v;
      const T llama = wavelen > low_wl ? v / factor : v;
      const T smooth = (static_cast<T>(old_len) / wavelen - static_cast<T>(d.low_freq_factor)) /
                       static_cast<T>(d.high_freq_factor - d.low_freq_factor);
      const T smoothed = (T(1) - smooth) * llama / factor + smooth * llama;
      const bool medium = !(wavelen < high_wl) && !(wavelen > low_wl);
      v = medium ? smoothed : llama;
    }
  } else if (d.scaling == KAIO_ROPE_SCALING_YARN) {
    auto mscale = [](double s, double m) { return s <= 1 ? 1.0 : 0.1 * m * std::log(s) + 1.0; };
    double att = d.attention_factor;
    if (att == 0)
      att = d.mscale != 0 && d.mscale_all_dim != 0
                ? mscale(d.factor, d.mscale) / mscale(d.factor, d.mscale_all_dim)
                : mscale(d.factor, 1.0);
    r.attention = static_cast<T>(att);
    const double omp = static_cast<double>(d.original_max_position_embeddings);
    auto corr = [&](double rot) {
      return (dim * std::log(omp / (rot * 2 * M_PI))) / (2 * std::log(d.theta));
    };
    double lo = corr(d.beta_fast), hi = corr(d.beta_slow);
    if (d.truncate) lo = std::floor(lo), hi = std::ceil(hi);
    lo = std::max(lo, 0.0);
    hi = std::min(hi, static_cast<double>(dim - 1));
    if (lo == hi) hi += 0.001;
    for (int64_t i = 0; i < n; ++i) {
      const T extrap = T(1) / pos_freqs[i], interp = T(1) / (factor * pos_freqs[i]);
      const T lin = (static_cast<T>(i) - static_cast<T>(lo)) / static_cast<T>(hi - lo);
      const T ef = T(1) - std::min(std::max(lin, T(0)), T(1));
      inv[i] = interp * (T(1) - ef) + extrap * ef;
    }
  }
  r.inv_freq.assign(inv.begin(), inv.end());
  return r;
}

}  // namespace

RopeRef rope_ref_f32(const kaio_rope_desc &desc) { return compute<float>(desc); }
RopeRef rope_ref_f64(const kaio_rope_desc &desc) { return compute<double>(desc); }

std::vector<double> rope_rotate_ref(const kaio_rope_desc &d, const double *x,
                                    const std::vector<double> &angles, double attention) {
  const int64_t rot = d.rotary_dim ? d.rotary_dim : d.head_dim;
  std::vector<double> y(x, x + d.head_dim);
  for (int64_t i = 0; i < rot / 2; ++i) {
    const int64_t a = d.style == KAIO_ROPE_HALF_SPLIT ? i : 2 * i;
    const int64_t b = d.style == KAIO_ROPE_HALF_SPLIT ? i + rot / 2 : 2 * i + 1;
    const double c = std::cos(angles[i]) * attention, s = std::sin(angles[i]) * attention;
    y[a] = x[a] * c - x[b] * s;
    y[b] = x[b] * c + x[a] * s;
  }
  return y;
}

}  // namespace kt
