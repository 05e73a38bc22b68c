// Stream and event entry points.
#include <kaio/kaio.h>

#include <memory>
#include <utility>

#include "core/error.hpp"
#include "core/firewall.hpp"
#include "runtime/context_scope.hpp"
#include "runtime/handle_check.hpp"
#include "runtime/stream.hpp"
#include "runtime/tensor_view.hpp"

using kaio::fail;
using kaio::fail_driver;
namespace cu = kaio::cu;

namespace {

kaio_status same_device(const char *fn, const char *a, const kaio_device *da, const char *b,
                        const kaio_device *db) {
  if (da == db) return KAIO_OK;
  return fail(KAIO_ERROR_WRONG_DEVICE,
              "%s: argument '%s' is on device %d but '%s' is on device %d; use objects of one "
              "device.",
              fn, a, da->ordinal, b, db->ordinal);
}

}  // namespace

extern "C" {

KAIO_API kaio_status kaio_stream_create(kaio_stream **out, kaio_device *device, uint32_t flags) {
  constexpr const char *fn = "kaio_stream_create";
  return kaio::firewall(fn, [&]() -> kaio_status {
    if (!out) return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'out' is NULL.", fn);
    *out = nullptr;
    KAIO_TRY(kaio::resolve_handle(fn, "device", device));
    if (flags & ~static_cast<uint32_t>(KAIO_STREAM_NON_BLOCKING))
      return fail(KAIO_ERROR_INVALID_ARGUMENT,
                  "%s: argument 'flags' is 0x%x; use KAIO_STREAM_DEFAULT or "
                  "KAIO_STREAM_NON_BLOCKING.",
                  fn, flags);
    auto s = std::make_unique<kaio_stream>();
    kaio::ContextScope scope(device);
    KAIO_TRY(scope.status(fn));
    unsigned cu_flags = (flags & KAIO_STREAM_NON_BLOCKING) ? cu::CU_STREAM_NON_BLOCKING : 0;
    if (cu::CUresult r = device->api->cuStreamCreate(&s->native, cu_flags))
      return fail_driver(r, fn, "cuStreamCreate");
    s->owned = true;
    s->error_flags = std::make_shared<kaio::ErrorFlagRegistry>();
    s->device = device;
    if (kaio_status st = kaio::publish_handle(fn, out, s.get())) {
      device->api->cuStreamDestroy(s->native);
      return st;
    }
    s.release();
    kaio::device_retain(device);
    return KAIO_OK;
  });
}

KAIO_API kaio_status kaio_stream_wrap(kaio_stream **out, kaio_device *device, void *cu_stream) {
  constexpr const char *fn = "kaio_stream_wrap";
  return kaio::firewall(fn, [&]() -> kaio_status {
    if (!out) return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'out' is NULL.", fn);
    *out = nullptr;
    KAIO_TRY(kaio::resolve_handle(fn, "device", device));
    auto native = static_cast<cu::CUstream>(cu_stream);
    bool special = native == nullptr || native == cu::CU_STREAM_LEGACY ||
                   native == cu::CU_STREAM_PER_THREAD;
    if (!special) {
      kaio::ContextScope scope(device);
      KAIO_TRY(scope.status(fn));
      cu::CUcontext owner = nullptr;
      if (cu::CUresult r = device->api->cuStreamGetCtx(native, &owner))
        return fail_driver(r, fn, "cuStreamGetCtx on argument 'cu_stream'");
      if (owner != device->context)
        return fail(KAIO_ERROR_WRONG_DEVICE,
                    "%s: argument 'cu_stream' (%p) belongs to another context than device %d's "
                    "primary context; wrap it with the device it was created on.",
                    fn, cu_stream, device->ordinal);
    }
    auto s = std::make_unique<kaio_stream>();
    s->error_flags = std::make_shared<kaio::ErrorFlagRegistry>();
    s->native = native;
    s->owned = false;
    s->device = device;
    KAIO_TRY(kaio::publish_handle(fn, out, s.get()));
    s.release();
    kaio::device_retain(device);
    return KAIO_OK;
  });
}

KAIO_API kaio_status kaio_stream_synchronize(kaio_stream *stream) {
  constexpr const char *fn = "kaio_stream_synchronize";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(kaio::resolve_handle(fn, "stream", stream));
    kaio::ContextScope scope(stream->device);
    KAIO_TRY(scope.status(fn));
    // launches noted before this ticket have completed once the sync returns
    const uint64_t done_before = stream->error_flags->ticket();
    if (cu::CUresult r = stream->device->api->cuStreamSynchronize(stream->native))
      return fail_driver(r, fn, "cuStreamSynchronize");
    return stream->error_flags->report(fn, done_before);
  });
}

KAIO_API kaio_status kaio_stream_wait_event(kaio_stream *stream, kaio_event *event) {
  constexpr const char *fn = "kaio_stream_wait_event";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(kaio::resolve_handle(fn, "stream", stream));
    KAIO_TRY(kaio::resolve_handle(fn, "event", event));
    // Cross-device waits are legal in CUDA, so only the context push needs care:
    // the wait is issued in the stream's context.
    kaio::ContextScope scope(stream->device);
    KAIO_TRY(scope.status(fn));
    if (cu::CUresult r = stream->device->api->cuStreamWaitEvent(stream->native, event->native, 0))
      return fail_driver(r, fn, "cuStreamWaitEvent");
    return KAIO_OK;
  });
}

KAIO_API void *kaio_stream_native(const kaio_stream *stream) {
  const kaio_stream *s = kaio::find_handle(stream);
  return s ? static_cast<void *>(s->native) : nullptr;
}

KAIO_API kaio_device *kaio_stream_device(const kaio_stream *stream) {
  const kaio_stream *s = kaio::find_handle(stream);
  return s ? s->device->borrowed_handle : nullptr;
}

KAIO_API void kaio_stream_destroy(kaio_stream *handle) {
  kaio::firewall_void([&] {
    kaio_stream *stream = kaio::retire_handle(handle);
    if (!stream) return;
    kaio_device *device = stream->device;
    if (stream->owned) {
      kaio::ContextScope scope(device);
      if (scope.status("kaio_stream_destroy") == KAIO_OK) device->api->cuStreamDestroy(stream->native);
    }
    delete stream;
    kaio::device_release(device);
  });
}

KAIO_API kaio_status kaio_event_create(kaio_event **out, kaio_device *device, uint32_t flags) {
  constexpr const char *fn = "kaio_event_create";
  return kaio::firewall(fn, [&]() -> kaio_status {
    if (!out) return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'out' is NULL.", fn);
    *out = nullptr;
    KAIO_TRY(kaio::resolve_handle(fn, "device", device));
    if (flags & ~static_cast<uint32_t>(KAIO_EVENT_DISABLE_TIMING))
      return fail(KAIO_ERROR_INVALID_ARGUMENT,
                  "%s: argument 'flags' is 0x%x; use KAIO_EVENT_DEFAULT or "
                  "KAIO_EVENT_DISABLE_TIMING.",
                  fn, flags);
    auto e = std::make_unique<kaio_event>();
    kaio::ContextScope scope(device);
    KAIO_TRY(scope.status(fn));
    unsigned cu_flags = (flags & KAIO_EVENT_DISABLE_TIMING) ? cu::CU_EVENT_DISABLE_TIMING : 0;
    if (cu::CUresult r = device->api->cuEventCreate(&e->native, cu_flags))
      return fail_driver(r, fn, "cuEventCreate");
    e->device = device;
    e->timing = !(flags & KAIO_EVENT_DISABLE_TIMING);
    if (kaio_status st = kaio::publish_handle(fn, out, e.get())) {
      device->api->cuEventDestroy(e->native);
      return st;
    }
    e.release();
    kaio::device_retain(device);
    return KAIO_OK;
  });
}

KAIO_API kaio_status kaio_event_record(kaio_event *event, kaio_stream *stream) {
  constexpr const char *fn = "kaio_event_record";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(kaio::resolve_handle(fn, "event", event));
    KAIO_TRY(kaio::resolve_handle(fn, "stream", stream));
    KAIO_TRY(same_device(fn, "event", event->device, "stream", stream->device));
    kaio::ContextScope scope(stream->device);
    KAIO_TRY(scope.status(fn));
    if (cu::CUresult r = stream->device->api->cuEventRecord(event->native, stream->native))
      return fail_driver(r, fn, "cuEventRecord");
    event->error_flags = stream->error_flags;  // a reference count, no allocation
    event->recorded.store(true, std::memory_order_release);
    return KAIO_OK;
  });
}

KAIO_API kaio_status kaio_event_synchronize(kaio_event *event) {
  constexpr const char *fn = "kaio_event_synchronize";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(kaio::resolve_handle(fn, "event", event));
    kaio::ContextScope scope(event->device);
    KAIO_TRY(scope.status(fn));
    if (cu::CUresult r = event->device->api->cuEventSynchronize(event->native))
      return fail_driver(r, fn, "cuEventSynchronize");
    // later launches on the stream may still run: report, forget nothing
    return event->error_flags ? event->error_flags->report(fn, 0) : KAIO_OK;
  });
}

KAIO_API kaio_status kaio_event_elapsed_ms(float *out_ms, kaio_event *start, kaio_event *end) {
  constexpr const char *fn = "kaio_event_elapsed_ms";
  return kaio::firewall(fn, [&]() -> kaio_status {
    if (!out_ms) return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'out_ms' is NULL.", fn);
    *out_ms = 0.0f;
    KAIO_TRY(kaio::resolve_handle(fn, "start", start));
    KAIO_TRY(kaio::resolve_handle(fn, "end", end));
    KAIO_TRY(same_device(fn, "start", start->device, "end", end->device));
    if (!start->timing || !end->timing)
      return fail(KAIO_ERROR_INVALID_ARGUMENT,
                  "%s: argument '%s' was created with KAIO_EVENT_DISABLE_TIMING; time with events "
                  "created with KAIO_EVENT_DEFAULT.",
                  fn, start->timing ? "end" : "start");
    for (const auto &[name, e] : {std::pair{"start", start}, std::pair{"end", end}})
      if (!e->recorded.load(std::memory_order_acquire))
        return fail(KAIO_ERROR_INVALID_ARGUMENT,
                    "%s: argument '%s' has never been recorded, so it marks no point in time; "
                    "record it with kaio_event_record first.",
                    fn, name);
    kaio::ContextScope scope(start->device);
    KAIO_TRY(scope.status(fn));
    if (cu::CUresult r = start->device->api->cuEventElapsedTime(out_ms, start->native, end->native))
      return fail_driver(r, fn,
                         "cuEventElapsedTime (both events must be recorded, completed and "
                         "created without KAIO_EVENT_DISABLE_TIMING)");
    return KAIO_OK;
  });
}

KAIO_API void kaio_event_destroy(kaio_event *handle) {
  kaio::firewall_void([&] {
    kaio_event *event = kaio::retire_handle(handle);
    if (!event) return;
    kaio_device *device = event->device;
    {
      kaio::ContextScope scope(device);
      if (scope.status("kaio_event_destroy") == KAIO_OK) device->api->cuEventDestroy(event->native);
    }
    delete event;
    kaio::device_release(device);
  });
}

}  // extern "C"
