// Device-side error flags: pinned mapped memory, and the per-stream registry.
#include "runtime/error_flag.hpp"

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "driver/driver_error.hpp"
#include "runtime/context_scope.hpp"

namespace kaio {

static_assert(sizeof(std::atomic<uint64_t>) == 8 && std::atomic<uint64_t>::is_always_lock_free,
              "the flag is shared with the GPU as a plain 8-byte word");

ErrorFlag::~ErrorFlag() {
  if (!device_) return;
  if (host_) {
    // run by whichever call lets go last (or by none): name the release
    ApiCall release("kaio error flag release");
    ContextScope scope(device_);
    if (scope.status() == KAIO_OK) device_->api->cuMemFreeHost(host_);
  }
  if (retained_) device_release(device_);
}

kaio_status ErrorFlag::allocate(kaio_device *device, bool retain_device) {
  ContextScope scope(device);
  KAIO_TRY(scope.status());
  void *host = nullptr;
  // portable: any context may free it; devicemap: kernels write it directly
  if (cu::CUresult r = device->api->cuMemHostAlloc(
          &host, sizeof(uint64_t), cu::CU_MEMHOSTALLOC_PORTABLE | cu::CU_MEMHOSTALLOC_DEVICEMAP))
    return fail_driver(r, "cuMemHostAlloc (an 8-byte mapped error flag)");
  device_ = device;
  retained_ = retain_device;
  if (retain_device) device_retain(device);
  host_ = new (host) std::atomic<uint64_t>(0);
  if (cu::CUresult r = device->api->cuMemHostGetDevicePointer(&device_address_, host, 0))
    return fail_driver(r, "cuMemHostGetDevicePointer (mapping the error flag)");
  return KAIO_OK;
}

void ErrorFlagRegistry::note(const std::shared_ptr<ErrorFlag> &flag) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t t = next_ticket_++;
  // a stream usually repeats the same few kernels: look from the newest
  for (size_t i = entries_.size(); i-- > 0;)
    if (entries_[i].flag == flag) {
      entries_[i].ticket = t;
      return;
    }
  entries_.push_back({flag, t});
}

uint64_t ErrorFlagRegistry::ticket() {
  std::lock_guard<std::mutex> lock(mu_);
  return next_ticket_;
}

kaio_status ErrorFlagRegistry::report(uint64_t done_before) {
  std::shared_ptr<ErrorFlag> hit;
  uint64_t value = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    size_t keep = 0;
    for (Entry &e : entries_) {
      bool raised = false;
      if (!hit) {
        value = e.flag->take();
        if (value) hit = e.flag;
      } else {
        raised = e.flag->raised();
      }
      if (e.ticket < done_before && !raised) continue;  // completed and clean (or reported)
      entries_[keep++] = std::move(e);
    }
    entries_.erase(entries_.begin() + static_cast<ptrdiff_t>(keep), entries_.end());
  }
  return hit ? hit->report(value) : KAIO_OK;
}

}  // namespace kaio
