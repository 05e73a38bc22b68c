// RoPE against f64 references computed from the same rounded inputs: both
// styles, every scaling, f32 / f16 / bf16, Q only / K only / both, odd head
// counts, partial rotary (D 80 with rotary 40, D 64 with 32), padded row
// strides and a fused QKV buffer, positions up to 1,000,000.
//
// Tolerances, per rotated element y = x0·c − x1·s (or x1·c + x0·s), with
// X = |x0| + |x1|, A the attention factor and ulp the output dtype's:
//   tight:  against f64 cos / sin of the kernel's own f32 angle
//           f32(f32(pos) · inv_freq_f32) (the table from the test's own HF
//           reference, tests/support/rope_ref.cpp, bit-equal to the
//           library's on the fake driver):
//               |y − ref| <= 4e-7·X·A + ulp(y) / 2
//           (cos / sin within 1e-7, their scaling and the fma's roundings;
//           then one rounding to the dtype).
//   loose:  against pure f64 (f64 inv_freq, angle, cos, sin): the f32
//           angle carries an error of about |angle|·2^-24 from its own
//           rounding plus that of inv_freq (a few f32 roundings: 2^-21
//           relative for NONE / LINEAR, 2^-19 for LLAMA3 / YARN, whose
//           smoothing ramps cancel), so
//               |y − ref| <= X·A·|angle|·rel + tight bound.
// Every element not rotated (dims >= rotary_dim, row padding, V of the
// fused buffer) must keep its bytes exactly.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "support/kaio_test.hpp"
#include "support/rope_ref.hpp"

namespace {

struct Case {
  kaio_rope_style style = KAIO_ROPE_HALF_SPLIT;
  kaio_dtype dt = KAIO_DTYPE_BF16;
  kaio_rope_scaling scaling = KAIO_ROPE_SCALING_NONE;
  int64_t tokens = 37, hq = 5, hk = 3, d = 128, rot = 0;
  int64_t pad = 0;            // extra elements per row of Q and K
  bool q = true, k = true;    // present
  int32_t max_pos = 1000000;
  bool prepared = false;
};

std::string describe(const Case &c) {
  const char *sc[] = {"none", "linear", "llama3", "yarn"};
  return std::string(c.style == KAIO_ROPE_HALF_SPLIT ? "half_split " : "interleaved ") +
         kaio_dtype_name(c.dt) + " " + sc[c.scaling] + " T" + std::to_string(c.tokens) + " Hq" +
         std::to_string(c.q ? c.hq : 0) + " Hk" + std::to_string(c.k ? c.hk : 0) + " D" +
         std::to_string(c.d) + " rot" + std::to_string(c.rot ? c.rot : c.d) + " pad" +
         std::to_string(c.pad) + (c.prepared ? " prepared" : " one-shot");
}

kaio_rope_desc make_desc(const Case &c) {
  kaio_rope_desc d;
  EXPECT_EQ(kaio_rope_desc_init(&d, sizeof d), KAIO_OK);
  d.style = c.style;
  d.dtype = c.dt;
  d.scaling = c.scaling;
  d.heads_q = c.hq;
  d.heads_k = c.hk;
  d.head_dim = c.d;
  d.rotary_dim = c.rot;
  switch (c.scaling) {
    case KAIO_ROPE_SCALING_LINEAR: d.factor = 4.0; break;
    case KAIO_ROPE_SCALING_LLAMA3:
      d.theta = 500000.0, d.factor = 8.0, d.original_max_position_embeddings = 8192;
      break;
    case KAIO_ROPE_SCALING_YARN:
      d.theta = 1000000.0, d.factor = 4.0, d.original_max_position_embeddings = 32768;
      break;
    default: break;
  }
  return d;
}

double ulp(kaio_dtype dt, double v) {
  const double a = std::max(std::fabs(v), 1e-30);
  const int e = static_cast<int>(std::floor(std::log2(a)));
  if (dt == KAIO_DTYPE_F32) return std::ldexp(1.0, std::max(e, -126) - 23);
  if (dt == KAIO_DTYPE_F16) return std::ldexp(1.0, std::max(e, -14) - 10);
  return std::ldexp(1.0, std::max(e, -126) - 7);
}

struct Stats {
  double worst_tight = 0, worst_loose = 0;  // error / bound
  long checked = 0;
};

// One tensor (Q or K): heads, its bytes before and after.
void check_tensor(const Case &c, const kaio_rope_desc &d, const char *name, int64_t heads,
                  int64_t stride, const std::vector<uint8_t> &before,
                  const std::vector<uint8_t> &after, const std::vector<int32_t> &pos,
                  Stats *st) {
  const size_t es = kaio_dtype_size(c.dt);
  const int64_t rot = c.rot ? c.rot : c.d;
  const std::vector<double> x = kt::decode(c.dt, before), y = kt::decode(c.dt, after);
  const kt::RopeRef r32 = kt::rope_ref_f32(d), r64 = kt::rope_ref_f64(d);
  const double rel = c.scaling == KAIO_ROPE_SCALING_LLAMA3 || c.scaling == KAIO_ROPE_SCALING_YARN
                         ? std::ldexp(1.0, -19)
                         : std::ldexp(1.0, -21);
  const double A = r32.attention;
  std::vector<bool> rotated(before.size() / es, false);
  int failures = 0;
  for (int64_t t = 0; t < c.tokens; ++t) {
    std::vector<double> a32(rot / 2), a64(rot / 2);
    for (int64_t i = 0; i < rot / 2; ++i) {
      a32[i] = static_cast<float>(static_cast<float>(pos[t]) * static_cast<float>(r32.inv_freq[i]));
      a64[i] = static_cast<double>(pos[t]) * r64.inv_freq[i];
    }
    for (int64_t h = 0; h < heads; ++h) {
      const size_t base = static_cast<size_t>(t * stride + h * c.d);
      const std::vector<double> tight = kt::rope_rotate_ref(d, &x[base], a32, A);
      const std::vector<double> loose = kt::rope_rotate_ref(d, &x[base], a64, r64.attention);
      for (int64_t i = 0; i < rot / 2; ++i) {
        const int64_t e0 = c.style == KAIO_ROPE_HALF_SPLIT ? i : 2 * i;
        const int64_t e1 = c.style == KAIO_ROPE_HALF_SPLIT ? i + rot / 2 : 2 * i + 1;
        const double X = std::fabs(x[base + e0]) + std::fabs(x[base + e1]);
        for (int64_t e : {e0, e1}) {
          rotated[base + e] = true;
          const double got = y[base + e];
          const double tb = 4e-7 * X * std::max(A, 1.0) +
                            0.5 * ulp(c.dt, std::max(std::fabs(got), std::fabs(tight[e])));
          const double lb = X * std::max(A, 1.0) * std::fabs(a64[i]) * rel + tb;
          const double et = std::fabs(got - tight[e]), el = std::fabs(got - loose[e]);
          st->worst_tight = std::max(st->worst_tight, et / tb);
          st->worst_loose = std::max(st->worst_loose, el / lb);
          ++st->checked;
          if (!(et <= tb && el <= lb) && failures++ < 5)
            ADD_FAILURE() << describe(c) << ": " << name << "[t " << t << ", head " << h
                          << ", dim " << e << "] pos " << pos[t] << " = " << got
                          << ", tight ref " << tight[e] << " (bound " << tb << "), f64 ref "
                          << loose[e] << " (bound " << lb << ")";
        }
      }
    }
  }
  for (size_t i = 0; i < rotated.size(); ++i)
    if (!rotated[i] && std::memcmp(&before[i * es], &after[i * es], es) != 0 && failures++ < 5)
      ADD_FAILURE() << describe(c) << ": " << name << " element " << i << " (row "
                    << i / stride << ", col " << i % stride << ") is not rotated but changed";
}

class GpuRope : public kt::GpuTest {
 protected:
  // Runs one case and checks it; returns the stats.
  Stats run(const Case &c) {
    Stats st;
    SCOPED_TRACE(describe(c));
    const kaio_rope_desc d = make_desc(c);
    const size_t es = kaio_dtype_size(c.dt);
    const int64_t qs = c.hq * c.d + c.pad, ks = c.hk * c.d + c.pad;
    const uint64_t seed = kt::test_seed() ^ std::hash<std::string>()(describe(c));
    // Whole rows, padding included, random: so untouched bytes are checked.
    kt::HostTensor qh = kt::random_tensor(c.dt, c.tokens * qs, -2, 2, seed);
    kt::HostTensor kh = kt::random_tensor(c.dt, c.tokens * ks, -2, 2, seed + 1);
    std::vector<int32_t> pos(c.tokens);
    std::mt19937 rng(static_cast<uint32_t>(seed));
    std::uniform_int_distribution<int32_t> any(0, c.max_pos);
    for (int64_t t = 0; t < c.tokens; ++t) pos[t] = any(rng);
    pos[0] = 0;
    if (c.tokens > 1) pos[c.tokens - 1] = c.max_pos;
    if (c.tokens > 2) pos[1] = 1;
    kt::Buffer qb = kt::make_buffer(dev(), qh.bytes.size()), kb = kt::make_buffer(dev(), kh.bytes.size());
    kt::Buffer pb = kt::make_buffer(dev(), pos.size() * 4);
    EXPECT_EQ(kaio_buffer_write(qb.get(), 0, qh.bytes.data(), qh.bytes.size()), KAIO_OK);
    EXPECT_EQ(kaio_buffer_write(kb.get(), 0, kh.bytes.data(), kh.bytes.size()), KAIO_OK);
    EXPECT_EQ(kaio_buffer_write(pb.get(), 0, pos.data(), pos.size() * 4), KAIO_OK);
    kaio_tensor qv = kaio_tensor_2d(c.q ? qb.get() : nullptr, c.dt, c.tokens, c.hq * c.d);
    qv.row_stride = qs;
    kaio_tensor kv = kaio_tensor_2d(c.k ? kb.get() : nullptr, c.dt, c.tokens, c.hk * c.d);
    kv.row_stride = ks;
    kaio_tensor pv = kaio_tensor_2d(pb.get(), KAIO_DTYPE_I32, 1, c.tokens);
    if (c.prepared) {
      kaio_op *raw = nullptr;
      EXPECT_EQ(kaio_op_create_rope(&raw, dev(), &d), KAIO_OK) << kaio_last_error();
      kt::Op op(raw);
      const kaio_tensor t[3] = {qv, kv, pv};
      EXPECT_EQ(kaio_op_launch(op.get(), stream(), t, 3), KAIO_OK) << kaio_last_error();
    } else {
      EXPECT_EQ(kaio_rope(stream(), &qv, &kv, &pv, &d), KAIO_OK) << kaio_last_error();
    }
    EXPECT_EQ(kaio_stream_synchronize(stream()), KAIO_OK) << kaio_last_error();
    std::vector<uint8_t> qa(qh.bytes.size()), ka(kh.bytes.size());
    EXPECT_EQ(kaio_buffer_read(qb.get(), 0, qa.data(), qa.size()), KAIO_OK);
    EXPECT_EQ(kaio_buffer_read(kb.get(), 0, ka.data(), ka.size()), KAIO_OK);
    (void)es;
    if (c.q) check_tensor(c, d, "q", c.hq, qs, qh.bytes, qa, pos, &st);
    else EXPECT_EQ(qa, qh.bytes) << "absent q was written";
    if (c.k) check_tensor(c, d, "k", c.hk, ks, kh.bytes, ka, pos, &st);
    else EXPECT_EQ(ka, kh.bytes) << "absent k was written";
    return st;
  }
};

TEST_F(GpuRope, EveryStyleScalingDtypeAndPresence) {
  Stats all;
  int n = 0;
  for (kaio_rope_style style : {KAIO_ROPE_HALF_SPLIT, KAIO_ROPE_INTERLEAVED})
    for (kaio_rope_scaling sc : {KAIO_ROPE_SCALING_NONE, KAIO_ROPE_SCALING_LINEAR,
                                 KAIO_ROPE_SCALING_LLAMA3, KAIO_ROPE_SCALING_YARN})
      for (kaio_dtype dt : {KAIO_DTYPE_F32, KAIO_DTYPE_F16, KAIO_DTYPE_BF16})
        for (int presence = 0; presence < 3; ++presence) {
          Case c;
          c.style = style, c.scaling = sc, c.dt = dt;
          c.q = presence != 1, c.k = presence != 0;
          // Layouts in turn: full rotary D 128; D 80 rotary 40 (element
          // kernel for half split); D 64 rotary 32 with padded rows.
          const int layout = n++ % 3;
          if (layout == 1) c.d = 80, c.rot = 40;
          if (layout == 2) c.d = 64, c.rot = 32, c.pad = 24;
          c.prepared = n % 2 == 0;
          const Stats st = run(c);
          all.worst_tight = std::max(all.worst_tight, st.worst_tight);
          all.worst_loose = std::max(all.worst_loose, st.worst_loose);
          all.checked += st.checked;
        }
  std::printf("[ rope     ] %ld elements; worst error / bound: tight %.3f, f64 %.3f\n",
              all.checked, all.worst_tight, all.worst_loose);
}

TEST_F(GpuRope, OddHeadsOddDimsAndManyTokens) {
  Case c;
  c.dt = KAIO_DTYPE_F16, c.tokens = 3001, c.hq = 7, c.hk = 1, c.d = 80, c.rot = 40, c.pad = 3;
  run(c);
  c.style = KAIO_ROPE_INTERLEAVED, c.dt = KAIO_DTYPE_BF16, c.d = 96, c.rot = 96, c.pad = 0;
  run(c);
  c.dt = KAIO_DTYPE_F32, c.d = 6, c.rot = 2, c.hq = 3, c.hk = 5;  // tiny heads
  run(c);
}

// Prefill shapes, where a token's threads take interleaved head lanes (up
// to a warp of them): odd head counts, chunks whose heads are not a
// multiple of the lanes, and a token count that is not a multiple of a
// block's tokens.
TEST_F(GpuRope, PrefillHeadLanesCoverEveryHeadOnce) {
  Case c;
  c.tokens = 4097, c.hq = 7, c.hk = 2;  // bf16 D 128: 4 lanes, heads split in two chunks
  run(c);
  c.dt = KAIO_DTYPE_F32, c.tokens = 8191, c.hq = 13, c.hk = 3;  // 2 lanes, one chunk
  run(c);
  c.dt = KAIO_DTYPE_F16, c.style = KAIO_ROPE_INTERLEAVED, c.d = 64, c.hq = 5, c.hk = 1;
  run(c);
}

TEST_F(GpuRope, DecodeSplitsHeadsAcrossBlocks) {
  Case c;
  c.tokens = 1, c.hq = 32, c.hk = 8, c.prepared = true;
  run(c);
  c.tokens = 3;
  run(c);
}

TEST_F(GpuRope, FusedQkvInPlaceLeavesVUntouched) {
  // One [T, (Hq + 2 Hk) D] bf16 buffer; Q and K are its first column ranges.
  const int64_t T = 50, Hq = 9, Hk = 3, D = 128, W = (Hq + 2 * Hk) * D;
  kt::HostTensor h = kt::random_tensor(KAIO_DTYPE_BF16, T * W, -1, 1, kt::test_seed());
  std::vector<int32_t> pos(T);
  for (int64_t t = 0; t < T; ++t) pos[t] = static_cast<int32_t>(t * 20000 + 7);
  kt::Buffer b = kt::make_buffer(dev(), h.bytes.size()), pb = kt::make_buffer(dev(), T * 4);
  KT_OK(kaio_buffer_write(b.get(), 0, h.bytes.data(), h.bytes.size()));
  KT_OK(kaio_buffer_write(pb.get(), 0, pos.data(), T * 4));
  kaio_tensor q = kaio_tensor_2d(b.get(), KAIO_DTYPE_BF16, T, Hq * D);
  q.row_stride = W;
  kaio_tensor k = q;
  k.cols = Hk * D;
  k.offset_bytes = Hq * D * 2;
  kaio_tensor p = kaio_tensor_2d(pb.get(), KAIO_DTYPE_I32, 1, T);
  kaio_rope_desc d;
  KT_OK(kaio_rope_desc_init(&d, sizeof d));
  d.heads_q = Hq, d.heads_k = Hk, d.head_dim = D, d.theta = 500000.0;
  KT_OK(kaio_rope(stream(), &q, &k, &p, &d));
  KT_OK(kaio_stream_synchronize(stream()));
  std::vector<uint8_t> after(h.bytes.size());
  KT_OK(kaio_buffer_read(b.get(), 0, after.data(), after.size()));
  // Q and K through the same checker, as one tensor of Hq + Hk heads per
  // row of stride W; V (the rest of each row) must be unchanged.
  Case c;
  c.tokens = T, c.hq = Hq + Hk, c.hk = 0, c.d = D, c.k = false;
  kaio_rope_desc all = d;
  all.heads_q = Hq + Hk;
  Stats st;
  check_tensor(c, all, "qk", Hq + Hk, W, h.bytes, after, pos, &st);
  EXPECT_EQ(st.checked, T * (Hq + Hk) * D);
}

TEST_F(GpuRope, SanitizerSmall) {
  Case c;
  c.dt = KAIO_DTYPE_F16, c.tokens = 5, c.hq = 3, c.hk = 1, c.d = 80, c.rot = 40, c.pad = 1;
  run(c);
  c.style = KAIO_ROPE_INTERLEAVED, c.d = 64, c.rot = 0, c.pad = 0, c.prepared = true;
  run(c);
}

}  // namespace
