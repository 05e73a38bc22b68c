#include "runtime/stream.hpp"

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "driver/driver_error.hpp"
#include "runtime/context_scope.hpp"

namespace kaio {
namespace {

StreamPtr make_stream(kaio_device *device) {
  StreamPtr s(new kaio_stream);
  s->error_flags = std::make_shared<ErrorFlagRegistry>();
  s->device = device;
  device_retain(device);
  return s;
}

}  // namespace

void StreamDelete::operator()(kaio_stream *stream) const {
  kaio_device *device = stream->device;
  if (stream->owned) {
    ContextScope scope(device);
    if (scope.status() == KAIO_OK) device->api->cuStreamDestroy(stream->native);
  }
  delete stream;
  device_release(device);
}

kaio_status stream_create(kaio_device *device, bool non_blocking, StreamPtr *out) {
  StreamPtr s = make_stream(device);
  ContextScope scope(device);
  KAIO_TRY(scope.status());
  unsigned flags = non_blocking ? cu::CU_STREAM_NON_BLOCKING : 0;
  if (cu::CUresult r = device->api->cuStreamCreate(&s->native, flags))
    return fail_driver(r, "cuStreamCreate");
  s->owned = true;
  *out = std::move(s);
  return KAIO_OK;
}

kaio_status stream_wrap(kaio_device *device, cu::CUstream native, StreamPtr *out) {
  bool special =
      native == nullptr || native == cu::CU_STREAM_LEGACY || native == cu::CU_STREAM_PER_THREAD;
  if (!special) {
    ContextScope scope(device);
    KAIO_TRY(scope.status());
    cu::CUcontext owner = nullptr;
    if (cu::CUresult r = device->api->cuStreamGetCtx(native, &owner))
      return fail_driver(r, "cuStreamGetCtx on argument 'cu_stream'");
    if (owner != device->context)
      return fail(KAIO_ERROR_WRONG_DEVICE,
                  "%s: argument 'cu_stream' (%p) belongs to another context than device %d's "
                  "primary context; wrap it with the device it was created on.",
                  api_name(), static_cast<void *>(native), device->ordinal);
  }
  StreamPtr s = make_stream(device);
  s->native = native;
  *out = std::move(s);
  return KAIO_OK;
}

kaio_status stream_synchronize(kaio_stream *stream) {
  ContextScope scope(stream->device);
  KAIO_TRY(scope.status());
  // launches noted before this ticket have completed once the sync returns
  const uint64_t done_before = stream->error_flags->ticket();
  if (cu::CUresult r = stream->device->api->cuStreamSynchronize(stream->native))
    return fail_driver(r, "cuStreamSynchronize");
  return stream->error_flags->report(done_before);
}

}  // namespace kaio
