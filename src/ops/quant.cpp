// What the quantized ops share: their KAIO_LOG subject and the alignment
// check of their 16-byte vector loads.
#include "ops/quant.hpp"

#include <cinttypes>
#include <cstdio>
#include <string>

#include "core/call_context.hpp"
#include "core/error.hpp"

namespace kaio {

kaio_status check_aligned_view(const char *arg, const kaio_tensor *t,
                               const kaio_device *device, unsigned align, int64_t stride_elems,
                               const char *why, CheckedView *out) {
  KAIO_TRY(check_view(arg, t, device, out));
  if (out->address % align != 0 || out->row_stride % stride_elems != 0)
    return fail(KAIO_ERROR_MISALIGNED,
                "%s: argument '%s' starts at byte offset %" PRIu64 " of a 256-byte-aligned "
                "allocation with row_stride %" PRId64 "; %s needs a %u-byte aligned start and a "
                "row_stride that is a multiple of %" PRId64 " elements. Pad the rows or copy "
                "into an aligned buffer.",
                api_name(), arg, static_cast<uint64_t>(out->address % 256), out->row_stride, why,
                align, stride_elems);
  return KAIO_OK;
}

std::string quant_subject(const char *kind, int64_t m, const int64_t *n, int nproj, int64_t k,
                          kaio_dtype dtype) {
  char s[160];
  int len = std::snprintf(s, sizeof s, "%s M=%" PRId64 " N=%" PRId64, kind, m, n[0]);
  for (int i = 1; i < nproj; ++i)
    len += std::snprintf(s + len, sizeof s - len, ",%" PRId64, n[i]);
  std::snprintf(s + len, sizeof s - len, " K=%" PRId64 " %s", k, kaio_dtype_name(dtype));
  return s;
}

}  // namespace kaio
