// TMA tensor maps for the Hopper kernels (ptx/gen_matmul_sm90.py), encoded
// from a checked view at each launch: host-side work only, no driver sync.
#pragma once

#include <kaio/kaio.h>

#include "runtime/tensor_view.hpp"

namespace kaio {

// CUtensorMap: 128 opaque bytes, 64-byte aligned.
struct alignas(64) TensorMap {
  unsigned long long opaque[16];
};

// A row-major view as a 2-D map, as the kernels' `// kaio-tma:` lines
// describe: dim 0 is the view's columns (the contiguous one), dim 1 its rows;
// out-of-bounds elements read as zeros; a 128-byte swizzle unless swizzle is
// false. dtype F16, BF16, U32 or I32 (encoded as UINT32), or I8 (UINT8: TMA
// moves bytes). The device's context must be current.
kaio_status encode_tensor_map(const kaio_device *device, const CheckedView &v, kaio_dtype dtype,
                              const unsigned box[2], TensorMap *out, bool swizzle = true);

// A BSHD tensor's rank-2 view [B·S, H·D] as a 4-D map {D, H, S, B} with a
// 128-byte swizzle and box {box[0], 1, box[1], 1}: one head's box[1] rows.
// Bounds hold per dimension, so a box past S reads zeros, never the next
// batch (the attention kernels' `// kaio-tma:` lines).
kaio_status encode_bshd_map(const kaio_device *device, const CheckedView &v, kaio_dtype dtype,
                            int64_t seq, int64_t heads, const unsigned box[2], TensorMap *out);

}  // namespace kaio
