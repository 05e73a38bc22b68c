// What the fake driver models for the hardening tests, checked on a real
// driver: the grid and block limits libkaio reads at device open (the fake
// reports an H100's), a JIT log of many errors (the fake writes ptxas's
// format) arriving whole, and KAIO_LOG naming the kernel AUTO planned.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "support/kaio_test.hpp"

namespace {

constexpr const char *kPtx =
    ".version 7.0\n.target sm_80\n.address_size 64\n"
    ".visible .entry k(.param .u32 n)\n{ ret; }\n";

class GpuHardening : public kt::GpuTest {};

TEST_F(GpuHardening, LaunchLimitsAreTheDevicesOwn) {
  kaio_module *m = nullptr;
  KT_OK(kaio_module_load_ptx(&m, dev(), kPtx));
  kt::Module module(m);
  kaio_kernel *k = nullptr;
  KT_OK(kaio_module_get_kernel(&k, m, "k"));
  kt::Kernel kernel(k);
  uint32_t n = 0;
  auto launch = [&](kaio_launch_config c) {
    return kaio_kernel_launch(k, stream(), &c, &n, sizeof n);
  };
  // the limits themselves run on the real driver
  KT_OK(launch({{1, 65535, 1}, {32, 1, 1}, 0, 0}));
  KT_OK(launch({{1, 1, 65535}, {1, 1, 64}, 0, 0}));
  KT_OK(launch({{1, 1, 1}, {1, 1024, 1}, 0, 0}));
  KT_OK(kaio_stream_synchronize(stream()));
  // one past is refused by libkaio, before the driver, with the limit it read
  EXPECT_EQ(launch({{1, 65536, 1}, {32, 1, 1}, 0, 0}), KAIO_ERROR_INVALID_DIMENSION);
  EXPECT_NE(std::string(kaio_last_error()).find("at most 65535"), std::string::npos)
      << kaio_last_error();
  EXPECT_EQ(kaio_last_error_driver_code(), 0);
  EXPECT_EQ(launch({{1, 1, 1}, {1, 1, 65}, 0, 0}), KAIO_ERROR_INVALID_DIMENSION);
  EXPECT_NE(std::string(kaio_last_error()).find("at most 64"), std::string::npos)
      << kaio_last_error();
  KT_OK(kaio_stream_synchronize(stream()));
}

TEST_F(GpuHardening, ALongJitLogArrivesWhole) {
  // 300 lines, each using an undeclared register: one error each
  std::string ptx = ".version 7.0\n.target sm_80\n.address_size 64\n.visible .entry k()\n{\n";
  for (int i = 0; i < 300; ++i) ptx += "  add.u32 %undeclared" + std::to_string(i) + ", 1, 2;\n";
  ptx += "  ret;\n}\n";
  kaio_module *m = nullptr;
  EXPECT_EQ(kaio_module_load_ptx(&m, dev(), ptx.c_str()), KAIO_ERROR_PTX_JIT_FAILED);
  EXPECT_EQ(m, nullptr);
  const std::string msg = kaio_last_error();
  size_t errors = 0;
  for (size_t at = msg.find("error"); at != std::string::npos; at = msg.find("error", at + 1))
    ++errors;
  std::printf("JIT log of %zu bytes, %zu \"error\"s; its last 160 bytes: %s\n", msg.size(), errors,
              msg.substr(msg.size() > 160 ? msg.size() - 160 : 0).c_str());
  EXPECT_GT(msg.size(), 4096u) << "a long log was cut";
  EXPECT_GE(errors, 100u) << msg.substr(0, 600);
  EXPECT_NE(msg.find("undeclared299"), std::string::npos) << "the last error is missing";
}

// KAIO_LOG is read once per process: the check runs in a child (gtest's
// threadsafe death tests re-run the binary), its stderr in a file.
TEST_F(GpuHardening, KaioLogNamesTheKernelAutoPlanned) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        setenv("KAIO_LOG", "1", 1);
        FILE *log = std::tmpfile();
        FILE *report = fdopen(dup(2), "w");
        if (!log || !report || dup2(fileno(log), 2) < 0) std::_Exit(3);
        kaio_device *d = nullptr;
        if (kaio_device_open(&d, 0) != KAIO_OK) std::_Exit(4);
        kaio_matmul_desc desc;
        if (kaio_matmul_desc_init(&desc, sizeof desc) != KAIO_OK) std::_Exit(5);
        desc.in_dtype = KAIO_DTYPE_BF16;
        desc.m = 4096;
        desc.n = 4096;
        desc.k = 4096;
        kaio_op *op = nullptr;
        if (kaio_op_create_matmul(&op, d, &desc) != KAIO_OK) std::_Exit(6);
        std::fflush(stderr);
        std::string text(4096, '\0');
        std::rewind(log);
        text.resize(std::fread(text.data(), 1, text.size(), log));
        std::fprintf(report, "KAIO_LOG: %s", text.c_str());
        std::fflush(report);  // _Exit flushes nothing
        const bool ok = text.rfind("kaio: kaio_op_create_matmul: M=4096 N=4096 K=4096 bf16", 0) == 0 &&
                        text.find(" -> kaio_matmul_sm90") != std::string::npos &&
                        text.find("AUTO") != std::string::npos;
        kaio_op_destroy(op);
        kaio_device_destroy(d);
        std::_Exit(ok ? 0 : 1);
      },
      ::testing::ExitedWithCode(0), "KAIO_LOG: kaio: kaio_op_create_matmul");
}

}  // namespace
