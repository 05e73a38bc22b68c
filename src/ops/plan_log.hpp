// KAIO_LOG=1: one line on stderr per op creation (kaio_op_create_*) naming
// the kernels the op planned and why, e.g.
//   kaio: kaio_op_create_matmul: M=128 N=4096 K=4096 bf16 nt ->
//   kaio_matmul_sm80_async_bf16_nt (AUTO: sm_80 cp.async; driver 11.8 < 12.0 ...)
// One-shot calls plan the same way without logging (they would print a line
// per call). Off by default; nothing is formatted unless it is on.
#pragma once

#include <kaio/kaio.h>

#include <functional>
#include <string>

#include "driver/cuda_abi.hpp"
#include "runtime/device.hpp"

namespace kaio {

// KAIO_LOG, read once per process (secure_getenv where the C library has
// it): on when set to anything but "" or "0".
bool log_enabled();

// Records `f` (a built-in kernel the plan committed to) and why, for the
// line of the planning in progress on this thread. Cheap when logging is off.
void log_kernel(const kaio_device *device, cu::CUfunction f, const std::string &why);
void log_kernel(const kaio_device *device, cu::CUfunction f, const char *why);

// Runs a family's planner. The outermost one on the thread writes the line,
// "kaio: <api_name()>: <subject()> -> <kernels (why); ...>", when the plan
// succeeded and the API function creates an op; nested planners (a k-quant
// op's matmul) add their kernels to it.
kaio_status log_plan(const std::function<kaio_status()> &plan,
                     const std::function<std::string()> &subject);

}  // namespace kaio
