// Paged KV cache entry points.
#include <kaio/kaio.h>

#include "abi/op_entry.hpp"
#include "core/call_context.hpp"
#include "core/error.hpp"
#include "core/firewall.hpp"
#include "runtime/tensor_view.hpp"

using kaio::KvCacheWritePlan;

namespace {

// The one-shot call's shape: dtype, tokens and width from k, rows from k_cache.
struct ShapeFromViews {
  kaio_status operator()(const kaio_stream *stream, const kaio_tensor *t, size_t,
                         KvCacheWritePlan *plan) const {
    kaio::CheckedView k, kc;
    KAIO_TRY(kaio::check_view("k", &t[0], stream->device, &k));
    KAIO_TRY(kaio::check_view("k_cache", &t[3], stream->device, &kc));
    plan->dtype = k.dtype;
    plan->tokens = k.rows;
    plan->width = k.cols;
    plan->cache_rows = kc.rows;
    return KAIO_OK;
  }
};

}  // namespace

extern "C" {

KAIO_API kaio_status kaio_op_create_kv_cache_write(kaio_op **out, kaio_device *device,
                                                   kaio_dtype dtype, int64_t tokens,
                                                   int64_t width, int64_t cache_rows) {
  return kaio::firewall("kaio_op_create_kv_cache_write", [&] {
    KvCacheWritePlan p;
    p.dtype = dtype;
    p.tokens = tokens;
    p.width = width;
    p.cache_rows = cache_rows;
    return kaio::create_op(out, device, p);
  });
}

KAIO_API kaio_status kaio_kv_cache_write(kaio_stream *stream, const kaio_tensor *k,
                                         const kaio_tensor *v, const kaio_tensor *slot_mapping,
                                         const kaio_tensor *k_cache,
                                         const kaio_tensor *v_cache) {
  return kaio::firewall("kaio_kv_cache_write", [&]() -> kaio_status {
    const kaio::NamedView views[] = {{"k", k},
                                     {"v", v, true},
                                     {"slot_mapping", slot_mapping},
                                     {"k_cache", k_cache},
                                     {"v_cache", v_cache, true}};
    KAIO_TRY(kaio::require_views(views));
    return kaio::one_shot(stream, views, KvCacheWritePlan{}, ShapeFromViews{});
  });
}

}  // extern "C"
