// Modules (PTX "JIT" through ptx_parser), functions and kernel launches.
// A launch runs nothing: it is validated like the real driver would and
// recorded for the kaio_fake_last_launch* hooks.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "fake_state.hpp"

namespace kaio::fake {
namespace {

constexpr int kJitNumOptions = 35;  // CU_JIT_NUM_OPTIONS in CUDA 13.0
constexpr int kNumRegs = 32;
constexpr size_t kMaxExtraWords = 64;
constexpr unsigned kMaxGridX = 0x7fffffff;
constexpr unsigned kMaxGridYZ = 65535;
constexpr unsigned kMaxBlockXY = 1024;
constexpr unsigned kMaxBlockZ = 64;
constexpr unsigned kMaxThreadsPerBlock = 1024;

struct JitLog {
  char *buffer = nullptr;
  size_t cap = 0;
  void **size_slot = nullptr;
};

struct JitOptions {
  JitLog error;
  JitLog info;
};

CUresult read_jit_options(unsigned n, const int *options, void **values, JitOptions &out) {
  if (n == 0) return CUDA_SUCCESS;
  if (!options || !values) return CUDA_ERROR_INVALID_VALUE;
  for (unsigned i = 0; i < n; ++i) {
    // Size options carry an unsigned int in the pointer-sized slot.
    auto as_size = static_cast<unsigned>(reinterpret_cast<uintptr_t>(values[i]));
    switch (options[i]) {
      case CU_JIT_ERROR_LOG_BUFFER:
        out.error.buffer = static_cast<char *>(values[i]);
        break;
      case CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES:
        out.error.cap = as_size;
        out.error.size_slot = &values[i];
        break;
      case CU_JIT_INFO_LOG_BUFFER:
        out.info.buffer = static_cast<char *>(values[i]);
        break;
      case CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES:
        out.info.cap = as_size;
        out.info.size_slot = &values[i];
        break;
      default:
        if (options[i] < 0 || options[i] >= kJitNumOptions) return CUDA_ERROR_INVALID_VALUE;
    }
  }
  return CUDA_SUCCESS;
}

// As the real driver does: the text is cut to fit (NUL-terminated) and the
// size slot receives min(text length, capacity).
void write_log(const JitLog &log, std::string_view text) {
  if (!log.buffer || log.cap == 0) return;
  size_t n = std::min(text.size(), log.cap - 1);
  std::memcpy(log.buffer, text.data(), n);
  log.buffer[n] = '\0';
  if (log.size_slot)
    *log.size_slot =
        reinterpret_cast<void *>(static_cast<uintptr_t>(std::min(text.size(), log.cap)));
}

// The newest PTX ISA each driver's JIT accepts, as major * 10 + minor.
int max_ptx_isa(int driver_version) {
  if (driver_version >= 13000) return 90 + (driver_version - 13000) / 10;
  static constexpr struct {
    int driver;
    int isa;
  } kTable[] = {
      {12090, 88}, {12080, 87}, {12070, 86}, {12050, 85}, {12040, 84}, {12030, 83}, {12020, 82},
      {12010, 81}, {12000, 80}, {11080, 78}, {11070, 77}, {11060, 76}, {11050, 75}, {11040, 74},
      {11030, 73}, {11020, 72}, {11010, 71}, {11000, 70}, {10020, 65}, {10010, 64}, {10000, 63},
  };
  for (const auto &row : kTable)
    if (driver_version >= row.driver) return row.isa;
  return 60;
}

std::string dotted(int v) { return std::to_string(v / 10) + "." + std::to_string(v % 10); }

// What ptxas would still object to in a well-formed module on this device.
CUresult check_compatible(const ptx::Module &m, const Config &c, std::string &log) {
  int isa = max_ptx_isa(c.driver_version);
  if (m.version > isa) {
    log = "ptxas fatal   : Unsupported .version " + dotted(m.version) + "; current version is '" +
          dotted(isa) + "'";
    return CUDA_ERROR_UNSUPPORTED_PTX_VERSION;
  }
  if (m.target_sm > c.sm()) {
    log =
        "ptxas fatal   : SM version specified by .target is higher than default SM version "
        "assumed";
    return CUDA_ERROR_INVALID_PTX;
  }
  if (m.arch_specific && m.target_sm != c.sm()) {
    log = "ptxas fatal   : fake JIT rejected the module: .target sm_" +
          std::to_string(m.target_sm) + "a runs only on that SM, not on sm_" +
          std::to_string(c.sm());
    return CUDA_ERROR_INVALID_PTX;
  }
  return CUDA_SUCCESS;
}

CUresult compile(const char *image, ptx::Module &out, std::string &log) {
  ptx::Result parsed = ptx::parse(image);
  log = parsed.log;
  if (parsed.failure == ptx::Failure::not_ptx) return CUDA_ERROR_INVALID_IMAGE;
  if (parsed.failure == ptx::Failure::invalid) return CUDA_ERROR_INVALID_PTX;
  if (CUresult r = check_compatible(parsed.module, state().config, log)) return r;
  out = std::move(parsed.module);
  return CUDA_SUCCESS;
}

CUresult lookup_module(CUmodule handle, CUmod_st **out) {
  if (CUresult r = check_init()) return r;
  CUmod_st *m = find(state().modules, handle);
  if (!m) return CUDA_ERROR_INVALID_HANDLE;
  *out = m;
  return check_active(m->ctx);
}

// Function handles are only valid while their module is loaded.
CUresult lookup_function(CUfunction f, CUfunc_st **out) {
  if (CUresult r = check_init()) return r;
  if (!state().functions.contains(f)) return CUDA_ERROR_INVALID_HANDLE;
  *out = f;
  return check_active(f->module->ctx);
}

CUresult check_dims(const ptx::Entry &e, const unsigned grid[3], const unsigned block[3]) {
  for (int i = 0; i < 3; ++i)
    if (grid[i] == 0 || block[i] == 0) return CUDA_ERROR_INVALID_VALUE;
  if (grid[0] > kMaxGridX || grid[1] > kMaxGridYZ || grid[2] > kMaxGridYZ)
    return CUDA_ERROR_INVALID_VALUE;
  if (block[0] > kMaxBlockXY || block[1] > kMaxBlockXY || block[2] > kMaxBlockZ)
    return CUDA_ERROR_INVALID_VALUE;
  unsigned long long threads = 1ull * block[0] * block[1] * block[2];
  if (threads > kMaxThreadsPerBlock || (e.maxntid && threads > e.maxntid))
    return CUDA_ERROR_INVALID_VALUE;
  if (e.reqntid[0] && !std::equal(block, block + 3, e.reqntid)) return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

// extra = {CU_LAUNCH_PARAM_BUFFER_POINTER, p, CU_LAUNCH_PARAM_BUFFER_SIZE, &n,
// CU_LAUNCH_PARAM_END}. A buffer larger than the parameters is
// CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, as on the real driver; a smaller one is
// rejected too (the real driver accepts it and the kernel reads garbage).
CUresult gather_extra(const ptx::Entry &e, void **extra, std::vector<unsigned char> &out) {
  const void *buffer = nullptr;
  const size_t *size = nullptr;
  bool have_buffer = false, have_size = false;
  for (size_t i = 0;; i += 2) {
    if (i >= kMaxExtraWords) return CUDA_ERROR_INVALID_VALUE;
    void *key = extra[i];
    if (key == CU_LAUNCH_PARAM_END) break;
    if (key == CU_LAUNCH_PARAM_BUFFER_POINTER) {
      buffer = extra[i + 1];
      have_buffer = true;
    } else if (key == CU_LAUNCH_PARAM_BUFFER_SIZE) {
      size = static_cast<const size_t *>(extra[i + 1]);
      have_size = true;
    } else {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  if (!have_buffer || !have_size)
    return e.param_bytes == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
  if (!size) return CUDA_ERROR_INVALID_VALUE;
  if (*size > e.param_bytes) return CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES;
  if (*size < e.param_bytes || (*size > 0 && !buffer)) return CUDA_ERROR_INVALID_VALUE;
  if (*size > 0) std::memcpy(out.data(), buffer, *size);
  return CUDA_SUCCESS;
}

CUresult gather_params(const ptx::Entry &e, void **params, void **extra,
                       std::vector<unsigned char> &out) {
  out.assign(e.param_bytes, 0);
  if (params && extra) return CUDA_ERROR_INVALID_VALUE;
  if (extra) return gather_extra(e, extra, out);
  if (e.params.empty()) return CUDA_SUCCESS;
  if (!params) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < e.params.size(); ++i) {
    if (!params[i]) return CUDA_ERROR_INVALID_VALUE;
    std::memcpy(out.data() + e.params[i].offset, params[i], e.params[i].size);
  }
  return CUDA_SUCCESS;
}

}  // namespace

// ---- modules ----------------------------------------------------------------

CUresult kaio_fake_cuModuleLoadDataEx(CUmodule *module, const void *image, unsigned n_options,
                                      int *options, void **values) {
  auto lock = lock_state();
  CUcontext ctx = nullptr;
  if (CUresult r = current_context(&ctx)) return r;
  JitOptions jit;
  if (!module || !image) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = read_jit_options(n_options, options, values, jit)) return r;
  auto m = std::make_unique<CUmod_st>();
  std::string log;
  CUresult r = compile(static_cast<const char *>(image), m->ptx, log);
  write_log(jit.error, r == CUDA_SUCCESS ? "" : log);
  write_log(jit.info, "");
  if (r != CUDA_SUCCESS) return r;
  m->ctx = ctx;
  for (const ptx::Entry &entry : m->ptx.entries) {
    auto f = std::make_unique<CUfunc_st>();
    f->module = m.get();
    f->entry = &entry;
    // As the driver: the default dynamic limit is what static memory leaves of 48 KiB.
    f->max_dynamic_shared =
        std::max(0, kDefaultSharedBytes - static_cast<int>(entry.static_shared_bytes));
    state().functions.insert(f.get());
    m->functions.push_back(std::move(f));
  }
  *module = m.get();
  state().modules.emplace(m.get(), std::move(m));
  return CUDA_SUCCESS;
}

CUresult kaio_fake_cuModuleUnload(CUmodule module) {
  auto lock = lock_state();
  CUmod_st *m = nullptr;
  if (CUresult r = lookup_module(module, &m)) return r;
  for (const auto &f : m->functions) state().functions.erase(f.get());
  state().modules.erase(module);
  return CUDA_SUCCESS;
}

CUresult kaio_fake_cuModuleGetFunction(CUfunction *function, CUmodule module, const char *name) {
  auto lock = lock_state();
  CUmod_st *m = nullptr;
  if (CUresult r = lookup_module(module, &m)) return r;
  if (!function || !name) return CUDA_ERROR_INVALID_VALUE;
  for (const auto &f : m->functions) {
    if (f->entry->name == name) {
      *function = f.get();
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_NOT_FOUND;
}

// ---- functions --------------------------------------------------------------

CUresult kaio_fake_cuFuncGetAttribute(int *value, int attrib, CUfunction function) {
  auto lock = lock_state();
  CUfunc_st *f = nullptr;
  if (CUresult r = lookup_function(function, &f)) return r;
  if (!value) return CUDA_ERROR_INVALID_VALUE;
  const ptx::Entry &e = *f->entry;
  switch (attrib) {
    case CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK:
      *value = e.maxntid ? static_cast<int>(e.maxntid) : kMaxThreadsPerBlock;
      break;
    case CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES:
      *value = static_cast<int>(e.static_shared_bytes);
      break;
    case CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES:
    case CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES:
    case CU_FUNC_ATTRIBUTE_CACHE_MODE_CA:
      *value = 0;
      break;
    case CU_FUNC_ATTRIBUTE_NUM_REGS:
      *value = kNumRegs;
      break;
    case CU_FUNC_ATTRIBUTE_PTX_VERSION:
      *value = f->module->ptx.version;
      break;
    case CU_FUNC_ATTRIBUTE_BINARY_VERSION:
      *value = state().config.sm();
      break;
    case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
      *value = f->max_dynamic_shared;
      break;
    case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
      *value = f->carveout;
      break;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult kaio_fake_cuFuncSetAttribute(CUfunction function, int attrib, int value) {
  auto lock = lock_state();
  CUfunc_st *f = nullptr;
  if (CUresult r = lookup_function(function, &f)) return r;
  if (attrib == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES && value >= 0 &&
      value + static_cast<int>(f->entry->static_shared_bytes) <= kOptInSharedBytes) {
    f->max_dynamic_shared = value;
    return CUDA_SUCCESS;
  }
  if (attrib == CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT && value >= -1 && value <= 100) {
    f->carveout = value;
    return CUDA_SUCCESS;
  }
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult kaio_fake_cuFuncGetParamInfo(CUfunction function, size_t index, size_t *offset,
                                      size_t *size) {
  auto lock = lock_state();
  CUfunc_st *f = nullptr;
  if (CUresult r = lookup_function(function, &f)) return r;
  const auto &params = f->entry->params;
  if (!offset || index >= params.size()) return CUDA_ERROR_INVALID_VALUE;
  *offset = params[index].offset;
  if (size) *size = params[index].size;
  return CUDA_SUCCESS;
}

// ---- launches ---------------------------------------------------------------

namespace {

// The launch runs in the stream's context (the current one for the NULL,
// legacy and per-thread streams), which must be the function's. Called with
// the state locked.
CUresult launch_locked(CUfunction function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                       unsigned by, unsigned bz, unsigned shared_bytes, CUstream stream,
                       void **params, void **extra, bool programmatic) {
  CUfunc_st *f = nullptr;
  if (CUresult r = lookup_function(function, &f)) return r;
  CUcontext ctx = nullptr;
  if (CUresult r = stream_context(stream, &ctx)) return r;
  if (ctx != f->module->ctx) return CUDA_ERROR_INVALID_CONTEXT;
  auto launch = std::make_unique<Launch>();
  launch->grid[0] = gx, launch->grid[1] = gy, launch->grid[2] = gz;
  launch->block[0] = bx, launch->block[1] = by, launch->block[2] = bz;
  const ptx::Entry &e = *f->entry;
  if (CUresult r = check_dims(e, launch->grid, launch->block)) return r;
  if (shared_bytes > static_cast<unsigned>(f->max_dynamic_shared)) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = gather_params(e, params, extra, launch->params)) return r;
  State &st = state();
  if (!st.fail_kernel.empty() && e.name.find(st.fail_kernel) != std::string::npos) {
    st.fail_kernel.clear();
    return st.fail_result;
  }
  launch->kernel = e.name;
  launch->shared = shared_bytes;
  launch->programmatic = programmatic;
  launch->layout = e.params;
  State &s = state();
  s.last_launch = std::move(launch);
  ++s.launches;
  return CUDA_SUCCESS;
}

// The attributes libkaio passes; the driver answers CUDA_ERROR_INVALID_VALUE
// for an id it does not know and for a stream-only attribute such as
// SYNCHRONIZATION_POLICY (3). The others valid for launches (cooperative,
// clusters, events, ...) are not modelled: CUDA_ERROR_NOT_SUPPORTED says so.
constexpr int kAttributeIgnore = 0, kAttributeSyncPolicy = 3, kAttributeProgrammatic = 6,
              kAttributeLast = 16;
constexpr CUresult kNotSupported = 801;  // CUDA_ERROR_NOT_SUPPORTED

}  // namespace

CUresult kaio_fake_cuLaunchKernel(CUfunction function, unsigned gx, unsigned gy, unsigned gz,
                                  unsigned bx, unsigned by, unsigned bz, unsigned shared_bytes,
                                  CUstream stream, void **params, void **extra) {
  auto lock = lock_state();
  return launch_locked(function, gx, gy, gz, bx, by, bz, shared_bytes, stream, params, extra,
                       false);
}

// The config is checked first (NULL, attributes), then the launch as
// cuLaunchKernel checks it.
CUresult kaio_fake_cuLaunchKernelEx(const CUlaunchConfig *config, CUfunction function,
                                    void **params, void **extra) {
  auto lock = lock_state();
  if (!config || (config->numAttrs > 0 && !config->attrs)) return CUDA_ERROR_INVALID_VALUE;
  bool programmatic = false;
  for (unsigned i = 0; i < config->numAttrs; ++i) {
    const CUlaunchAttribute &a = config->attrs[i];
    if (a.id == kAttributeIgnore) continue;
    if (a.id == kAttributeProgrammatic) {
      programmatic = a.value.programmaticStreamSerializationAllowed != 0;
      continue;
    }
    if (a.id < 0 || a.id > kAttributeLast || a.id == kAttributeSyncPolicy)
      return CUDA_ERROR_INVALID_VALUE;
    return kNotSupported;
  }
  return launch_locked(function, config->gridDimX, config->gridDimY, config->gridDimZ,
                       config->blockDimX, config->blockDimY, config->blockDimZ,
                       config->sharedMemBytes, config->hStream, params, extra, programmatic);
}

// Clusters of a kernel whose size .reqnctapercluster fixes, as many as fit at
// once: CTAs an SM by shared memory (each reserves 1 KiB, as on sm_90) and by
// threads, over the SMs, grouped by the cluster size. The fake has no GPCs
// (a real GPU's count can be lower: a cluster stays inside one GPC). Cluster
// sizes from launch attributes, and kernels without any, are not modelled.
CUresult kaio_fake_cuOccupancyMaxActiveClusters(int *clusters, CUfunction function,
                                                const CUlaunchConfig *config) {
  auto lock = lock_state();
  CUfunc_st *f = nullptr;
  if (CUresult r = lookup_function(function, &f)) return r;
  if (!clusters || !config || (config->numAttrs > 0 && !config->attrs))
    return CUDA_ERROR_INVALID_VALUE;
  const ptx::Entry &e = *f->entry;
  const unsigned size = e.cluster[0] * e.cluster[1] * e.cluster[2];
  if (size == 0 || config->numAttrs > 0) return kNotSupported;
  const unsigned threads = config->blockDimX * config->blockDimY * config->blockDimZ;
  if (threads == 0 || threads > (e.maxntid ? e.maxntid : 1024u) ||
      config->sharedMemBytes > static_cast<unsigned>(f->max_dynamic_shared))
    return CUDA_ERROR_INVALID_VALUE;
  const unsigned per_cta =
      static_cast<unsigned>(e.static_shared_bytes) + config->sharedMemBytes + 1024;
  const unsigned per_sm =
      std::min(unsigned{kSharedPerSm} / per_cta, unsigned{kThreadsPerSm} / threads);
  *clusters = static_cast<int>(kSmCount * per_sm / size);
  return CUDA_SUCCESS;
}

}  // namespace kaio::fake
