#include "ops/tensor_map.hpp"

#include "core/error.hpp"

namespace kaio {
namespace {

// cuTensorMapEncodeTiled enums (values fixed by the driver ABI).
constexpr int kTmaUint8 = 0, kTmaUint32 = 2, kTmaFloat16 = 6, kTmaBfloat16 = 9;
constexpr int kInterleaveNone = 0, kSwizzleNone = 0, kSwizzle128 = 3, kL2Promote128 = 2,
              kOobZeroFill = 0;

}  // namespace

int tma_dtype_of(kaio_dtype dtype) {
  switch (dtype) {
    case KAIO_DTYPE_BF16: return kTmaBfloat16;
    case KAIO_DTYPE_F16: return kTmaFloat16;
    case KAIO_DTYPE_U32:
    case KAIO_DTYPE_I32: return kTmaUint32;
    default: return kTmaUint8;
  }
}

kaio_status encode_tensor_map(const kaio_device *device, const CheckedView &v, kaio_dtype dtype,
                              const unsigned box[2], TensorMap *out, bool swizzle) {
  const int tma_dtype = tma_dtype_of(dtype);
  unsigned long long dims[2] = {static_cast<unsigned long long>(v.cols),
                                static_cast<unsigned long long>(v.rows)};
  unsigned long long strides[1] = {static_cast<unsigned long long>(v.row_stride) *
                                   kaio_dtype_size(dtype)};
  unsigned element_strides[2] = {1, 1};
  cu::CUresult r = device->api->cuTensorMapEncodeTiled(
      out, tma_dtype, 2, reinterpret_cast<void *>(v.address), dims, strides, box,
      element_strides, kInterleaveNone, swizzle ? kSwizzle128 : kSwizzleNone, kL2Promote128,
      kOobZeroFill);
  if (r) return fail_driver(r, "cuTensorMapEncodeTiled");
  return KAIO_OK;
}

kaio_status encode_bshd_map(const kaio_device *device, const CheckedView &v, kaio_dtype dtype,
                            int64_t seq, int64_t heads, const unsigned box[2], TensorMap *out) {
  const unsigned long long esize = kaio_dtype_size(dtype), dim = v.cols / heads;
  const unsigned long long batch = v.rows / seq, row = v.row_stride * esize;
  unsigned long long dims[4] = {dim, static_cast<unsigned long long>(heads),
                                static_cast<unsigned long long>(seq), batch};
  unsigned long long strides[3] = {dim * esize, row, row * seq};
  const unsigned box4[4] = {box[0], 1, box[1], 1};
  unsigned element_strides[4] = {1, 1, 1, 1};
  cu::CUresult r = device->api->cuTensorMapEncodeTiled(
      out, tma_dtype_of(dtype), 4, reinterpret_cast<void *>(v.address), dims, strides, box4,
      element_strides, kInterleaveNone, kSwizzle128, kL2Promote128, kOobZeroFill);
  if (r) return fail_driver(r, "cuTensorMapEncodeTiled");
  return KAIO_OK;
}

}  // namespace kaio
