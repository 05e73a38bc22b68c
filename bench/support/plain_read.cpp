#include "plain_read.hpp"

#include "errors.hpp"
#include "user_ptx.hpp"

namespace kaio_bench {
namespace {

constexpr uint32_t kThreads = 256, kCtasPerSm = 4;

// Thread i reads the 16-byte chunks i, i + T, i + 2T, ... (T threads in all),
// four per loop trip (indices past the end re-read the last chunk), and
// writes the xor of what it read to sink[i]. Measured on the H100 at 4 CTAs
// of 256 threads per SM: within 1 % of a bulk-copy ring and of 2 to 16
// loads per trip (bench/RESULTS.md, session 5).
constexpr const char *kReadPtx = R"(
.version 7.0
.target sm_80
.address_size 64
.visible .entry plain_read(.param .u64 src, .param .u64 chunks, .param .u64 sink)
{
  .reg .pred %p;
  .reg .b32 %r<24>;
  .reg .b64 %rd<16>;
  ld.param.u64 %rd1, [src];
  ld.param.u64 %rd2, [chunks];
  ld.param.u64 %rd3, [sink];
  mov.u32 %r1, %ctaid.x;
  mov.u32 %r2, %ntid.x;
  mov.u32 %r3, %tid.x;
  mov.u32 %r4, %nctaid.x;
  mad.lo.u32 %r5, %r1, %r2, %r3;
  mul.lo.u32 %r6, %r4, %r2;
  cvt.u64.u32 %rd4, %r5;
  cvt.u64.u32 %rd5, %r6;
  sub.u64 %rd6, %rd2, 1;
  mov.b32 %r20, 0;
LOOP:
  setp.ge.u64 %p, %rd4, %rd2;
  @%p bra DONE;
  mad.lo.u64 %rd7, %rd5, 1, %rd4;
  mad.lo.u64 %rd8, %rd5, 2, %rd4;
  mad.lo.u64 %rd9, %rd5, 3, %rd4;
  min.u64 %rd7, %rd7, %rd6;
  min.u64 %rd8, %rd8, %rd6;
  min.u64 %rd9, %rd9, %rd6;
  mad.lo.u64 %rd10, %rd4, 16, %rd1;
  mad.lo.u64 %rd11, %rd7, 16, %rd1;
  mad.lo.u64 %rd12, %rd8, 16, %rd1;
  mad.lo.u64 %rd13, %rd9, 16, %rd1;
  ld.global.nc.v4.b32 {%r7, %r8, %r9, %r10}, [%rd10];
  ld.global.nc.v4.b32 {%r11, %r12, %r13, %r14}, [%rd11];
  ld.global.nc.v4.b32 {%r15, %r16, %r17, %r18}, [%rd12];
  ld.global.nc.v4.b32 {%r19, %r21, %r22, %r23}, [%rd13];
  xor.b32 %r7, %r7, %r8;
  xor.b32 %r9, %r9, %r10;
  xor.b32 %r11, %r11, %r12;
  xor.b32 %r13, %r13, %r14;
  xor.b32 %r15, %r15, %r16;
  xor.b32 %r17, %r17, %r18;
  xor.b32 %r19, %r19, %r21;
  xor.b32 %r22, %r22, %r23;
  xor.b32 %r7, %r7, %r9;
  xor.b32 %r11, %r11, %r13;
  xor.b32 %r15, %r15, %r17;
  xor.b32 %r19, %r19, %r22;
  xor.b32 %r7, %r7, %r11;
  xor.b32 %r15, %r15, %r19;
  xor.b32 %r20, %r20, %r7;
  xor.b32 %r20, %r20, %r15;
  mad.lo.u64 %rd4, %rd5, 4, %rd4;
  bra LOOP;
DONE:
  cvt.u64.u32 %rd14, %r5;
  mad.lo.u64 %rd15, %rd14, 4, %rd3;
  st.global.u32 [%rd15], %r20;
  ret;
}
)";

}  // namespace

PlainRead::PlainRead(kaio_device *device, int sms)
    : ctas_(static_cast<uint32_t>(sms) * kCtasPerSm) {
  load_user_kernel(device, kReadPtx, "plain_read", &module_, &kernel_);
  kaio_buffer *b = nullptr;
  CHECK(kaio_buffer_create(&b, device, uint64_t{ctas_} * kThreads * 4));
  sink_.reset(b);
}

void PlainRead::enqueue(kaio_stream *stream, uint64_t src, uint64_t bytes) const {
  kaio_launch_config config{};
  config.grid[0] = ctas_;
  config.block[0] = kThreads;
  struct {
    uint64_t src, chunks, sink;
  } args{src, bytes / 16, kaio_buffer_device_ptr(sink_.get())};
  CHECK(kaio_kernel_launch(kernel_.get(), stream, &config, &args, sizeof args));
}

}  // namespace kaio_bench
