// kaio_op_create_sampling and its launch on the fake driver: every bad desc
// and view gets its status and a message naming the function, the argument
// and the value, and launches nothing.
#include <cstring>

#include "support/fake_device_test.hpp"

namespace {

class SamplingBadInput : public kt::FakeDeviceTest {
 protected:
  kaio_sampling_desc desc(uint32_t features = 0) {
    kaio_sampling_desc d;
    EXPECT_EQ(kaio_sampling_desc_init(&d, sizeof d), KAIO_OK);
    d.batch = 4;
    d.vocab = 100;
    d.features = features;
    return d;
  }
  kaio_status create(const kaio_sampling_desc &d) {
    kaio_op *o = nullptr;
    kaio_status s = kaio_op_create_sampling(&o, dev_.get(), &d);
    op_.reset(o);
    return s;
  }
  void reject(kaio_status got, kaio_status want, std::vector<const char *> parts) {
    kt::expect_rejected(got, want, parts, launches_);
  }
  unsigned long long launches_ = kt::fake().launch_count ? kt::fake().launch_count() : 0;
  kt::Op op_;
};

TEST_F(SamplingBadInput, DescFieldsAreChecked) {
  if (IsSkipped()) return;
  kaio_sampling_desc d = desc();
  reject(kaio_sampling_desc_init(&d, 4), KAIO_ERROR_BUFFER_TOO_SMALL, {"kaio_sampling_desc_init"});
  reject(kaio_op_create_sampling(nullptr, dev_.get(), &d), KAIO_ERROR_INVALID_ARGUMENT,
         {"kaio_op_create_sampling", "'out'"});
  kaio_op *o = nullptr;
  reject(kaio_op_create_sampling(&o, dev_.get(), nullptr), KAIO_ERROR_INVALID_ARGUMENT,
         {"kaio_op_create_sampling", "'desc'"});
  d.struct_size = 8;
  reject(create(d), KAIO_ERROR_BUFFER_TOO_SMALL, {"struct_size", "kaio_sampling_desc_init"});
  d = desc(); d.dtype = KAIO_DTYPE_I32;
  reject(create(d), KAIO_ERROR_INVALID_DTYPE, {"kaio_op_create_sampling", "desc->dtype", "i32"});
  d = desc(); d.batch = 0;
  reject(create(d), KAIO_ERROR_INVALID_DIMENSION, {"desc->batch is 0"});
  d = desc(); d.vocab = -5;
  reject(create(d), KAIO_ERROR_INVALID_DIMENSION, {"desc->vocab is -5"});
  d = desc(0x100);
  reject(create(d), KAIO_ERROR_INVALID_ARGUMENT, {"desc->features", "0x100"});
  d = desc(KAIO_SAMPLING_TOP_P);
  reject(create(d), KAIO_ERROR_INVALID_ARGUMENT, {"KAIO_SAMPLING_RANDOM"});
  d = desc(KAIO_SAMPLING_RANDOM | KAIO_SAMPLING_TOP_K | KAIO_SAMPLING_TOP_P_OF_ROW);
  reject(create(d), KAIO_ERROR_INVALID_ARGUMENT, {"KAIO_SAMPLING_TOP_P_OF_ROW", "KAIO_SAMPLING_TOP_P;"});
  d = desc(KAIO_SAMPLING_PENALTIES);
  reject(create(d), KAIO_ERROR_INVALID_DIMENSION, {"desc->max_prev is 0"});
  d = desc(); d.max_prev = 3;
  reject(create(d), KAIO_ERROR_INVALID_DIMENSION, {"desc->max_prev is 3"});
  d = desc(); d.reserved = 1;
  reject(create(d), KAIO_ERROR_INVALID_ARGUMENT, {"desc->reserved is 1"});
}

TEST_F(SamplingBadInput, LaunchViewsAreChecked) {
  if (IsSkipped()) return;
  ASSERT_EQ(create(desc(KAIO_SAMPLING_RANDOM | KAIO_SAMPLING_TOP_K)), KAIO_OK) << kaio_last_error();
  kt::Buffer buf = kt::make_buffer(dev_.get(), 1 << 16);
  kaio_tensor t[12];
  std::memset(t, 0, sizeof t);
  t[0] = kaio_tensor_2d(buf.get(), KAIO_DTYPE_F32, 4, 100);
  kaio_tensor f32v = kaio_tensor_2d(buf.get(), KAIO_DTYPE_F32, 4, 1);
  f32v.offset_bytes = 2048;
  t[1] = f32v;
  t[2] = kaio_tensor_2d(buf.get(), KAIO_DTYPE_I32, 1, 4);
  t[2].offset_bytes = 4096;
  t[5] = kaio_tensor_2d(buf.get(), KAIO_DTYPE_U32, 4, 4);
  t[5].offset_bytes = 8192;
  t[9] = kaio_tensor_2d(buf.get(), KAIO_DTYPE_I32, 4, 1);
  t[9].offset_bytes = 12288;
  reject(kaio_op_launch(op_.get(), stream_.get(), t, 11), KAIO_ERROR_INVALID_ARGUMENT,
         {"kaio_op_launch", "'count' is 11", "12"});
  kaio_tensor bad[12];
  std::memcpy(bad, t, sizeof t);
  bad[3] = f32v;  // top_p is off
  reject(kaio_op_launch(op_.get(), stream_.get(), bad, 12), KAIO_ERROR_INVALID_ARGUMENT,
         {"kaio_op_launch", "'top_p'", "NULL buffer"});
  std::memcpy(bad, t, sizeof t);
  bad[5].buffer = nullptr;  // rng is on
  reject(kaio_op_launch(op_.get(), stream_.get(), bad, 12), KAIO_ERROR_INVALID_ARGUMENT,
         {"'rng'", "NULL buffer"});
  std::memcpy(bad, t, sizeof t);
  bad[2].dtype = KAIO_DTYPE_F32;
  reject(kaio_op_launch(op_.get(), stream_.get(), bad, 12), KAIO_ERROR_INVALID_DTYPE,
         {"'top_k'", "f32", "i32"});
  std::memcpy(bad, t, sizeof t);
  bad[9].rows = 2; bad[9].cols = 2;
  reject(kaio_op_launch(op_.get(), stream_.get(), bad, 12), KAIO_ERROR_SHAPE_MISMATCH,
         {"'tokens'", "2 x 2", "1 x 4 or 4 x 1"});
  std::memcpy(bad, t, sizeof t);
  bad[0].cols = 99;
  reject(kaio_op_launch(op_.get(), stream_.get(), bad, 12), KAIO_ERROR_SHAPE_MISMATCH, {"logits"});
  std::memcpy(bad, t, sizeof t);
  bad[9] = bad[1];
  bad[9].dtype = KAIO_DTYPE_I32;  // tokens over temperature
  reject(kaio_op_launch(op_.get(), stream_.get(), bad, 12), KAIO_ERROR_INVALID_ARGUMENT,
         {"temperature", "tokens"});
  const unsigned long long before = kt::fake().launch_count();
  EXPECT_EQ(kaio_op_launch(op_.get(), stream_.get(), t, 12), KAIO_OK) << kaio_last_error();
  EXPECT_EQ(kt::fake().launch_count(), before + 1);
  // top-k without top-p, B <= SMs: the split kernel's stage 7, one CTA a row
  EXPECT_EQ(kt::last_launch().name, "kaio_sample_split_f32");
  EXPECT_EQ(kt::last_launch().grid[0], 1u);
  EXPECT_EQ(kt::last_launch().grid[1], 4u);
  EXPECT_EQ(kt::launch_param<uint32_t>(20), 7u);
}

TEST_F(SamplingBadInput, PenaltiesOwnAWorkspaceAndLaunchTwoKernels) {
  if (IsSkipped()) return;
  kaio_sampling_desc d = desc(KAIO_SAMPLING_PENALTIES);
  d.max_prev = 8;
  d.dtype = KAIO_DTYPE_BF16;
  const unsigned long long live = kt::fake().live_allocations();
  ASSERT_EQ(create(d), KAIO_OK) << kaio_last_error();
  EXPECT_EQ(kt::fake().live_allocations(), live + 1);
  kt::Buffer buf = kt::make_buffer(dev_.get(), 1 << 16);
  kaio_tensor t[12];
  std::memset(t, 0, sizeof t);
  t[0] = kaio_tensor_2d(buf.get(), KAIO_DTYPE_BF16, 4, 100);
  t[6] = kaio_tensor_2d(buf.get(), KAIO_DTYPE_I32, 4, 8);
  t[6].offset_bytes = 1024;
  t[7] = kaio_tensor_2d(buf.get(), KAIO_DTYPE_I32, 4, 1);
  t[7].offset_bytes = 2048;
  t[8] = kaio_tensor_2d(buf.get(), KAIO_DTYPE_F32, 4, 3);
  t[8].offset_bytes = 3072;
  t[9] = kaio_tensor_2d(buf.get(), KAIO_DTYPE_I32, 1, 4);
  t[9].offset_bytes = 4096;
  const unsigned long long before = kt::fake().launch_count();
  EXPECT_EQ(kaio_op_launch(op_.get(), stream_.get(), t, 12), KAIO_OK) << kaio_last_error();
  EXPECT_EQ(kt::fake().launch_count(), before + 2);
  EXPECT_EQ(kt::last_launch().name, "kaio_sample_f32");
  op_.reset();  // frees the workspace; buf stays
  EXPECT_EQ(kt::fake().live_allocations(), live + 1);
}

// Fewer rows than SMs (the fake device has 4): each row is split over
// SMs / B CTAs, one launch per stage the features use (top-k without top-p:
// stage 7 alone), with a workspace the op owns (allocated at creation, none
// at launch); B >= SMs keeps one CTA, but for top-k without top-p.
TEST_F(SamplingBadInput, FewRowsSplitOverSeveralCtasInStages) {
  if (IsSkipped()) return;
  kaio_device_info info;
  info.struct_size = sizeof info;
  ASSERT_EQ(kaio_device_get_info(dev_.get(), &info), KAIO_OK);
  const int64_t V = 128256, quads = (V + 3) / 4;
  kt::Buffer buf = kt::make_buffer(dev_.get(), 1 << 20);
  struct Case {
    uint32_t features;
    int stages;
    uint32_t last;
  };
  const Case cases[] = {{0, 1, 1},
                        {KAIO_SAMPLING_RANDOM, 2, 6},
                        {KAIO_SAMPLING_RANDOM | KAIO_SAMPLING_TOP_K, 1, 7},
                        {KAIO_SAMPLING_RANDOM | KAIO_SAMPLING_TOP_K | KAIO_SAMPLING_MIN_P, 1, 7},
                        {KAIO_SAMPLING_RANDOM | KAIO_SAMPLING_TOP_P | KAIO_SAMPLING_MIN_P, 4, 6},
                        {KAIO_SAMPLING_RANDOM | KAIO_SAMPLING_TOP_K | KAIO_SAMPLING_TOP_P, 6, 6},
                        {KAIO_SAMPLING_RANDOM | KAIO_SAMPLING_TOP_K | KAIO_SAMPLING_TOP_P |
                             KAIO_SAMPLING_TOP_P_OF_ROW, 6, 6}};
  for (const Case &c : cases) {
    kaio_sampling_desc d = desc(c.features);
    d.batch = 1;
    d.vocab = V;
    d.dtype = KAIO_DTYPE_BF16;
    op_.reset();
    const unsigned long long live = kt::fake().live_allocations();
    ASSERT_EQ(create(d), KAIO_OK) << kaio_last_error();
    EXPECT_EQ(kt::fake().live_allocations(), live + 1) << "features " << c.features;
    kaio_tensor t[12];
    std::memset(t, 0, sizeof t);
    t[0] = kaio_tensor_2d(buf.get(), KAIO_DTYPE_BF16, 1, V);
    const kaio_dtype types[12] = {KAIO_DTYPE_BF16, KAIO_DTYPE_F32, KAIO_DTYPE_I32, KAIO_DTYPE_F32,
                                  KAIO_DTYPE_F32, KAIO_DTYPE_U32, KAIO_DTYPE_I32, KAIO_DTYPE_I32,
                                  KAIO_DTYPE_F32, KAIO_DTYPE_I32, KAIO_DTYPE_F32, KAIO_DTYPE_F32};
    const uint32_t need[12] = {0, KAIO_SAMPLING_RANDOM, KAIO_SAMPLING_TOP_K, KAIO_SAMPLING_TOP_P,
                               KAIO_SAMPLING_MIN_P, KAIO_SAMPLING_RANDOM, 1u << 30, 1u << 30,
                               1u << 30, 0, 1u << 30, 1u << 30};
    for (int i = 1; i < 12; ++i) {
      if (need[i] && !(c.features & need[i])) continue;
      t[i] = kaio_tensor_2d(buf.get(), types[i], 1, i == 5 ? 4 : 1);
      t[i].offset_bytes = 300000 + 64 * i;
    }
    const unsigned long long before = kt::fake().launch_count();
    EXPECT_EQ(kaio_op_launch(op_.get(), stream_.get(), t, 12), KAIO_OK) << kaio_last_error();
    EXPECT_EQ(kt::fake().launch_count(), before + c.stages) << "features " << c.features;
    const kt::Launch l = kt::last_launch();
    EXPECT_EQ(l.name, "kaio_sample_split_bf16");
    EXPECT_EQ(l.grid[0], static_cast<unsigned>(info.sm_count));
    EXPECT_EQ(l.grid[1], 1u);
    // parameters 18 .. 22: ws, vocab, stage (the last: 6, 7 top-k alone, 1 greedy), span, flags
    EXPECT_EQ(kt::launch_param<uint32_t>(19), static_cast<uint32_t>(V));
    EXPECT_EQ(kt::launch_param<uint32_t>(20), c.last);
    const uint32_t span = kt::launch_param<uint32_t>(21);
    EXPECT_EQ(kt::launch_param<uint32_t>(22), (c.features & KAIO_SAMPLING_TOP_P_OF_ROW) ? 1u : 0u);
    EXPECT_GE(span * l.grid[0], quads);
    EXPECT_LT(span * (l.grid[0] - 1), quads);
  }
  kaio_sampling_desc d = desc(KAIO_SAMPLING_RANDOM);
  d.batch = info.sm_count;
  d.vocab = V;
  op_.reset();
  const unsigned long long live = kt::fake().live_allocations();
  ASSERT_EQ(create(d), KAIO_OK) << kaio_last_error();
  EXPECT_EQ(kt::fake().live_allocations(), live) << "one CTA per row needs no workspace";
  d = desc(KAIO_SAMPLING_RANDOM | KAIO_SAMPLING_TOP_K);
  d.batch = info.sm_count;
  d.vocab = V;
  op_.reset();
  ASSERT_EQ(create(d), KAIO_OK) << kaio_last_error();
  EXPECT_EQ(kt::fake().live_allocations(), live + 1) << "top-k alone: stage 7's records";
}

}  // namespace
