// Kernel-language modules are bounded: kernels of one source share a module,
// and the last kernel of a source unloads it, so a server that builds
// kernels from user input does not accumulate loaded modules.
#include <string>
#include <vector>

#include "support/fake_device_test.hpp"

namespace {

class FakeLangModules : public kt::FakeDeviceTest {
 protected:
  kaio_lang_kernel *create(const std::string &src) {
    kaio_lang_kernel *k = nullptr;
    EXPECT_EQ(kaio_lang_kernel_create(&k, dev_.get(), src.c_str()), KAIO_OK) << kaio_last_error();
    return k;
  }
  kaio_status launch(kaio_lang_kernel *k) {
    kt::Buffer x = kt::make_buffer(dev_.get(), 64 * 4), out = kt::make_buffer(dev_.get(), 64 * 4);
    const kaio_tensor t[] = {kaio_tensor_2d(x.get(), KAIO_DTYPE_F32, 1, 64),
                             kaio_tensor_2d(out.get(), KAIO_DTYPE_F32, 1, 64)};
    return kaio_lang_kernel_launch(k, stream_.get(), t, 2, nullptr, 0);
  }
};

std::string source(int i) {
  return "kernel add_" + std::to_string(i) + "(x: tensor<f32>, out: tensor<f32>) {\n    out = x + " +
         std::to_string(i) + ".0;\n}\n";
}

TEST_F(FakeLangModules, TheLastKernelOfASourceUnloadsItsModule) {
  ASSERT_NE(kt::fake().live_modules, nullptr) << "the fake driver lacks kaio_fake_live_modules";
  const unsigned long long base = kt::fake().live_modules();
  for (int i = 0; i < 200; ++i) {
    kaio_lang_kernel *k = create(source(i));
    ASSERT_NE(k, nullptr);
    EXPECT_EQ(kt::fake().live_modules(), base + 1);
    KT_OK(launch(k));
    kaio_lang_kernel_destroy(k);
    EXPECT_EQ(kt::fake().live_modules(), base) << "kernel " << i << " left its module loaded";
  }
  // one source, two kernels: one module, loaded until the second goes
  kaio_lang_kernel *a = create(source(7)), *b = create(source(7));
  ASSERT_TRUE(a && b);
  EXPECT_EQ(kt::fake().live_modules(), base + 1);
  kaio_lang_kernel_destroy(a);
  EXPECT_EQ(kt::fake().live_modules(), base + 1);
  KT_OK(launch(b));
  kaio_lang_kernel_destroy(b);
  EXPECT_EQ(kt::fake().live_modules(), base);
  // a failed create (the device cannot run it) leaves nothing behind
  kaio_lang_kernel *bad = nullptr;
  EXPECT_EQ(kaio_lang_kernel_create(&bad, dev_.get(), "kernel k(x: tensor<f32>) { out = 1.0; }"),
            KAIO_ERROR_KERNEL_SOURCE);
  EXPECT_EQ(kt::fake().live_modules(), base);
}

}  // namespace
