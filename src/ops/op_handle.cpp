#include "ops/op_handle.hpp"

#include "runtime/handle_check.hpp"

namespace kaio {

kaio_status publish_op(kaio_op **out, kaio_device *device, std::unique_ptr<kaio_op> op) {
  KAIO_TRY(publish_handle(out, op.get()));
  op.release()->device = device;
  device_retain(device);
  return KAIO_OK;
}

kaio_status run_op_handle(const kaio_op &op, kaio_stream *stream,
                          const kaio_tensor *tensors, size_t count) {
  return std::visit([&](const auto &plan) { return plan.run(stream, tensors, count); },
                    op.body);
}

}  // namespace kaio
