// Makes a device's primary context current for one call and restores the
// caller's context afterwards: callers (goroutines, async tasks, PyTorch)
// hop threads and keep their own current context.
#pragma once

#include "core/error.hpp"
#include "driver/driver_error.hpp"
#include "runtime/device.hpp"

namespace kaio {

class ContextScope {
 public:
  explicit ContextScope(const kaio_device *device)
      : api_(device->api), pushed_(api_->cuCtxPushCurrent(device->context)) {}
  ~ContextScope() {
    if (pushed_ == cu::CUDA_SUCCESS) {
      cu::CUcontext popped = nullptr;
      api_->cuCtxPopCurrent(&popped);
    }
  }
  ContextScope(const ContextScope &) = delete;
  ContextScope &operator=(const ContextScope &) = delete;

  kaio_status status() const {
    return pushed_ == cu::CUDA_SUCCESS ? KAIO_OK : fail_driver(pushed_, "cuCtxPushCurrent");
  }

 private:
  const driver::Api *api_;
  cu::CUresult pushed_;
};

}  // namespace kaio
