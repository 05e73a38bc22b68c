// Paged prefill (kaio_op_create_attention_paged_prefill) against the
// contiguous varlen op on the same keys: every sequence's K and V rows are
// scattered into shuffled pages of a pool (unused slots hold other random
// values, unused block-table entries hold bad ids that must never be read),
// and O and LSE must equal kaio_attention_varlen's with the same sm_80
// variant BIT FOR BIT (the same kernel code on the same rows; the varlen op
// itself is checked against an f64 reference in gpu_attention_varlen_test).
// The sm_90a paged kernel (variant SM90, AUTO on sm_90) likewise equals the
// varlen op's sm_90a kernel bit for bit, and the sm_80 paged kernel within
// a bound in the dtype's epsilon and the sequence's key count, with every
// unused pool slot NaN (the kernel reads whole pages by TMA, so it must zero
// the rows past a sequence's end). AUTO against the varlen op's AUTO is
// checked within the attention tolerances: O relative Frobenius f16 2e-3,
// bf16 1.2e-2; LSE absolute 2e-3. Mixed lengths (len_q 0, 1, 17, 300;
// len_k >= len_q up to 4097), page sizes 16 to 256, GQA 1/4/8, f16/bf16,
// D 64/128, outputs poisoned with 0xFF (NaN) first, and bad device data
// (NaN rows, error).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "support/kaio_test.hpp"

namespace {

struct Case {
  std::vector<int32_t> lq, lk;
  int64_t hq = 8, hkv = 2, d = 64, page = 16;
  kaio_dtype dt = KAIO_DTYPE_F16;
  kaio_attention_mask mask = KAIO_ATTENTION_CAUSAL;
  kaio_attention_variant variant = KAIO_ATTENTION_SM80_M128;
  bool nan_pool = false;  // unused pool slots NaN instead of random values
};

std::string describe(const Case &c) {
  std::string s = std::string(kaio_dtype_name(c.dt)) + " D" + std::to_string(c.d) + " H" +
                  std::to_string(c.hq) + ":" + std::to_string(c.hkv) + " page " +
                  std::to_string(c.page) + " mask " + std::to_string(c.mask) + " variant " +
                  std::to_string(c.variant);
  for (size_t b = 0; b < c.lq.size(); ++b)
    s += " (" + std::to_string(c.lq[b]) + "," + std::to_string(c.lk[b]) + ")";
  return s;
}

class GpuAttentionPagedPrefill : public kt::GpuTest {
 protected:
  struct Dev {
    kt::Buffer buf;
    kaio_tensor view;
    size_t bytes = 0;
  };
  Dev make(kaio_dtype dt, int64_t rows, int64_t cols, const void *data) {
    Dev d;
    d.bytes = static_cast<size_t>(rows * cols * kaio_dtype_size(dt));
    d.buf = kt::make_buffer(dev(), d.bytes);
    if (data)
      EXPECT_EQ(kaio_buffer_write(d.buf.get(), 0, data, d.bytes), KAIO_OK);
    else
      EXPECT_EQ(kaio_buffer_memset(d.buf.get(), stream(), 0, 0xFF, d.bytes), KAIO_OK);
    d.view = kaio_tensor_2d(d.buf.get(), dt, rows, cols);
    return d;
  }
  std::vector<uint8_t> raw(const Dev &d) {
    std::vector<uint8_t> bytes(d.bytes);
    EXPECT_EQ(kaio_buffer_read(d.buf.get(), 0, bytes.data(), bytes.size()), KAIO_OK);
    return bytes;
  }

  // The batch on the device: packed Q and K/V, the pools, the table.
  struct Batch {
    int64_t tq = 0, tk = 0, mq = 1, mk = 0, max_pages = 1;
    std::vector<int32_t> cq, ck, table, lens;
    Dev q, k, v, kpool, vpool, cuq, cuk, tab, sl;
  };
  Batch upload(const Case &c);
  kaio_attention_varlen_desc desc(const Case &c, const Batch &b, bool paged) const {
    kaio_attention_varlen_desc d;
    EXPECT_EQ(kaio_attention_varlen_desc_init(&d, sizeof d), KAIO_OK);
    d.dtype = c.dt;
    d.mask = c.mask;
    d.variant = c.variant;
    d.batch = static_cast<int64_t>(c.lq.size());
    d.max_seqlen_q = b.mq;
    d.max_seqlen_k = b.mk;
    d.total_q = b.tq;
    d.total_k = paged ? 0 : b.tk;
    d.heads_q = c.hq;
    d.heads_kv = c.hkv;
    d.head_dim = c.d;
    return d;
  }
  // Contiguous varlen (O, LSE raw bytes) with variant v.
  void contiguous(const Case &c, Batch &b, kaio_attention_variant v, std::vector<uint8_t> *o,
                  std::vector<uint8_t> *lse) {
    Dev od = make(c.dt, b.tq, c.hq * c.d, nullptr), ld = make(KAIO_DTYPE_F32, c.hq, b.tq, nullptr);
    kaio_attention_varlen_desc d = desc(c, b, false);
    d.variant = v;
    KT_OK(kaio_attention_varlen(stream(), &b.q.view, &b.k.view, &b.v.view, &b.cuq.view,
                                &b.cuk.view, &od.view, &ld.view, &d));
    KT_OK(kaio_stream_synchronize(stream()));
    *o = raw(od);
    *lse = raw(ld);
  }
  // Paged through a prepared op; returns the synchronisation's status.
  kaio_status paged(const Case &c, Batch &b, kaio_attention_variant v, std::vector<uint8_t> *o,
                    std::vector<uint8_t> *lse) {
    Dev od = make(c.dt, b.tq, c.hq * c.d, nullptr), ld = make(KAIO_DTYPE_F32, c.hq, b.tq, nullptr);
    kaio_attention_varlen_desc d = desc(c, b, true);
    d.variant = v;
    kaio_attention_paged_desc pd;
    EXPECT_EQ(kaio_attention_paged_desc_init(&pd, sizeof pd), KAIO_OK);
    pd.page_size = static_cast<int32_t>(c.page);
    kaio_op *op = nullptr;
    EXPECT_EQ(kaio_op_create_attention_paged_prefill(&op, dev(), &d, &pd), KAIO_OK);
    kt::Op guard(op);
    const kaio_tensor t[8] = {b.q.view,   b.kpool.view, b.vpool.view, b.cuq.view,
                              b.tab.view, b.sl.view,    od.view,      ld.view};
    EXPECT_EQ(kaio_op_launch(op, stream(), t, 8), KAIO_OK);
    const kaio_status st = kaio_stream_synchronize(stream());
    *o = raw(od);
    *lse = raw(ld);
    return st;
  }
  void run(const Case &c);
  void bad_device_data(kaio_attention_variant v);
  // SM80_M128, and SM90 where the device is sm_90 (the sm_90a kernels' only target)
  std::vector<kaio_attention_variant> variants() {
    kaio_device_info info{};
    info.struct_size = sizeof info;
    EXPECT_EQ(kaio_device_get_info(dev(), &info), KAIO_OK);
    if (info.cc_major == 9 && info.cc_minor == 0) return {KAIO_ATTENTION_SM80_M128, KAIO_ATTENTION_SM90};
    return {KAIO_ATTENTION_SM80_M128};
  }
};

GpuAttentionPagedPrefill::Batch GpuAttentionPagedPrefill::upload(const Case &c) {
  Batch b;
  const size_t B = c.lq.size();
  const int64_t ldk = c.hkv * c.d, ps = c.page;
  b.cq = {0};
  b.ck = {0};
  for (size_t i = 0; i < B; ++i) {
    b.cq.push_back(b.cq.back() + c.lq[i]);
    b.ck.push_back(b.ck.back() + c.lk[i]);
    b.mq = std::max<int64_t>(b.mq, c.lq[i]);
    b.mk = std::max<int64_t>(b.mk, c.lk[i]);
    b.lens.push_back(c.lk[i]);
  }
  b.tq = std::max<int64_t>(b.cq.back(), 1);
  b.tk = std::max<int64_t>(b.ck.back(), 1);
  b.max_pages = std::max<int64_t>((b.mk + ps - 1) / ps, 1) + 1;  // one spare column
  int64_t used = 0;
  for (size_t i = 0; i < B; ++i) used += (c.lk[i] + ps - 1) / ps;
  const int64_t num_pages = used + 3;
  std::mt19937 rng(static_cast<unsigned>(kt::test_seed() ^ (used * 131 + c.d + ps)));
  std::vector<int32_t> ids(num_pages);
  std::iota(ids.begin(), ids.end(), 0);
  std::shuffle(ids.begin(), ids.end(), rng);
  const uint64_t seed = kt::test_seed() ^ static_cast<uint64_t>(b.tq * 7919 + b.tk * 31 + c.d);
  kt::HostTensor hq = kt::random_tensor(c.dt, b.tq * c.hq * c.d, -1, 1, seed);
  kt::HostTensor hk = kt::random_tensor(c.dt, b.tk * ldk, -1, 1, seed + 1);
  kt::HostTensor hv = kt::random_tensor(c.dt, b.tk * ldk, -1, 1, seed + 2);
  // pools start as other random values: a wrong slot read changes the result
  kt::HostTensor pk = kt::random_tensor(c.dt, num_pages * ps * ldk, -1, 1, seed + 3);
  kt::HostTensor pv = kt::random_tensor(c.dt, num_pages * ps * ldk, -1, 1, seed + 4);
  b.table.assign(B * b.max_pages, -7);  // never read: past every sequence's pages
  const size_t row_bytes = static_cast<size_t>(ldk) * kaio_dtype_size(c.dt);
  std::vector<bool> used_row(static_cast<size_t>(num_pages * ps), false);
  int64_t next = 0;
  for (size_t i = 0; i < B; ++i)
    for (int64_t j = 0; j < c.lk[i]; ++j) {
      if (j % ps == 0) b.table[i * b.max_pages + j / ps] = ids[next++];
      const int64_t prow = b.table[i * b.max_pages + j / ps] * ps + j % ps;
      std::memcpy(&pk.bytes[prow * row_bytes], &hk.bytes[(b.ck[i] + j) * row_bytes], row_bytes);
      std::memcpy(&pv.bytes[prow * row_bytes], &hv.bytes[(b.ck[i] + j) * row_bytes], row_bytes);
      used_row[prow] = true;
    }
  for (size_t r = 0; c.nan_pool && r < used_row.size(); ++r)
    if (!used_row[r]) {  // 0xFFFF: a NaN in f16 and bf16
      std::memset(&pk.bytes[r * row_bytes], 0xFF, row_bytes);
      std::memset(&pv.bytes[r * row_bytes], 0xFF, row_bytes);
    }
  b.q = make(c.dt, b.tq, c.hq * c.d, hq.bytes.data());
  b.k = make(c.dt, b.tk, ldk, hk.bytes.data());
  b.v = make(c.dt, b.tk, ldk, hv.bytes.data());
  b.kpool = make(c.dt, num_pages * ps, ldk, pk.bytes.data());
  b.vpool = make(c.dt, num_pages * ps, ldk, pv.bytes.data());
  b.cuq = make(KAIO_DTYPE_I32, 1, B + 1, b.cq.data());
  b.cuk = make(KAIO_DTYPE_I32, 1, B + 1, b.ck.data());
  b.tab = make(KAIO_DTYPE_I32, B, b.max_pages, b.table.data());
  b.sl = make(KAIO_DTYPE_I32, 1, B, b.lens.data());
  return b;
}

int64_t count_nan(kaio_dtype dt, const std::vector<uint8_t> &bytes) {
  int64_t n = 0;
  for (double x : kt::decode(dt, bytes)) n += std::isnan(x);
  return n;
}

void GpuAttentionPagedPrefill::run(const Case &c) {
  SCOPED_TRACE(describe(c));
  Batch b = upload(c);
  std::vector<uint8_t> o_ref, l_ref, o, l;
  contiguous(c, b, c.variant, &o_ref, &l_ref);
  EXPECT_EQ(paged(c, b, c.variant, &o, &l), KAIO_OK);
  EXPECT_TRUE(o == o_ref) << "O differs from the contiguous varlen op";
  EXPECT_TRUE(l == l_ref) << "LSE differs from the contiguous varlen op";
  // rows of the sequences are written (no NaN left); tail rows: none here
  EXPECT_EQ(count_nan(c.dt, o), 0);
}

// AUTO (the sm_80 128-row paged kernel) against the varlen op's AUTO.
double rel_err(const std::vector<double> &a, const std::vector<double> &b) {
  double e = 0, r = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    e += (a[i] - b[i]) * (a[i] - b[i]);
    r += b[i] * b[i];
  }
  return std::sqrt(e / std::max(r, 1e-30));
}

const std::vector<int32_t> kLq = {0, 1, 17, 300, 5, 17, 64};
const std::vector<int32_t> kLk = {40, 1, 17, 4097, 300, 1000, 129};

TEST_F(GpuAttentionPagedPrefill, MatchesContiguousVarlenBitwise) {
  for (kaio_attention_variant v : variants())
    for (kaio_dtype dt : {KAIO_DTYPE_F16, KAIO_DTYPE_BF16})
      for (int64_t d : {64, 128})
        for (int64_t page : {16, 256}) {
          Case c;
          c.variant = v;
          c.lq = kLq;
          c.lk = kLk;
          c.dt = dt;
          c.d = d;
          c.page = page;
          c.hkv = d == 64 ? 8 : 2;  // GQA 1 and 4
          c.nan_pool = v == KAIO_ATTENTION_SM90;
          run(c);
        }
}

TEST_F(GpuAttentionPagedPrefill, MasksGqaAndSixtyFourRowTile) {
  const kaio_attention_mask masks[] = {KAIO_ATTENTION_MASK_NONE, KAIO_ATTENTION_CAUSAL_TOP_LEFT,
                                       KAIO_ATTENTION_CAUSAL};
  for (kaio_attention_mask m : masks)
    for (kaio_attention_variant v : {KAIO_ATTENTION_SM80, KAIO_ATTENTION_SM80_M128, KAIO_ATTENTION_SM90}) {
      if (v == KAIO_ATTENTION_SM90 && variants().size() == 1) continue;
      Case c;
      c.lq = {17, 300, 1, 0};
      c.lk = {33, 513, 200, 7};
      c.hq = 8;
      c.hkv = 1;  // GQA 8
      c.dt = KAIO_DTYPE_BF16;
      c.d = 128;
      c.page = m == KAIO_ATTENTION_CAUSAL ? 256 : 16;
      c.mask = m;
      c.variant = v;
      run(c);
    }
}

TEST_F(GpuAttentionPagedPrefill, AutoWithinToleranceOfVarlenAuto) {
  for (kaio_dtype dt : {KAIO_DTYPE_F16, KAIO_DTYPE_BF16}) {
    Case c;
    c.lq = kLq;
    c.lk = kLk;
    c.dt = dt;
    c.d = 128;
    c.page = 16;
    c.variant = KAIO_ATTENTION_AUTO;
    SCOPED_TRACE(describe(c));
    Batch b = upload(c);
    std::vector<uint8_t> o_ref, l_ref, o, l;
    contiguous(c, b, KAIO_ATTENTION_AUTO, &o_ref, &l_ref);
    EXPECT_EQ(paged(c, b, KAIO_ATTENTION_AUTO, &o, &l), KAIO_OK);
    EXPECT_LE(rel_err(kt::decode(dt, o), kt::decode(dt, o_ref)),
              dt == KAIO_DTYPE_BF16 ? 1.2e-2 : 2e-3);
    const std::vector<double> gl = kt::decode(KAIO_DTYPE_F32, l), rl = kt::decode(KAIO_DTYPE_F32, l_ref);
    int64_t bad = 0;
    for (size_t i = 0; i < gl.size(); ++i)
      bad += !(gl[i] == rl[i] || std::fabs(gl[i] - rl[i]) <= 2e-3);
    EXPECT_EQ(bad, 0);
  }
}

// A bad page id in sequence 1 and a too-long length in sequence 2: their
// rows become NaN, sequence 0 is untouched, and the sync reports it once.
TEST_F(GpuAttentionPagedPrefill, BadDeviceDataGivesNanAndError) {
  for (kaio_attention_variant v : variants()) bad_device_data(v);
}

void GpuAttentionPagedPrefill::bad_device_data(kaio_attention_variant v) {
  Case c;
  c.lq = {40, 20, 10};
  c.lk = {100, 50, 30};
  c.variant = v;
  SCOPED_TRACE(describe(c));
  Batch b = upload(c);
  std::vector<uint8_t> o_ref, l_ref, o, l;
  contiguous(c, b, c.variant, &o_ref, &l_ref);
  std::vector<int32_t> table = b.table;
  table[1 * b.max_pages + 0] = 1 << 20;  // page 0 of sequence 1: every tile reads it
  KT_OK(kaio_buffer_write(b.tab.buf.get(), 0, table.data(), table.size() * 4));
  std::vector<int32_t> lens = b.lens;
  lens[2] = -5;
  KT_OK(kaio_buffer_write(b.sl.buf.get(), 0, lens.data(), lens.size() * 4));
  EXPECT_EQ(paged(c, b, c.variant, &o, &l), KAIO_ERROR_OUT_OF_BOUNDS);
  // the device's op flag keeps the largest value: a page id (PAGE_ID is
  // above SEQ_LEN), of the highest block-table row that had one (sequence 2's
  // clamped length reaches its unused entries)
  const std::string why = kaio_last_error();
  EXPECT_NE(why.find("page id"), std::string::npos) << why;
  EXPECT_NE(why.find("in block_table row"), std::string::npos) << why;
  KT_OK(kaio_stream_synchronize(stream()));  // reported once
  // The one-shot call reports through the same flag.
  {
    Dev od = make(c.dt, b.tq, c.hq * c.d, nullptr);
    kaio_attention_varlen_desc d = desc(c, b, true);
    d.variant = c.variant;
    kaio_attention_paged_desc pd;
    KT_OK(kaio_attention_paged_desc_init(&pd, sizeof pd));
    pd.page_size = static_cast<int32_t>(c.page);
    KT_OK(kaio_attention_paged_prefill(stream(), &b.q.view, &b.kpool.view, &b.vpool.view, &b.cuq.view,
                                       &b.tab.view, &b.sl.view, &od.view, nullptr, &d, &pd));
    EXPECT_EQ(kaio_stream_synchronize(stream()), KAIO_ERROR_OUT_OF_BOUNDS);
    EXPECT_NE(std::string(kaio_last_error()).find("kaio_stream_synchronize: a paged attention"),
              std::string::npos)
        << kaio_last_error();
    KT_OK(kaio_stream_synchronize(stream()));
  }
  const size_t esz = kaio_dtype_size(c.dt), row = static_cast<size_t>(c.hq * c.d) * esz;
  const std::vector<double> go = kt::decode(c.dt, o);
  int64_t nan_rows = 0;
  for (int64_t r = 0; r < b.tq; ++r) {
    const bool good_seq = r < b.cq[1];
    const double x = go[r * c.hq * c.d];
    if (good_seq)
      EXPECT_EQ(std::memcmp(&o[r * row], &o_ref[r * row], row), 0) << "row " << r;
    else
      nan_rows += std::isnan(x);
  }
  EXPECT_EQ(nan_rows, b.tq - b.cq[1]);
  const std::vector<double> gl = kt::decode(KAIO_DTYPE_F32, l);
  EXPECT_TRUE(std::isnan(gl[b.cq[1]]));
  EXPECT_FALSE(std::isnan(gl[0]));
}

// Small enough for compute-sanitizer memcheck: both tiles, both page sizes,
// a partial last page and a sequence with no query rows.
TEST_F(GpuAttentionPagedPrefill, SanitizerSmall) {
  std::vector<kaio_attention_variant> vs = variants();
  vs.push_back(KAIO_ATTENTION_SM80);
  for (kaio_attention_variant v : vs)
    for (int64_t page : {16, 256}) {
      Case c;
      c.nan_pool = v == KAIO_ATTENTION_SM90;
      c.lq = {3, 17, 0, 1};
      c.lk = {20, 40, 5, 33};
      c.hq = 4;
      c.hkv = 1;
      c.page = page;
      c.variant = v;
      run(c);
    }
}

// The sm_90a paged kernel against the sm_80 one on the same pools (every
// page size, pages shuffled, unused slots NaN, mixed lengths with 0 and 1,
// GQA 4, both masks that align differently): per element |O90 - O80| <=
// 4 eps(dtype) + K 2^-20 (P is rounded to the dtype in both, in different
// key blocks; K the sequence's keys, for the f32 sums), LSE within 1e-3 +
// K 2^-20; rows of empty sequences O = 0, LSE = -inf in both.
TEST_F(GpuAttentionPagedPrefill, Sm90MatchesSm80WithinEpsilon) {
  if (variants().size() == 1) GTEST_SKIP() << "the sm_90a kernels need an sm_90 device";
  for (kaio_dtype dt : {KAIO_DTYPE_F16, KAIO_DTYPE_BF16})
    for (int64_t page : {16, 32, 64, 128, 256})
      for (kaio_attention_mask mask : {KAIO_ATTENTION_CAUSAL, KAIO_ATTENTION_MASK_NONE}) {
        Case c;
        c.lq = {0, 1, 130, 7, 256, 1};
        c.lk = {5, 1, 700, 0, 300, 129};  // (7, 0): no keys, O = 0, LSE = -inf
        c.dt = dt;
        c.d = page == 64 ? 64 : 128;
        c.page = page;
        c.mask = mask;
        c.nan_pool = true;
        SCOPED_TRACE(describe(c));
        Batch b = upload(c);
        std::vector<uint8_t> o90, l90, o80, l80;
        EXPECT_EQ(paged(c, b, KAIO_ATTENTION_SM90, &o90, &l90), KAIO_OK);
        EXPECT_EQ(paged(c, b, KAIO_ATTENTION_SM80_M128, &o80, &l80), KAIO_OK);
        const std::vector<double> a = kt::decode(dt, o90), r = kt::decode(dt, o80);
        const std::vector<double> la = kt::decode(KAIO_DTYPE_F32, l90),
                                  lr = kt::decode(KAIO_DTYPE_F32, l80);
        const double eps = dt == KAIO_DTYPE_BF16 ? 0x1p-7 : 0x1p-10;
        int64_t bad = 0, bad_lse = 0;
        double worst = 0;
        for (size_t s = 0; s < c.lq.size(); ++s)
          for (int64_t row = b.cq[s]; row < b.cq[s + 1]; ++row) {
            const double kk = c.lk[s], tol = 4 * eps + kk * 0x1p-20;
            for (int64_t i = 0; i < c.hq * c.d; ++i) {
              const double e = std::fabs(a[row * c.hq * c.d + i] - r[row * c.hq * c.d + i]);
              worst = std::max(worst, std::isnan(e) ? 1e30 : e);
              bad += !(e <= tol);
            }
            for (int64_t h = 0; h < c.hq; ++h) {
              const double x = la[h * b.tq + row], y = lr[h * b.tq + row];
              bad_lse += !(x == y || std::fabs(x - y) <= 1e-3 + kk * 0x1p-20);
            }
          }
        EXPECT_EQ(bad, 0) << "worst |O90 - O80| " << worst;
        EXPECT_EQ(bad_lse, 0);
      }
}

}  // namespace
