#include "runtime/event.hpp"

#include "core/error.hpp"
#include "driver/driver_error.hpp"
#include "runtime/context_scope.hpp"

namespace kaio {

void EventDelete::operator()(kaio_event *event) const {
  kaio_device *device = event->device;
  if (event->native) {
    ContextScope scope(device);
    if (scope.status() == KAIO_OK) device->api->cuEventDestroy(event->native);
  }
  delete event;
  device_release(device);
}

kaio_status event_create(kaio_device *device, bool timing, EventPtr *out) {
  EventPtr e(new kaio_event);
  e->device = device;
  e->timing = timing;
  device_retain(device);
  ContextScope scope(device);
  KAIO_TRY(scope.status());
  if (cu::CUresult r =
          device->api->cuEventCreate(&e->native, timing ? 0 : cu::CU_EVENT_DISABLE_TIMING))
    return fail_driver(r, "cuEventCreate");
  *out = std::move(e);
  return KAIO_OK;
}

kaio_status event_record(kaio_event *event, const kaio_stream *stream) {
  ContextScope scope(stream->device);
  KAIO_TRY(scope.status());
  if (cu::CUresult r = stream->device->api->cuEventRecord(event->native, stream->native))
    return fail_driver(r, "cuEventRecord");
  event->error_flags = stream->error_flags;  // a reference count, no allocation
  event->recorded.store(true, std::memory_order_release);
  return KAIO_OK;
}

kaio_status event_synchronize(const kaio_event *event) {
  ContextScope scope(event->device);
  KAIO_TRY(scope.status());
  if (cu::CUresult r = event->device->api->cuEventSynchronize(event->native))
    return fail_driver(r, "cuEventSynchronize");
  // later launches on the stream may still run: report, forget nothing
  return event->error_flags ? event->error_flags->report(0) : KAIO_OK;
}

kaio_status event_elapsed_ms(const kaio_event *start, const kaio_event *end, float *out_ms) {
  ContextScope scope(start->device);
  KAIO_TRY(scope.status());
  if (cu::CUresult r = start->device->api->cuEventElapsedTime(out_ms, start->native, end->native))
    return fail_driver(r, "cuEventElapsedTime (both events must be recorded, completed and "
                       "created without KAIO_EVENT_DISABLE_TIMING)");
  return KAIO_OK;
}

kaio_status stream_wait_event(const kaio_stream *stream, const kaio_event *event) {
  // Cross-device waits are legal in CUDA, so only the context push needs care:
  // the wait is issued in the stream's context.
  ContextScope scope(stream->device);
  KAIO_TRY(scope.status());
  if (cu::CUresult r = stream->device->api->cuStreamWaitEvent(stream->native, event->native, 0))
    return fail_driver(r, "cuStreamWaitEvent");
  return KAIO_OK;
}

}  // namespace kaio
