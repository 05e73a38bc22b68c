// Programmatic dependent launch on the fake driver: a kernel whose PTX
// executes griddepcontrol.wait (today the streaming k-quant matvecs, sm_90)
// is launched through cuLaunchKernelEx with programmatic stream
// serialization, every other kernel through cuLaunchKernel as before; a
// driver without cuLaunchKernelEx launches it as every other kernel. (The
// kernel registry test checks the flag against each entry's PTX.)
#include <dlfcn.h>

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

}  // namespace
