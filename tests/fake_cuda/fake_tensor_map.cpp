// cuTensorMapEncodeTiled: checks the arguments the way the driver documents
// them and writes a readable record into the 128-byte map, so tests can see
// through the launch record exactly what a kernel would have been given.
#include <cstdint>
#include <cstring>

#include "fake_state.hpp"

namespace kaio::fake {

namespace {

size_t element_size(int dtype) {
  switch (dtype) {
    case 0: return 1;                  // UINT8
    case 1: case 6: case 9: return 2;  // UINT16, FLOAT16, BFLOAT16
    case 2: case 3: case 7: case 10: case 11: case 12: return 4;
    case 4: case 5: case 8: return 8;
    default: return 0;
  }
}

size_t swizzle_span(int swizzle) { return swizzle == 1 ? 32 : swizzle == 2 ? 64 : swizzle == 3 ? 128 : 0; }

}  // namespace

// Layout of the record (little-endian u64 words): [0] address, [1..2] dims,
// [3] stride of dim 1 in bytes, [4] box (inner | outer << 32),
// [5] dtype | swizzle << 8 | interleave << 16 | l2 << 24 | oob << 32,
// [6] rank; dim i >= 2 at [7 + 3(i-2)] (size), [8 + 3(i-2)] (stride in
// bytes), [9 + 3(i-2)] (box).
CUresult kaio_fake_cuTensorMapEncodeTiled(void *map, int dtype, unsigned rank, void *address,
                                          const unsigned long long *dims,
                                          const unsigned long long *strides, const unsigned *box,
                                          const unsigned *element_strides, int interleave,
                                          int swizzle, int l2_promotion, int oob_fill) {
  const size_t es = element_size(dtype);
  if (!map || reinterpret_cast<uintptr_t>(map) % 64 || es == 0 || rank < 1 || rank > 5 || !address ||
      reinterpret_cast<uintptr_t>(address) % 16 || !dims || !strides || !box ||
      !element_strides || interleave < 0 || interleave > 2 || swizzle < 0 || swizzle > 3 ||
      l2_promotion < 0 || l2_promotion > 3 || oob_fill < 0 || oob_fill > 1)
    return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < rank; ++i) {
    if (dims[i] == 0 || dims[i] > (1ull << 32) || box[i] == 0 || box[i] > 256 ||
        element_strides[i] == 0 || element_strides[i] > 8)
      return CUDA_ERROR_INVALID_VALUE;
  }
  for (unsigned i = 0; i + 1 < rank; ++i)
    if (strides[i] % 16 || strides[i] >= (1ull << 40)) return CUDA_ERROR_INVALID_VALUE;
  if (interleave == 0 && (box[0] * es) % 16) return CUDA_ERROR_INVALID_VALUE;
  if (swizzle != 0 && box[0] * es > swizzle_span(swizzle)) return CUDA_ERROR_INVALID_VALUE;
  uint64_t record[16] = {};
  record[0] = reinterpret_cast<uintptr_t>(address);
  // rank 2 in slots 1-4; dims, strides and boxes of ranks 3-5 from slot 6 on
  record[1] = dims[0];
  record[2] = rank > 1 ? dims[1] : 0;
  record[3] = rank > 1 ? strides[0] : 0;
  record[4] = box[0] | (rank > 1 ? uint64_t{box[1]} << 32 : 0);
  record[5] = static_cast<uint64_t>(dtype) | (uint64_t(swizzle) << 8) |
              (uint64_t(interleave) << 16) | (uint64_t(l2_promotion) << 24) |
              (uint64_t(oob_fill) << 32);
  record[6] = rank;
  for (unsigned i = 2; i < rank; ++i) {
    record[7 + 3 * (i - 2)] = dims[i];
    record[8 + 3 * (i - 2)] = strides[i - 1];
    record[9 + 3 * (i - 2)] = box[i];
  }
  std::memcpy(map, record, sizeof record);
  return CUDA_SUCCESS;
}

}  // namespace kaio::fake
