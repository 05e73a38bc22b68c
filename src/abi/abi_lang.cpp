// Kernel-language entry points: compile, load, inspect, launch, check.
#include <kaio/kaio.h>

#include <algorithm>
#include <cstring>
#include <memory>

#include "core/call_context.hpp"
#include "core/error.hpp"
#include "core/firewall.hpp"
#include "kernels/module_cache.hpp"
#include "kernels/user_module.hpp"
#include "lang/lower.hpp"
#include "ops/lang_kernel.hpp"
#include "runtime/handle_check.hpp"
#include "runtime/stream.hpp"

using kaio::api_name;
using kaio::fail;
namespace cu = kaio::cu;
namespace lang = kaio::lang;

namespace {

kaio_status compile_or_fail(const char *source, lang::Compiled *out) {
  if (!source)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: argument 'source' is NULL; pass NUL-terminated kernel-language text.",
                api_name());
  lang::Diagnostic d;
  if (lang::compile(source, out, &d)) return KAIO_OK;
  return fail(KAIO_ERROR_KERNEL_SOURCE, "%s: %s", api_name(),
              lang::format_diagnostic(source, d).c_str());
}

kaio_status copy_text(const std::string &text, char *buf, size_t cap, size_t *out_length) {
  if (!out_length)
    return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'out_length' is NULL.", api_name());
  if (!buf && cap)
    return fail(KAIO_ERROR_INVALID_ARGUMENT,
                "%s: argument 'buf' is NULL but cap is %zu; pass cap 0 to measure.", api_name(),
                cap);
  *out_length = text.size();
  if (cap) {
    size_t n = std::min(cap - 1, text.size());
    std::memcpy(buf, text.data(), n);
    buf[n] = '\0';
  }
  return KAIO_OK;
}

// A kernel holds a reference to its device and, through its source, to the
// device's module of that source: the last kernel of a source unloads it.
void destroy_kernel(kaio_lang_kernel *k) {
  kaio_device *device = k->device;
  if (device) device->modules->release_source_module(k->source);
  k->error_flag.reset();  // the memory lives on while a stream has it noted
  delete k;
  if (device) kaio::device_release(device);
}

}  // namespace

extern "C" {

KAIO_API kaio_status kaio_lang_kernel_create(kaio_lang_kernel **out, kaio_device *device,
                                             const char *source) {
  constexpr const char *fn = "kaio_lang_kernel_create";
  return kaio::firewall(fn, [&]() -> kaio_status {
    if (!out) return fail(KAIO_ERROR_INVALID_ARGUMENT, "%s: argument 'out' is NULL.", fn);
    *out = nullptr;
    KAIO_TRY(kaio::resolve_handle("device", device));
    auto compiled = std::make_shared<lang::Compiled>();
    KAIO_TRY(compile_or_fail(source, compiled.get()));
    KAIO_TRY(kaio::require_arch(device, 8, 0, "kernel-language kernels (PTX sm_80)"));
    std::unique_ptr<kaio_lang_kernel, void (*)(kaio_lang_kernel *)> k(new kaio_lang_kernel,
                                                                        destroy_kernel);
    k->source = source;
    cu::CUmodule module = nullptr;
    KAIO_TRY(device->modules->source_module(k->source, compiled->ptx.c_str(), &module));
    k->device = device;  // from here destroy_kernel releases the module and device
    kaio::device_retain(device);
    const std::string base = lang::entry_base(compiled->kernel);
    const char *suffix[2][4] = {{"_scalar", "_vector", nullptr, nullptr},
                                {"_warp", "_block", "_warp_cached", "_block_cached"}};
    for (int e = 0; e < 4; ++e) {
      const char *which = suffix[compiled->kernel.row_kernel][e];
      if (!which) break;
      KAIO_TRY(kaio::module_function(device, module, (base + which).c_str(), &k->entries[e]));
    }
    k->compiled = compiled;
    k->error_flag = std::make_shared<kaio::LangErrorFlag>(k->source, std::move(compiled));
    KAIO_TRY(k->error_flag->allocate(device));
    KAIO_TRY(kaio::publish_handle(out, k.get()));
    k.release();
    return KAIO_OK;
  });
}

KAIO_API void kaio_lang_kernel_destroy(kaio_lang_kernel *kernel) {
  kaio::firewall_void("kaio_lang_kernel_destroy", [&] {
    if (kaio_lang_kernel *object = kaio::retire_handle(kernel)) destroy_kernel(object);
  });
}

KAIO_API kaio_status kaio_lang_compile_ptx(const char *source, char *buf, size_t cap,
                                           size_t *out_length) {
  constexpr const char *fn = "kaio_lang_compile_ptx";
  return kaio::firewall(fn, [&]() -> kaio_status {
    if (out_length) *out_length = 0;
    lang::Compiled compiled;
    KAIO_TRY(compile_or_fail(source, &compiled));
    return copy_text(compiled.ptx, buf, cap, out_length);
  });
}

KAIO_API kaio_status kaio_lang_kernel_ptx(const kaio_lang_kernel *kernel, char *buf, size_t cap,
                                          size_t *out_length) {
  constexpr const char *fn = "kaio_lang_kernel_ptx";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(kaio::resolve_handle("kernel", kernel));
    return copy_text(kernel->compiled->ptx, buf, cap, out_length);
  });
}

KAIO_API kaio_status kaio_lang_kernel_launch(const kaio_lang_kernel *kernel, kaio_stream *stream,
                                             const kaio_tensor *tensors, size_t tensor_count,
                                             const double *scalars, size_t scalar_count) {
  constexpr const char *fn = "kaio_lang_kernel_launch";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(kaio::resolve_handle("kernel", kernel));
    KAIO_TRY(kaio::resolve_handle("stream", stream));
    return kaio::lang_launch(*kernel, stream, tensors, tensor_count, scalars, scalar_count);
  });
}

KAIO_API kaio_status kaio_lang_kernel_check(const kaio_lang_kernel *kernel) {
  constexpr const char *fn = "kaio_lang_kernel_check";
  return kaio::firewall(fn, [&]() -> kaio_status {
    KAIO_TRY(kaio::resolve_handle("kernel", kernel));
    // a host-mapped word: no driver call; the caller has synchronised
    const uint64_t value = kernel->error_flag->take();
    return value ? kernel->error_flag->report(value) : KAIO_OK;
  });
}

}  // extern "C"
