// The int4 decode kernels' sm_90 twins on the fake driver: on compute
// capability 9.0 (a driver that loads PTX 7.8) the matvec and the fused QKV
// launch the `_pdl` entries through cuLaunchKernelEx with programmatic stream
// serialization; on 8.x the sm_80 kernels, through cuLaunchKernel.
#include <cstdio>
#include <string>

#include "support/kaio_test.hpp"

namespace {

// The kernel of the fake driver's last launch.
std::string last_kernel() {
  char name[128] = {0};
  EXPECT_EQ(kt::fake().last_launch(name, sizeof name, nullptr, nullptr, nullptr), 0);
  return name;
}

// M = `m` rows, N = 64, K = 256, group 128 with qzeros: exits 0 when the
// matvec launched `base` (+ "_pdl" when `pdl`) and the QKV projection a kernel
// of that family (its 3 x 2 CTAs may pick fewer warps on the fake's SMs), each
// as a programmatic dependent launch exactly when `pdl`, else the failed check.
[[noreturn]] void decode_launches(const char *cc, int64_t m, const std::string &base, bool pdl) {
  const std::string expect = base + (pdl ? "_pdl" : "");
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
  if (last_kernel() != expect) std::_Exit(4);
  if (kt::fake().last_launch_programmatic() != (pdl ? 1 : 0)) std::_Exit(5);
  kaio_qkv_int4_desc q;
  if (kaio_qkv_int4_desc_init(&q, sizeof q) != KAIO_OK) std::_Exit(6);
  q.group_size = 128;
  const kaio_tensor c2 = child.at(KAIO_DTYPE_F16, m, 64, 98304), c3 = child.at(KAIO_DTYPE_F16, m, 64, 131072);
  const kaio_tensor t[13] = {x, qw, qz, sc, qw, qz, sc, qw, qz, sc, c, c2, c3};
  if (kaio_qkv_project_int4(s, t, 13, &q) != KAIO_OK) std::_Exit(7);
  const std::string got = last_kernel();
  const bool twin = got.size() > 4 && got.compare(got.size() - 4, 4, "_pdl") == 0;
  if (got.rfind(base, 0) != 0 || twin != pdl) {
    std::fprintf(stderr, "qkv launched %s\n", got.c_str());
    std::_Exit(8);
  }
  if (kt::fake().last_launch_programmatic() != (pdl ? 1 : 0)) std::_Exit(9);
  if (kaio_stream_synchronize(s) != KAIO_OK) std::_Exit(10);
  std::_Exit(0);
}

class FakeInt4Pdl : public ::testing::Test {
 protected:
  void SetUp() override {
    GTEST_FLAG_SET(death_test_style, "threadsafe");
    if (!kt::on_fake_driver())
      GTEST_SKIP() << "needs the fake driver: run through `meson test` (suite host)";
    ASSERT_NE(kt::fake().last_launch_programmatic, nullptr) << "the fake driver lacks the hook";
  }
};

TEST_F(FakeInt4Pdl, Sm90RunsTheTwinAsADependentLaunch) {
  EXPECT_EXIT(decode_launches("90", 1, "kaio_int4_gemv_f16_m8_g128", true),
              ::testing::ExitedWithCode(0), "");
  EXPECT_EXIT(decode_launches("90", 16, "kaio_int4_gemv_f16_m16_g128", true),
              ::testing::ExitedWithCode(0), "");
}

TEST_F(FakeInt4Pdl, Sm8xRunsTheSm80KernelAsBefore) {
  for (const char *cc : {"80", "86", "89"})
    EXPECT_EXIT(decode_launches(cc, 1, "kaio_int4_gemv_f16_m8_g128", false),
                ::testing::ExitedWithCode(0), "")
        << "cc " << cc;
}

}  // namespace
