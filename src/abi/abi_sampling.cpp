// Token sampling entry points: the desc and the prepared op (no one-shot:
// see kaio.h, "Token sampling").
#include <kaio/kaio.h>

#include <cstring>

#include "abi/op_entry.hpp"
#include "core/desc_init.hpp"
#include "core/firewall.hpp"
#include "ops/sampling.hpp"

namespace {

kaio_sampling_desc default_desc() {
  kaio_sampling_desc d;
  std::memset(&d, 0, sizeof d);
  d.struct_size = sizeof d;
  d.dtype = KAIO_DTYPE_F32;
  return d;
}

}  // namespace

KAIO_API kaio_status kaio_sampling_desc_init(kaio_sampling_desc *desc, size_t struct_size) {
  constexpr const char *fn = "kaio_sampling_desc_init";
  return kaio::firewall(fn, [&]() -> kaio_status {
    return kaio::init_desc(desc, struct_size, default_desc());
  });
}

KAIO_API kaio_status kaio_op_create_sampling(kaio_op **out, kaio_device *device,
                                             const kaio_sampling_desc *desc) {
  constexpr const char *fn = "kaio_op_create_sampling";
  return kaio::firewall(fn, [&] {
    return kaio::create_op<kaio::SamplingPlan>(out, device, [&](kaio::SamplingPlan *plan) {
      return kaio::read_desc("kaio_sampling_desc_init", desc, &plan->desc);
    });
  });
}
