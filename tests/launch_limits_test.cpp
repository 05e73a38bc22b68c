// Launch shapes past the device's grid and block limits (the fake reports an
// H100's: grid 2147483647 x 65535 x 65535, block 1024 x 1024 x 64) are
// refused before the driver, naming 'config', the dimension and the limit;
// built-in ops refuse user dims whose grid would not fit when planning.
#include <string>

#include "support/fake_device_test.hpp"

namespace {

constexpr const char *kPtx =
    ".version 7.0\n.target sm_80\n.address_size 64\n"
    ".visible .entry k(.param .u32 n)\n{ ret; }\n";

class LaunchLimits : public kt::FakeDeviceTest {
 protected:
  void SetUp() override {
    FakeDeviceTest::SetUp();
    if (IsSkipped()) return;
    kaio_module *m = nullptr;
    KT_OK(kaio_module_load_ptx(&m, dev_.get(), kPtx));
    module_.reset(m);
    kaio_kernel *k = nullptr;
    KT_OK(kaio_module_get_kernel(&k, m, "k"));
    kernel_.reset(k);
  }
  kaio_status launch(kaio_launch_config c) {
    uint32_t n = 0;
    return kaio_kernel_launch(kernel_.get(), stream_.get(), &c, &n, sizeof n);
  }
  kt::Module module_;
  kt::Kernel kernel_;
};

TEST_F(LaunchLimits, TheLimitsThemselvesLaunch) {
  unsigned long long before = kt::fake().launch_count();
  KT_OK(launch({{2147483647u, 1, 1}, {1024, 1, 1}, 0, 0}));
  KT_OK(launch({{1, 65535, 65535}, {1, 1, 64}, 0, 0}));
  KT_OK(launch({{1, 1, 1}, {1, 1024, 1}, 0, 0}));
  EXPECT_EQ(kt::fake().launch_count(), before + 3);
}

TEST_F(LaunchLimits, PastALimitNamesConfigTheDimensionAndTheLimit) {
  struct Case {
    kaio_launch_config config;
    std::vector<const char *> parts;
  };
  const Case cases[] = {
      {{{1, 65536, 1}, {32, 1, 1}, 0, 0}, {"grid[1] (y) = 65536", "at most 65535", "grid x"}},
      {{{1, 1, 70000}, {32, 1, 1}, 0, 0}, {"grid[2] (z) = 70000", "at most 65535"}},
      {{{2147483648u, 1, 1}, {32, 1, 1}, 0, 0}, {"grid[0] (x) = 2147483648", "at most 2147483647"}},
      {{{1, 1, 1}, {1, 1, 128}, 0, 0}, {"block[2] (z) = 128", "at most 64", "reshape the block"}},
  };
  for (const Case &c : cases) {
    std::vector<const char *> parts = c.parts;
    parts.insert(parts.end(), {"kaio_kernel_launch", "'config'", "device 0"});
    kt::expect_rejected(launch(c.config), KAIO_ERROR_INVALID_DIMENSION, parts,
                        kt::fake().launch_count());
    EXPECT_EQ(kaio_last_error_driver_code(), 0) << kaio_last_error();
  }
}

// Static .shared and the launch's dynamic bytes share the per-block limit:
// kaio raises the dynamic limit when their sum passes 48 KiB (the driver's
// default), and refuses a sum past the opt-in limit (227 KiB, the fake's H100).
TEST_F(LaunchLimits, StaticAndDynamicSharedShareOneLimit) {
  constexpr const char *ptx =
      ".version 7.0\n.target sm_80\n.address_size 64\n"
      ".visible .entry s(.param .u32 n)\n{\n  .reg .b32 %r<2>;\n"
      "  .shared .align 16 .b8 tile[16384];\n  ld.param.u32 %r1, [n];\n"
      "  st.shared.u32 [tile+16380], %r1;\n  ret;\n}\n";
  const kt::UserKernel s = kt::load_user_kernel(dev_.get(), ptx, "s");
  kaio_kernel *k = s.get();
  ASSERT_NE(k, nullptr);
  kaio_kernel_attributes attrs = {};
  attrs.struct_size = sizeof attrs;
  KT_OK(kaio_kernel_get_attributes(k, &attrs));
  EXPECT_EQ(attrs.static_shared_bytes, 16384);
  uint32_t n = 0;
  auto run = [&](uint32_t dynamic) {
    kaio_launch_config c = {{1, 1, 1}, {32, 1, 1}, dynamic, 0};
    return kaio_kernel_launch(k, stream_.get(), &c, &n, sizeof n);
  };
  const unsigned long long before = kt::fake().launch_count();
  KT_OK(run(40000));              // 56384 in all: past the default, so kaio raises it
  KT_OK(run(232448 - 16384));     // the whole opt-in limit
  EXPECT_EQ(kt::fake().launch_count(), before + 2);
  kt::expect_rejected(run(232448 - 16384 + 1), KAIO_ERROR_INVALID_ARGUMENT,
                      {"kaio_kernel_launch", "config.shared_bytes is 216065",
                       "16384 bytes of static", "232449 in all", "at most 232448",
                       "at most 216064 dynamic"},
                      kt::fake().launch_count());
}

// One grid row per (batch, head): 65536 of them cannot launch.
TEST_F(LaunchLimits, AttentionRefusesTooManyBatchHeadsWhenPlanning) {
  kaio_attention_desc d;
  KT_OK(kaio_attention_desc_init(&d, sizeof d));
  d.dtype = KAIO_DTYPE_BF16;
  d.batch = 4096;
  d.heads_q = 16;
  d.heads_kv = 16;
  d.seq_q = d.seq_k = 1;
  d.head_dim = 64;
  kaio_op *op = nullptr;
  kt::expect_rejected(kaio_op_create_attention(&op, dev_.get(), &d),
                      KAIO_ERROR_INVALID_DIMENSION,
                      {"kaio_op_create_attention", "desc->batch 4096", "desc->heads_q 16",
                       "65536", "at most 65535", "split the batch"},
                      kt::fake().launch_count());
  EXPECT_EQ(op, nullptr);
  d.batch = 4095;  // 65520 rows fit
  KT_OK(kaio_op_create_attention(&op, dev_.get(), &d));
  kaio_op_destroy(op);
}

}  // namespace
