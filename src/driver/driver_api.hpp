// The driver entry points libkaio resolves, as one X-macro table so the
// loader, the function-pointer struct and the test driver cannot drift apart.
//
// Columns: member name, the symbol's base name for cuGetProcAddress, the ABI
// version asked for (the CUDA version whose signature we declare), the
// explicitly versioned export for drivers without cuGetProcAddress_v2, whether
// libkaio can run without it, and the signature.
#pragma once

#include "driver/cuda_abi.hpp"

namespace kaio::driver {

using namespace kaio::cu;

// clang-format off
#define KAIO_DRIVER_FUNCTIONS(X)                                                                   \
  X(cuInit, 2000, "cuInit", true, CUresult, (unsigned flags))                                      \
  X(cuDriverGetVersion, 2020, "cuDriverGetVersion", true, CUresult, (int *version))                \
  X(cuGetErrorName, 6000, "cuGetErrorName", true, CUresult, (CUresult error, const char **name))   \
  X(cuGetErrorString, 6000, "cuGetErrorString", true, CUresult, (CUresult error, const char **s))  \
  X(cuDeviceGetCount, 2000, "cuDeviceGetCount", true, CUresult, (int *count))                      \
  X(cuDeviceGet, 2000, "cuDeviceGet", true, CUresult, (CUdevice *dev, int ordinal))               \
  X(cuDeviceGetName, 2000, "cuDeviceGetName", true, CUresult, (char *name, int len, CUdevice dev)) \
  X(cuDeviceGetAttribute, 2000, "cuDeviceGetAttribute", true, CUresult,                            \
    (int *value, int attrib, CUdevice dev))                                                        \
  X(cuDeviceTotalMem, 3020, "cuDeviceTotalMem_v2", true, CUresult, (size_t *bytes, CUdevice dev))  \
  X(cuDevicePrimaryCtxRetain, 7000, "cuDevicePrimaryCtxRetain", true, CUresult,                    \
    (CUcontext *ctx, CUdevice dev))                                                                \
  X(cuDevicePrimaryCtxRelease, 11000, "cuDevicePrimaryCtxRelease_v2", true, CUresult,              \
    (CUdevice dev))                                                                                \
  X(cuCtxPushCurrent, 4000, "cuCtxPushCurrent_v2", true, CUresult, (CUcontext ctx))                \
  X(cuCtxPopCurrent, 4000, "cuCtxPopCurrent_v2", true, CUresult, (CUcontext *ctx))                 \
  X(cuMemAlloc, 3020, "cuMemAlloc_v2", true, CUresult, (CUdeviceptr *ptr, size_t bytes))          \
  X(cuMemFree, 3020, "cuMemFree_v2", true, CUresult, (CUdeviceptr ptr))                            \
  X(cuMemHostAlloc, 3020, "cuMemHostAlloc", true, CUresult,                                      \
    (void **host, size_t bytes, unsigned flags))                                                   \
  X(cuMemHostGetDevicePointer, 3020, "cuMemHostGetDevicePointer_v2", true, CUresult,               \
    (CUdeviceptr *ptr, void *host, unsigned flags))                                                \
  X(cuMemFreeHost, 2000, "cuMemFreeHost", true, CUresult, (void *host))                            \
  X(cuMemcpyHtoD, 3020, "cuMemcpyHtoD_v2", true, CUresult,                                         \
    (CUdeviceptr dst, const void *src, size_t bytes))                                              \
  X(cuMemcpyDtoH, 3020, "cuMemcpyDtoH_v2", true, CUresult,                                         \
    (void *dst, CUdeviceptr src, size_t bytes))                                                    \
  X(cuMemcpyHtoDAsync, 3020, "cuMemcpyHtoDAsync_v2", true, CUresult,                               \
    (CUdeviceptr dst, const void *src, size_t bytes, CUstream stream))                             \
  X(cuMemcpyDtoHAsync, 3020, "cuMemcpyDtoHAsync_v2", true, CUresult,                               \
    (void *dst, CUdeviceptr src, size_t bytes, CUstream stream))                                   \
  X(cuMemcpyDtoDAsync, 3020, "cuMemcpyDtoDAsync_v2", true, CUresult,                               \
    (CUdeviceptr dst, CUdeviceptr src, size_t bytes, CUstream stream))                             \
  X(cuMemsetD8Async, 3020, "cuMemsetD8Async", true, CUresult,                                      \
    (CUdeviceptr dst, unsigned char value, size_t count, CUstream stream))                         \
  X(cuPointerGetAttribute, 4000, "cuPointerGetAttribute", true, CUresult,                          \
    (void *data, int attribute, CUdeviceptr ptr))                                                  \
  X(cuPointerGetAttributes, 7000, "cuPointerGetAttributes", true, CUresult,                        \
    (unsigned count, int *attributes, void **data, CUdeviceptr ptr))                               \
  X(cuStreamCreate, 2000, "cuStreamCreate", true, CUresult, (CUstream *stream, unsigned flags))    \
  X(cuStreamDestroy, 4000, "cuStreamDestroy_v2", true, CUresult, (CUstream stream))                \
  X(cuStreamSynchronize, 2000, "cuStreamSynchronize", true, CUresult, (CUstream stream))           \
  X(cuStreamWaitEvent, 3020, "cuStreamWaitEvent", true, CUresult,                                  \
    (CUstream stream, CUevent event, unsigned flags))                                              \
  X(cuStreamGetCtx, 9020, "cuStreamGetCtx", true, CUresult, (CUstream stream, CUcontext *ctx))     \
  X(cuEventCreate, 2000, "cuEventCreate", true, CUresult, (CUevent *event, unsigned flags))        \
  X(cuEventDestroy, 4000, "cuEventDestroy_v2", true, CUresult, (CUevent event))                    \
  X(cuEventRecord, 2000, "cuEventRecord", true, CUresult, (CUevent event, CUstream stream))        \
  X(cuEventSynchronize, 2000, "cuEventSynchronize", true, CUresult, (CUevent event))               \
  X(cuEventElapsedTime, 2000, "cuEventElapsedTime", true, CUresult,                                \
    (float *ms, CUevent start, CUevent end))                                                       \
  X(cuModuleLoadDataEx, 2010, "cuModuleLoadDataEx", true, CUresult,                                \
    (CUmodule *module, const void *image, unsigned n_options, int *options, void **values))        \
  X(cuModuleUnload, 2000, "cuModuleUnload", true, CUresult, (CUmodule module))                     \
  X(cuModuleGetFunction, 2000, "cuModuleGetFunction", true, CUresult,                              \
    (CUfunction *function, CUmodule module, const char *name))                                     \
  X(cuFuncGetAttribute, 2020, "cuFuncGetAttribute", true, CUresult,                                \
    (int *value, int attrib, CUfunction function))                                                 \
  X(cuFuncSetAttribute, 9000, "cuFuncSetAttribute", true, CUresult,                                \
    (CUfunction function, int attrib, int value))                                                  \
  X(cuLaunchKernel, 4000, "cuLaunchKernel", true, CUresult,                                        \
    (CUfunction f, unsigned gx, unsigned gy, unsigned gz, unsigned bx, unsigned by, unsigned bz,   \
     unsigned shared_bytes, CUstream stream, void **params, void **extra))                         \
  X(cuLaunchKernelEx, 11060, "cuLaunchKernelEx", false, CUresult,                                 \
    (const CUlaunchConfig *config, CUfunction f, void **params, void **extra))                     \
  X(cuOccupancyMaxActiveClusters, 11080, "cuOccupancyMaxActiveClusters", false, CUresult,           \
    (int *clusters, CUfunction f, const CUlaunchConfig *config))                                   \
  X(cuFuncGetParamInfo, 12040, "cuFuncGetParamInfo", false, CUresult,                              \
    (CUfunction f, size_t index, size_t *offset, size_t *size))                                    \
  X(cuTensorMapEncodeTiled, 12000, "cuTensorMapEncodeTiled", false, CUresult,                      \
    (void *map, int dtype, unsigned rank, void *address, const unsigned long long *dims,           \
     const unsigned long long *strides, const unsigned *box, const unsigned *element_strides,      \
     int interleave, int swizzle, int l2_promotion, int oob_fill))
// clang-format on

struct Api {
#define KAIO_DECLARE_MEMBER(name, version, symbol, required, ret, args) ret(*name) args = nullptr;
  KAIO_DRIVER_FUNCTIONS(KAIO_DECLARE_MEMBER)
#undef KAIO_DECLARE_MEMBER
  int driver_version = 0;
};

}  // namespace kaio::driver
