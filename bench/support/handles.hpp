// Owning handles for kaio objects: each destroys its object with the matching
// kaio_*_destroy, so an exception thrown mid-case leaks nothing on the device.
#pragma once

#include <kaio/kaio.h>

#include <memory>

namespace kaio_bench {

template <class T, void (*Destroy)(T *)>
struct Destroyer {
  void operator()(T *p) const { Destroy(p); }
};

using Device = std::unique_ptr<kaio_device, Destroyer<kaio_device, kaio_device_destroy>>;
using Stream = std::unique_ptr<kaio_stream, Destroyer<kaio_stream, kaio_stream_destroy>>;
using Event = std::unique_ptr<kaio_event, Destroyer<kaio_event, kaio_event_destroy>>;
using Buffer = std::unique_ptr<kaio_buffer, Destroyer<kaio_buffer, kaio_buffer_destroy>>;
using Op = std::unique_ptr<kaio_op, Destroyer<kaio_op, kaio_op_destroy>>;
using Module = std::unique_ptr<kaio_module, Destroyer<kaio_module, kaio_module_destroy>>;
using Kernel = std::unique_ptr<kaio_kernel, Destroyer<kaio_kernel, kaio_kernel_destroy>>;

}  // namespace kaio_bench
