// A plain streaming read (user PTX): every byte of a range read once with
// 16-byte loads, as a bandwidth-bound kernel would at best. Timed on the same
// bytes as a kernel under test, it is that kernel's ceiling on this GPU at
// this size: a read of a few tens of MB pays launch, ramp and tail costs that
// the 1 GiB copy bandwidth does not show (bench/RESULTS.md, session 5).
#pragma once

#include <kaio/kaio.h>

#include <cstdint>

#include "handles.hpp"

namespace kaio_bench {

class PlainRead {
 public:
  // sms: the device's SM count (the grid is 4 CTAs of 256 threads per SM).
  PlainRead(kaio_device *device, int sms);

  // Enqueues a read of `bytes` (a multiple of 16) at device address `src`
  // (16-byte aligned) on the stream.
  void enqueue(kaio_stream *stream, uint64_t src, uint64_t bytes) const;

 private:
  Module module_;
  Kernel kernel_;
  Buffer sink_;  // one word per thread, so the loads are not dead code
  uint32_t ctas_;
};

}  // namespace kaio_bench
