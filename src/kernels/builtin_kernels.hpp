// The kernels libkaio ships. Modules are the PTX files the build generates
// from ptx/ (ptx/meson.build), embedded; each kernel loads once per device,
// on first use. Which kernels exist, their launch facts and the typed
// selectors that pick them (kaio::kernels::matmul_sm80(...)) come from the
// generators' manifests (src/kernels/kernel_registry.py).
#pragma once

#include "driver/cuda_abi.hpp"
#include "kernel_registry.hpp"  // generated (src/meson.build)

namespace kaio {

// A resolved kernel: its function, its launch facts (info, never null once
// resolved), and the dynamic shared memory it runs with on this device (its
// manifest's, or for a kernel that sizes a tail per launch, capped at what
// the device has).
struct BuiltinFunction {
  cu::CUfunction function = nullptr;
  const KernelInfo *info = nullptr;
  unsigned shared_bytes = 0;
  // A cluster kernel's clusters that fit on the device at once (the driver's
  // cuOccupancyMaxActiveClusters, asked once at load): a wave of it is at most
  // this many clusters. 0 for kernels without clusters, or where the driver
  // cannot say.
  int max_clusters = 0;
};

// Copies the box of the kernel's TMA tensor map `param` into out; false
// when the kernel has no such tensor map.
inline bool tma_box(const BuiltinFunction &fn, std::string_view param, unsigned out[2]) {
  const unsigned *box = fn.info ? fn.info->tma_box(param) : nullptr;
  if (!box) return false;
  out[0] = box[0];
  out[1] = box[1];
  return true;
}

}  // namespace kaio
