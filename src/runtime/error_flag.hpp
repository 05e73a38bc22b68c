// Device-side error flags that the next synchronisation reports.
//
// A kernel that can detect a fault it must not act on (an index outside its
// view) raises a flag instead: 8 bytes of host-mapped pinned memory that its
// threads update with an atomic max. The launch notes the flag on the
// stream's ErrorFlagRegistry (no allocation once the registry has seen as
// many flags as the stream carries at once, no driver call); the stream's or
// an event's synchronisation reads the noted flags with plain host loads
// after the driver's sync has made the kernels' writes visible, reports the
// first raised one and clears it.
//
// Ownership: flags are shared (std::shared_ptr) by the object that launches
// them and by every registry that noted them, so a kernel destroyed before
// the sync is still reported, and its pinned memory is freed by whichever
// lets go last.
#pragma once

#include <kaio/kaio.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "runtime/device.hpp"

namespace kaio {

class ErrorFlag {
 public:
  ErrorFlag() = default;
  ErrorFlag(const ErrorFlag &) = delete;
  ErrorFlag &operator=(const ErrorFlag &) = delete;
  virtual ~ErrorFlag();

  // Allocates the zeroed flag on device, retained until destruction unless
  // the device itself owns the flag (retain_device false: no cycle).
  kaio_status allocate(kaio_device *device, bool retain_device = true);

  // The address kernels write to (a mapped device pointer).
  cu::CUdeviceptr device_address() const { return device_address_; }
  // Reads and clears the flag; 0 when it was not raised.
  uint64_t take() { return host_ ? host_->exchange(0, std::memory_order_acq_rel) : 0; }
  bool raised() const { return host_ && host_->load(std::memory_order_acquire) != 0; }

  // The error for a raised value (what take() returned), named after the
  // API function that reports it (api_name()).
  virtual kaio_status report(uint64_t value) const = 0;

 private:
  kaio_device *device_ = nullptr;
  bool retained_ = false;
  std::atomic<uint64_t> *host_ = nullptr;
  cu::CUdeviceptr device_address_ = 0;
};

// The flags launched on one stream since its last synchronisation.
// Thread-safe: launches and synchronisations may run on several threads.
class ErrorFlagRegistry {
 public:
  ErrorFlagRegistry() { entries_.reserve(16); }

  // Called after each successful launch that can raise `flag`.
  void note(const std::shared_ptr<ErrorFlag> &flag);

  // A ticket that orders notes: every note made before ticket() was taken
  // has a smaller number.
  uint64_t ticket();

  // Reports the first raised flag in launch order and clears it (KAIO_OK if
  // none is raised). Forgets the flags noted before `done_before` (a ticket
  // taken before a stream synchronisation, whose launches have completed)
  // that are not raised; 0 forgets nothing (an event synchronisation, after
  // which later launches may still be running). Other raised flags stay for
  // the next synchronisation.
  kaio_status report(uint64_t done_before);

 private:
  struct Entry {
    std::shared_ptr<ErrorFlag> flag;
    uint64_t ticket;
  };
  std::mutex mu_;
  std::vector<Entry> entries_;
  uint64_t next_ticket_ = 1;
};

}  // namespace kaio
