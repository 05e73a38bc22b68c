#include "device.hpp"

#include <cstdio>

#include "errors.hpp"

namespace kaio_bench {

kaio_device_info open_device(Device *device, const std::string &requirement) {
  kaio_probe_info probe{};
  probe.struct_size = sizeof probe;
  CHECK(kaio_probe(&probe));
  if (probe.driver_status != KAIO_OK || probe.device_count < 1)
    throw NoDevice(probe.message[0] ? probe.message : "the driver reports 0 devices");

  kaio_device *raw = nullptr;
  CHECK(kaio_device_open(&raw, 0));
  device->reset(raw);
  kaio_device_info info{};
  info.struct_size = sizeof info;
  CHECK(kaio_device_get_info(raw, &info));
  if (info.cc_major < 8)
    throw NoDevice(requirement + ", device 0 (" + std::string(info.name) + ") has " +
                   std::to_string(info.cc_major) + "." + std::to_string(info.cc_minor));
  return info;
}

Stream create_stream(const Device &device) {
  kaio_stream *raw_stream = nullptr;
  CHECK(kaio_stream_create(&raw_stream, device.get(), KAIO_STREAM_NON_BLOCKING));
  return Stream(raw_stream);
}

void print_banner(const char *program, const kaio_device_info &info) {
  std::printf("%s: %s (cc %d.%d, %d SMs, L2 %.1f MiB), libkaio %s\n", program, info.name,
              info.cc_major, info.cc_minor, info.sm_count,
              static_cast<double>(info.l2_cache_bytes) / 1048576.0, kaio_version_string());
}

}  // namespace kaio_bench
