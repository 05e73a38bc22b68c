// cuBLAS opened at run time with dlopen (no CUDA toolkit or headers needed
// to build): the few prototypes and constants the benches use are declared
// here. Enums cross the C ABI as int.
#pragma once

#include <dlfcn.h>
#include <glob.h>
#include <kaio/kaio.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace kaio_bench {

struct CublasError : std::runtime_error {
  using std::runtime_error::runtime_error;
};


inline constexpr int CUDA_R_32F = 0;
inline constexpr int CUDA_R_16F = 2;
inline constexpr int CUDA_R_16BF = 14;
inline constexpr int CUBLAS_COMPUTE_32F = 68;
inline constexpr int CUBLAS_GEMM_DEFAULT = -1;
inline constexpr int CUBLAS_OP_N = 0;
inline constexpr int CUBLAS_OP_T = 1;
inline constexpr int CUBLAS_DEFAULT_MATH = 0;  // no TF32 for sgemm; tensor cores for 16-bit GemmEx
inline constexpr int CUBLAS_STATUS_SUCCESS = 0;

inline const char *cublas_status_name(int s) {
  switch (s) {
    case 0:
      return "CUBLAS_STATUS_SUCCESS";
    case 1:
      return "CUBLAS_STATUS_NOT_INITIALIZED";
    case 3:
      return "CUBLAS_STATUS_ALLOC_FAILED";
    case 7:
      return "CUBLAS_STATUS_INVALID_VALUE";
    case 8:
      return "CUBLAS_STATUS_ARCH_MISMATCH";
    case 11:
      return "CUBLAS_STATUS_MAPPING_ERROR";
    case 13:
      return "CUBLAS_STATUS_EXECUTION_FAILED";
    case 14:
      return "CUBLAS_STATUS_INTERNAL_ERROR";
    case 15:
      return "CUBLAS_STATUS_NOT_SUPPORTED";
    case 16:
      return "CUBLAS_STATUS_LICENSE_ERROR";
    default:
      return "CUBLAS_STATUS_UNKNOWN";
  }
}

class Cublas {
 public:
  // Opens the first cuBLAS that loads and gives a handle: $KAIO_BENCH_CUBLAS,
  // then libcublas.so.13, .12, .11 through the loader's search path, then the
  // same names in the usual CUDA and pip directories. Returns null with the
  // reasons in *why when none works.
  static std::unique_ptr<Cublas> open(kaio_stream *stream, std::string *why) {
    static const char *const kNames[] = {"libcublas.so.13", "libcublas.so.12", "libcublas.so.11"};
    std::vector<std::string> candidates;
    if (const char *env = std::getenv("KAIO_BENCH_CUBLAS"); env && *env) candidates.push_back(env);
    for (const char *name : kNames) candidates.push_back(name);
    std::vector<std::string> seen;  // real paths of the files already listed
    for (const std::string &dir : search_dirs())
      for (const char *name : kNames) {
        const std::string path = dir + "/" + name;
        char real[PATH_MAX];
        if (!::realpath(path.c_str(), real)) continue;
        if (std::find(seen.begin(), seen.end(), real) != seen.end()) continue;
        seen.push_back(real);
        candidates.push_back(path);
      }
    std::string reasons;
    for (const std::string &path : candidates) {
      std::string reason;
      if (std::unique_ptr<Cublas> c = try_open(path, stream, &reason)) return c;
      // A bare name the loader cannot find is expected; say so only once.
      if (reason.find("cannot open shared object file") != std::string::npos &&
          path.find('/') == std::string::npos)
        continue;
      reasons += (reasons.empty() ? "" : "; ") + reason;
    }
    *why =
        "no libcublas.so.13/.12/.11 could be opened (tried the loader's path, "
        "$CUDA_HOME/lib64, /usr/local/cuda*/lib64 and pip's nvidia/cublas/lib; set "
        "KAIO_BENCH_CUBLAS=/path/to/libcublas.so.N)";
    if (!reasons.empty()) *why += ": " + reasons;
    return nullptr;
  }

  ~Cublas() {
    if (handle_) destroy_(handle_);
    // The library stays loaded: unloading cuBLAS before exit is asking for
    // trouble in its static destructors.
  }

  Cublas(const Cublas &) = delete;
  Cublas &operator=(const Cublas &) = delete;

  const std::string &path() const { return path_; }
  int version() const { return version_; }

  // C (M×N row-major, f32) = op(A)·op(B), computed column-major as
  // Cᵀ = op(B)ᵀ·op(A)ᵀ: a row-major X is a column-major Xᵀ with the same
  // stride, so B goes first with op(B)'s flag, then A with op(A)'s. ta: A is
  // stored K×M; tb: B is stored N×K; ld*: row strides in elements.
  void gemm_ex(bool ta, bool tb, int64_t m, int64_t n, int64_t k, int type, uint64_t a,
               int64_t lda, uint64_t b, int64_t ldb, uint64_t out, int64_t ldc) const {
    const float alpha = 1.0f, beta = 0.0f;
    check_status(gemm_ex_(handle_, op(tb), op(ta), static_cast<int>(n), static_cast<int>(m),
                          static_cast<int>(k), &alpha, ptr(b), type, static_cast<int>(ldb),
                          ptr(a), type, static_cast<int>(lda), &beta, ptr(out), CUDA_R_32F,
                          static_cast<int>(ldc), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
                 "cublasGemmEx");
  }

  void sgemm(bool ta, bool tb, int64_t m, int64_t n, int64_t k, uint64_t a, int64_t lda,
             uint64_t b, int64_t ldb, uint64_t out, int64_t ldc) const {
    const float alpha = 1.0f, beta = 0.0f;
    check_status(
        sgemm_(handle_, op(tb), op(ta), static_cast<int>(n), static_cast<int>(m),
               static_cast<int>(k), &alpha, static_cast<const float *>(ptr(b)),
               static_cast<int>(ldb), static_cast<const float *>(ptr(a)), static_cast<int>(lda),
               &beta, static_cast<float *>(ptr(out)), static_cast<int>(ldc)),
        "cublasSgemm_v2");
  }

 private:
  using Handle = void *;
  Cublas() = default;

  static int op(bool t) { return t ? CUBLAS_OP_T : CUBLAS_OP_N; }
  static void *ptr(uint64_t address) {
    return reinterpret_cast<void *>(static_cast<uintptr_t>(address));
  }

  static std::vector<std::string> search_dirs() {
    std::vector<std::string> dirs;
    for (const char *var : {"CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"})
      if (const char *v = std::getenv(var); v && *v) {
        dirs.push_back(std::string(v) + "/lib64");
        dirs.push_back(std::string(v) + "/lib");
      }
    for (const char *pattern :
         {"/usr/local/cuda/lib64", "/usr/local/cuda/targets/*-linux/lib", "/usr/local/cuda-*/lib64",
          "/usr/local/cuda-*/targets/*-linux/lib", "/usr/lib/x86_64-linux-gnu",
          "/usr/lib/aarch64-linux-gnu", "/usr/local/lib/python3*/dist-packages/nvidia/cublas/lib",
          "/usr/local/lib/python3*/site-packages/nvidia/cublas/lib",
          "/usr/lib/python3/dist-packages/nvidia/cublas/lib",
          "/usr/local/lib/python3*/dist-packages/nvidia/cu13/lib",
          "/usr/local/lib/python3*/site-packages/nvidia/cu13/lib"}) {
      glob_t g{};
      if (::glob(pattern, 0, nullptr, &g) == 0) {
        std::vector<std::string> found(g.gl_pathv, g.gl_pathv + g.gl_pathc);
        std::sort(found.rbegin(), found.rend());  // the newest versioned toolkit first
        dirs.insert(dirs.end(), found.begin(), found.end());
      }
      ::globfree(&g);
    }
    return dirs;
  }

  template <class F>
  static bool resolve(void *lib, F *out, std::initializer_list<const char *> names) {
    for (const char *name : names)
      if (void *p = ::dlsym(lib, name)) {
        *out = reinterpret_cast<F>(p);
        return true;
      }
    return false;
  }

  static std::unique_ptr<Cublas> try_open(const std::string &path, kaio_stream *stream,
                                          std::string *why) {
    // libcublas needs libcublasLt of the same version; load it from the same
    // directory first, in case that directory is not on the loader's path.
    // The loader matches libcublas's DT_NEEDED against libraries already
    // loaded by soname, so RTLD_LOCAL suffices and exports nothing globally.
    if (const size_t slash = path.rfind('/'); slash != std::string::npos) {
      const std::string dir = path.substr(0, slash + 1), name = path.substr(slash + 1);
      constexpr std::string_view prefix = "libcublas.so";
      if (name.compare(0, prefix.size(), prefix) == 0) {
        const std::string lt = dir + "libcublasLt" + name.substr(std::strlen("libcublas"));
        if (::access(lt.c_str(), F_OK) == 0) ::dlopen(lt.c_str(), RTLD_NOW | RTLD_LOCAL);
      }
    }
    void *lib = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      const char *e = ::dlerror();
      *why = e ? e : (path + ": dlopen failed");
      return nullptr;
    }
    std::unique_ptr<Cublas> c(new Cublas);
    c->path_ = path;
    if (!resolve(lib, &c->create_, {"cublasCreate_v2", "cublasCreate"}) ||
        !resolve(lib, &c->destroy_, {"cublasDestroy_v2", "cublasDestroy"}) ||
        !resolve(lib, &c->set_stream_, {"cublasSetStream_v2", "cublasSetStream"}) ||
        !resolve(lib, &c->gemm_ex_, {"cublasGemmEx"}) ||
        !resolve(lib, &c->sgemm_, {"cublasSgemm_v2", "cublasSgemm"})) {
      *why = path +
             ": a cuBLAS entry point is missing (cublasCreate_v2, cublasDestroy_v2, "
             "cublasSetStream_v2, cublasGemmEx or cublasSgemm_v2)";
      return nullptr;
    }
    resolve(lib, &c->set_math_mode_, {"cublasSetMathMode"});
    resolve(lib, &c->status_string_, {"cublasGetStatusString"});
    int (*get_version)(Handle, int *) = nullptr;
    resolve(lib, &get_version, {"cublasGetVersion_v2", "cublasGetVersion"});

    Handle h = nullptr;
    if (const int s = c->create_(&h); s != CUBLAS_STATUS_SUCCESS) {
      *why = path + ": cublasCreate_v2 failed: " + c->describe(s);
      return nullptr;
    }
    c->handle_ = h;
    // cuBLAS runs on the device's primary context, libkaio's too: kaio's
    // stream and buffers' device pointers are valid cuBLAS arguments.
    if (const int s = c->set_stream_(h, kaio_stream_native(stream)); s != CUBLAS_STATUS_SUCCESS) {
      *why = path + ": cublasSetStream_v2 failed: " + c->describe(s);
      return nullptr;
    }
    if (c->set_math_mode_) {
      if (const int s = c->set_math_mode_(h, CUBLAS_DEFAULT_MATH); s != CUBLAS_STATUS_SUCCESS) {
        *why = path + ": cublasSetMathMode failed: " + c->describe(s);
        return nullptr;
      }
    }
    if (get_version && get_version(h, &c->version_) != CUBLAS_STATUS_SUCCESS) c->version_ = 0;
    return c;
  }

  std::string describe(int s) const {
    std::string text = std::string(cublas_status_name(s)) + " (" + std::to_string(s) + ")";
    if (status_string_)
      if (const char *t = status_string_(s)) text += ": " + std::string(t);
    return text;
  }

  void check_status(int s, const char *call) const {
    if (s != CUBLAS_STATUS_SUCCESS)
      throw CublasError(std::string(call) + " failed: " + describe(s));
  }

  std::string path_;
  int version_ = 0;
  Handle handle_ = nullptr;
  int (*create_)(Handle *) = nullptr;
  int (*destroy_)(Handle) = nullptr;
  int (*set_stream_)(Handle, void *) = nullptr;
  int (*set_math_mode_)(Handle, int) = nullptr;
  const char *(*status_string_)(int) = nullptr;
  int (*gemm_ex_)(Handle, int, int, int, int, int, const void *, const void *, int, int,
                  const void *, int, int, const void *, void *, int, int, int, int) = nullptr;
  int (*sgemm_)(Handle, int, int, int, int, int, const float *, const float *, int, const float *,
                int, const float *, float *, int) = nullptr;
};

}  // namespace kaio_bench
