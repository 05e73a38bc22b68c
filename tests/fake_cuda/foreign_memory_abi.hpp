// The driver's allocators that libkaio never calls but its users do (pool
// memory, virtual memory management), declared for the fake driver and for
// the tests that allocate such memory on the fake or a real driver. Layouts
// follow cuda.h (CUDA 13.0).
#pragma once

#include <cstddef>

#include "driver/cuda_abi.hpp"

namespace kaio::cu {

using CUmemGenericAllocationHandle = unsigned long long;

struct CUmemLocation {
  int type;  // CU_MEM_LOCATION_TYPE_DEVICE
  int id;    // device ordinal
};

struct CUmemAllocationProp {
  int type;                   // CU_MEM_ALLOCATION_TYPE_PINNED
  int requested_handle_types;
  CUmemLocation location;
  void *win32_handle_meta_data;
  struct {
    unsigned char compression_type;
    unsigned char gpu_direct_rdma_capable;
    unsigned short usage;
    unsigned char reserved[4];
  } alloc_flags;
};

struct CUmemAccessDesc {
  CUmemLocation location;
  int flags;  // CU_MEM_ACCESS_FLAGS_PROT_*
};

constexpr int CU_MEM_ALLOCATION_TYPE_PINNED = 1;
constexpr int CU_MEM_LOCATION_TYPE_DEVICE = 1;
constexpr int CU_MEM_ACCESS_FLAGS_PROT_NONE = 0;
constexpr int CU_MEM_ACCESS_FLAGS_PROT_READ = 1;
constexpr int CU_MEM_ALLOC_GRANULARITY_MINIMUM = 0;

// The entry points, by their exported names in libcuda.so.1.
struct ForeignMemoryApi {
  CUresult (*cuMemAllocAsync)(CUdeviceptr *ptr, size_t bytes, CUstream stream);
  CUresult (*cuMemFreeAsync)(CUdeviceptr ptr, CUstream stream);
  CUresult (*cuMemGetAllocationGranularity)(size_t *granularity, const CUmemAllocationProp *prop,
                                            int option);
  CUresult (*cuMemAddressReserve)(CUdeviceptr *ptr, size_t size, size_t alignment,
                                  CUdeviceptr addr, unsigned long long flags);
  CUresult (*cuMemAddressFree)(CUdeviceptr ptr, size_t size);
  CUresult (*cuMemCreate)(CUmemGenericAllocationHandle *handle, size_t size,
                          const CUmemAllocationProp *prop, unsigned long long flags);
  CUresult (*cuMemRelease)(CUmemGenericAllocationHandle handle);
  CUresult (*cuMemMap)(CUdeviceptr ptr, size_t size, size_t offset,
                       CUmemGenericAllocationHandle handle, unsigned long long flags);
  CUresult (*cuMemUnmap)(CUdeviceptr ptr, size_t size);
  CUresult (*cuMemSetAccess)(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc,
                             size_t count);
};

#define KAIO_FOREIGN_MEMORY_FUNCTIONS(X)                                                      \
  X(cuMemAllocAsync) X(cuMemFreeAsync) X(cuMemGetAllocationGranularity) X(cuMemAddressReserve) \
  X(cuMemAddressFree) X(cuMemCreate) X(cuMemRelease) X(cuMemMap) X(cuMemUnmap) X(cuMemSetAccess)

}  // namespace kaio::cu
