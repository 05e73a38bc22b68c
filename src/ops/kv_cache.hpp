// The paged KV cache's write op: new K and V rows scattered into their
// caches by a slot mapping (vLLM's reshape_and_cache).
#pragma once

#include <kaio/kaio.h>

#include <memory>

#include "ops/plan.hpp"
#include "runtime/error_flag.hpp"

namespace kaio {

struct KvCacheWritePlan : PlanBase {
  kaio_dtype dtype = KAIO_DTYPE_INVALID;
  int64_t tokens = 0;      // T: rows of K, V and entries of the slot mapping
  int64_t width = 0;       // Hkv · D: columns of every view
  int64_t cache_rows = 0;  // num_pages · page_size
  Launch launch;
  std::shared_ptr<ErrorFlag> flag;  // the device's op flag (ops/op_flag.hpp)

  kaio_status plan(kaio_device *device);
  // Tensors: {k, v, slot_mapping, k_cache, v_cache}; v and v_cache may both
  // have a NULL buffer (a K-only cache).
  kaio_status run(kaio_stream *stream, const kaio_tensor *tensors, size_t count) const;
};

}  // namespace kaio
