#include "spinner.hpp"

#include "errors.hpp"
#include "user_ptx.hpp"

namespace kaio_bench {
namespace {

constexpr const char *kSpinPtx = R"(
.version 7.0
.target sm_80
.address_size 64
.visible .entry spin(.param .u64 ns)
{
  .reg .pred %p;
  .reg .u64 %ns, %t0, %t1;
  ld.param.u64 %ns, [ns];
  mov.u64 %t0, %globaltimer;
WAIT:
  mov.u64 %t1, %globaltimer;
  sub.u64 %t1, %t1, %t0;
  setp.lt.u64 %p, %t1, %ns;
  @%p bra WAIT;
  ret;
}
)";

}  // namespace

Spinner::Spinner(kaio_device *device) {
  load_user_kernel(device, kSpinPtx, "spin", &module_, &kernel_);
}

void Spinner::enqueue(kaio_stream *stream, uint64_t ns) const {
  kaio_launch_config config{};
  config.grid[0] = config.grid[1] = config.grid[2] = 1;
  config.block[0] = config.block[1] = config.block[2] = 1;
  CHECK(kaio_kernel_launch(kernel_.get(), stream, &config, &ns, sizeof ns));
}

}  // namespace kaio_bench
