// A one-thread kernel (user PTX) that busy-waits on the GPU's global timer.
// Queued ahead of timed launches, it holds the stream while the host enqueues
// them, so their start events fire back to back on the GPU instead of waiting
// on the host: without it a short launch's time would be its launch latency.
#pragma once

#include <kaio/kaio.h>

#include <cstdint>

#include "handles.hpp"

namespace kaio_bench {

class Spinner {
 public:
  explicit Spinner(kaio_device *device);

  // Enqueues a spin of `ns` nanoseconds on the stream.
  void enqueue(kaio_stream *stream, uint64_t ns) const;

 private:
  Module module_;
  Kernel kernel_;
};

}  // namespace kaio_bench
