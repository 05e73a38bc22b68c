// Reporting a failed driver call as the last error: the CUresult's status,
// its name and text, and the raw code for kaio_last_error_driver_code().
#pragma once

#include "core/error.hpp"
#include "driver/cuda_abi.hpp"

namespace kaio {

// Records a failed driver call: maps the CUresult to a status and writes
// "<api_name()>: <what> failed: CUDA_ERROR_X (text)" with the raw code kept.
kaio_status fail_driver(cu::CUresult result, const char *what);

// The status a CUresult maps to (errors that poison the context map to
// KAIO_ERROR_DEVICE_FAULT).
kaio_status status_from_driver(cu::CUresult result);

}  // namespace kaio
