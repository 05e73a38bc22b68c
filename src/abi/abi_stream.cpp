// Stream and event entry points. They check the arguments and resolve the
// handles; runtime/stream.cpp and runtime/event.cpp do the work.
#include <kaio/kaio.h>

#include <utility>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "core/firewall.hpp"
#include "runtime/event.hpp"
#include "runtime/handle_check.hpp"
#include "runtime/stream.hpp"

using kaio::fail;

namespace {

kaio_status same_device(const char *a, const kaio_device *da, const char *b,
                        const kaio_device *db) {
  if (da == db) return KAIO_OK;
  return fail(KAIO_ERROR_WRONG_DEVICE,
              "%s: argument '%s' is on device %d but '%s' is on device %d; use objects of one "
              "device.",
              kaio::api_name(), a, da->ordinal, b, db->ordinal);
}

}  // namespace

extern "C" {

KAIO_API kaio_status kaio_stream_create(kaio_stream **out, kaio_device *device, uint32_t flags) {
  constexpr const char *fn = "kaio_stream_create";
  return kaio::firewall(fn, [&]() -> kaio_status {
    if (!out) return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'out' is NULL.", fn);
    *out = nullptr;
    KAIO_TRY(kaio::resolve_handle("device", device));
    if (flags & ~static_cast<uint32_t>(KAIO_STREAM_NON_BLOCKING))
      return fail(KAIO_ERROR_INVALID_ARGUMENT,
                  "%s: argument 'flags' is 0x%x; use KAIO_STREAM_DEFAULT or "
                  "KAIO_STREAM_NON_BLOCKING.",
                  fn, flags);
    kaio::StreamPtr stream;
    KAIO_TRY(kaio::stream_create(device, flags & KAIO_STREAM_NON_BLOCKING, &stream));
    return kaio::publish_handle(out, std::move(stream));
  });
}

KAIO_API kaio_status kaio_stream_wrap(kaio_stream **out, kaio_device *device, void *cu_stream) {
  constexpr const char *fn = "kaio_stream_wrap";
  return kaio::firewall(fn, [&]() -> kaio_status {
    if (!out) return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'out' is NULL.", fn);
    *out = nullptr;
    KAIO_TRY(kaio::resolve_handle("device", device));
    kaio::StreamPtr stream;
    KAIO_TRY(kaio::stream_wrap(device, static_cast<kaio::cu::CUstream>(cu_stream), &stream));
    return kaio::publish_handle(out, std::move(stream));
  });
}

KAIO_API kaio_status kaio_stream_synchronize(kaio_stream *stream) {
  constexpr const char *fn = "kaio_stream_synchronize";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(kaio::resolve_handle("stream", stream));
    return kaio::stream_synchronize(stream);
  });
}

KAIO_API kaio_status kaio_stream_wait_event(kaio_stream *stream, kaio_event *event) {
  constexpr const char *fn = "kaio_stream_wait_event";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(kaio::resolve_handle("stream", stream));
    KAIO_TRY(kaio::resolve_handle("event", event));
    return kaio::stream_wait_event(stream, event);
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
  kaio::firewall_void("kaio_stream_destroy",
                      [&] { kaio::StreamPtr stream(kaio::retire_handle(handle)); });
}

KAIO_API kaio_status kaio_event_create(kaio_event **out, kaio_device *device, uint32_t flags) {
  constexpr const char *fn = "kaio_event_create";
  return kaio::firewall(fn, [&]() -> kaio_status {
    if (!out) return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'out' is NULL.", fn);
    *out = nullptr;
    KAIO_TRY(kaio::resolve_handle("device", device));
    if (flags & ~static_cast<uint32_t>(KAIO_EVENT_DISABLE_TIMING))
      return fail(KAIO_ERROR_INVALID_ARGUMENT,
                  "%s: argument 'flags' is 0x%x; use KAIO_EVENT_DEFAULT or "
                  "KAIO_EVENT_DISABLE_TIMING.",
                  fn, flags);
    kaio::EventPtr event;
    KAIO_TRY(kaio::event_create(device, !(flags & KAIO_EVENT_DISABLE_TIMING), &event));
    return kaio::publish_handle(out, std::move(event));
  });
}

KAIO_API kaio_status kaio_event_record(kaio_event *event, kaio_stream *stream) {
  constexpr const char *fn = "kaio_event_record";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(kaio::resolve_handle("event", event));
    KAIO_TRY(kaio::resolve_handle("stream", stream));
    KAIO_TRY(same_device("event", event->device, "stream", stream->device));
    return kaio::event_record(event, stream);
  });
}

KAIO_API kaio_status kaio_event_synchronize(kaio_event *event) {
  constexpr const char *fn = "kaio_event_synchronize";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(kaio::resolve_handle("event", event));
    return kaio::event_synchronize(event);
  });
}

KAIO_API kaio_status kaio_event_elapsed_ms(float *out_ms, kaio_event *start, kaio_event *end) {
  constexpr const char *fn = "kaio_event_elapsed_ms";
  return kaio::firewall(fn, [&]() -> kaio_status {
    if (!out_ms) return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'out_ms' is NULL.", fn);
    *out_ms = 0.0f;
    KAIO_TRY(kaio::resolve_handle("start", start));
    KAIO_TRY(kaio::resolve_handle("end", end));
    KAIO_TRY(same_device("start", start->device, "end", end->device));
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
    return kaio::event_elapsed_ms(start, end, out_ms);
  });
}

KAIO_API void kaio_event_destroy(kaio_event *handle) {
  kaio::firewall_void("kaio_event_destroy",
                      [&] { kaio::EventPtr event(kaio::retire_handle(handle)); });
}

}  // extern "C"
