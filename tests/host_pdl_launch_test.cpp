// Programmatic dependent launch on the fake driver: a kernel whose PTX
// executes griddepcontrol.wait (the streaming k-quant matvecs, and the `_pdl`
// twins of the int4 decode kernels and of a decode step's norms, SiLU gate,
// RoPE + KV cache and decode attention, on sm_90) is launched through cuLaunchKernelEx
// with programmatic stream serialization, every other kernel through
// cuLaunchKernel as before; a driver without cuLaunchKernelEx launches it as
// every other kernel; on 8.x the int4 decode runs the sm_80 kernels. (The
// kernel registry test checks the flag against each entry's PTX.)
#include <dlfcn.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "support/kaio_test.hpp"

namespace {

// The hooks of the fake driver at `path`: the child that drops
// cuLaunchKernelEx loads another build of the fake than kt::fake() found.
struct Hooks {
  explicit Hooks(const char *path) : lib(dlopen(path, RTLD_NOW)) {
    if (!lib) std::_Exit(20);
    count = reinterpret_cast<decltype(count)>(dlsym(lib, "kaio_fake_launch_count"));
    launch = reinterpret_cast<decltype(launch)>(dlsym(lib, "kaio_fake_last_launch"));
    programmatic = reinterpret_cast<decltype(programmatic)>(dlsym(lib, "kaio_fake_last_launch_programmatic"));
    if (!count || !launch || !programmatic) std::_Exit(21);
  }
  void *lib;
  unsigned long long (*count)();
  int (*launch)(char *, size_t, unsigned *, unsigned *, unsigned *);
  int (*programmatic)();
};

// The kernel of the last launch, and whether it asked for the overlap.
struct Seen {
  std::string name;
  int programmatic;
};
Seen last(const Hooks &h) {
  char name[128] = {0};
  if (h.launch(name, sizeof name, nullptr, nullptr, nullptr) != 0) std::_Exit(22);
  return {name, h.programmatic()};
}

// Q4_K matvec M = 1, N = 40, K = 512 (the streaming kernel on sm_90), a
// quantize and a dequantize of the same W: exits 0 when each launched as
// `expect_stream_ex` says, else the failed check's code.
[[noreturn]] void launches(bool expect_stream_ex) {
  const Hooks h(std::getenv("LIBKAIO_CUDA_DRIVER"));
  const kt::FakeChild child("90", 1 << 20);
  kaio_stream *s = child.stream.get();
  const kaio_tensor a = child.at(KAIO_DTYPE_F16, 1, 512, 0), w = child.at(KAIO_DTYPE_U8, 40, 288, 16384),
                    c = child.at(KAIO_DTYPE_F32, 1, 40, 65536), x = child.at(KAIO_DTYPE_F32, 40, 512, 131072),
                    y = child.at(KAIO_DTYPE_F16, 40, 512, 262144);
  const unsigned long long before = h.count();
  if (kaio_quant_matmul(s, &a, &w, &c, KAIO_QUANT_Q4_K) != KAIO_OK) std::_Exit(2);
  Seen l = last(h);
  if (l.name != "kaio_kq_stream_q4_k_f16") std::_Exit(3);
  if (l.programmatic != (expect_stream_ex ? 1 : 0)) std::_Exit(4);
  if (kaio_quantize(s, &x, &w, KAIO_QUANT_Q4_K, KAIO_QUANT_MODE_GGML) != KAIO_OK) std::_Exit(5);
  l = last(h);
  if (l.name.rfind("kaio_kq_quantize_q4_k", 0) != 0 || l.programmatic != 0) std::_Exit(6);
  if (kaio_dequantize(s, &w, &y, KAIO_QUANT_Q4_K) != KAIO_OK) std::_Exit(7);
  l = last(h);
  if (l.name.rfind("kaio_kq_dequantize_q4_k", 0) != 0 || l.programmatic != 0) std::_Exit(8);
  if (kaio_quant_matmul(s, &a, &w, &c, KAIO_QUANT_Q4_K) != KAIO_OK) std::_Exit(9);
  if (last(h).programmatic != (expect_stream_ex ? 1 : 0)) std::_Exit(10);
  if (h.count() - before != 4) std::_Exit(11);
  if (kaio_stream_synchronize(s) != KAIO_OK) std::_Exit(12);
  std::_Exit(0);
}

// The fake without versioned exports, so that libkaio's dlsym fallback does
// not find cuLaunchKernelEx either.
[[noreturn]] void without_launch_ex() {
  const char *proc_only = std::getenv("KAIO_TEST_FAKE_PROC_ONLY");
  if (!proc_only) std::_Exit(23);
  setenv("LIBKAIO_CUDA_DRIVER", proc_only, 1);
  setenv("KAIO_FAKE_MISSING", "cuLaunchKernelEx", 1);
  launches(false);
}

// M = `m` rows, N = 64, K = 256, group 128 with qzeros: exits 0 when the
// matvec launched `base` (+ "_pdl" when `pdl`) and the QKV projection a kernel
// of that family (its 3 x 2 CTAs may pick fewer warps on the fake's SMs), each
// as a programmatic dependent launch exactly when `pdl`, else the failed check.
[[noreturn]] void decode_launches(const char *cc, int64_t m, const std::string &base, bool pdl) {
  const std::string expect = base + (pdl ? "_pdl" : "");
  const Hooks h(std::getenv("LIBKAIO_CUDA_DRIVER"));
  const kt::FakeChild child(cc, 1 << 20);
  kaio_stream *s = child.stream.get();
  const kaio_tensor x = child.at(KAIO_DTYPE_F16, m, 256, 0), qw = child.at(KAIO_DTYPE_U32, 32, 64, 16384),
                    qz = child.at(KAIO_DTYPE_U32, 2, 8, 32768), sc = child.at(KAIO_DTYPE_F16, 2, 64, 49152),
                    c = child.at(KAIO_DTYPE_F16, m, 64, 65536);
  kaio_matmul_int4_desc d;
  if (kaio_matmul_int4_desc_init(&d, sizeof d) != KAIO_OK) std::_Exit(2);
  d.in_dtype = d.out_dtype = KAIO_DTYPE_F16;
  d.group_size = 128;
  if (kaio_matmul_int4(s, &x, &qw, &qz, &sc, &c, &d) != KAIO_OK) std::_Exit(3);
  Seen l = last(h);
  if (l.name != expect) std::_Exit(4);
  if (l.programmatic != (pdl ? 1 : 0)) std::_Exit(5);
  kaio_qkv_int4_desc q;
  if (kaio_qkv_int4_desc_init(&q, sizeof q) != KAIO_OK) std::_Exit(6);
  q.group_size = 128;
  const kaio_tensor c2 = child.at(KAIO_DTYPE_F16, m, 64, 98304), c3 = child.at(KAIO_DTYPE_F16, m, 64, 131072);
  const kaio_tensor t[13] = {x, qw, qz, sc, qw, qz, sc, qw, qz, sc, c, c2, c3};
  if (kaio_qkv_project_int4(s, t, 13, &q) != KAIO_OK) std::_Exit(7);
  l = last(h);
  const bool twin = l.name.size() > 4 && l.name.compare(l.name.size() - 4, 4, "_pdl") == 0;
  if (l.name.rfind(base, 0) != 0 || twin != pdl) {
    std::fprintf(stderr, "qkv launched %s\n", l.name.c_str());
    std::_Exit(8);
  }
  if (l.programmatic != (pdl ? 1 : 0)) std::_Exit(9);
  if (kaio_stream_synchronize(s) != KAIO_OK) std::_Exit(10);
  std::_Exit(0);
}

// The kernels between a decode step's matvecs (add + RMSNorm, RMSNorm, SiLU
// gate, softmax, LayerNorm, RoPE with and without the KV-cache write, the
// KV-cache write, paged and contiguous decode attention): each
// op launched the kernel whose name starts with `prefix`, as its `_pdl` twin
// with the overlap exactly when `pdl`; exits 0, else the failed check's code.
[[noreturn]] void step_launches(const char *cc, bool pdl) {
  const Hooks h(std::getenv("LIBKAIO_CUDA_DRIVER"));
  const kt::FakeChild child(cc, 1 << 20);
  kaio_stream *s = child.stream.get();
  int code = 2;
  auto expect = [&](kaio_status st, const std::string &prefix) {
    if (st != KAIO_OK) std::_Exit(code);
    const Seen l = last(h);
    const bool twin = l.name.size() > 4 && l.name.compare(l.name.size() - 4, 4, "_pdl") == 0;
    if (l.name.rfind(prefix, 0) != 0 || twin != pdl || l.programmatic != (pdl ? 1 : 0)) {
      std::fprintf(stderr, "%s launched %s (programmatic %d)\n", prefix.c_str(), l.name.c_str(),
                   l.programmatic);
      std::_Exit(code + 1);
    }
    code += 2;
  };
  auto at = [&](kaio_dtype dt, int64_t rows, int64_t cols, int slot) {
    return child.at(dt, rows, cols, static_cast<uint64_t>(slot) << 14);
  };
  const kaio_tensor x = at(KAIO_DTYPE_F16, 1, 4096, 0), res = at(KAIO_DTYPE_F16, 1, 4096, 1),
                    w = at(KAIO_DTYPE_F16, 1, 4096, 2), out = at(KAIO_DTYPE_F16, 1, 4096, 3);
  expect(kaio_add_rmsnorm(s, &x, &res, &w, &out, 1e-5f), "kaio_add_rmsnorm_f16_block");
  expect(kaio_rmsnorm(s, &x, &w, &out, 1e-5f), "kaio_rmsnorm_f16_block");
  expect(kaio_silu_gate(s, &x, &res, &out), "kaio_silu_gate_f16");
  expect(kaio_softmax(s, &x, &out), "kaio_softmax_f16");
  expect(kaio_layernorm(s, &x, &w, &res, &out, 1e-5f), "kaio_layernorm_f16");
  const kaio_tensor q = at(KAIO_DTYPE_F16, 1, 128, 4), k = at(KAIO_DTYPE_F16, 1, 64, 5),
                    v = at(KAIO_DTYPE_F16, 1, 64, 6), pos = at(KAIO_DTYPE_I32, 1, 1, 7),
                    slot = at(KAIO_DTYPE_I32, 1, 1, 8), kc = at(KAIO_DTYPE_F16, 16, 64, 9),
                    vc = at(KAIO_DTYPE_F16, 16, 64, 10), table = at(KAIO_DTYPE_I32, 1, 1, 11),
                    o = at(KAIO_DTYPE_F16, 1, 128, 12);
  kaio_rope_desc rd;
  if (kaio_rope_desc_init(&rd, sizeof rd) != KAIO_OK) std::_Exit(1);
  rd.dtype = KAIO_DTYPE_F16;
  rd.heads_q = 2;
  rd.heads_k = 1;
  rd.head_dim = 64;
  expect(kaio_rope_kv_cache_write(s, &q, &k, &v, &pos, &slot, &kc, &vc, &rd), "kaio_rope_cache_half_split_f16");
  expect(kaio_kv_cache_write(s, &k, &v, &slot, &kc, &vc), "kaio_kv_cache_write");
  expect(kaio_rope(s, &q, &k, &pos, &rd), "kaio_rope_half_split_f16");
  kaio_attention_desc ad;
  kaio_attention_paged_desc pd;
  if (kaio_attention_desc_init(&ad, sizeof ad) != KAIO_OK ||
      kaio_attention_paged_desc_init(&pd, sizeof pd) != KAIO_OK)
    std::_Exit(1);
  ad.batch = ad.seq_q = 1;
  ad.seq_k = 16;
  ad.heads_q = 2;
  ad.heads_kv = 1;
  ad.head_dim = 64;
  expect(kaio_attention_paged(s, &q, &kc, &vc, &table, &pos, &o, nullptr, &ad, &pd),
         "kaio_attn_decode_paged_f16_d64");
  expect(kaio_attention(s, &q, &kc, &vc, &o, nullptr, &ad), "kaio_attn_decode_f16_d64");
  if (kaio_stream_synchronize(s) != KAIO_OK) std::_Exit(1);
  std::_Exit(0);
}

class FakePdl : public ::testing::Test {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    if (!kt::on_fake_driver())
      GTEST_SKIP() << "needs the fake driver: run through `meson test` (suite host)";
    ASSERT_NE(kt::fake().last_launch_programmatic, nullptr) << "the fake driver lacks the hook";
  }
};

TEST_F(FakePdl, OnlyTheKernelsThatWaitAskForTheOverlap) {
  EXPECT_EXIT(launches(true), ::testing::ExitedWithCode(0), "");
}

TEST_F(FakePdl, WithoutCuLaunchKernelExEveryKernelLaunchesAsBefore) {
  EXPECT_EXIT(without_launch_ex(), ::testing::ExitedWithCode(0), "");
}

TEST_F(FakePdl, Int4Sm90RunsTheTwinAsADependentLaunch) {
  EXPECT_EXIT(decode_launches("90", 1, "kaio_int4_gemv_f16_m8_g128", true),
              ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(decode_launches("90", 16, "kaio_int4_gemv_f16_m16_g128", true),
              ::testing::ExitedWithCode(0), "");
}

TEST_F(FakePdl, DecodeStepKernelsRunTheirTwinsOnSm90) {
  EXPECT_EXIT(step_launches("90", true), ::testing::ExitedWithCode(0), "");
}

TEST_F(FakePdl, DecodeStepKernelsRunPlainOnSm8x) {
  for (const char *cc : {"80", "89"})
    EXPECT_EXIT(step_launches(cc, false), ::testing::ExitedWithCode(0), "") << "cc " << cc;
}

TEST_F(FakePdl, Int4Sm8xRunsTheSm80KernelAsBefore) {
  for (const char *cc : {"80", "86", "89"})
    EXPECT_EXIT(decode_launches(cc, 1, "kaio_int4_gemv_f16_m8_g128", false),
                ::testing::ExitedWithCode(0), "")
        << "cc " << cc;
}

}  // namespace
