// Opening the GPU a bench runs on.
#pragma once

#include <kaio/kaio.h>

#include <string>

#include "handles.hpp"

namespace kaio_bench {

// Opens device 0 into *device and returns its info. Throws NoDevice (exit
// status 2) when the driver is missing, reports no device, or device 0 is
// older than compute capability 8.0; `requirement` starts that last message,
// e.g. "tensor-core matmul needs compute capability 8.0+".
kaio_device_info open_device(Device *device, const std::string &requirement);

// The one stream a bench enqueues everything on. It is non-blocking: it does
// not synchronise with the legacy NULL stream, and kaio_buffer_write/read do
// not wait for it, so synchronise it before touching its buffers from the host.
Stream create_stream(const Device &device);

// The first line of a bench's output, "program: device (cc, SMs, L2), libkaio
// version": a saved log then says what it was measured on.
void print_banner(const char *program, const kaio_device_info &info);

}  // namespace kaio_bench
