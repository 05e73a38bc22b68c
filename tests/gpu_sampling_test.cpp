// Token sampling (kaio_op_create_sampling) against a CPU reference: greedy
// argmax exactly (ties, NaN, ±inf rows), the kept set of top-k / top-p /
// min-p (every kept token drawn, nothing else), chi-square of 10^6 draws
// against the filtered, tempered distribution, reproducibility across batch
// compositions, penalties, probability outputs, f32/f16/bf16, V = 1, prime V
// and V = 262144; rows split over several CTAs give the bits of one CTA per
// row. Skips with its reason when no real GPU is present.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>

#include "support/kaio_test.hpp"

namespace {

struct RowParams {
  float temperature = 0, top_p = 1, min_p = 0;
  int32_t top_k = 0;
  uint32_t seed_lo = 0, seed_hi = 0, off_lo = 0, off_hi = 0;
  float rep = 1, presence = 0, frequency = 0;
  std::vector<int32_t> prev;
  bool top_p_of_row = false;  // the op's KAIO_SAMPLING_TOP_P_OF_ROW
};

// CPU reference: which tokens are kept and their probabilities (0 for the
// others); greedy rows and special rows give the single chosen token.
std::vector<double> reference(const std::vector<double> &x0, const RowParams &p, bool pen,
                              bool *greedy_out, int64_t *argmax_out) {
  const int64_t V = static_cast<int64_t>(x0.size());
  std::vector<double> x = x0;
  if (pen) {
    std::vector<int> cnt(V, 0);
    for (int32_t t : p.prev)
      if (t >= 0 && t < V) ++cnt[t];
    const double r = p.rep > 0 ? p.rep : 1.0;
    for (int64_t t = 0; t < V; ++t) {
      if (!cnt[t]) continue;
      float v = static_cast<float>(x[t]);
      v = v > 0 ? v / static_cast<float>(r) : v * static_cast<float>(r);
      v = v - (p.frequency * static_cast<float>(cnt[t]) + p.presence);
      x[t] = v;
    }
  }
  int64_t am = -1;
  for (int64_t i = 0; i < V; ++i)
    if (!std::isnan(x[i]) && (am < 0 || x[i] > x[am])) am = i;
  *argmax_out = am < 0 ? 0 : am;
  std::vector<double> prob(V, 0.0);
  const bool greedy = !(p.temperature > 0);
  *greedy_out = greedy || am < 0 || std::isinf(x[am]);
  if (*greedy_out) {
    if (am >= 0 && x[am] > -INFINITY) prob[am] = 1;
    return prob;
  }
  const double m = x[am], T = p.temperature;
  std::vector<int64_t> order;
  for (int64_t i = 0; i < V; ++i)
    if (!std::isnan(x[i])) order.push_back(i);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return x[a] > x[b]; });
  double thr = -INFINITY;
  if (p.top_k > 0 && p.top_k < static_cast<int64_t>(order.size())) thr = x[order[p.top_k - 1]];
  auto w = [&](int64_t i) { return std::exp((x[i] - m) / T); };
  if (p.top_p < 1) {
    double z = 0;
    for (int64_t i : order)
      if (p.top_p_of_row || x[i] >= thr) z += w(i);
    double cum = 0, target = std::max(0.0, static_cast<double>(p.top_p)) * z;
    for (int64_t i : order) {
      if (x[i] < thr) break;
      if (cum + w(i) >= target) { thr = std::max(thr, x[i]); break; }
      cum += w(i);
    }
  }
  const double mp = p.min_p > 0 ? std::min(1.0, static_cast<double>(p.min_p)) : 0.0;
  double z = 0;
  for (int64_t i : order)
    if (x[i] >= thr && w(i) >= mp) { prob[i] = w(i); z += w(i); }
  for (double &v : prob) v /= z;
  return prob;
}

struct Sampler {
  kaio_device *dev;
  kaio_stream *stream;
  kaio_sampling_desc d;
  kt::Op op;
  std::vector<kt::Buffer> bufs;
  int64_t row_stride = 0;  // > vocab: logits rows padded to this many elements

  Sampler(kaio_device *dv, kaio_stream *s, kaio_dtype dt, int64_t B, int64_t V, uint32_t feat,
          int64_t max_prev = 0)
      : dev(dv), stream(s) {
    EXPECT_EQ(kaio_sampling_desc_init(&d, sizeof d), KAIO_OK);
    d.dtype = dt;
    d.batch = B;
    d.vocab = V;
    d.features = feat;
    d.max_prev = max_prev;
    kaio_op *o = nullptr;
    EXPECT_EQ(kaio_op_create_sampling(&o, dev, &d), KAIO_OK) << kaio_last_error();
    op.reset(o);
  }
  kaio_tensor upload(const void *data, size_t bytes, kaio_dtype dt, int64_t rows, int64_t cols) {
    bufs.push_back(kt::make_buffer(dev, bytes));
    EXPECT_EQ(kaio_buffer_write(bufs.back().get(), 0, data, bytes), KAIO_OK);
    return kaio_tensor_2d(bufs.back().get(), dt, rows, cols);
  }
  // Runs the op; logits are in the op's dtype storage. Returns tokens (and probs).
  std::vector<int32_t> run(const std::vector<uint8_t> &logits, const std::vector<RowParams> &rows,
                           std::vector<float> *probs = nullptr, std::vector<float> *logprobs = nullptr,
                           int launches = 1, std::vector<int32_t> *all = nullptr) {
    const int64_t B = d.batch;
    std::vector<kaio_tensor> t(12);
    for (auto &v : t) std::memset(&v, 0, sizeof v);
    if (row_stride > d.vocab) {
      const size_t es = kaio_dtype_size(d.dtype), rb = d.vocab * es, sb = row_stride * es;
      std::vector<uint8_t> padded(B * sb, 0xFF);  // NaN padding: never read
      for (int64_t b = 0; b < B; ++b) std::memcpy(&padded[b * sb], &logits[b * rb], rb);
      t[0] = upload(padded.data(), padded.size(), d.dtype, B, d.vocab);
      t[0].row_stride = row_stride;
    } else {
      t[0] = upload(logits.data(), logits.size(), d.dtype, B, d.vocab);
    }
    std::vector<float> temp(B), tp(B), mp(B), pen(B * 3);
    std::vector<int32_t> tk(B), lens(B), prev(B * std::max<int64_t>(1, d.max_prev), 0);
    std::vector<uint32_t> rng(B * 4);
    for (int64_t b = 0; b < B; ++b) {
      const RowParams &p = rows[b];
      temp[b] = p.temperature; tk[b] = p.top_k; tp[b] = p.top_p; mp[b] = p.min_p;
      rng[b * 4] = p.seed_lo; rng[b * 4 + 1] = p.seed_hi; rng[b * 4 + 2] = p.off_lo;
      rng[b * 4 + 3] = p.off_hi;
      pen[b * 3] = p.rep; pen[b * 3 + 1] = p.presence; pen[b * 3 + 2] = p.frequency;
      lens[b] = static_cast<int32_t>(p.prev.size());
      for (size_t j = 0; j < p.prev.size() && static_cast<int64_t>(j) < d.max_prev; ++j)
        prev[b * d.max_prev + j] = p.prev[j];
    }
    const uint32_t f = d.features;
    if (f & KAIO_SAMPLING_RANDOM) {
      t[1] = upload(temp.data(), B * 4, KAIO_DTYPE_F32, B, 1);
      t[5] = upload(rng.data(), B * 16, KAIO_DTYPE_U32, B, 4);
    }
    if (f & KAIO_SAMPLING_TOP_K) t[2] = upload(tk.data(), B * 4, KAIO_DTYPE_I32, 1, B);
    if (f & KAIO_SAMPLING_TOP_P) t[3] = upload(tp.data(), B * 4, KAIO_DTYPE_F32, B, 1);
    if (f & KAIO_SAMPLING_MIN_P) t[4] = upload(mp.data(), B * 4, KAIO_DTYPE_F32, 1, B);
    if (f & KAIO_SAMPLING_PENALTIES) {
      t[6] = upload(prev.data(), prev.size() * 4, KAIO_DTYPE_I32, B, d.max_prev);
      t[7] = upload(lens.data(), B * 4, KAIO_DTYPE_I32, B, 1);
      t[8] = upload(pen.data(), B * 12, KAIO_DTYPE_F32, B, 3);
    }
    std::vector<int32_t> init(B, -7);
    t[9] = upload(init.data(), B * 4, KAIO_DTYPE_I32, 1, B);
    if (f & KAIO_SAMPLING_PROBS) {
      std::vector<float> nanv(B, NAN);
      t[10] = upload(nanv.data(), B * 4, KAIO_DTYPE_F32, 1, B);
      t[11] = upload(nanv.data(), B * 4, KAIO_DTYPE_F32, B, 1);
    }
    std::vector<int32_t> tokens(B);
    for (int l = 0; l < launches; ++l) {
      if (l && t[5].buffer) {  // greedy ops have no rng
        for (int64_t b = 0; b < B; ++b) rng[b * 4 + 2] = rows[b].off_lo + l;
        EXPECT_EQ(kaio_buffer_write(t[5].buffer, 0, rng.data(), B * 16), KAIO_OK);
      }
      EXPECT_EQ(kaio_op_launch(op.get(), stream, t.data(), 12), KAIO_OK) << kaio_last_error();
      EXPECT_EQ(kaio_stream_synchronize(stream), KAIO_OK) << kaio_last_error();
      EXPECT_EQ(kaio_buffer_read(t[9].buffer, 0, tokens.data(), B * 4), KAIO_OK);
      if (all) all->insert(all->end(), tokens.begin(), tokens.end());
    }
    if (probs) {
      probs->resize(B);
      logprobs->resize(B);
      EXPECT_EQ(kaio_buffer_read(t[10].buffer, 0, probs->data(), B * 4), KAIO_OK);
      EXPECT_EQ(kaio_buffer_read(t[11].buffer, 0, logprobs->data(), B * 4), KAIO_OK);
    }
    return tokens;
  }
};

std::vector<uint8_t> encode(kaio_dtype dt, const std::vector<float> &v) {
  std::vector<uint8_t> out(v.size() * kaio_dtype_size(dt));
  for (size_t i = 0; i < v.size(); ++i) {
    if (dt == KAIO_DTYPE_F32) {
      std::memcpy(&out[i * 4], &v[i], 4);
    } else {
      uint16_t h = dt == KAIO_DTYPE_F16 ? kt::f32_to_f16(v[i]) : kt::f32_to_bf16(v[i]);
      std::memcpy(&out[i * 2], &h, 2);
    }
  }
  return out;
}

class GpuSampling : public kt::GpuTest {};

const kaio_dtype kDtypes[] = {KAIO_DTYPE_F32, KAIO_DTYPE_F16, KAIO_DTYPE_BF16};

TEST_F(GpuSampling, GreedyIsArgmaxLowestIndexNanNeverInfWins) {
  for (kaio_dtype dt : kDtypes) {
    for (int64_t V : {1, 97, 4099, 128256, 262144}) {
      const int64_t B = 7;
      std::mt19937 g(static_cast<uint32_t>(V + dt));
      std::uniform_real_distribution<float> u(-8, 8);
      std::vector<float> x(B * V);
      for (auto &v : x) v = u(g);
      auto row = [&](int64_t b) { return &x[b * V]; };
      // row 1: a tie of the max at two places; row 2: NaN everywhere but one;
      // row 3: +inf twice; row 4: all -inf; row 5: all NaN; row 6: -inf and NaN.
      if (V > 3) { row(1)[V / 3] = 20; row(1)[V - 1] = 20; }
      std::fill(row(2), row(2) + V, NAN); row(2)[V - 1] = -3;
      if (V > 2) { row(3)[V / 2] = INFINITY; row(3)[1] = INFINITY; }
      std::fill(row(4), row(4) + V, -INFINITY);
      std::fill(row(5), row(5) + V, NAN);
      std::fill(row(6), row(6) + V, NAN); row(6)[V - 1] = -INFINITY;
      auto bytes = encode(dt, x);
      auto back = kt::decode(dt, bytes);
      Sampler s(dev(), stream(), dt, B, V, KAIO_SAMPLING_PROBS);
      std::vector<RowParams> rows(B);
      std::vector<float> pr, lp;
      auto tok = s.run(bytes, rows, &pr, &lp);
      for (int64_t b = 0; b < B; ++b) {
        std::vector<double> xr(back.begin() + b * V, back.begin() + (b + 1) * V);
        bool greedy; int64_t am;
        auto prob = reference(xr, rows[b], false, &greedy, &am);
        EXPECT_EQ(tok[b], am) << "dtype " << dt << " V " << V << " row " << b;
        EXPECT_EQ(pr[b], static_cast<float>(prob[am])) << "row " << b;
        EXPECT_EQ(lp[b], prob[am] > 0 ? 0.0f : -INFINITY) << "row " << b;
      }
    }
  }
}

// 10^6 draws over V = 50: every kept token appears, nothing else does, and
// the frequencies pass a chi-square test (p > 1e-6) against the reference.
std::vector<float> chi_logits() {
  std::vector<float> x(50);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>(std::sin(i * 1.7) * 2.5);
  x[7] = x[3];                    // ties
  x[11] = x[3];
  x[20] = NAN;
  x[21] = -INFINITY;
  return x;
}

void chi_square(kt::GpuTest *t, kaio_device *dev, kaio_stream *st, kaio_dtype dt, RowParams p,
                uint32_t feat, const char *what) {
  const int64_t V = 50, B = 20000;
  const int launches = 50;
  const std::vector<float> x = chi_logits();
  std::vector<float> all(B * V);
  for (int64_t b = 0; b < B; ++b) std::copy(x.begin(), x.end(), all.begin() + b * V);
  auto bytes = encode(dt, all);
  auto back = kt::decode(dt, std::vector<uint8_t>(bytes.begin(), bytes.begin() + V * kaio_dtype_size(dt)));
  bool greedy; int64_t am;
  auto prob = reference(back, p, feat & KAIO_SAMPLING_PENALTIES, &greedy, &am);
  Sampler s(dev, st, dt, B, V, feat, (feat & KAIO_SAMPLING_PENALTIES) ? 8 : 0);
  std::vector<RowParams> rows(B, p);
  for (int64_t b = 0; b < B; ++b) { rows[b].seed_lo = static_cast<uint32_t>(b * 2654435761u); rows[b].seed_hi = 17; }
  std::vector<int32_t> draws;
  s.run(bytes, rows, nullptr, nullptr, launches, &draws);
  std::vector<double> n(V, 0);
  for (int32_t d : draws) {
    ASSERT_TRUE(d >= 0 && d < V) << what;
    n[d] += 1;
  }
  const double N = static_cast<double>(draws.size());
  double chi = 0;
  int df = -1;
  for (int64_t i = 0; i < V; ++i) {
    if (prob[i] == 0) {
      EXPECT_EQ(n[i], 0) << what << ": token " << i << " is outside the kept set";
      continue;
    }
    EXPECT_GT(n[i], 0) << what << ": kept token " << i << " never drawn (p " << prob[i] << ")";
    const double e = N * prob[i];
    chi += (n[i] - e) * (n[i] - e) / e;
    ++df;
  }
  // Wilson-Hilferty: the chi-square quantile for p = 1e-6 (z = 4.75).
  const double k = std::max(df, 1), z = 4.75;
  const double crit = k * std::pow(1 - 2 / (9 * k) + z * std::sqrt(2 / (9 * k)), 3);
  EXPECT_LT(chi, crit) << what << ": chi-square " << chi << " with " << df << " df";
  (void)t;
}

TEST_F(GpuSampling, ChiSquareTemperature) {
  RowParams p; p.temperature = 0.7f;
  chi_square(this, dev(), stream(), KAIO_DTYPE_F32, p, KAIO_SAMPLING_RANDOM, "temperature");
}
TEST_F(GpuSampling, ChiSquareTopKWithTies) {
  RowParams p; p.temperature = 1.3f; p.top_k = 9;
  chi_square(this, dev(), stream(), KAIO_DTYPE_F32, p, KAIO_SAMPLING_RANDOM | KAIO_SAMPLING_TOP_K, "top-k");
}
TEST_F(GpuSampling, ChiSquareTopP) {
  RowParams p; p.temperature = 1.0f; p.top_p = 0.83f;
  chi_square(this, dev(), stream(), KAIO_DTYPE_BF16, p, KAIO_SAMPLING_RANDOM | KAIO_SAMPLING_TOP_P, "top-p");
}
TEST_F(GpuSampling, ChiSquareTopKThenTopP) {
  RowParams p; p.temperature = 2.0f; p.top_k = 20; p.top_p = 0.7f;
  chi_square(this, dev(), stream(), KAIO_DTYPE_F16, p,
             KAIO_SAMPLING_RANDOM | KAIO_SAMPLING_TOP_K | KAIO_SAMPLING_TOP_P, "top-k then top-p");
}
// candle's TopKThenTopP: top-p's mass over the whole row. The case is one
// where that keeps other tokens than top-p renormalised over the top k.
TEST_F(GpuSampling, ChiSquareTopKThenTopPOfRow) {
  RowParams p; p.temperature = 2.0f; p.top_k = 20; p.top_p = 0.5f; p.top_p_of_row = true;
  const std::vector<double> x = kt::decode(KAIO_DTYPE_F16, encode(KAIO_DTYPE_F16, chi_logits()));
  bool greedy; int64_t am;
  RowParams renorm = p;
  renorm.top_p_of_row = false;
  auto kept = [](const std::vector<double> &pr) {
    return std::count_if(pr.begin(), pr.end(), [](double v) { return v > 0; });
  };
  ASSERT_NE(kept(reference(x, p, false, &greedy, &am)), kept(reference(x, renorm, false, &greedy, &am)));
  chi_square(this, dev(), stream(), KAIO_DTYPE_F16, p,
             KAIO_SAMPLING_RANDOM | KAIO_SAMPLING_TOP_K | KAIO_SAMPLING_TOP_P | KAIO_SAMPLING_TOP_P_OF_ROW,
             "top-k then top-p over the row");
}
TEST_F(GpuSampling, ChiSquareMinP) {
  RowParams p; p.temperature = 1.5f; p.min_p = 0.12f;
  chi_square(this, dev(), stream(), KAIO_DTYPE_F32, p, KAIO_SAMPLING_RANDOM | KAIO_SAMPLING_MIN_P, "min-p");
}
TEST_F(GpuSampling, ChiSquarePenalties) {
  RowParams p; p.temperature = 1.0f; p.rep = 1.3f; p.presence = 0.4f; p.frequency = 0.25f;
  p.prev = {3, 3, 5, 40, 40, 40, -2, 77};
  chi_square(this, dev(), stream(), KAIO_DTYPE_F32, p, KAIO_SAMPLING_RANDOM | KAIO_SAMPLING_PENALTIES,
             "penalties");
}

TEST_F(GpuSampling, SameSeedAndOffsetSameTokenWhateverTheBatch) {
  const int64_t V = 128256, B = 6;
  auto h = kt::random_tensor(KAIO_DTYPE_BF16, B * V, -4, 4, kt::test_seed());
  std::vector<RowParams> rows(B);
  for (int64_t b = 0; b < B; ++b) {
    rows[b].temperature = 1.0f; rows[b].top_k = b % 2 ? 0 : 1000; rows[b].top_p = 0.95f;
    rows[b].seed_lo = 1234 + static_cast<uint32_t>(b); rows[b].off_lo = 99;
  }
  const uint32_t f = KAIO_SAMPLING_RANDOM | KAIO_SAMPLING_TOP_K | KAIO_SAMPLING_TOP_P;
  Sampler s6(dev(), stream(), KAIO_DTYPE_BF16, B, V, f);
  auto full = s6.run(h.bytes, rows);
  auto again = s6.run(h.bytes, rows);
  EXPECT_EQ(full, again);
  // Rows 4, 1 alone, in another order.
  const int64_t pick[] = {4, 1};
  std::vector<uint8_t> sub;
  std::vector<RowParams> subrows;
  for (int64_t b : pick) {
    sub.insert(sub.end(), h.bytes.begin() + b * V * 2, h.bytes.begin() + (b + 1) * V * 2);
    subrows.push_back(rows[b]);
  }
  Sampler s2(dev(), stream(), KAIO_DTYPE_BF16, 2, V, f);
  auto part = s2.run(sub, subrows);
  EXPECT_EQ(part[0], full[4]);
  EXPECT_EQ(part[1], full[1]);
}

TEST_F(GpuSampling, ProbsAndPenaltiesMatchTheReference) {
  for (kaio_dtype dt : kDtypes) {
    const int64_t V = 1009, B = 16, L = 12;
    auto h = kt::random_tensor(dt, B * V, -3, 3, kt::test_seed() + dt);
    std::vector<RowParams> rows(B);
    std::mt19937 g(5);
    for (int64_t b = 0; b < B; ++b) {
      RowParams &p = rows[b];
      p.temperature = b % 4 ? 0.5f + 0.1f * b : 0.0f;
      p.top_k = b % 3 ? 40 : 0; p.top_p = b % 5 ? 0.9f : 1.0f; p.min_p = b % 2 ? 0.05f : 0.0f;
      p.seed_lo = static_cast<uint32_t>(b); p.off_lo = 3;
      p.rep = 1.2f; p.presence = 0.3f; p.frequency = 0.1f;
      for (int j = 0; j < L - (b % 4); ++j) p.prev.push_back(static_cast<int32_t>(g() % (V + 5)) - 2);
    }
    const uint32_t f = KAIO_SAMPLING_RANDOM | KAIO_SAMPLING_TOP_K | KAIO_SAMPLING_TOP_P |
                       KAIO_SAMPLING_MIN_P | KAIO_SAMPLING_PENALTIES | KAIO_SAMPLING_PROBS;
    Sampler s(dev(), stream(), dt, B, V, f, L);
    std::vector<float> pr, lp;
    auto tok = s.run(h.bytes, rows, &pr, &lp);
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> xr(h.values.begin() + b * V, h.values.begin() + (b + 1) * V);
      bool greedy; int64_t am;
      auto prob = reference(xr, rows[b], true, &greedy, &am);
      ASSERT_TRUE(tok[b] >= 0 && tok[b] < V) << "row " << b;
      if (greedy) {
        EXPECT_EQ(tok[b], am) << "row " << b;
      }
      EXPECT_GT(prob[tok[b]], 0) << "dtype " << dt << " row " << b << ": token outside the kept set";
      EXPECT_NEAR(pr[b], prob[tok[b]], 2e-5 + 1e-4 * prob[tok[b]]) << "row " << b;
      EXPECT_NEAR(lp[b], std::log(prob[tok[b]]), 2e-4) << "row " << b;
    }
  }
}

// Every draw of `launches` launches is inside the reference's kept set, and
// every kept token of row 0 among the first `must_see` is drawn at least once.
void expect_kept(kaio_device *dev, kaio_stream *st, kaio_dtype dt, int64_t B, int64_t V,
                 const kt::HostTensor &h, const std::vector<RowParams> &rows, uint32_t feat,
                 int launches, const char *what) {
  Sampler s(dev, st, dt, B, V, feat);
  std::vector<int32_t> all;
  s.run(h.bytes, rows, nullptr, nullptr, launches, &all);
  std::vector<std::vector<double>> prob(B);
  for (int64_t b = 0; b < B; ++b) {
    std::vector<double> xr(h.values.begin() + b * V, h.values.begin() + (b + 1) * V);
    bool greedy; int64_t am;
    prob[b] = reference(xr, rows[b], false, &greedy, &am);
  }
  for (size_t j = 0; j < all.size(); ++j) {
    const int64_t b = static_cast<int64_t>(j % B);
    ASSERT_TRUE(all[j] >= 0 && all[j] < V) << what;
    EXPECT_GT(prob[b][all[j]], 0) << what << ": draw " << j << " (row " << b << ") outside the kept set";
  }
}

TEST_F(GpuSampling, LargeVocabTopKDrawsInsideTheKeptSet) {
  const int64_t V = 262144, B = 3;
  auto h = kt::random_tensor(KAIO_DTYPE_F32, B * V, -10, 10, kt::test_seed());
  std::vector<RowParams> rows(B);
  for (int64_t b = 0; b < B; ++b) { rows[b].temperature = 1; rows[b].top_k = 50; rows[b].seed_lo = 9 + b; }
  expect_kept(dev(), stream(), KAIO_DTYPE_F32, B, V, h, rows,
              KAIO_SAMPLING_RANDOM | KAIO_SAMPLING_TOP_K, 20, "top-k 50");
}

// Few distinct values: the threshold's coarse bin holds more tokens than the
// shared-memory candidate list, so the float-digit radix passes run.
TEST_F(GpuSampling, CrowdedThresholdBinTakesTheRadixPath) {
  for (kaio_dtype dt : kDtypes) {
    const int64_t V = 8191, B = 4;
    std::vector<float> x(B * V);
    for (int64_t i = 0; i < B * V; ++i) x[i] = static_cast<float>((i * 7919) % 5) * 0.25f + ((i % 97) == 0 ? 0.0009765625f : 0.0f);
    kt::HostTensor h;
    h.bytes = encode(dt, x);
    h.values = kt::decode(dt, h.bytes);
    std::vector<RowParams> rows(B);
    for (int64_t b = 0; b < B; ++b) {
      rows[b].temperature = b == 3 ? 40.0f : 1.0f; rows[b].seed_lo = 5 + static_cast<uint32_t>(b);
      rows[b].top_k = b % 2 ? 2500 : 0; rows[b].top_p = b >= 2 ? 0.5f : 1.0f;
    }
    rows[0].top_p = 0.3f;
    expect_kept(dev(), stream(), dt, B, V, h, rows, KAIO_SAMPLING_RANDOM | KAIO_SAMPLING_TOP_K | KAIO_SAMPLING_TOP_P,
                30, "crowded threshold bin");
  }
}

// A logits view with padded rows (row_stride V + 3: rows not 16-byte aligned,
// so the per-element loads run) gives the same tokens and probabilities, bit
// for bit, as the contiguous one (whole-quad loads).
TEST_F(GpuSampling, PaddedRowsSameTokensAsContiguous) {
  for (kaio_dtype dt : kDtypes) {
    const int64_t V = 128256, B = 5;
    auto h = kt::random_tensor(dt, B * V, -6, 6, kt::test_seed() + 3 * dt);
    std::vector<RowParams> rows(B);
    for (int64_t b = 0; b < B; ++b) {
      rows[b].temperature = b == 4 ? 0.0f : 0.8f; rows[b].seed_lo = 77 + static_cast<uint32_t>(b);
      rows[b].off_lo = 5; rows[b].top_k = b % 2 ? 40 : 0; rows[b].top_p = b % 3 ? 0.9f : 1.0f;
      rows[b].min_p = b == 2 ? 0.05f : 0.0f;
    }
    const uint32_t f = KAIO_SAMPLING_RANDOM | KAIO_SAMPLING_TOP_K | KAIO_SAMPLING_TOP_P |
                       KAIO_SAMPLING_MIN_P | KAIO_SAMPLING_PROBS;
    Sampler a(dev(), stream(), dt, B, V, f), p(dev(), stream(), dt, B, V, f);
    p.row_stride = V + 3;
    std::vector<float> pa, la, pp, lp;
    std::vector<int32_t> ta, tp;
    a.run(h.bytes, rows, &pa, &la, 4, &ta);
    p.run(h.bytes, rows, &pp, &lp, 4, &tp);
    EXPECT_EQ(ta, tp) << "dtype " << dt;
    EXPECT_EQ(pa, pp) << "dtype " << dt;
    for (int64_t b = 0; b < B; ++b) {
      std::vector<double> xr(h.values.begin() + b * V, h.values.begin() + (b + 1) * V);
      bool greedy; int64_t am;
      auto prob = reference(xr, rows[b], false, &greedy, &am);
      for (int l = 0; l < 4; ++l) EXPECT_GT(prob[tp[l * B + b]], 0) << "dtype " << dt << " row " << b;
    }
  }
}

// Small enough for compute-sanitizer memcheck: every feature, odd shapes,
// out-of-range parameters (clamped or ignored, never out of bounds).
TEST_F(GpuSampling, SanitizerSmall) {
  const int64_t V = 37, B = 5, L = 4;
  auto h = kt::random_tensor(KAIO_DTYPE_F16, B * V, -2, 2, 7);
  std::vector<RowParams> rows(B);
  const int32_t ks[] = {0, 5, 1000, -3, 1};
  const float ps[] = {1.0f, 0.5f, -1.0f, 7.0f, NAN}, mps[] = {0.0f, 0.2f, 3.0f, -1.0f, NAN};
  const float ts[] = {1.0f, 0.8f, -2.0f, NAN, 1e30f};
  for (int64_t b = 0; b < B; ++b) {
    rows[b].temperature = ts[b]; rows[b].top_k = ks[b]; rows[b].top_p = ps[b]; rows[b].min_p = mps[b];
    rows[b].prev = {static_cast<int32_t>(b), -5, 1 << 30, static_cast<int32_t>(V - 1), 3, 3};
    rows[b].rep = b == 2 ? -1.0f : 1.1f;
  }
  const uint32_t f = KAIO_SAMPLING_RANDOM | KAIO_SAMPLING_TOP_K | KAIO_SAMPLING_TOP_P |
                     KAIO_SAMPLING_MIN_P | KAIO_SAMPLING_PENALTIES | KAIO_SAMPLING_PROBS;
  Sampler s(dev(), stream(), KAIO_DTYPE_F16, B, V, f, L);
  std::vector<float> pr, lp;
  auto tok = s.run(h.bytes, rows, &pr, &lp);
  for (int64_t b = 0; b < B; ++b) {
    EXPECT_TRUE(tok[b] >= 0 && tok[b] < V) << "row " << b;
    EXPECT_TRUE(pr[b] > 0 && pr[b] <= 1) << "row " << b << " prob " << pr[b];
  }
}

// Rows split over several CTAs (fewer rows than SMs) give the bits one CTA
// per row gives (SMs + 1 rows: top-k without top-p takes the split kernel's
// stage 7 up to SMs rows; same row data and seeds): tokens,
// probs and logprobs, over 3 launches (each launch's last CTA of a row
// resets the workspace for the next), every mode, V not a multiple of the
// split, ties at the max, a crowded threshold bin, NaN, +inf, -inf rows.
void split_same_bits(kaio_device *dev, kaio_stream *st, kaio_dtype dt, int64_t V) {
  kaio_device_info info;
  info.struct_size = sizeof info;
  ASSERT_EQ(kaio_device_get_info(dev, &info), KAIO_OK);
  const int64_t nref = info.sm_count + 1, rows_n = 4;  // nref rows: one CTA per row
  std::mt19937 g(static_cast<uint32_t>(V * 3 + dt));
  std::uniform_real_distribution<float> u(-6, 6);
  std::vector<float> x(rows_n * V);
  for (auto &v : x) v = u(g);
  float *r1 = &x[V], *r2 = &x[2 * V], *r3 = &x[3 * V];
  for (int64_t i = 0; i < V; ++i) r1[i] = static_cast<float>((i * 7919) % 5) * 0.25f;  // crowded ties
  r2[V / 3] = 9; r2[V - 1] = 9; r2[5] = NAN; r2[V / 2] = -INFINITY; r2[V - 2] = NAN;  // max tie
  if (V == 4099) { r3[V / 2] = INFINITY; r3[1] = INFINITY; }               // +inf wins
  if (V == 1009) std::fill(r3, r3 + V, -INFINITY), r3[7] = NAN;            // nothing above -inf
  std::vector<RowParams> base0(rows_n);
  const float temps[] = {1.0f, 0.8f, 1.3f, 0.6f}, tps[] = {0.9f, 0.5f, 0.3f, 0.95f},
              mps[] = {0.05f, 0.1f, 0.2f, 0.01f};
  const int32_t tks[] = {50, 2500, 7, 1};
  for (int64_t b = 0; b < rows_n; ++b) {
    base0[b].temperature = temps[b]; base0[b].top_k = tks[b]; base0[b].top_p = tps[b];
    base0[b].min_p = mps[b]; base0[b].seed_lo = 1000u + static_cast<uint32_t>(b * 77);
    base0[b].seed_hi = 3; base0[b].off_lo = 11;
  }
  const uint32_t P = KAIO_SAMPLING_PROBS, R = KAIO_SAMPLING_RANDOM, K = KAIO_SAMPLING_TOP_K,
                 TP = KAIO_SAMPLING_TOP_P, MP = KAIO_SAMPLING_MIN_P, OR = KAIO_SAMPLING_TOP_P_OF_ROW;
  const uint32_t modes[] = {P,          R | P,
                            R | K | P,  R | TP | P,
                            R | MP | P, R | K | TP | MP | P,
                            R | K | MP | P, R | K | TP | OR | P};
  const int launches = 3;
  for (uint32_t f : modes) {
    // top-k + min-p: also a greedy row and a row with top-k off
    std::vector<RowParams> base = base0;
    if (f == (R | K | MP | P)) base[0].temperature = 0, base[3].top_k = 0;
    std::vector<float> xr(nref * V);
    std::vector<RowParams> rref(nref);
    for (int64_t b = 0; b < nref; ++b) {
      std::copy(x.begin() + (b % rows_n) * V, x.begin() + (b % rows_n + 1) * V, xr.begin() + b * V);
      rref[b] = base[b % rows_n];
    }
    Sampler ref(dev, st, dt, nref, V, f);
    std::vector<float> pref, lref;
    std::vector<int32_t> tref;
    ref.run(encode(dt, xr), rref, &pref, &lref, launches, &tref);
    for (int64_t B : {int64_t{1}, rows_n}) {
      Sampler s(dev, st, dt, B, V, f);
      std::vector<float> ps, ls;
      std::vector<int32_t> ts;
      std::vector<RowParams> rs(base.begin(), base.begin() + B);
      s.run(encode(dt, std::vector<float>(x.begin(), x.begin() + B * V)), rs, &ps, &ls, launches, &ts);
      for (int l = 0; l < launches; ++l)
        for (int64_t b = 0; b < B; ++b)
          EXPECT_EQ(ts[l * B + b], tref[l * nref + b])
              << "dtype " << dt << " V " << V << " features " << f << " B " << B << " launch " << l
              << " row " << b;
      for (int64_t b = 0; b < B; ++b) {
        uint32_t a[2], c[2];
        std::memcpy(&a[0], &ps[b], 4); std::memcpy(&c[0], &pref[b], 4);
        std::memcpy(&a[1], &ls[b], 4); std::memcpy(&c[1], &lref[b], 4);
        EXPECT_EQ(a[0], c[0]) << "prob: dtype " << dt << " V " << V << " features " << f << " B " << B << " row " << b;
        EXPECT_EQ(a[1], c[1]) << "logprob: dtype " << dt << " V " << V << " features " << f << " B " << B << " row " << b;
      }
    }
  }
}

// One dtype, one small V: short enough for compute-sanitizer.
TEST_F(GpuSampling, SplitSanitizerSmall) { split_same_bits(dev(), stream(), KAIO_DTYPE_F16, 1009); }

TEST_F(GpuSampling, SplitSmallSameBitsAsOneCtaPerRow) {
  for (kaio_dtype dt : kDtypes)
    for (int64_t V : {1009, 4099}) split_same_bits(dev(), stream(), dt, V);
}

TEST_F(GpuSampling, SplitLargeSameBitsAsOneCtaPerRow) {
  for (kaio_dtype dt : {KAIO_DTYPE_F32, KAIO_DTYPE_BF16}) split_same_bits(dev(), stream(), dt, 128256);
}

}  // namespace
