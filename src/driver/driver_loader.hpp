// Opens the CUDA driver library on first use (volk-style) and resolves every
// entry point in driver_api.hpp. The library is never closed: driver state
// outlives any kaio object, and unloading it under live contexts is unsafe.
#pragma once

#include <kaio/kaio.h>

#include "driver/driver_api.hpp"

namespace kaio::driver {

// Loads the driver once per process (thread-safe) and calls cuInit(0).
// On success *out points to the resolved table for the life of the process.
// On failure returns the same status every time, with the message recorded
// as this thread's last error, prefixed by api_name().
kaio_status load(const Api **out);

// The table if load() already succeeded, else nullptr. Never loads.
const Api *loaded();

}  // namespace kaio::driver
