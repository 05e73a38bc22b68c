/*
 * kaio.h: the stable C ABI of libkaio, GPU kernels for LLM inference and
 * training, loaded through the CUDA driver API with no CUDA toolkit needed.
 *
 * C99 and C++ clean. Includes only <stddef.h> and <stdint.h>: native CUDA
 * handles cross this header as void * or uint64_t.
 *
 * ---------------------------------------------------------------------------
 * Conventions
 * ---------------------------------------------------------------------------
 * Naming     kaio_<object>_<verb>; out-parameters come first, then the object,
 *            then inputs.
 * Status     Every fallible function returns kaio_status: 0 is KAIO_OK and
 *            every failure is negative. On failure the calling thread's last
 *            error holds a message naming the function, the argument, the
 *            value and the fix (kaio_last_error). Out-handles are set to NULL
 *            on failure.
 * Ownership  (the words used on every function below)
 *            "caller owns"   : the caller must release the result with the
 *                              matching _destroy.
 *            "borrowed"      : valid while the object it came from lives; do
 *                              not destroy it.
 *            "retains X"     : the new object keeps X alive; X's _destroy only
 *                              drops the caller's reference, so objects may be
 *                              destroyed in any order.
 *            "foreign"       : memory or streams made by someone else (candle,
 *                              cudarc, PyTorch); kaio never frees them, and the
 *                              caller keeps them alive while kaio uses them.
 *            Every _destroy accepts NULL and may be called from any thread,
 *            but must not race with other calls on the same handle.
 * Handles    Opaque values, not addresses of memory to read. Each is issued
 *            once: a destroyed handle (destroyed again, or used later, even
 *            after new objects were made) gives KAIO_ERROR_INVALID_HANDLE or,
 *            for _destroy, nothing; so do NULL and handles of another type.
 * Threads    Global functions (status names, versions, last error, probe)
 *            are safe from any thread at any time. A kaio_device is internally
 *            synchronised: concurrent calls on one device, and on objects made
 *            from it, are safe. Modules, kernels and op handles are immutable
 *            after creation and may be shared between threads. Concurrent
 *            writes to overlapping bytes of a buffer are a data race that the
 *            caller orders, as with any memory. Work on one stream runs in
 *            order; across streams the caller orders with events. Errors are
 *            per OS thread.
 * Async      Ops, kernel launches and *_async copies enqueue work on a stream
 *            and return without waiting for the GPU. A steady-state op launch
 *            does no host synchronisation, no module load and no device
 *            allocation, so it may be captured into a CUDA graph. Errors raised
 *            by the GPU while running appear at the next synchronising call.
 *            On compute capability 9.0 the kernels of a decode step (k-quant
 *            and int4 matvecs, norms, elementwise, RoPE and KV-cache writes,
 *            decode attention; not the f16 / bf16 or int8-weight matvecs)
 *            are programmatic dependent launches: they may start while the
 *            previous kernel on the stream still runs, and wait for it to
 *            finish before reading or writing memory, so stream order holds.
 * Contexts   kaio uses each device's primary context, the one the CUDA runtime,
 *            PyTorch, candle and cudarc use, so memory and streams are shared.
 *            Every call pushes that context and pops it before returning: the
 *            caller's current context is left as it was.
 */
#ifndef KAIO_H
#define KAIO_H

#include <stddef.h>
#include <stdint.h>

#include <kaio/kaio_version.h>

#if defined(_WIN32) && !defined(KAIO_STATIC)
#  if defined(KAIO_BUILDING)
#    define KAIO_API __declspec(dllexport)
#  else
#    define KAIO_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__)
#  define KAIO_API __attribute__((visibility("default")))
#else
#  define KAIO_API
#endif

#if defined(__GNUC__)
#  define KAIO_NODISCARD __attribute__((warn_unused_result))
#else
#  define KAIO_NODISCARD
#endif

#ifdef __cplusplus
#  define KAIO_BEGIN_DECLS extern "C" {
#  define KAIO_END_DECLS }
#else
#  define KAIO_BEGIN_DECLS
#  define KAIO_END_DECLS
#endif

KAIO_BEGIN_DECLS

/* ===========================================================================
 * Status codes
 *
 * Values are pinned. The hundreds digit is the category (see
 * KAIO_STATUS_CATEGORY). A future release may add negative values: treat any
 * status < 0 as failure and fall back on its category.
 * ======================================================================== */
typedef int32_t kaio_status;

enum {
    KAIO_OK = 0,

    /* -1xx: the caller passed something wrong. */
    KAIO_ERROR_INVALID_ARGUMENT = -100,  /* a NULL pointer, unknown enum, bad option   */
    KAIO_ERROR_INVALID_HANDLE = -101,    /* NULL, destroyed or wrong-type handle        */
    KAIO_ERROR_INVALID_DTYPE = -102,     /* unknown dtype, or one the call does not take */
    KAIO_ERROR_SHAPE_MISMATCH = -103,    /* shapes that do not agree                     */
    KAIO_ERROR_OUT_OF_BOUNDS = -104,     /* a view or copy past the end of its buffer    */
    KAIO_ERROR_MISALIGNED = -105,        /* an offset or stride off the required alignment */
    KAIO_ERROR_WRONG_DEVICE = -106,      /* objects from two different devices mixed     */
    KAIO_ERROR_BUFFER_TOO_SMALL = -107,  /* a caller buffer or struct_size too small     */
    KAIO_ERROR_INVALID_DIMENSION = -108, /* a zero, negative or overflowing dimension    */
    KAIO_ERROR_UNSUPPORTED = -109,       /* valid, but not supported by this call yet    */

    /* -2xx: the environment cannot run the request. */
    KAIO_ERROR_DRIVER_NOT_FOUND = -200,  /* libcuda.so.1 could not be opened             */
    KAIO_ERROR_DRIVER_TOO_OLD = -201,    /* driver lacks an entry point or PTX ISA    */
    KAIO_ERROR_NO_DEVICE = -202,         /* no CUDA device, or ordinal out of range      */
    KAIO_ERROR_UNSUPPORTED_ARCH = -203,  /* the device's compute capability is too low   */

    /* -3xx: out of a resource. */
    KAIO_ERROR_OUT_OF_HOST_MEMORY = -300,
    KAIO_ERROR_OUT_OF_DEVICE_MEMORY = -301,

    /* -4xx: building or loading GPU code. */
    KAIO_ERROR_PTX_JIT_FAILED = -400,    /* the message holds the JIT log                */
    KAIO_ERROR_KERNEL_NOT_FOUND = -401,
    KAIO_ERROR_KERNEL_SOURCE = -402,     /* kernel-language source rejected: the message
                                            holds line:column, the reason and a caret excerpt */

    /* -5xx: running GPU code. */
    KAIO_ERROR_LAUNCH_FAILED = -500,
    KAIO_ERROR_DEVICE_FAULT = -501,      /* sticky: the context is unusable from now on  */
    KAIO_ERROR_KERNEL_BOUNDS = -502,     /* a kernel-language kernel indexed a tensor outside
                                            its view; the read was skipped (gave 0), nothing
                                            was written out of bounds; not sticky        */

    /* -9xx: anything else. */
    KAIO_ERROR_DRIVER = -900,            /* any other CUresult: see kaio_last_error_driver_code */
    KAIO_ERROR_INTERNAL = -999,

    KAIO_STATUS_FORCE32_ = 0x7FFFFFFF
};

/* The category of a status: 0 for OK, else -100, -200, ... -900. */
#define KAIO_STATUS_CATEGORY(s) ((s) >= 0 ? 0 : -((-(s)) / 100) * 100)

/* The constant's name, e.g. "KAIO_ERROR_OUT_OF_BOUNDS", or
 * "KAIO_UNKNOWN_STATUS". Never NULL; static storage; any thread. */
KAIO_API const char *kaio_status_name(kaio_status status);

/* The calling thread's last error message, or "" if none was set. Never NULL.
 * Kept whole up to 80 KiB (a JIT log included); a longer one is cut and ends
 * with "... (N bytes cut)".
 * Valid until the next kaio call on this thread that returns a kaio_status;
 * functions that cannot fail (status, dtype and version names, the
 * kaio_last_error* family, handle getters such as kaio_buffer_size) never
 * touch it. Meaningful only right after a call that failed: success does not
 * promise to clear it. Any thread. */
KAIO_API const char *kaio_last_error(void);

/* The status of the calling thread's last failure, or KAIO_OK. */
KAIO_API kaio_status kaio_last_error_status(void);

/* Copies the last error message into buf (cap bytes, always NUL-terminated
 * when cap > 0) and returns its full length without the NUL, so a caller can
 * size a second call (buf NULL with cap 0 only measures). For bindings (Go, Rust) whose next call may run on
 * another thread: capture right after the failing call. */
KAIO_API size_t kaio_last_error_copy(char *buf, size_t cap);

/* The raw CUresult behind the last error, or 0 if the driver did not fail. */
KAIO_API int32_t kaio_last_error_driver_code(void);

/* ===========================================================================
 * Version
 * ======================================================================== */
/* KAIO_VERSION_NUMBER of the library actually loaded. Bindings check
 * kaio_version_number() >= KAIO_VERSION_NUMBER at start-up. Any thread. */
KAIO_API uint32_t kaio_version_number(void);
/* "MAJOR.MINOR.PATCH"; static storage; any thread. */
KAIO_API const char *kaio_version_string(void);

/* ===========================================================================
 * Driver probe
 *
 * The driver is libcuda.so.1, opened on first use. The environment variable
 * LIBKAIO_CUDA_DRIVER, if set, names another file to open instead (a setuid
 * or setgid program ignores it, as it does KAIO_LOG).
 * ======================================================================== */
typedef struct kaio_probe_info {
    uint32_t struct_size;        /* in: sizeof(kaio_probe_info)                   */
    kaio_status driver_status;   /* out: KAIO_OK; KAIO_ERROR_DRIVER_NOT_FOUND or
                                    _DRIVER_TOO_OLD; KAIO_ERROR_NO_DEVICE when the
                                    driver loads but sees no GPU                  */
    int32_t driver_version;      /* out: e.g. 13000 for CUDA 13.0; 0 if unknown   */
    int32_t device_count;        /* out: 0 when no driver or no device            */
    char message[256];           /* out: "" or the reason, e.g. the loader's text */
} kaio_probe_info;

/* Reports whether a driver and devices are usable, without failing: returns
 * KAIO_OK whenever info is valid, with the outcome in info. Use it to skip GPU
 * work cleanly. Any thread.
 * Returns KAIO_ERROR_INVALID_ARGUMENT (info NULL) or KAIO_ERROR_BUFFER_TOO_SMALL
 * (struct_size below the first version's size). */
KAIO_API KAIO_NODISCARD kaio_status kaio_probe(kaio_probe_info *info);

/* ===========================================================================
 * Element types
 * ======================================================================== */
typedef int32_t kaio_dtype;
enum {
    KAIO_DTYPE_INVALID = 0, /* zero-initialised views are caught, not guessed */
    KAIO_DTYPE_F32 = 1,
    KAIO_DTYPE_F16 = 2,
    KAIO_DTYPE_BF16 = 3,
    KAIO_DTYPE_I8 = 4,
    KAIO_DTYPE_U8 = 5,
    KAIO_DTYPE_I32 = 6,
    KAIO_DTYPE_U32 = 7
};
/* Bytes per element, or 0 for an unknown dtype. Any thread. */
KAIO_API size_t kaio_dtype_size(kaio_dtype dtype);
/* "f32", "f16", ... or "invalid". Never NULL. Any thread. */
KAIO_API const char *kaio_dtype_name(kaio_dtype dtype);

/* ===========================================================================
 * Device
 * ======================================================================== */
typedef struct kaio_device kaio_device;

/* Number of visible CUDA devices. Fails with the driver's status (e.g.
 * KAIO_ERROR_DRIVER_NOT_FOUND) when no driver can be loaded. Any thread. */
KAIO_API KAIO_NODISCARD kaio_status kaio_device_count(int32_t *out_count);

/* Opens device `ordinal` (0-based) on its primary context.
 * Ownership: caller owns *out. Opening one ordinal twice returns handles to the
 * same device (and its module cache); each must be destroyed.
 * Returns KAIO_ERROR_NO_DEVICE when ordinal is out of range. Any thread. */
KAIO_API KAIO_NODISCARD kaio_status kaio_device_open(kaio_device **out, int32_t ordinal);

/* Drops the caller's reference. The device lives on while buffers, streams,
 * events, modules or ops made from it exist. Accepts NULL. */
KAIO_API void kaio_device_destroy(kaio_device *device);

typedef struct kaio_device_info {
    uint32_t struct_size;            /* in: sizeof(kaio_device_info)      */
    int32_t ordinal;
    int32_t cc_major;                /* compute capability, e.g. 9 ...    */
    int32_t cc_minor;                /* ... and 0 for an H100             */
    int32_t sm_count;
    int32_t max_shared_per_block;    /* opt-in maximum, bytes             */
    uint64_t total_memory;           /* bytes                             */
    uint64_t l2_cache_bytes;
    char name[256];
} kaio_device_info;

/* Fills info (set info->struct_size first). Any thread. */
KAIO_API KAIO_NODISCARD kaio_status kaio_device_get_info(const kaio_device *device,
                                                          kaio_device_info *info);

/* The CUcontext (primary context) of the device, for interop. Borrowed. */
KAIO_API void *kaio_device_native_context(const kaio_device *device);

/* ===========================================================================
 * Stream and event
 * ======================================================================== */
typedef struct kaio_stream kaio_stream;
typedef struct kaio_event kaio_event;

enum { KAIO_STREAM_DEFAULT = 0, KAIO_STREAM_NON_BLOCKING = 1 };

/* Creates a stream on device. flags: KAIO_STREAM_DEFAULT or
 * KAIO_STREAM_NON_BLOCKING (does not synchronise with the legacy NULL
 * stream). Ownership: caller owns *out; retains device. Any thread. */
KAIO_API KAIO_NODISCARD kaio_status kaio_stream_create(kaio_stream **out, kaio_device *device,
                                                        uint32_t flags);

/* Wraps a foreign CUstream (e.g. candle's), which must belong to device's
 * primary context; NULL means the legacy default stream. kaio never destroys
 * it. Ownership: caller owns *out (the wrapper); the CUstream is foreign;
 * retains device. Returns KAIO_ERROR_WRONG_DEVICE if the stream belongs to
 * another context. */
KAIO_API KAIO_NODISCARD kaio_status kaio_stream_wrap(kaio_stream **out, kaio_device *device,
                                                      void *cu_stream);

/* Blocks the calling thread until all work queued on stream has finished.
 * Reports errors raised by that work, including the device-side error flag
 * of kernel-language kernels launched on this handle
 * (KAIO_ERROR_KERNEL_BOUNDS; see the "Kernel language" section). Any thread. */
KAIO_API KAIO_NODISCARD kaio_status kaio_stream_synchronize(kaio_stream *stream);

/* Makes all future work on stream wait until event completes (no host wait). */
KAIO_API KAIO_NODISCARD kaio_status kaio_stream_wait_event(kaio_stream *stream,
                                                            kaio_event *event);

/* The native CUstream, for interop. Borrowed. NULL for the legacy stream. */
KAIO_API void *kaio_stream_native(const kaio_stream *stream);

/* The device of the stream. Borrowed. */
KAIO_API kaio_device *kaio_stream_device(const kaio_stream *stream);

/* Destroys an owned stream after its queued work completes (the call does
 * not wait), or drops a wrapper. Accepts NULL. */
KAIO_API void kaio_stream_destroy(kaio_stream *stream);

enum { KAIO_EVENT_DEFAULT = 0, KAIO_EVENT_DISABLE_TIMING = 1 };

/* Ownership: caller owns *out; retains device. */
KAIO_API KAIO_NODISCARD kaio_status kaio_event_create(kaio_event **out, kaio_device *device,
                                                       uint32_t flags);
/* Records event at the current end of stream. */
KAIO_API KAIO_NODISCARD kaio_status kaio_event_record(kaio_event *event, kaio_stream *stream);
/* Blocks until the work captured by the last record has finished. Reports
 * a raised kernel-language error flag of the recording stream as
 * kaio_stream_synchronize does (it may also be one of a kernel launched on
 * that stream after the record). Must not race with kaio_event_record of
 * the same event. */
KAIO_API KAIO_NODISCARD kaio_status kaio_event_synchronize(kaio_event *event);
/* Milliseconds between two completed records. Events created with
 * KAIO_EVENT_DISABLE_TIMING, or never recorded, give
 * KAIO_ERROR_INVALID_ARGUMENT. */
KAIO_API KAIO_NODISCARD kaio_status kaio_event_elapsed_ms(float *out_ms, kaio_event *start,
                                                           kaio_event *end);
/* Accepts NULL. */
KAIO_API void kaio_event_destroy(kaio_event *event);

/* ===========================================================================
 * Buffer: a range of device memory
 * ======================================================================== */
typedef struct kaio_buffer kaio_buffer;

/* Allocates size_bytes (>= 1) of device memory, 256-byte aligned, contents
 * undefined. Ownership: caller owns *out; retains device. Allocation is not a
 * steady-state operation: do it before capturing graphs. */
KAIO_API KAIO_NODISCARD kaio_status kaio_buffer_create(kaio_buffer **out, kaio_device *device,
                                                        uint64_t size_bytes);

/* Wraps foreign device memory [device_ptr, device_ptr + size_bytes), e.g. a
 * candle CudaSlice or a PyTorch tensor's data. Accepted: cuMemAlloc /
 * cudaMalloc memory of device's primary context, stream-ordered pool memory
 * (cuMemAllocAsync / cudaMallocAsync: candle, JAX, PyTorch's async backend)
 * and virtual memory (cuMemCreate + cuMemMap, over one or several adjacent
 * mappings: PyTorch's expandable segments) with read-write access for device.
 * Every byte of the range is checked with the driver: memory of another
 * device or of another context gives KAIO_ERROR_WRONG_DEVICE, a range past
 * the allocation or into unmapped addresses KAIO_ERROR_OUT_OF_BOUNDS, host,
 * unknown or inaccessible memory KAIO_ERROR_INVALID_ARGUMENT. kaio never
 * frees it. Ownership: caller owns *out (the wrapper); the memory is foreign. */
KAIO_API KAIO_NODISCARD kaio_status kaio_buffer_wrap(kaio_buffer **out, kaio_device *device,
                                                      uint64_t device_ptr, uint64_t size_bytes);

/* Frees owned memory (the driver waits for work using it), or drops a
 * wrapper. Accepts NULL. */
KAIO_API void kaio_buffer_destroy(kaio_buffer *buffer);

/* Blocking copies between host memory and [offset, offset + size) of buffer.
 * They return once the bytes have landed, and (as the driver does) order
 * after prior work on the legacy stream, but NOT after work on
 * KAIO_STREAM_NON_BLOCKING or foreign streams: synchronise such a stream
 * first, or use the _async forms on it. */
KAIO_API KAIO_NODISCARD kaio_status kaio_buffer_write(kaio_buffer *buffer, uint64_t offset,
                                                       const void *src, uint64_t size);
KAIO_API KAIO_NODISCARD kaio_status kaio_buffer_read(const kaio_buffer *buffer, uint64_t offset,
                                                      void *dst, uint64_t size);

/* Stream-ordered copies. The host memory must stay valid and unchanged until
 * the copy has run on stream (synchronise or wait on an event); with pageable
 * host memory the driver may return only after staging it. */
KAIO_API KAIO_NODISCARD kaio_status kaio_buffer_write_async(kaio_buffer *buffer,
                                                             kaio_stream *stream,
                                                             uint64_t offset, const void *src,
                                                             uint64_t size);
KAIO_API KAIO_NODISCARD kaio_status kaio_buffer_read_async(const kaio_buffer *buffer,
                                                            kaio_stream *stream, uint64_t offset,
                                                            void *dst, uint64_t size);

/* Stream-ordered: sets size bytes from offset to value. */
KAIO_API KAIO_NODISCARD kaio_status kaio_buffer_memset(kaio_buffer *buffer, kaio_stream *stream,
                                                        uint64_t offset, uint8_t value,
                                                        uint64_t size);

/* Stream-ordered device-to-device copy; ranges must not overlap. */
KAIO_API KAIO_NODISCARD kaio_status kaio_buffer_copy(kaio_buffer *dst, uint64_t dst_offset,
                                                      const kaio_buffer *src,
                                                      uint64_t src_offset, uint64_t size,
                                                      kaio_stream *stream);

/* Queries; 0 or NULL for a NULL or invalid handle. Borrowed results. */
KAIO_API uint64_t kaio_buffer_device_ptr(const kaio_buffer *buffer);
KAIO_API uint64_t kaio_buffer_size(const kaio_buffer *buffer);
KAIO_API kaio_device *kaio_buffer_device(const kaio_buffer *buffer);

/* ===========================================================================
 * Tensor views: how ops see buffers
 *
 * A rank-2, row-major view: element (r, c) lives at byte
 *     offset_bytes + (r * row_stride + c) * kaio_dtype_size(dtype)
 * of buffer. row_stride is in elements; 0 means cols (contiguous). Every op
 * checks every view at every call: a known dtype, rows and cols >= 1,
 * row_stride >= cols, offset_bytes a multiple of the element size, and the
 * last element inside the buffer. The view borrows buffer for the call only.
 * ======================================================================== */
typedef struct kaio_tensor {
    kaio_buffer *buffer;
    uint64_t offset_bytes;
    kaio_dtype dtype;
    uint32_t reserved; /* must be 0 */
    int64_t rows;
    int64_t cols;
    int64_t row_stride;
} kaio_tensor;

/* A contiguous view of a whole buffer from its start. */
static inline kaio_tensor kaio_tensor_2d(kaio_buffer *buffer, kaio_dtype dtype, int64_t rows,
                                         int64_t cols) {
    kaio_tensor t;
    t.buffer = buffer;
    t.offset_bytes = 0;
    t.dtype = dtype;
    t.reserved = 0;
    t.rows = rows;
    t.cols = cols;
    t.row_stride = 0;
    return t;
}

/* ===========================================================================
 * Ops
 *
 * An op handle is one op kind with its dtype, shapes and options, validated
 * once. Its kernels are loaded and its launch configuration chosen at
 * creation, so kaio_op_launch only checks the views and enqueues. An op runs
 * on any stream of its device, from any thread. An op that owns a workspace
 * (its creator says so: split-K matmul, matmul backward with an f32 dC) must
 * not run on two streams at the same time; order such launches with events,
 * or create one op per stream.
 *
 * Each op also has a one-shot call that validates and launches in one go; the
 * first call on a device loads the kernels, later calls reuse them.
 *
 * Element-wise ops (silu_gate, gelu) need contiguous views (row_stride ==
 * cols). Row ops (rmsnorm, softmax) honour any row_stride. Inputs and outputs
 * share one dtype (f32, f16 or bf16); math is f32, rounded once on output.
 * Inputs and outputs must not partly overlap; the very same view as input
 * and output (in place) is fine for every op here (for RMSNorm that is x and
 * out; the weight must not overlap out). Built-in ops need compute capability 8.0+.
 * ======================================================================== */
typedef struct kaio_op kaio_op;

typedef int32_t kaio_gelu_mode;
enum { KAIO_GELU_ERF = 1, KAIO_GELU_TANH = 2 };

/* out = x * sigmoid(x) * gate.       launch tensors: {x, gate, out} */
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_silu_gate(kaio_op **out, kaio_device *device,
                                                              kaio_dtype dtype, int64_t rows,
                                                              int64_t cols);
/* ERF: 0.5·x·(1 + erf(x/√2)); TANH: 0.5·x·(1 + tanh(√(2/π)(x + 0.044715x³))).
 *                                     launch tensors: {x, out} */
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_gelu(kaio_op **out, kaio_device *device,
                                                         kaio_dtype dtype, int64_t rows,
                                                         int64_t cols, kaio_gelu_mode mode);
/* out[r,c] = x[r,c] / sqrt(mean_c x[r,:]² + eps) · weight[c]; weight is 1×cols.
 * eps must be finite and >= 0.         launch tensors: {x, weight, out} */
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_rmsnorm(kaio_op **out, kaio_device *device,
                                                            kaio_dtype dtype, int64_t rows,
                                                            int64_t cols, float eps);
/* Numerically stable softmax along each row.  launch tensors: {x, out} */
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_softmax(kaio_op **out, kaio_device *device,
                                                            kaio_dtype dtype, int64_t rows,
                                                            int64_t cols);

/* Enqueues op on stream with the tensors in the order its creator lists.
 * Checks count, dtypes and shapes against the op, each view against its
 * buffer, and that every buffer and the stream belong to the op's device.
 * No host synchronisation, allocation or module load. */
KAIO_API KAIO_NODISCARD kaio_status kaio_op_launch(const kaio_op *op, kaio_stream *stream,
                                                    const kaio_tensor *tensors, size_t count);

/* Accepts NULL. */
KAIO_API void kaio_op_destroy(kaio_op *op);

/* One-shot forms: shapes and dtype come from the views. */
KAIO_API KAIO_NODISCARD kaio_status kaio_silu_gate(kaio_stream *stream, const kaio_tensor *x,
                                                    const kaio_tensor *gate,
                                                    const kaio_tensor *out);
KAIO_API KAIO_NODISCARD kaio_status kaio_gelu(kaio_stream *stream, const kaio_tensor *x,
                                               const kaio_tensor *out, kaio_gelu_mode mode);
KAIO_API KAIO_NODISCARD kaio_status kaio_rmsnorm(kaio_stream *stream, const kaio_tensor *x,
                                                  const kaio_tensor *weight,
                                                  const kaio_tensor *out, float eps);
KAIO_API KAIO_NODISCARD kaio_status kaio_softmax(kaio_stream *stream, const kaio_tensor *x,
                                                  const kaio_tensor *out);

/* ===========================================================================
 * Tensor-core matmul
 *
 *   C = alpha · op(A) · op(B) + beta · C, accumulated in f32, row-major views.
 *
 * op(A) is M×K: A is an M×K view (KAIO_TRANS_N) or a K×M view (KAIO_TRANS_T).
 * op(B) is K×N: B is a K×N view (KAIO_TRANS_N) or an N×K view (KAIO_TRANS_T,
 * the layout of nn.Linear weights). A and B are both f16 or both bf16; C is
 * f32, f16 or bf16, rounded once from f32. When beta is 0, C is not read (it
 * may hold anything, NaN included). No transposed copies are ever made.
 *
 * Constraints, checked at creation and at every launch:
 *   M, N >= 1 and K >= 8, each at most 2^31 - 1, K a multiple of 8, and
 *   M at most 65535 · 128;
 *   A and B start on 16-byte boundaries with row strides that are multiples
 *   of 8 elements (KAIO_ERROR_MISALIGNED otherwise); C any row stride;
 *   C must not overlap A or B.
 * Variants: KAIO_MATMUL_AUTO (the default) picks the fastest kernel for the
 * device and shape: wgmma + TMA kernels on compute capability 9.0, GEMV
 * kernels for M <= 16 with B transposed, else the sm_80 cp.async kernels.
 * KAIO_MATMUL_SYNC and KAIO_MATMUL_ASYNC force the sm_80 mma.sync kernels
 * without and with a multi-stage cp.async pipeline.
 *
 * Split K: where the output has too few tiles to fill the GPU and K is long
 * (e.g. M = 128 prefill chunks), a prepared AUTO op on compute capability
 * 9.0 may cut K into slices computed by separate CTAs. The op then owns an
 * f32 workspace (slices × M × N × 4 bytes, allocated at creation) and each
 * launch enqueues a second kernel that sums the slices in a fixed order: the
 * result is the same bits on every run, though it may differ in the last
 * bits from the one-shot call, which never splits (it owns no workspace).
 * Such an op must not run on two streams at once: order its launches, or
 * create one op per stream.
 * Long K: with f32 output (and for split partials), the compute capability
 * 9.0 kernels used where the output has few tiles (e.g. M = 128) add K in
 * chunks of 4096, each summed in f32 into the result in a fixed order, which
 * keeps the error near that of K = 4096 at any K (deterministic; products
 * with K > 4096 differ in the last bits from earlier libkaio builds).
 * ======================================================================== */
typedef int32_t kaio_trans;
enum { KAIO_TRANS_N = 0, KAIO_TRANS_T = 1 };

typedef int32_t kaio_matmul_variant;
enum { KAIO_MATMUL_AUTO = 0, KAIO_MATMUL_SYNC = 1, KAIO_MATMUL_ASYNC = 2 };

typedef struct kaio_matmul_desc {
    uint32_t struct_size;          /* sizeof(kaio_matmul_desc)                  */
    kaio_dtype in_dtype;           /* A and B: KAIO_DTYPE_F16 or _BF16           */
    kaio_dtype out_dtype;          /* C: KAIO_DTYPE_F32, _F16 or _BF16           */
    kaio_trans trans_a;
    kaio_trans trans_b;
    kaio_matmul_variant variant;
    int64_t m, n, k;               /* one-shot calls: 0 means "from the views" */
    float alpha;
    float beta;
} kaio_matmul_desc;

/* Sets the defaults: f16 in, f32 out, no transposes, AUTO, alpha 1, beta 0,
 * m = n = k = 0. struct_size is sizeof(kaio_matmul_desc) as the caller knows
 * it (bindings cannot use an initialiser macro). Any thread. */
KAIO_API KAIO_NODISCARD kaio_status kaio_matmul_desc_init(kaio_matmul_desc *desc,
                                                          size_t struct_size);

/* A prepared matmul.                    launch tensors: {A, B, C} */
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_matmul(kaio_op **out, kaio_device *device,
                                                           const kaio_matmul_desc *desc);

/* One-shot matmul; shapes come from the views where desc's m, n, k are 0. */
KAIO_API KAIO_NODISCARD kaio_status kaio_matmul(kaio_stream *stream, const kaio_tensor *a,
                                                 const kaio_tensor *b, const kaio_tensor *c,
                                                 const kaio_matmul_desc *desc);

/* KAIO's entry points: C (f32, M×N) = A (M×K) · B (K×N), alpha 1, beta 0.
 * _tc and _tc_bf16 use KAIO_MATMUL_AUTO; the _async forms force the cp.async
 * kernels. Each has a prepared-op form (launch tensors {A, B, C}). */
KAIO_API KAIO_NODISCARD kaio_status kaio_matmul_tc(kaio_stream *stream, const kaio_tensor *a,
                                                    const kaio_tensor *b, const kaio_tensor *c);
KAIO_API KAIO_NODISCARD kaio_status kaio_matmul_tc_async(kaio_stream *stream,
                                                          const kaio_tensor *a,
                                                          const kaio_tensor *b,
                                                          const kaio_tensor *c);
KAIO_API KAIO_NODISCARD kaio_status kaio_matmul_tc_bf16(kaio_stream *stream,
                                                         const kaio_tensor *a,
                                                         const kaio_tensor *b,
                                                         const kaio_tensor *c);
KAIO_API KAIO_NODISCARD kaio_status kaio_matmul_tc_bf16_async(kaio_stream *stream,
                                                               const kaio_tensor *a,
                                                               const kaio_tensor *b,
                                                               const kaio_tensor *c);
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_matmul_tc(kaio_op **out, kaio_device *device,
                                                              int64_t m, int64_t n, int64_t k);
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_matmul_tc_async(kaio_op **out,
                                                                    kaio_device *device,
                                                                    int64_t m, int64_t n,
                                                                    int64_t k);
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_matmul_tc_bf16(kaio_op **out,
                                                                   kaio_device *device,
                                                                   int64_t m, int64_t n,
                                                                   int64_t k);
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_matmul_tc_bf16_async(kaio_op **out,
                                                                         kaio_device *device,
                                                                         int64_t m, int64_t n,
                                                                         int64_t k);

/* Matmul backward for C = A · B (A M×K, B K×N, no transposes):
 *     dA = dC · Bᵀ + beta · dA        (M×K)
 *     dB = Aᵀ · dC + beta · dB        (K×N)
 * Both products run on the transposed-operand kernels, reading A, B and dC
 * where they lie: no transposed copies. beta != 0 accumulates gradients.
 * A and B are in_dtype (f16 or bf16). dC is in_dtype, or f32: an f32 dC is
 * first rounded to in_dtype (round to nearest even, the tensor cores take
 * 16-bit operands) into a workspace the op owns. dA and dB are out_dtype
 * (f32 by default). A view whose buffer is NULL skips that gradient.
 * The matmul constraints apply to both products: M, N and K are multiples
 * of 8 (each is the reduction dimension of one product or a row stride).
 *                                    launch tensors: {dC, A, B, dA, dB} */
typedef struct kaio_matmul_backward_desc {
    uint32_t struct_size;          /* sizeof(kaio_matmul_backward_desc)        */
    kaio_dtype in_dtype;           /* A, B: KAIO_DTYPE_F16 or _BF16             */
    kaio_dtype grad_dtype;         /* dC: in_dtype or KAIO_DTYPE_F32            */
    kaio_dtype out_dtype;          /* dA, dB: KAIO_DTYPE_F32, _F16 or _BF16     */
    kaio_matmul_variant variant;
    uint32_t reserved;             /* must be 0                                */
    int64_t m, n, k;
    float beta;
    uint32_t reserved2;            /* must be 0                                */
} kaio_matmul_backward_desc;

/* Defaults: f16 in, f16 dC, f32 out, AUTO, beta 0, m = n = k = 0. */
KAIO_API KAIO_NODISCARD kaio_status kaio_matmul_backward_desc_init(
    kaio_matmul_backward_desc *desc, size_t struct_size);

/* Allocates the f32-dC workspace (M×N in_dtype) when grad_dtype is f32.
 * Ownership: caller owns *out; retains device. */
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_matmul_backward(
    kaio_op **out, kaio_device *device, const kaio_matmul_backward_desc *desc);

/* KAIO's name, one-shot: f16 A, B and dC; dA, dB f32 (either skipped with a
 * NULL-buffer view); beta 0. An f32 dC needs the op handle, which owns the
 * workspace: this call never allocates. */
KAIO_API KAIO_NODISCARD kaio_status kaio_matmul_tc_backward(kaio_stream *stream,
                                                             const kaio_tensor *dc,
                                                             const kaio_tensor *a,
                                                             const kaio_tensor *b,
                                                             const kaio_tensor *da,
                                                             const kaio_tensor *db);

/* ===========================================================================
 * User kernels: your own PTX, launched through the same handles
 * ======================================================================== */
typedef struct kaio_module kaio_module;
typedef struct kaio_kernel kaio_kernel;

/* JIT-compiles NUL-terminated PTX text for device. On a JIT failure returns
 * KAIO_ERROR_PTX_JIT_FAILED with the JIT's error log in the message.
 * Ownership: caller owns *out; retains device. Loading is not a steady-state
 * operation: load before capturing graphs. */
KAIO_API KAIO_NODISCARD kaio_status kaio_module_load_ptx(kaio_module **out, kaio_device *device,
                                                          const char *ptx);
/* Drops the caller's reference; the module unloads once its kernels are gone
 * too. Accepts NULL. */
KAIO_API void kaio_module_destroy(kaio_module *module);

/* Looks up an .entry by name. Ownership: caller owns *out; retains module.
 * Returns KAIO_ERROR_KERNEL_NOT_FOUND for an unknown name. */
KAIO_API KAIO_NODISCARD kaio_status kaio_module_get_kernel(kaio_kernel **out, kaio_module *module,
                                                            const char *name);
/* Accepts NULL. */
KAIO_API void kaio_kernel_destroy(kaio_kernel *kernel);

typedef struct kaio_kernel_attributes {
    uint32_t struct_size;        /* in: sizeof(kaio_kernel_attributes)   */
    int32_t registers;           /* per thread                            */
    int32_t static_shared_bytes;
    int32_t local_bytes;         /* per thread; > 0 often means spills    */
    int32_t const_bytes;
    int32_t max_threads_per_block;
    int32_t param_bytes;         /* size of the packed argument buffer; -1 when
                                    the driver predates CUDA 12.4 and cannot tell */
} kaio_kernel_attributes;

KAIO_API KAIO_NODISCARD kaio_status kaio_kernel_get_attributes(const kaio_kernel *kernel,
                                                                kaio_kernel_attributes *attrs);

typedef struct kaio_launch_config {
    uint32_t grid[3];            /* blocks; x >= 1; y, z of 0 mean 1      */
    uint32_t block[3];           /* threads; x >= 1; y, z of 0 mean 1     */
    uint32_t shared_bytes;       /* dynamic shared memory per block       */
    uint32_t reserved;           /* must be 0                             */
} kaio_launch_config;

/* Enqueues kernel on stream. args points to args_size bytes laid out as the
 * kernel's .param list (each parameter at its natural alignment, the way a C
 * struct of the same members would be, tail padding allowed); a device
 * pointer parameter takes kaio_buffer_device_ptr() plus an offset. When the
 * driver can report the parameter layout (CUDA 12.4+), args_size is checked
 * against it. config->shared_bytes plus the kernel's static .shared bytes
 * (kaio_kernel_attributes.static_shared_bytes) must fit the device's opt-in
 * limit per block (227 KiB on sm_90); kaio raises the kernel's dynamic limit
 * past the driver's 48 KiB default whenever their sum needs it. kaio cannot see
 * what the kernel does with the pointers: keeping user kernels inside their
 * buffers is the caller's job. */
KAIO_API KAIO_NODISCARD kaio_status kaio_kernel_launch(const kaio_kernel *kernel,
                                                        kaio_stream *stream,
                                                        const kaio_launch_config *config,
                                                        const void *args, size_t args_size);

/* ===========================================================================
 * GGUF k-quants: Q8_0, Q4_K, Q5_K and Q6_K
 *
 * A quantized matrix is its GGUF block bytes, row-major: each row of `cols`
 * values is cols / block_elems blocks laid end to end (block_q8_0: 34 bytes
 * per 32 values; block_q4_K: 144, block_q5_K: 176, block_q6_K: 210 bytes per
 * 256). Ops take it as a KAIO_DTYPE_U8 view of rows x
 * kaio_quant_row_bytes(format, cols) bytes; its start and row_stride must
 * be multiples of 16 bytes (Q4_K, Q5_K) or 2 bytes (Q8_0, Q6_K).
 * Float views (x, y, A) must start on 16-byte boundaries with row strides
 * of a multiple of 16 bytes. All errors are reported at creation and launch
 * (KAIO_ERROR_INVALID_ARGUMENT for an unknown format or mode,
 * KAIO_ERROR_INVALID_DIMENSION when cols or K is not a multiple of the
 * block, KAIO_ERROR_INVALID_DTYPE, KAIO_ERROR_SHAPE_MISMATCH,
 * KAIO_ERROR_MISALIGNED). Compute capability 8.0+.
 * ======================================================================== */
typedef int32_t kaio_quant_format;
enum { KAIO_QUANT_Q8_0 = 1, KAIO_QUANT_Q4_K = 2, KAIO_QUANT_Q5_K = 3, KAIO_QUANT_Q6_K = 4 };

/* Which reference quantize reproduces byte for byte, on every finite
 * input (subnormals, values up to 3e38 and signed zeros included):
 * GGML   ggml's quantize_row_*_ref (what llama.cpp's llama-quantize writes
 *        without an importance matrix), as built for x86-64;
 * CANDLE candle-core 0.11's QTensor::quantize on x86-64 (an older port;
 *        differs from GGML on Q4_K, Q5_K and Q6_K, including its quirks: a
 *        constant 32-value sub-block of Q4_K/Q5_K quantizes to 0, an
 *        all-zero Q6_K superblock stores d = -0.0, and a Q4_K/Q5_K
 *        superblock whose sub-block mins are all zero stores the sign of
 *        the last one in dmin, -0.0 (0x8000) where that min was clamped
 *        from above zero). Q8_0 is the same in both modes except for a
 *        block whose largest magnitude is below about 3.7e-37 (1/d
 *        overflows): GGML writes quants 0, CANDLE 127 / -128 by sign (0 for
 *        zeros); d is 0 and the block dequantizes to 0 in both. */
typedef int32_t kaio_quant_mode;
enum { KAIO_QUANT_MODE_GGML = 0, KAIO_QUANT_MODE_CANDLE = 1 };

/* Values per block (32 or 256) and bytes per block, or 0 for an unknown
 * format; bytes of one quantized row of `cols` values, or 0 when the format
 * is unknown, cols is not a positive multiple of the block, or the row would
 * take more than INT64_MAX bytes. Any thread. */
KAIO_API int64_t kaio_quant_block_elems(kaio_quant_format format);
KAIO_API int64_t kaio_quant_block_bytes(kaio_quant_format format);
KAIO_API int64_t kaio_quant_row_bytes(kaio_quant_format format, int64_t cols);

/* Quantize x (in_dtype f32, f16 or bf16; rows x cols, cols a multiple of
 * the block) into q (U8, rows x kaio_quant_row_bytes(format, cols)). f16 and
 * bf16 inputs are widened to f32 exactly, so the bytes are those the
 * reference gives for the widened values. q must not overlap x. Every byte
 * of q is written. NaN or infinite inputs give unspecified bytes.
 * Ownership: caller owns *out; retains device.  launch tensors: {x, q} */
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_quantize(kaio_op **out, kaio_device *device,
                                                             kaio_quant_format format,
                                                             kaio_quant_mode mode,
                                                             kaio_dtype in_dtype, int64_t rows,
                                                             int64_t cols);
/* One-shot quantize: shapes and in_dtype come from x. */
KAIO_API KAIO_NODISCARD kaio_status kaio_quantize(kaio_stream *stream, const kaio_tensor *x,
                                                   const kaio_tensor *q,
                                                   kaio_quant_format format,
                                                   kaio_quant_mode mode);

/* Dequantize q (U8, rows x kaio_quant_row_bytes(format, cols)) into y
 * (out_dtype f32, f16 or bf16; rows x cols). f32 values equal ggml's
 * dequantize_row_* bit for bit; f16/bf16 are those values rounded to nearest
 * even. y must not overlap q.
 * Ownership: caller owns *out; retains device.  launch tensors: {q, y} */
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_dequantize(kaio_op **out, kaio_device *device,
                                                               kaio_quant_format format,
                                                               kaio_dtype out_dtype,
                                                               int64_t rows, int64_t cols);
/* One-shot dequantize: shapes and out_dtype come from y. */
KAIO_API KAIO_NODISCARD kaio_status kaio_dequantize(kaio_stream *stream, const kaio_tensor *q,
                                                     const kaio_tensor *y,
                                                     kaio_quant_format format);

/* Dequant-matmul: C[M, N] = A[M, K] · dequant(W)ᵀ, W the N x K quantized
 * weight (U8, N x kaio_quant_row_bytes(format, K), the layout of a GGUF
 * nn.Linear weight). A is f32, f16 or bf16; C is f32 or f16; f32
 * accumulation (not bit-exact with any reference; error about that of an
 * f32 dot product of length K).
 * M <= 8: bandwidth-bound kernels read W once and never dequantize it to
 * memory; on sm_90 they stream W fastest when A fits in shared memory and,
 * for Q6_K and Q8_0, W starts 16-byte aligned with at least 15 more bytes
 * of its buffer after it (else slower kernels run).
 * M > 8: the op dequantizes W into an N x K f16 workspace (bf16 when
 * A is bf16) that it owns, rounds an f32 A to f16 into a second M x K
 * workspace (A must then be contiguous), and runs the tensor-core matmul
 * (kaio_matmul's kernels): the products then see f16/bf16-rounded operands.
 * C must not overlap A or W.
 * Ownership: caller owns *out; retains device; allocates the workspaces
 * for M > 8 at creation.            launch tensors: {A, W, C} */
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_quant_matmul(kaio_op **out, kaio_device *device,
                                                                 kaio_quant_format format,
                                                                 kaio_dtype a_dtype,
                                                                 kaio_dtype out_dtype, int64_t m,
                                                                 int64_t n, int64_t k);
/* One-shot dequant-matmul for M <= 8 (shapes and dtypes from the views);
 * it never allocates, so M > 8 returns KAIO_ERROR_UNSUPPORTED: create the
 * op, which owns the workspaces. */
KAIO_API KAIO_NODISCARD kaio_status kaio_quant_matmul(kaio_stream *stream, const kaio_tensor *a,
                                                       const kaio_tensor *w,
                                                       const kaio_tensor *c,
                                                       kaio_quant_format format);

/* ===========================================================================
 * Quantized matmul: INT8 W8A8, INT4 W4A16 (GPTQ layout), fused QKV
 *
 * Tensors whose buffer is NULL are "absent" (optional scale vectors, qzeros).
 * Op handles are created once (checks, kernel load, workspace) and launched
 * with kaio_op_launch; one-shot calls never allocate. All calls are
 * stream-ordered and asynchronous. Compute capability 8.0+.
 * ======================================================================== */

/* INT8 W8A8:
 *     acc(m, n) = sum_k A(m, k) · B(n, k)          exact, int32
 *     C(m, n)   = ((acc · alpha) · sa[m]) · sb[n]  each product rounded in f32,
 *                                                   then once to C's dtype
 * A: i8 M×K. B: i8 N×K (the native layout: nn.Linear weights, cuBLASLt "TN";
 * a K×N int8 B is not accepted: transpose it once when loading weights).
 * sa: f32 1×M (per row of A) and sb: f32 1×N (per column of B), each
 * optional (absent = 1); a scalar scale is alpha. C: f32, f16, bf16, or i32
 * (the exact integer sums: then alpha must be 1 and sa, sb absent).
 * Constraints: M, N >= 1, M <= 65535·128; K >= 16, a multiple of 16 and
 * < 131072 (no int32 overflow); A and B start on 16-byte boundaries with row
 * strides that are multiples of 16; C must not overlap the inputs.
 * Variants: KAIO_MATMUL_AUTO (default) runs wgmma s8 + TMA on compute
 * capability 9.0, else mma.sync m16n8k32 with a 4-stage cp.async ring;
 * KAIO_MATMUL_ASYNC forces the latter.
 *                               launch tensors: {A, B, sa, sb, C} */
typedef struct kaio_matmul_int8_desc {
    uint32_t struct_size;          /* sizeof(kaio_matmul_int8_desc)             */
    kaio_dtype out_dtype;          /* KAIO_DTYPE_F32 (default), _F16, _BF16, _I32 */
    int64_t m, n, k;               /* one-shot calls: 0 means "from the views"   */
    float alpha;                   /* default 1                                  */
    kaio_matmul_variant variant;   /* KAIO_MATMUL_AUTO (default) or _ASYNC       */
} kaio_matmul_int8_desc;

/* Defaults: f32 out, alpha 1, AUTO, m = n = k = 0. Any thread. */
KAIO_API KAIO_NODISCARD kaio_status kaio_matmul_int8_desc_init(kaio_matmul_int8_desc *desc,
                                                               size_t struct_size);
/* Ownership: caller owns *out; retains device. Any thread. */
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_matmul_int8(kaio_op **out,
                                                                kaio_device *device,
                                                                const kaio_matmul_int8_desc *desc);
/* One-shot; sa and sb may be NULL (absent). Borrowed views. */
KAIO_API KAIO_NODISCARD kaio_status kaio_matmul_int8(kaio_stream *stream, const kaio_tensor *a,
                                                      const kaio_tensor *b,
                                                      const kaio_tensor *sa,
                                                      const kaio_tensor *sb,
                                                      const kaio_tensor *c,
                                                      const kaio_matmul_int8_desc *desc);

/* INT4 W4A16, weights in GPTQ's checkpoint layout for a logical K×N W:
 *   qweight: u32 (or i32) K/8 × N: W(k, n) is the 4-bit field k % 8 (bits
 *            4·(k%8) .. +3) of word (k/8, n);
 *   qzeros:  u32 (or i32) K/g × N/8: the zero point of (k/g, n) is field
 *            n % 8 of word (k/g, n/8); absent: every zero point is 8;
 *   scales:  K/g × N, in A's dtype (f16, or bf16 with bf16 activations).
 *   W(k, n) = (q - (z + zeros_offset)) · s, rounded once to A's dtype, and
 *   C = A · W accumulated in f32. zeros_offset 1 reads AutoGPTQ's v1
 *   checkpoints, whose qzeros hold z - 1.
 * KAIO_INT4_SIGNED: the fields are signed (-8..7), no zero point, no qzeros
 * (KAIO's contract); kaio_int4_repack_kaio turns KAIO's column-major storage
 * into the K/8 × N arrangement taken here.
 * Constraints: M, N, K >= 1; K a multiple of 32 and at most 524280 (op
 * handles with M > 16) or 2^31 - 1; N a multiple of 8; group_size g a power
 * of two >= 32 dividing K, or g = K; A 16-byte aligned with a row stride
 * that is a multiple of 8; qweight 16-byte aligned, row stride a multiple of
 * 4; scales 8-byte aligned, row stride a multiple of 4.
 * Kernels: M <= 16 runs the decode kernel, which reads each weight byte
 * once per 16 rows of A with 16-byte loads and dequantizes in registers for
 * mma.sync; on compute capability 9.0 it also takes M <= 32, and M <= 64
 * where N <= 4096 (slices of 16 rows, faster there). Larger M on compute
 * capability 9.0 (sm_90a): one kernel that dequantizes straight into wgmma,
 * no workspace, for one-shot calls and for op handles up to M = 4096; where
 * its tiles would leave SMs idle, clusters of 2 or 4 CTAs split K and sum
 * their partial tiles in shared memory, in a fixed order. Otherwise op
 * handles with M > 16 own a K×N workspace in A's dtype: each launch
 * dequantizes into it and runs the tensor-core matmul (two launches);
 * one-shot calls run the decode kernel over tiles of 16 rows.
 *                     launch tensors: {A, qweight, qzeros, scales, C} */
typedef int32_t kaio_int4_format;
enum { KAIO_INT4_GPTQ = 0, KAIO_INT4_SIGNED = 1 };

typedef struct kaio_matmul_int4_desc {
    uint32_t struct_size;          /* sizeof(kaio_matmul_int4_desc)             */
    kaio_dtype in_dtype;           /* A and scales: KAIO_DTYPE_F16 (default), _BF16 */
    kaio_dtype out_dtype;          /* C: KAIO_DTYPE_F32 (default), _F16, _BF16  */
    kaio_int4_format format;       /* KAIO_INT4_GPTQ (default) or _SIGNED       */
    int64_t m, n, k;               /* one-shot calls: 0 means "from the views"   */
    int64_t group_size;            /* 0 (default) means 128                      */
    uint32_t zeros_offset;         /* 0 (default) or 1                           */
    uint32_t reserved;             /* must be 0                                  */
} kaio_matmul_int4_desc;

/* Defaults: f16 in, f32 out, GPTQ, group 128, zeros_offset 0. Any thread. */
KAIO_API KAIO_NODISCARD kaio_status kaio_matmul_int4_desc_init(kaio_matmul_int4_desc *desc,
                                                               size_t struct_size);
/* Ownership: caller owns *out (and through it the workspace of M > 16 where
 * one is used, see "Kernels" above); retains device. Any thread. */
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_matmul_int4(kaio_op **out,
                                                                kaio_device *device,
                                                                const kaio_matmul_int4_desc *desc);
/* One-shot; allocates nothing; qzeros may be NULL. Borrowed views. */
KAIO_API KAIO_NODISCARD kaio_status kaio_matmul_int4(kaio_stream *stream, const kaio_tensor *a,
                                                      const kaio_tensor *qweight,
                                                      const kaio_tensor *qzeros,
                                                      const kaio_tensor *scales,
                                                      const kaio_tensor *c,
                                                      const kaio_matmul_int4_desc *desc);

/* KAIO's signed-nibble storage (u32 N × K/8: the words of column n back to
 * back) -> the K/8 × N arrangement of KAIO_INT4_SIGNED (a transpose; the
 * nibbles are unchanged). Stream-ordered; src and dst must not overlap. */
KAIO_API KAIO_NODISCARD kaio_status kaio_int4_repack_kaio(kaio_stream *stream,
                                                           const kaio_tensor *src,
                                                           const kaio_tensor *dst);

/* Fused QKV projection, INT4 GPTQ weights, one launch:
 *     out_q = x · W_q,  out_k = x · W_k,  out_v = x · W_v
 * x: M×K in in_dtype; each W_p as for matmul_int4 with its own N (n_q, n_k,
 * n_v may differ: grouped-query attention); outputs out_dtype (default f16).
 * Constraints as matmul_int4; the three outputs must not overlap anything.
 * Every M runs the decode kernel (one launch); it reads the weights once per
 * 16 rows of x, so it is meant for decode (M <= 16).
 *   launch tensors: {x, qweight_q, qzeros_q, scales_q, qweight_k, qzeros_k,
 *                    scales_k, qweight_v, qzeros_v, scales_v,
 *                    out_q, out_k, out_v} */
typedef struct kaio_qkv_int4_desc {
    uint32_t struct_size;          /* sizeof(kaio_qkv_int4_desc)                */
    kaio_dtype in_dtype;           /* x and scales: KAIO_DTYPE_F16 (default), _BF16 */
    kaio_dtype out_dtype;          /* outputs: KAIO_DTYPE_F16 (default), _BF16, _F32 */
    kaio_int4_format format;       /* KAIO_INT4_GPTQ (default) or _SIGNED       */
    int64_t m, k;
    int64_t n_q, n_k, n_v;
    int64_t group_size;            /* 0 (default) means 128                      */
    uint32_t zeros_offset;         /* 0 (default) or 1                           */
    uint32_t reserved;             /* must be 0                                  */
} kaio_qkv_int4_desc;

KAIO_API KAIO_NODISCARD kaio_status kaio_qkv_int4_desc_init(kaio_qkv_int4_desc *desc,
                                                            size_t struct_size);
/* Ownership: caller owns *out; retains device. Any thread. */
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_qkv_project_int4(
    kaio_op **out, kaio_device *device, const kaio_qkv_int4_desc *desc);
/* One-shot: tensors as the op's launch list (13 views; qzeros may have NULL
 * buffers); m, k, n_* of 0 come from the views. */
KAIO_API KAIO_NODISCARD kaio_status kaio_qkv_project_int4(kaio_stream *stream,
                                                           const kaio_tensor *tensors,
                                                           size_t count,
                                                           const kaio_qkv_int4_desc *desc);

/* Fused QKV projection, int8 weights and f16 activations (W8A16), one launch:
 *     out_p(m, n) = (sum_k x(m, k) · W_p(k, n)) · scale_p[n or 0]
 * x: f16 M×K. W_p: i8 K×N_p row-major (KAIO's layout). scale_p: f32 1×1
 * (per tensor) or 1×N_p (per column). The sum is accumulated in f32 from
 * exact products, scaled in f32 and rounded once to out_dtype.
 * Constraints: M, K >= 1, K a multiple of 32; each N_p a multiple of 4; x
 * 16-byte aligned with a row stride that is a multiple of 8; each W_p 4-byte
 * aligned with a row stride that is a multiple of 4. Meant for decode: the
 * weights are read once per 16 rows of x.
 *   launch tensors: {x, w_q, scale_q, w_k, scale_k, w_v, scale_v,
 *                    out_q, out_k, out_v} */
typedef struct kaio_qkv_int8_desc {
    uint32_t struct_size;          /* sizeof(kaio_qkv_int8_desc)                */
    kaio_dtype out_dtype;          /* KAIO_DTYPE_F16 (default), _BF16, _F32     */
    int64_t m, k;
    int64_t n_q, n_k, n_v;
    uint32_t reserved;             /* must be 0                                  */
} kaio_qkv_int8_desc;

KAIO_API KAIO_NODISCARD kaio_status kaio_qkv_int8_desc_init(kaio_qkv_int8_desc *desc,
                                                            size_t struct_size);
/* Ownership: caller owns *out; retains device. Any thread. */
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_qkv_project_int8(
    kaio_op **out, kaio_device *device, const kaio_qkv_int8_desc *desc);
/* One-shot: the op's 10 launch views; m, k, n_* of 0 come from the views. */
KAIO_API KAIO_NODISCARD kaio_status kaio_qkv_project_int8(kaio_stream *stream,
                                                           const kaio_tensor *tensors,
                                                           size_t count,
                                                           const kaio_qkv_int8_desc *desc);

/* ===========================================================================
 * Attention: FlashAttention forward and backward (tensor cores)
 *
 *   O = softmax(scale · Q Kᵀ + mask) · V,   LSE = logsumexp(scale · Q Kᵀ + mask)
 *
 * computed tile by tile (FlashAttention-2 on mma.sync m16n8k16; on an H100
 * the forward is FlashAttention-3 style, wgmma + TMA), so no
 * Sq × Sk matrix is ever stored, forward or backward. Accumulation, softmax
 * and LSE are f32.
 *
 * Layout. Q is [B, Sq, Hq, D]; K and V are [B, Sk, Hkv, D] (BSHD, the layout
 * of FlashAttention and of a projection output viewed as (B, S, H, D)).
 * kaio_tensor is rank 2, so each is passed as the rank-2 view [B·S, H·D]:
 * row b·S + s holds position s of batch b, head h in columns h·D .. h·D+D-1.
 * row_stride may exceed H·D, e.g. Q, K and V as three views (with offsets)
 * of one fused QKV projection output. O, dO and dQ are views like Q; dK and
 * dV like K. The LSE is an f32 view [B·Hq, Sq] (row b·Hq + h), natural log.
 * Heads. Hq must be a multiple of Hkv (MHA, GQA, MQA): query head h reads
 * KV head h / (Hq / Hkv). In the backward, dK and dV of a KV head are the
 * sums over the Hq / Hkv query heads that share it.
 * Masks. KAIO_ATTENTION_CAUSAL is bottom-right aligned (FlashAttention >= 2.1):
 * query i sees key j iff j <= i + (Sk − Sq). KAIO_ATTENTION_CAUSAL_TOP_LEFT:
 * j <= i (PyTorch SDPA's is_causal, and KAIO's convention). Both are the
 * usual lower triangle when Sq == Sk. A query row that sees no key (bottom-
 * right with Sq > Sk: rows i < Sq − Sk) gets O = 0 and LSE = −inf, and
 * contributes nothing to the gradients.
 * Constraints, checked at creation and at every launch:
 *   dtype f16 or bf16; head_dim D in {32, 64, 96, 128, 256} forward and
 *   {32, 64, 96, 128} backward; B, Sq, Sk, Hq, Hkv >= 1 and each at most
 *   2^31 − 1; B·Hq at most 65535 and B·Hq·Sq at most 2^31 − 1;
 *   softmax_scale finite and > 0, or 0 for
 *   1/√D. Every view (LSE excepted) starts on a 16-byte boundary and has a
 *   row_stride that is a multiple of 8 elements (KAIO_ERROR_MISALIGNED
 *   otherwise). Outputs must not overlap any input or each other.
 * Precision. Q, K, V (and dO) are used as given; P = softmax is rounded to
 * the input dtype before P·V (as in FlashAttention); exponentials use
 * ex2.approx. Expect O within about 1e-2 (bf16) / 2e-3 (f16) of an f64
 * reference for unit-scale inputs (tests/gpu_attention_test.cpp states the
 * exact tolerances).
 * Variants. The sm_80 kernels use mma.sync and run on sm_80 and newer.
 * KAIO_ATTENTION_SM80: 64 query rows per CTA (every head dim).
 * KAIO_ATTENTION_SM80_M128: the forward with 128 query rows per CTA (32 per
 * warp, FlashAttention-2's tile), head dims up to 128.
 * KAIO_ATTENTION_SM90: compute capability 9.0 (sm_90a: H100, H200), head
 * dims 64 and 128: TMA loads, wgmma, a producer warpgroup and two consumer
 * warpgroups. The forward overlaps softmax with P·V (FlashAttention-3's
 * design); the backward runs the same Dv kernel, then a dQ kernel over
 * query blocks and a dK/dV kernel over key blocks (still no atomics).
 * Elsewhere KAIO_ERROR_UNSUPPORTED_ARCH.
 * KAIO_ATTENTION_DECODE: the forward for few query rows against a long
 * cache (decoding; sm_80+, mma.sync): Sq <= 16, head dims 64, 128 and 256.
 * One CTA serves all Hq / Hkv query heads of a KV head (up to 16 query rows
 * (position, head) per CTA, more CTAs beyond), so K and V are read once,
 * not once per query head; the keys are split across CTAs
 * (flash-decoding) when B · Hkv alone cannot fill the GPU: each split
 * writes a partial O (f32) and LSE into the op's workspace, and the CTA
 * that finishes a block's splits last (one launch; a count per block in
 * the workspace) merges them in split order, so results are bitwise
 * identical run to run. The split count depends on the desc's shape and
 * the device's SM count only. A prepared op (kaio_op_create_attention) is
 * the fast path: it allocates the split workspace at creation (B · Hkv ·
 * Hq / Hkv · Sq · (D + 1) · 4 bytes per split, at most 128 splits, plus
 * 4 bytes per 16 query rows of a KV head), so its
 * launches allocate nothing and are graph-capturable. The one-shot
 * kaio_attention allocates nothing, so it runs the decode kernel without
 * splitting (one CTA per 16 rows and KV head: slow when B · Hkv is small).
 * Launches of one prepared decode op must not run concurrently on
 * different streams (they share the workspace). Backward: not available
 * (KAIO_ERROR_UNSUPPORTED).
 * KAIO_ATTENTION_AUTO: the forward takes DECODE when Sq <= 16 and D is 64,
 * 128 or 256; otherwise SM90 where it applies; else SM80_M128 for D <= 128
 * and SM80 above; the backward the sm_80 kernels (or SM90's).
 * SM80 and SM80_M128 run the sm_80 backward.
 * Every call below is asynchronous (enqueues on the stream and returns),
 * borrows its views for the call only, and may be called from any thread.
 * One-shot calls allocate nothing and load the kernels' module on first use
 * only; ops are immutable after creation.
 * ======================================================================== */
typedef int32_t kaio_attention_mask;
enum {
    KAIO_ATTENTION_MASK_NONE = 0,
    KAIO_ATTENTION_CAUSAL = 1,           /* bottom-right aligned: j <= i + Sk − Sq */
    KAIO_ATTENTION_CAUSAL_TOP_LEFT = 2   /* j <= i                               */
};

typedef int32_t kaio_attention_variant;
enum {
    KAIO_ATTENTION_AUTO = 0,
    KAIO_ATTENTION_SM80 = 1,
    KAIO_ATTENTION_SM80_M128 = 2,
    KAIO_ATTENTION_SM90 = 3,
    KAIO_ATTENTION_DECODE = 4
};

typedef struct kaio_attention_desc {
    uint32_t struct_size;          /* sizeof(kaio_attention_desc)                 */
    kaio_dtype dtype;              /* Q, K, V, dO: KAIO_DTYPE_F16 or _BF16         */
    kaio_dtype out_dtype;          /* forward: O; backward: dQ, dK, dV. F32, F16 or
                                      BF16; 0 means dtype                          */
    kaio_dtype o_dtype;            /* backward only: the dtype of O as passed in
                                      (dtype or F32); 0 means dtype                */
    kaio_attention_mask mask;
    kaio_attention_variant variant;
    int32_t deterministic;         /* backward. 1 (default): bit-identical gradients
                                      on every run. 0: the sm_90a backward from 4096
                                      keys (any mask) adds dQ's f32 partial sums in
                                      whatever order its CTAs finish (H100: up to
                                      1.1x faster non-causal, 1.18x causal, where 1
                                      keeps two kernels); dQ may differ in the last
                                      bits between runs. Elsewhere 0 changes
                                      nothing (no atomics, each gradient element
                                      written once).                             */
    uint32_t reserved;             /* must be 0                                   */
    int64_t batch;                 /* B                                           */
    int64_t seq_q, seq_k;          /* Sq, Sk                                      */
    int64_t heads_q, heads_kv;     /* Hq, Hkv                                     */
    int64_t head_dim;              /* D                                           */
    float softmax_scale;           /* 0 means 1/√D                                */
    uint32_t reserved2;            /* must be 0                                   */
} kaio_attention_desc;

/* Defaults: f16, out_dtype and o_dtype 0 (= dtype), no mask, AUTO,
 * deterministic 1, all shape fields 0 (must be set), scale 0 (= 1/√D).
 * Any thread. */
KAIO_API KAIO_NODISCARD kaio_status kaio_attention_desc_init(kaio_attention_desc *desc,
                                                             size_t struct_size);

/* A prepared attention forward.    launch tensors: {Q, K, V, O, LSE}
 * LSE may be a view with a NULL buffer: then it is not written.
 * Ownership: caller owns *out; retains device. Thread-safe to launch from
 * several threads. */
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_attention(kaio_op **out, kaio_device *device,
                                                              const kaio_attention_desc *desc);

/* One-shot forward: desc gives the shape, exactly as for the op (the views
 * cannot tell B from S or H from D). lse may be NULL or have a NULL buffer.
 * Ownership: nothing is retained after the call. */
KAIO_API KAIO_NODISCARD kaio_status kaio_attention(kaio_stream *stream, const kaio_tensor *q,
                                                    const kaio_tensor *k, const kaio_tensor *v,
                                                    const kaio_tensor *o, const kaio_tensor *lse,
                                                    const kaio_attention_desc *desc);

/* A prepared attention backward.
 *                     launch tensors: {dO, Q, K, V, O, LSE, dQ, dK, dV}
 * dO is dtype; O is o_dtype; LSE is the forward's (f32 [B·Hq, Sq]); dQ, dK
 * and dV are out_dtype and fully overwritten (no accumulation). Runs three
 * kernels on the stream: Dv = rowsum(dO ∘ O) into the op's workspace, then
 * either dQ over query tiles and dK and dV over key tiles, or (sm_90a, Sk >=
 * 1024) one kernel for dK, dV and dQ's f32
 * partial sums (added into the workspace per key block) and a small kernel
 * that writes dQ from them.
 * Deterministic by default: the same inputs give bit-identical gradients on
 * every run (the fused kernel's adds go in a fixed key-block order, the
 * first of each query block storing); desc->deterministic 0 lets them go in
 * any order, and a memset after the small kernel zeroes the sums for the
 * next launch (a launch whose later steps failed to enqueue makes the next
 * launch zero them first, on its stream).
 * Ownership: caller owns *out; retains device; the op owns a B·Hq·Sq f32
 * workspace (the fused kernel: plus B·Hq·ceil(Sq/64)·64·D f32 and
 * B·Hq·ceil(Sq/64) u32, zeroed once at creation), so launches of one op
 * must not run concurrently on different streams (launches on one stream
 * are ordered). */
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_attention_backward(
    kaio_op **out, kaio_device *device, const kaio_attention_desc *desc);

/* KAIO's rank-2 single-head tensor-core attention (one batch, one head):
 * q [Sq, D] f16, k [Sk, D] f16, v [Sk, Dv] f16 -> out [Sq, Dv] f32, scale
 * 1/√D. No seq_k cap. Dv must equal D and D be one of the forward's head
 * dims (KAIO_ERROR_UNSUPPORTED otherwise). _causal masks top-left aligned
 * as KAIO does (query i sees keys j <= i). Same view rules as above.
 * Ownership: nothing is retained after the call. */
KAIO_API KAIO_NODISCARD kaio_status kaio_attention_tc(kaio_stream *stream, const kaio_tensor *q,
                                                       const kaio_tensor *k,
                                                       const kaio_tensor *v,
                                                       const kaio_tensor *out);
KAIO_API KAIO_NODISCARD kaio_status kaio_attention_tc_causal(kaio_stream *stream,
                                                              const kaio_tensor *q,
                                                              const kaio_tensor *k,
                                                              const kaio_tensor *v,
                                                              const kaio_tensor *out);

/* KAIO's f32 single-head FlashAttention (self-attention: one length S):
 * q, k, v [S, D] f32 with D <= 256 -> out [S, D] f32, scale 1/√D, tile by
 * tile with an online softmax (no S × S buffer; exponentials with
 * ex2.approx). D <= 128: tensor cores in split TF32 (see
 * kaio_attention_flash_backward), f32-level accuracy; D > 128: CUDA-core
 * FMA. No 16-bit rounding anywhere. _causal is top-left (query i sees keys j <= i).
 * _with_stats also writes lse, an f32 [1, S] view: the natural-log
 * logsumexp of row i's scaled scores, as the backward needs it.
 * Views may have any row_stride >= D; outputs must not overlap inputs.
 * S at most 2^31 − 1. Ownership: nothing is retained after the call. */
KAIO_API KAIO_NODISCARD kaio_status kaio_attention_flash(kaio_stream *stream, const kaio_tensor *q,
                                                          const kaio_tensor *k,
                                                          const kaio_tensor *v,
                                                          const kaio_tensor *out);
KAIO_API KAIO_NODISCARD kaio_status kaio_attention_flash_causal(kaio_stream *stream,
                                                                 const kaio_tensor *q,
                                                                 const kaio_tensor *k,
                                                                 const kaio_tensor *v,
                                                                 const kaio_tensor *out);
KAIO_API KAIO_NODISCARD kaio_status kaio_attention_flash_with_stats(
    kaio_stream *stream, const kaio_tensor *q, const kaio_tensor *k, const kaio_tensor *v,
    const kaio_tensor *out, const kaio_tensor *lse);
KAIO_API KAIO_NODISCARD kaio_status kaio_attention_flash_causal_with_stats(
    kaio_stream *stream, const kaio_tensor *q, const kaio_tensor *k, const kaio_tensor *v,
    const kaio_tensor *out, const kaio_tensor *lse);

/* Backward of the f32 flash forward: dq, dk, dv [S, D] f32 from dout, q, k,
 * v, out and the forward's lse (f32 [1, S]). D <= 128: tensor cores in split
 * TF32 (each f32 operand x = big + small, big the TF32 rounding of x, and
 * a·b = a_small·b_big + a_big·b_small + a_big·b_big, each tile's sums
 * folded into the totals with round-to-nearest f32 adds: about 2^-21
 * relative error per product, f32-level accuracy, not TF32's 2^-11); three
 * kernels: rowsum(dout ∘ out) into column 0 of dq (its
 * scratch until the dQ kernel overwrites it), dK/dV over key tiles, dQ over
 * query tiles. D > 128: two CUDA-core FMA kernels recomputing the rowsum.
 * No atomics, no workspace: deterministic, bit for bit. dq, dk, dv are
 * overwritten. Ownership: nothing is retained after the call. */
KAIO_API KAIO_NODISCARD kaio_status kaio_attention_flash_backward(
    kaio_stream *stream, const kaio_tensor *dout, const kaio_tensor *q, const kaio_tensor *k,
    const kaio_tensor *v, const kaio_tensor *out, const kaio_tensor *lse, const kaio_tensor *dq,
    const kaio_tensor *dk, const kaio_tensor *dv);
KAIO_API KAIO_NODISCARD kaio_status kaio_attention_flash_causal_backward(
    kaio_stream *stream, const kaio_tensor *dout, const kaio_tensor *q, const kaio_tensor *k,
    const kaio_tensor *v, const kaio_tensor *out, const kaio_tensor *lse, const kaio_tensor *dq,
    const kaio_tensor *dk, const kaio_tensor *dv);

/* ===========================================================================
 * Kernel language: small typed kernels compiled to PTX by libkaio itself
 *
 * A kernel is a few lines of text (grammar and examples: README, "Kernel
 * language"), for instance
 *
 *     kernel silu_gate(x: tensor<f16>, gate: tensor<f16>, out: tensor<f16>) {
 *         out = x * sigmoid(x) * gate;
 *     }
 *
 * libkaio parses, type-checks and lowers it to PTX (no CUDA toolkit, no
 * NVRTC), then JIT-loads it through the device's module cache, keyed by the
 * source text: the same source on the same device is loaded once.
 *
 * Parameters are rank-2 tensor views (tensor<f32|f16|bf16|i8|u8|i32|u32>) and
 * scalars (f32, i32, u32). Tensors that the body assigns are outputs; the
 * others are inputs. The grid comes from the first output's shape: a map
 * kernel computes every (row, col) of it; a kernel with reductions
 * (`let s = sum(...)` / `max(...)`) is a row kernel that reduces along each
 * row and then computes the row's outputs.
 *
 * Safety: a tensor read at the element's own position (a bare name, `x`) is
 * proved in bounds on the host (the view must have the output's shape); a
 * read at computed indices (`w[col]`, `q[i / 4]`) is checked on the GPU. An
 * index outside its view is not read (it yields 0) and raises the kernel's
 * device-side error flag. The next kaio_stream_synchronize of a stream the
 * kernel was launched on (or kaio_event_synchronize of an event recorded
 * on it afterwards) returns KAIO_ERROR_KERNEL_BOUNDS and clears the flag;
 * the message names the kernel, the tensor, which index and its value, and
 * the read's line:col with a caret excerpt, e.g.
 *     kaio_stream_synchronize: kernel 'shift' read outside a view: 2:11:
 *     index 1000 out of range for tensor 'x'; the read was skipped and gave 0
 * When several reads failed, the first in source order is named (for it,
 * the largest index); when several kernels failed, each sync reports one,
 * in launch order. This holds if the kernel is destroyed before the sync.
 * kaio_lang_kernel_check reads the same flag. Flags are tracked per
 * kaio_stream handle: a sync of another wrapper of the same CUstream, a
 * foreign sync, or a replayed CUDA graph does not report them (check the
 * kernel instead). Outputs are only ever written at their own elements.
 * Needs compute capability 8.0+.
 * ======================================================================== */
typedef struct kaio_lang_kernel kaio_lang_kernel;

/* Compiles `source` (NUL-terminated) and loads it on device. A rejected
 * source returns KAIO_ERROR_KERNEL_SOURCE; the last error then reads
 * "kaio_lang_kernel_create: <line>:<col>: <reason>" followed by the source
 * line and a caret under the column. Compiling takes well under a
 * millisecond; the first load of a source on a device adds the driver's JIT.
 * Not a steady-state operation: create kernels before capturing graphs.
 * Ownership: caller owns *out; retains device. Any thread. */
KAIO_API KAIO_NODISCARD kaio_status kaio_lang_kernel_create(kaio_lang_kernel **out,
                                                             kaio_device *device,
                                                             const char *source);

/* Accepts NULL. Must not race with launches of the same handle. Launches
 * still queued run to the end; a stream that noted the kernel's error flag
 * keeps it until its next sync reports it. Kernels made from one source
 * share a module; destroying the last of them unloads it (a driver call
 * that waits for the device), so destroy kernels outside graph capture and
 * after destroying graphs that launch them. */
KAIO_API void kaio_lang_kernel_destroy(kaio_lang_kernel *kernel);

/* Compiles `source` to PTX without a device or driver, for inspection and
 * offline checks (e.g. ptxas). Copies the PTX into buf (cap bytes, always
 * NUL-terminated when cap > 0) and sets *out_length to its full length
 * without the NUL (buf NULL with cap 0 only measures). Rejected source:
 * KAIO_ERROR_KERNEL_SOURCE, as for kaio_lang_kernel_create. Any thread. */
KAIO_API KAIO_NODISCARD kaio_status kaio_lang_compile_ptx(const char *source, char *buf,
                                                           size_t cap, size_t *out_length);

/* The PTX a kernel was built from, copied as for kaio_lang_compile_ptx.
 * Any thread. */
KAIO_API KAIO_NODISCARD kaio_status kaio_lang_kernel_ptx(const kaio_lang_kernel *kernel,
                                                          char *buf, size_t cap,
                                                          size_t *out_length);

/* Enqueues the kernel on stream. `tensors` holds one view per tensor
 * parameter and `scalars` one value per scalar parameter, each in
 * declaration order (an i32 or u32 scalar must be an integer in its range).
 * Checks counts (KAIO_ERROR_INVALID_ARGUMENT), each view against its buffer
 * and device, dtypes against the declarations (KAIO_ERROR_INVALID_DTYPE),
 * that all outputs and every tensor read at (row, col) have the first
 * output's shape (KAIO_ERROR_SHAPE_MISMATCH), at most 2^31 - 1 output
 * elements (KAIO_ERROR_INVALID_DIMENSION), and overlap: outputs must not
 * overlap each other or any input, except that an input read only at
 * (row, col) may be the very same view as an output (in place).
 * No host synchronisation, allocation or module load: graph-capturable.
 * The launch notes the kernel's error flag on the stream handle for its
 * next synchronisation (a short lock; memory is taken only when more than
 * 16 distinct kernels run on one stream between two syncs, and is kept).
 * Thread-safe; a kernel may be launched from several threads at once. */
KAIO_API KAIO_NODISCARD kaio_status kaio_lang_kernel_launch(const kaio_lang_kernel *kernel,
                                                             kaio_stream *stream,
                                                             const kaio_tensor *tensors,
                                                             size_t tensor_count,
                                                             const double *scalars,
                                                             size_t scalar_count);

/* Reports and clears the kernel's device-side error flag, as a stream
 * synchronisation does. Returns KAIO_ERROR_KERNEL_BOUNDS when some launch
 * since the flag was last reported indexed a tensor outside its view; the
 * message names the first such read in source order (tensor, index and
 * value, line:col, caret excerpt). The flag is read without waiting:
 * synchronise the streams the kernel ran on first (that sync itself
 * reports the flag; this call then returns KAIO_OK). No driver call.
 * Any thread. */
KAIO_API KAIO_NODISCARD kaio_status kaio_lang_kernel_check(const kaio_lang_kernel *kernel);

/* ===========================================================================
 * Paged KV cache
 *
 * A serving engine keeps each layer's K and V in pages of page_size tokens
 * (the layout of vLLM and FlashInfer, "NHD"): the K cache and the V cache
 * are each [num_pages, page_size, Hkv, D], passed as the rank-2 view
 * [num_pages · page_size, Hkv · D] (row p · page_size + t is slot t of page
 * p; row_stride may exceed Hkv · D). A token's slot is
 * page · page_size + offset. Sequence b's token i lives in page
 * block_table[b, i / page_size] at offset i % page_size, where block_table
 * is an I32 view [B, max_pages] owned by the caller.
 * ======================================================================== */

/* Writes new K and V rows into their caches: row t of k goes to row
 * slot_mapping[t] of k_cache, and row t of v to the same row of v_cache
 * (vLLM's reshape_and_cache). k and v are [T, Hkv · D] views (e.g. of the
 * K and V projection outputs, row_stride allowed), f32, f16 or bf16, the
 * caches' dtype; slot_mapping is an I32 view [1, T].
 * A negative slot skips its token (padding). A slot at or past the caches'
 * rows is device data the host cannot check: that token is skipped, nothing
 * is written outside the caches, and the next kaio_stream_synchronize (or
 * kaio_event_synchronize of an event recorded after it) on the stream
 * returns KAIO_ERROR_OUT_OF_BOUNDS naming the slot. Two tokens with the same
 * slot leave one of them, unspecified which.
 * v and v_cache may both be absent (NULL, or a view with a NULL buffer) for
 * a K-only cache; one without the other is KAIO_ERROR_INVALID_ARGUMENT.
 * Alignment: every view but slot_mapping starts on a 16-byte boundary and
 * has a row pitch that is a multiple of 16 bytes (KAIO_ERROR_MISALIGNED),
 * and Hkv · D · the element size is a multiple of 16 bytes
 * (KAIO_ERROR_UNSUPPORTED). The caches must not overlap each other or an
 * input. Needs compute capability 8.0+. Asynchronous and stream-ordered, no
 * allocation at launch (the device's 8-byte error flag is made by the first
 * call or op creation on a device), graph-capturable; any thread.
 *                  launch tensors: {k, v, slot_mapping, k_cache, v_cache}
 * width is Hkv · D; cache_rows is num_pages · page_size.
 * Ownership: caller owns *out; retains device. */
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_kv_cache_write(kaio_op **out,
                                                                   kaio_device *device,
                                                                   kaio_dtype dtype,
                                                                   int64_t tokens, int64_t width,
                                                                   int64_t cache_rows);
/* One-shot: dtype, T and Hkv · D from k, the caches' rows from k_cache.
 * Ownership: nothing is retained after the call. */
KAIO_API KAIO_NODISCARD kaio_status kaio_kv_cache_write(kaio_stream *stream, const kaio_tensor *k,
                                                        const kaio_tensor *v,
                                                        const kaio_tensor *slot_mapping,
                                                        const kaio_tensor *k_cache,
                                                        const kaio_tensor *v_cache);

/* ===========================================================================
 * Normalisations: fused residual add + RMSNorm, LayerNorm
 *
 * Row ops like kaio_rmsnorm (see "Ops"): one dtype for every view (f32, f16
 * or bf16), any row_stride and offset, rows and cols from 1 to 2^31 - 1,
 * f32 math with one rounding to the dtype per stored value. Rows of any
 * length: a row of up to 1024 (warp per row) or 8192 (block per row)
 * columns, when every view is 16-byte aligned and cols a multiple of 16
 * bytes, is read from memory once; other rows are re-read per pass (mostly
 * from L2), never held whole in registers or shared memory. eps must be
 * finite and >= 0. Ownership and threads as for every op: the caller owns
 * the op; launches are thread-safe; no workspace.
 *
 * Add + RMSNorm, for a transformer block's "h = h + f(h); y = norm(h)":
 *     residual[r,c] = round(residual[r,c] + x[r,c])        (in place)
 *     out[r,c] = residual[r,c] / sqrt(mean_c residual[r,:]² + eps) · weight[c]
 * The updated residual is rounded to the dtype ONCE, stored, and the norm is
 * computed from that rounded value (as a framework that stores the residual
 * and then normalises it would), so out is kaio_rmsnorm of the new residual.
 *   launch tensors: {x, residual, weight, out}; x, residual, out rows×cols,
 *   weight 1×cols. out may be the very same view as x (x is dead after the
 *   add); residual must not overlap x, out or weight; weight must not
 *   overlap out. Any other overlap is KAIO_ERROR_INVALID_ARGUMENT.
 *
 * LayerNorm (torch.nn.functional.layer_norm over the last dimension):
 *     mean = Σ_c x[r,c] / cols,  var = Σ_c (x[r,c] − mean)² / cols  (biased)
 *     out[r,c] = (x[r,c] − mean) / sqrt(var + eps) · weight[c] + bias[c]
 * The variance is a second pass over deviations from the mean (not
 * E[x²] − mean²), so a large common offset (1e4 + N(0,1)) costs no
 * precision. weight and bias are optional: a view with a NULL buffer (or,
 * in the one-shot call, a NULL pointer) is absent: weight 1, no bias.
 *   launch tensors: {x, weight, bias, out}; x, out rows×cols, weight and
 *   bias 1×cols or absent. out may be the very same view as x; weight and
 *   bias must not overlap out.
 *
 * Range: sums are f32; a sum of squares that overflows f32 while every
 * value is finite (|values| beyond ~1e19) is redone on values scaled by a
 * power of two, so rows of 1e30 normalise correctly (LayerNorm's mean sum
 * itself needs cols·max|x| below 3.4e38). A NaN in a row makes its whole
 * output NaN (for add + RMSNorm also that residual element); an inf makes
 * LayerNorm's row NaN, and add + RMSNorm's output NaN where the residual is
 * inf and ±0 elsewhere (x / inf), as torch gives. The residual overflows to
 * ±inf where the rounded sum does.
 * Error against f64 from the same rounded inputs: a few f32 ulp growing
 * like 2^-22·sqrt(cols), then the one rounding to the dtype.
 * ======================================================================== */

/* eps finite and >= 0.          launch tensors: {x, residual, weight, out} */
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_add_rmsnorm(kaio_op **out, kaio_device *device,
                                                                kaio_dtype dtype, int64_t rows,
                                                                int64_t cols, float eps);
/* eps finite and >= 0.          launch tensors: {x, weight, bias, out} */
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_layernorm(kaio_op **out, kaio_device *device,
                                                              kaio_dtype dtype, int64_t rows,
                                                              int64_t cols, float eps);

/* One-shot forms: dtype and shape come from x. Borrowed views. */
KAIO_API KAIO_NODISCARD kaio_status kaio_add_rmsnorm(kaio_stream *stream, const kaio_tensor *x,
                                                      const kaio_tensor *residual,
                                                      const kaio_tensor *weight,
                                                      const kaio_tensor *out, float eps);
/* weight and bias may be NULL (absent). */
KAIO_API KAIO_NODISCARD kaio_status kaio_layernorm(kaio_stream *stream, const kaio_tensor *x,
                                                    const kaio_tensor *weight,
                                                    const kaio_tensor *bias,
                                                    const kaio_tensor *out, float eps);

/* ===========================================================================
 * Rotary position embeddings (RoPE), in place on Q and K
 *
 * Q is [T, Hq·D] and K [T, Hk·D] (tokens, then heads, then the head's D
 * elements: a [T, H, D] tensor seen as rank 2), any row_stride >= cols, so
 * Q and K may be column ranges of one fused QKV projection's output.
 * Positions are an I32 [1, T] view (one position per token, any value;
 * as f32 they are exact up to 2^24). Q, K: dtype f32, f16 or bf16; math in
 * f32, rounded once on output.
 *
 * Per token t, head and pair i < rotary_dim / 2, with
 *     angle = f32(f32(pos[t]) · inv_freq[i])          (as HF transformers)
 *     c = f32(cos(angle) · attention), s = f32(sin(angle) · attention)
 * the pair (x0, x1) becomes (x0·c − x1·s, x1·c + x0·s), where the pair is
 *     KAIO_ROPE_HALF_SPLIT   (x[i], x[i + rotary_dim/2])  GPT-NeoX, Llama, HF's
 *                            rotate_half / apply_rotary_pos_emb
 *     KAIO_ROPE_INTERLEAVED  (x[2i], x[2i + 1])          GPT-J, rotate_every_two
 * Elements from rotary_dim to D - 1 of each head are neither read nor written
 * (partial rotary). cos and sin are computed with an f32 range reduction
 * (Cody-Waite, three-part π/2): within 1e-7 of the f64 values of the same
 * f32 angle for |angle| <= 2^22 rad (position 1e6 · inv_freq 1 included).
 * Past 2^22 the f32 angle itself is off by more than 0.1 rad; there c and s
 * stay bounded (|c|, |s| <= attention) but are not meaningful.
 *
 * inv_freq (f32, computed on the host once per op or call, as
 * transformers' modeling_rope_utils.py computes it in f32; r = rotary_dim):
 *     NONE    1 / θ^(2i/r)            (_compute_default_rope_parameters)
 *     LINEAR  that / factor           (_compute_linear_scaling_rope_parameters)
 *     LLAMA3  factor, low_freq_factor, high_freq_factor and
 *             original_max_position_embeddings (_compute_llama3_parameters)
 *     YARN    factor, original_max_position_embeddings, beta_fast, beta_slow,
 *             truncate, and the attention factor: attention_factor if > 0,
 *             else HF's default from factor, mscale and mscale_all_dim
 *             (_compute_yarn_parameters). Pass the factor and original
 *             length your config's HF code ends up using.
 * θ^e is the correctly rounded f32 power (torch's may differ by an ulp).
 * The attention factor is 1 except for YARN. Fields a scaling does not use
 * are ignored.
 *
 * Constraints (KAIO_ERROR_* on creation or call): heads_q, heads_k >= 0,
 * not both 0, sum at most 65535 (INVALID_DIMENSION); head_dim >= 1 (any
 * parity); rotary_dim (0 means head_dim) even, 2 <= rotary_dim <= head_dim
 * (INVALID_DIMENSION) and <= 512 (UNSUPPORTED); theta finite and > 1;
 * factors, lengths and betas as commented below (INVALID_ARGUMENT).
 * Views: Q (if present) [T, heads_q·head_dim] and K [T, heads_k·head_dim]
 * of dtype, one T (SHAPE_MISMATCH); a NULL-buffer (or, for the one-shot
 * call, NULL) Q or K is skipped, not both; a tensor whose heads are 0 must be
 * absent. Q and K must not share an element (column ranges of one buffer
 * with the same row_stride are fine); positions must not overlap them.
 * Fastest with 16-byte aligned heads: start, row_stride·size, head_dim·size
 * and (rotary_dim / 2)·size (half split) or rotary_dim·size (interleaved)
 * multiples of 16 bytes; any other layout runs an element-wise kernel.
 * Compute capability 8.0+.
 * ======================================================================== */
typedef int32_t kaio_rope_style;
enum { KAIO_ROPE_HALF_SPLIT = 0, KAIO_ROPE_INTERLEAVED = 1 };

typedef int32_t kaio_rope_scaling;
enum {
    KAIO_ROPE_SCALING_NONE = 0,
    KAIO_ROPE_SCALING_LINEAR = 1,
    KAIO_ROPE_SCALING_LLAMA3 = 2,
    KAIO_ROPE_SCALING_YARN = 3
};

typedef struct kaio_rope_desc {
    uint32_t struct_size;          /* sizeof(kaio_rope_desc)                       */
    kaio_rope_style style;         /* default KAIO_ROPE_HALF_SPLIT                 */
    kaio_dtype dtype;              /* Q and K: F32, F16 or BF16 (default BF16)     */
    kaio_rope_scaling scaling;     /* default KAIO_ROPE_SCALING_NONE               */
    int64_t heads_q;               /* Hq (0: Q always absent)                      */
    int64_t heads_k;               /* Hk (0: K always absent)                      */
    int64_t head_dim;              /* D                                            */
    int64_t rotary_dim;            /* 0 means head_dim                             */
    double theta;                  /* base θ, default 10000                        */
    double factor;                 /* LINEAR, LLAMA3, YARN: finite, > 0; default 1 */
    double low_freq_factor;        /* LLAMA3: > 0; default 1                       */
    double high_freq_factor;       /* LLAMA3: > low_freq_factor; default 4         */
    int64_t original_max_position_embeddings; /* LLAMA3, YARN: >= 1; default 8192 */
    double beta_fast;              /* YARN: > 0; default 32                        */
    double beta_slow;              /* YARN: > 0; default 1                         */
    double attention_factor;       /* YARN: > 0, or 0 for HF's default (default 0) */
    double mscale;                 /* YARN: >= 0, 0 = unset (default)              */
    double mscale_all_dim;         /* YARN: >= 0, 0 = unset (default)              */
    int32_t truncate;              /* YARN: 1 floors / ceils the correction range
                                      as HF does by default (default 1), or 0      */
    uint32_t reserved;             /* must be 0                                    */
    uint64_t reserved2[4];         /* must be 0                                    */
} kaio_rope_desc;

/* Defaults as commented above; heads and head_dim 0 (must be set). Any thread. */
KAIO_API KAIO_NODISCARD kaio_status kaio_rope_desc_init(kaio_rope_desc *desc, size_t struct_size);

/* A prepared RoPE: checks desc, computes the inv_freq table (kept in the op,
 * passed to the kernel by value) and loads the kernels. Launches take any T.
 *                                 launch tensors: {Q, K, positions}
 * Ownership: caller owns *out; retains device. No workspace: launches may
 * run on several streams and threads at once (on disjoint Q and K). */
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_rope(kaio_op **out, kaio_device *device,
                                                         const kaio_rope_desc *desc);

/* One-shot RoPE: q or k may be NULL or have a NULL buffer (skipped), not
 * both. Computes the table on the host and allocates nothing on the device.
 * Ownership: nothing is retained after the call. */
KAIO_API KAIO_NODISCARD kaio_status kaio_rope(kaio_stream *stream, const kaio_tensor *q,
                                               const kaio_tensor *k, const kaio_tensor *positions,
                                               const kaio_rope_desc *desc);

/* RoPE fused with the paged KV-cache write (see "Paged KV cache" below):
 * Q is rotated in place as kaio_rope does; K is rotated on its way into
 * k_cache, row t going to row slot_mapping[t] (K itself is only read, and
 * its dims past rotary_dim are copied as they are); V's row t is copied to
 * the same row of v_cache. One pass over K and V where kaio_rope followed by
 * kaio_kv_cache_write makes two.
 *   launch tensors: {Q, K, V, positions, slot_mapping, k_cache, v_cache}
 * Q, K, positions as for kaio_rope (Q may be absent; K may not: desc->heads_k
 * >= 1). V [T, heads_k · head_dim] of dtype; k_cache and v_cache
 * [num_pages · page_size, heads_k · head_dim] of dtype (v_cache as k_cache);
 * V and v_cache both present or both absent. slot_mapping I32 [1, T]: a
 * negative slot skips the token's K and V (its Q is still rotated); a slot
 * at or past the caches' rows skips them too and is reported by the next
 * kaio_stream_synchronize as KAIO_ERROR_OUT_OF_BOUNDS, as for
 * kaio_kv_cache_write. V and v_cache rows move as 16-byte vectors (start,
 * row pitch and heads_k · head_dim · size multiples of 16 bytes, else
 * KAIO_ERROR_MISALIGNED). The caches must not overlap each other or any
 * input; Q shares no element with anything (K and V may be its neighbouring
 * column ranges, one fused QKV output with one row_stride). Any thread; no allocation at launch (the
 * device's error flag is made by the first call or op creation).
 * Ownership: caller owns *out; retains device. */
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_rope_kv_cache_write(
    kaio_op **out, kaio_device *device, const kaio_rope_desc *desc);
/* One-shot form; q, v and v_cache may be NULL. Nothing is retained. */
KAIO_API KAIO_NODISCARD kaio_status kaio_rope_kv_cache_write(
    kaio_stream *stream, const kaio_tensor *q, const kaio_tensor *k, const kaio_tensor *v,
    const kaio_tensor *positions, const kaio_tensor *slot_mapping, const kaio_tensor *k_cache,
    const kaio_tensor *v_cache, const kaio_rope_desc *desc);

/* ===========================================================================
 * Paged attention: decode attention over a paged KV cache
 *
 * The forward of the attention section (same kaio_attention_desc, same
 * O = softmax(scale · Q Kᵀ + mask) · V, Q / O / LSE layouts, precision and
 * KAIO_ATTENTION_DECODE kernels) with K and V read from page pools, in the
 * layout of vLLM and FlashInfer (their caches can be wrapped as views):
 *   K pool, V pool: rank-2 views [num_pages · page_size, Hkv · D] of
 *     desc->dtype: row p · page_size + t is slot t of page p (a pool
 *     [num_pages, page_size, Hkv, D]); rows must be a multiple of
 *     page_size; row_stride may exceed Hkv · D (16-byte aligned start,
 *     row_stride a multiple of 8 elements); both pools have the same rows.
 *   block_table: KAIO_DTYPE_I32 [B, max_pages_per_seq] (row_stride
 *     allowed): entry (b, i) is the page holding tokens i · page_size ..
 *     (i + 1) · page_size − 1 of sequence b. max_pages_per_seq · page_size
 *     must be >= desc->seq_k.
 *   seq_lens: KAIO_DTYPE_I32 [1, B], contiguous: the KV length of each
 *     sequence INCLUDING its Sq new rows (query row i of sequence b is at
 *     position seq_lens[b] − Sq + i; KAIO_ATTENTION_CAUSAL: it sees key j
 *     iff j <= seq_lens[b] − Sq + i). desc->seq_k is the largest length
 *     any sequence may have (it sizes the split workspace). A length of 0
 *     gives that sequence O = 0 and LSE = −inf.
 * desc: variant KAIO_ATTENTION_AUTO or _DECODE, seq_q <= 16, head_dim 64,
 * 128 or 256; every other field as for kaio_op_create_attention.
 * Device data is not checked on the host. A length outside [0, seq_k] is
 * clamped into it and a page id outside [0, num_pages) replaced by page 0,
 * so no byte outside the pools or the table is ever read; that sequence's
 * O and LSE are then written as NaN, and the next kaio_stream_synchronize
 * (of a kaio_stream it was launched on; one-shot calls too) returns
 * KAIO_ERROR_OUT_OF_BOUNDS naming the sequence and the bad value (the
 * device's op flag, shared by every op that reports device data).
 * ======================================================================== */
typedef struct kaio_attention_paged_desc {
    uint32_t struct_size;          /* sizeof(kaio_attention_paged_desc)            */
    int32_t page_size;             /* tokens per page: 16, 32, 64, 128 or 256      */
    uint64_t reserved[2];          /* must be 0                                    */
} kaio_attention_paged_desc;

/* Defaults: page_size 16. Any thread. */
KAIO_API KAIO_NODISCARD kaio_status kaio_attention_paged_desc_init(
    kaio_attention_paged_desc *desc, size_t struct_size);

/* A prepared paged decode attention.
 *        launch tensors: {Q, K pool, V pool, block_table, seq_lens, O, LSE}
 * LSE may be a view with a NULL buffer: then it is not written. The op owns
 * the split workspace (as a prepared KAIO_ATTENTION_DECODE op) and reports
 * bad device data through the device's op flag; its launches allocate nothing and are
 * graph-capturable (a replayed graph's bounds errors are not reported:
 * check a launch outside the graph). Launches of one op must not run
 * concurrently on different streams.
 * Ownership: caller owns *out; retains device. Any thread. */
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_attention_paged(
    kaio_op **out, kaio_device *device, const kaio_attention_desc *desc,
    const kaio_attention_paged_desc *paged);

/* One-shot paged decode attention: no split (one CTA per 16 query rows and
 * KV head), allocates nothing; bad device data gives NaN (see above).
 * lse may be NULL or have a NULL buffer. Nothing is retained. */
KAIO_API KAIO_NODISCARD kaio_status kaio_attention_paged(
    kaio_stream *stream, const kaio_tensor *q, const kaio_tensor *k_pool,
    const kaio_tensor *v_pool, const kaio_tensor *block_table, const kaio_tensor *seq_lens,
    const kaio_tensor *o, const kaio_tensor *lse, const kaio_attention_desc *desc,
    const kaio_attention_paged_desc *paged);

/* ===========================================================================
 * Token sampling: logits -> token ids on the GPU
 *
 * From logits [B, V] (f32, f16 or bf16; any row_stride) to one token id per
 * row, with per-row parameters read from device vectors, so one launch mixes
 * greedy and sampled rows without a host sync.
 *
 * Per-row vectors. A "vector of B" is a view of B elements, either [1, B]
 * or [B, 1] (any row_stride). tokens: I32 vector of B (output).
 * temperature: F32 (> 0 samples; 0, negative or NaN: greedy). top_k: I32
 * (<= 0: off; >= the row's number of non-NaN logits: off). top_p: F32 (>= 1
 * or NaN: off; <= 0: only the most likely value's tokens). min_p: F32 (<= 0
 * or NaN: off; above 1 acts as 1). rng: U32 or I32 [B, 4] (any row_stride):
 * the row's 64-bit seed (cols 0 = low word, 1 = high) and 64-bit offset
 * (cols 2, 3). Out-of-range values are clamped or ignored as stated, never
 * an error and never an access outside the views.
 *
 * Order of operations, as HF transformers' warpers and candle's
 * LogitsProcessor (TopKThenTopP) apply them:
 *   penalties -> temperature -> top-k -> top-p -> min-p -> draw.
 * top-p is taken over what top-k kept (renormalised; with
 * KAIO_SAMPLING_TOP_P_OF_ROW, over the whole row), min-p relative to the
 * most likely token (which every filter keeps). Filters are thresholds on
 * the value: top-k keeps every token >= the k-th largest logit and top-p
 * every token >= the logit where the running mass, from the largest down,
 * first reaches top_p of the total; so ties at a boundary are all kept
 * (HF's semantics; candle's sort keeps an arbitrary k of them). Sampled
 * probabilities are softmax(logit / T) over the kept tokens.
 *
 * Penalties (KAIO_SAMPLING_PENALTIES), over each row's previous tokens
 * prev [B, max_prev] I32 with prev_lens an I32 vector of B (clamped to
 * [0, max_prev]); ids outside [0, V) are ignored. penalties F32 [B, 3]:
 * (repetition r, presence, frequency). For each distinct previous token t,
 * c times in the row's list: first repetition (HF / candle: x > 0 ? x / r :
 * x * r; r <= 0 or NaN acts as 1), then OpenAI's x -= presence + frequency
 * * c. The penalised row is written to the op's f32 workspace and sampled
 * from there; logits are never modified.
 *
 * The draw. Greedy takes the argmax, lowest index on ties (candle's
 * argmax takes the last one and may take NaN). Sampled rows use the
 * Gumbel-max trick: token = argmax over kept tokens of
 * log(p) - log(-log U), U from Philox4x32-10 with key = seed and counter
 * (token / 4, 0, offset low, offset high), word token % 4. A token's U
 * depends on (seed, offset, token) only: the same seed and offset give the
 * same token bit for bit, whatever the batch's other rows, B or stream.
 * Advance the offset by 1 per step (any change gives fresh draws).
 *
 * Special values. NaN logits are never chosen and count nowhere. A +inf
 * logit wins: the lowest-index +inf token, probability 1, in every mode.
 * A row with no logit above -inf (all -inf or NaN) gives the lowest index
 * of a -inf logit, or 0 when all are NaN, with probability 0 and
 * log-probability -inf; this is data, not an error: no status is raised.
 *
 * Outputs (KAIO_SAMPLING_PROBS): probs and logprobs, F32 vectors of B: the
 * chosen token's probability under the distribution it was drawn from
 * (after penalties, temperature and filters; greedy rows: 1 and 0).
 *
 * Method and cost. One 1024-thread CTA per row, several passes over the
 * row (the first from memory, the rest mostly from L2; whole 16-byte loads
 * where the row is aligned): max and argmax; top-k and top-p thresholds
 * by a histogram of the tempered log-weight (2048 bins of 1/64 octave),
 * then the exact value inside the threshold's bin (its tokens sorted out
 * in shared memory, or, when over 512, radix passes on the float bits);
 * counts and top-p's fixed-point mass are exact integer sums, so the
 * threshold is independent of atomic order; then the draw. No sort.
 * With at most half as many rows as SMs, a prepared op splits each row over
 * about SMs / B CTAs and launches one kernel per pass (2 to 6 launches);
 * the CTAs' partials (integer sums, maxima) meet in the op's workspace,
 * so tokens, probs and logprobs are the same bits for any split, B or
 * device. Top-k without top-p (B <= SMs, prepared op) takes one launch of
 * 1 to 8 CTAs a row that read the row once: max, a histogram of the value
 * bits and each thread's two largest tokens give each CTA's tokens at or
 * above its own k-th largest bin; the row's last CTA finds the exact k-th
 * largest value among them (up to 1024; more, or top_k <= 0: the passes
 * above over the whole row, in that CTA) and draws over the kept ones.
 * exp and log use ex2.approx / lg2.approx.
 *
 * Launch tensors (12, in this order; views of features the desc leaves
 * off must have a NULL buffer, those it turns on must not):
 *   {logits, temperature, top_k, top_p, min_p, rng,
 *    prev, prev_lens, penalties, tokens, probs, logprobs}
 * RANDOM: temperature, rng; TOP_K: top_k; TOP_P: top_p; MIN_P: min_p
 * (the three filters need RANDOM); PENALTIES: prev, prev_lens, penalties;
 * PROBS: probs, logprobs. Outputs must not overlap the inputs.
 * ======================================================================== */
enum {
    KAIO_SAMPLING_RANDOM = 1,      /* temperature + rng; else every row is greedy */
    KAIO_SAMPLING_TOP_K = 2,
    KAIO_SAMPLING_TOP_P = 4,
    KAIO_SAMPLING_MIN_P = 8,
    KAIO_SAMPLING_PENALTIES = 16,
    KAIO_SAMPLING_PROBS = 32,
    /* With TOP_K and TOP_P: top-p's mass is the whole row's, not what top-k
     * kept, so the kept tokens are those both filters keep (candle's
     * LogitsProcessor TopKThenTopP). Without it, top-p renormalises over
     * top-k's tokens (HF transformers, vLLM). No view of its own. */
    KAIO_SAMPLING_TOP_P_OF_ROW = 64
};

typedef struct kaio_sampling_desc {
    uint32_t struct_size;          /* sizeof(kaio_sampling_desc)                 */
    kaio_dtype dtype;              /* logits: KAIO_DTYPE_F32 (default), _F16, _BF16 */
    int64_t batch;                 /* B >= 1, at most 2^31 - 1                  */
    int64_t vocab;                 /* V, 1 .. 2^31 - 1                          */
    int64_t max_prev;              /* columns of prev (PENALTIES), else 0       */
    uint32_t features;             /* KAIO_SAMPLING_* bits; default 0 (greedy)  */
    uint32_t reserved;             /* must be 0                                 */
} kaio_sampling_desc;

/* Defaults: f32, batch = vocab = max_prev = 0 (batch and vocab must be
 * set), features 0. Any thread. */
KAIO_API KAIO_NODISCARD kaio_status kaio_sampling_desc_init(kaio_sampling_desc *desc,
                                                            size_t struct_size);

/* A prepared sampler. With KAIO_SAMPLING_PENALTIES it owns a workspace of
 * 8 · B · V bytes (the penalised f32 rows and per-token counts), and when
 * it splits rows (2 · B <= SMs, V >= 509) one of 32896 · B bytes, both
 * allocated (and zeroed) here, none at launch; such an op must not run on
 * two streams at once (CUDA-graph capture is fine). Launch:
 * kaio_op_launch with the 12 views above; no allocation, module load or
 * sync. There is no one-shot call: 12 views are clearer in one list, and
 * the penalty path needs the workspace.
 * Errors: KAIO_ERROR_INVALID_DTYPE (dtype), KAIO_ERROR_INVALID_DIMENSION
 * (batch, vocab, max_prev), KAIO_ERROR_INVALID_ARGUMENT (unknown feature
 * bits, a filter without RANDOM, reserved != 0).
 * Ownership: caller owns *out; retains device. Any thread. */
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_sampling(kaio_op **out, kaio_device *device,
                                                             const kaio_sampling_desc *desc);

/* ===========================================================================
 * Attention on variable-length batches (packed sequences, FlashAttention's
 * varlen layout): the attention section's op for B sequences of different
 * lengths stored back to back, no padding.
 *
 * Layout. Q is [total_q, Hq·D] and K, V are [total_k, Hkv·D] (rank-2 views,
 * row_stride allowed as for kaio_attention); O is like Q. cu_seqlens_q and
 * cu_seqlens_k are KAIO_DTYPE_I32 views [1, B+1] of prefix sums (first 0):
 * sequence b's queries are rows cu_seqlens_q[b] .. cu_seqlens_q[b+1]−1, its
 * keys rows cu_seqlens_k[b] .. cu_seqlens_k[b+1]−1; len_q = difference of
 * the q entries, len_k of the k entries. Each sequence is attention on its
 * own: query head h reads KV head h / (Hq / Hkv) of its own keys only.
 * LSE is f32 [Hq, total_q] (FlashAttention's varlen layout: row h, column
 * the packed query row), natural log; row_stride >= total_q allowed.
 * Masks per sequence: KAIO_ATTENTION_CAUSAL is bottom-right aligned (query
 * i sees key j iff j <= i + len_k − len_q), KAIO_ATTENTION_CAUSAL_TOP_LEFT
 * j <= i. A sequence with len_q 0 writes nothing; one with len_k 0 gets O = 0
 * and LSE = −inf (and zero gradients); rows of a sequence that see no key
 * likewise.
 * max_seqlen_q / max_seqlen_k (host values, as FlashAttention's) size the
 * grid: they must be >= every len_q / len_k.
 * cu_seqlens are device data, read by the kernels: whatever they hold, no
 * byte outside Q, K, V, O, LSE (and dO, dQ, dK, dV) is read or written. Each
 * entry pair must satisfy 0 <= cu[b] <= cu[b+1] <= total and cu[b+1] −
 * cu[b] <= max_seqlen; a side (q or k) whose pair does not (non-monotonic,
 * negative, past total, longer than max_seqlen) is treated as empty for that
 * sequence (no query rows: nothing written for it; no keys: O = 0 and LSE =
 * −inf), and the next kaio_stream_synchronize of a stream it was launched on
 * returns KAIO_ERROR_OUT_OF_BOUNDS naming the entry (the device's op flag;
 * one-shot calls too). Rows that belong to no sequence are never written. Valid pairs that overlap another sequence's
 * rows (not prefix sums) stay inside the tensors, but the rows they share
 * are written by both: their values are unspecified.
 * Variants. KAIO_ATTENTION_SM80 / _SM80_M128: the sm_80 mma.sync forward
 * (64 / 128 query rows per CTA), every row fetched with per-row zero fill.
 * KAIO_ATTENTION_SM90 (compute capability 9.0, D 64 or 128): the
 * FlashAttention-3 forward, its TMA maps over the packed rows with each
 * sequence's first row added to the coordinates; its 128-row tiles read up
 * to 127 rows past a sequence's end (the next sequence's, or zeros past
 * total) and give them weight 0, so those rows of K and V must be finite
 * (0 · Inf is NaN): true of any packed batch of real activations.
 * KAIO_ATTENTION_AUTO: SM90 where it applies, else SM80_M128 for D <= 128,
 * else SM80. The backward runs the sm_80 kernels (D in {32, 64, 96, 128}).
 * Constraints (checked at creation and at every launch, with the attention
 * section's statuses): dtype f16 or bf16; D as the attention section's
 * forward (backward); 1 <= batch, 1 <= heads, Hq a multiple of Hkv,
 * batch·Hq <= 65535; 1 <= max_seqlen_q <= total_q, 0 <= max_seqlen_k <=
 * total_k; total_q·Hq and total_k·Hkv at most 2^31 − 1; alignment and
 * no-overlap of the views as the attention section. Precision: as the
 * attention section; each sequence's O and LSE are bit-identical to
 * kaio_attention run on that sequence alone with the same variant.
 * Threads, ownership and asynchrony as the attention section.
 * ======================================================================== */
typedef struct kaio_attention_varlen_desc {
    uint32_t struct_size;          /* sizeof(kaio_attention_varlen_desc)          */
    kaio_dtype dtype;              /* Q, K, V, dO: KAIO_DTYPE_F16 or _BF16         */
    kaio_dtype out_dtype;          /* forward: O; backward: dQ, dK, dV. F32, F16 or
                                      BF16; 0 means dtype                          */
    kaio_dtype o_dtype;            /* backward only: O's dtype (dtype or F32); 0
                                      means dtype                                  */
    kaio_attention_mask mask;      /* per sequence, see above                     */
    kaio_attention_variant variant;
    uint32_t reserved;             /* must be 0                                   */
    int64_t batch;                 /* B: sequences (cu_seqlens have B+1 entries)  */
    int64_t max_seqlen_q, max_seqlen_k;
    int64_t total_q, total_k;      /* rows of Q (and O), of K and V               */
    int64_t heads_q, heads_kv;     /* Hq, Hkv                                     */
    int64_t head_dim;              /* D                                           */
    float softmax_scale;           /* 0 means 1/√D                                */
    uint32_t reserved2;            /* must be 0                                   */
} kaio_attention_varlen_desc;

/* Defaults: f16, out_dtype and o_dtype 0 (= dtype), no mask, AUTO, every
 * shape field 0 (must be set), scale 0 (= 1/√D). Any thread. */
KAIO_API KAIO_NODISCARD kaio_status kaio_attention_varlen_desc_init(
    kaio_attention_varlen_desc *desc, size_t struct_size);

/* A prepared varlen forward.
 *   launch tensors: {Q, K, V, cu_seqlens_q, cu_seqlens_k, O, LSE}
 * LSE may be a view with a NULL buffer: then it is not written.
 * Ownership: caller owns *out; retains device. Thread-safe to launch from
 * several threads. */
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_attention_varlen(
    kaio_op **out, kaio_device *device, const kaio_attention_varlen_desc *desc);

/* One-shot varlen forward; lse may be NULL or have a NULL buffer. Nothing
 * is retained after the call. */
KAIO_API KAIO_NODISCARD kaio_status kaio_attention_varlen(
    kaio_stream *stream, const kaio_tensor *q, const kaio_tensor *k, const kaio_tensor *v,
    const kaio_tensor *cu_seqlens_q, const kaio_tensor *cu_seqlens_k, const kaio_tensor *o,
    const kaio_tensor *lse, const kaio_attention_varlen_desc *desc);

/* A prepared varlen backward (sm_80 kernels, deterministic, no atomics).
 *   launch tensors: {dO, Q, K, V, cu_seqlens_q, cu_seqlens_k, O, LSE,
 *                    dQ, dK, dV}
 * dO like Q (dtype); O o_dtype; LSE the forward's [Hq, total_q]; dQ like Q,
 * dK and dV like K, out_dtype: the rows of every sequence are overwritten,
 * rows of no sequence left as they are.
 * Ownership: caller owns *out; retains device; the op owns an Hq·total_q
 * f32 workspace, so launches of one op must not run concurrently on
 * different streams. */
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_attention_varlen_backward(
    kaio_op **out, kaio_device *device, const kaio_attention_varlen_desc *desc);

/* ===========================================================================
 * Paged prefill: chunked prefill attention over a paged KV cache
 *
 * The varlen forward (previous section: kaio_attention_varlen_desc, packed
 * Q / O / LSE, masks, precision) with each sequence's keys read from the
 * page pools of "Paged KV cache" / "Paged attention" instead of packed K and
 * V: sequence b has len_q new query rows (rows cu_seqlens_q[b] ..
 * cu_seqlens_q[b+1] − 1 of Q) attending to its len_k = seq_lens[b] keys,
 * the cache INCLUDING those new rows (append them first with
 * kaio_kv_cache_write). KAIO_ATTENTION_CAUSAL is bottom-right per sequence:
 * query i sees key j iff j <= i + len_k − len_q (position len_k − len_q + i
 * of the sequence); KAIO_ATTENTION_CAUSAL_TOP_LEFT j <= i; MASK_NONE every
 * key below len_k. A chunk of a long prompt, a whole prompt (len_k = len_q)
 * and decode rows (len_q = 1) mix freely in one batch.
 *   Q, O: [total_q, Hq·D] as varlen; LSE f32 [Hq, total_q] or absent.
 *   K pool, V pool: [num_pages · page_size, Hkv · D] of desc->dtype, as the
 *     paged decode op (row p · page_size + t is slot t of page p; rows a
 *     multiple of page_size, num_pages >= 1; same rows in both; row_stride
 *     allowed, 16-byte aligned start and pitch).
 *   cu_seqlens_q: I32 [1, B+1] prefix sums, read as the varlen op reads
 *     them (a bad pair is an empty sequence, nothing written).
 *   block_table: I32 [B, max_pages_per_seq] (row_stride allowed); key j of
 *     sequence b is slot j % page_size of page block_table[b, j / page_size].
 *     max_pages_per_seq · page_size must be >= desc->max_seqlen_k.
 *   seq_lens: I32 [1, B], len_k of each sequence.
 * desc: a kaio_attention_varlen_desc with total_k 0 (K and V are the pools)
 * and max_seqlen_k the largest seq_lens entry any launch may pass (it bounds
 * the lengths, not the grid); max_seqlen_q and total_q as the varlen op;
 * head_dim 32, 64, 96, 128 or 256; every other field as varlen's forward.
 * paged: page_size 16, 32, 64, 128 or 256 (KAIO_ERROR_INVALID_ARGUMENT else, as
 * for the paged decode op).
 * Kernels, chosen as the varlen forward chooses: KAIO_ATTENTION_SM90
 * (compute capability 9.0, D 64 or 128; else KAIO_ERROR_UNSUPPORTED_ARCH /
 * _UNSUPPORTED) is the sm_90a varlen forward with K and V loaded by TMA one
 * page at a time (boxes of min(page_size, 128) rows, each from its page of
 * the block table); AUTO picks it where it applies. KAIO_ATTENTION_SM80_M128
 * (and AUTO elsewhere for D <= 128) is the sm_80 mma.sync 128-row tile with
 * a paged row fetch (each key row's table entry read in the tile's cp.async
 * issue), KAIO_ATTENTION_SM80 the 64-row one. O and LSE equal
 * kaio_attention_varlen's with the same variant on the same keys stored
 * contiguously (bit for bit). Unused pool slots (past a sequence's length)
 * may hold anything, NaN included.
 * Device data (cu_seqlens_q, block_table, seq_lens) is not checked on the
 * host; whatever it holds, no byte outside the views is read or written.
 * As for the paged decode op: a length outside [0, max_seqlen_k] is clamped
 * into it and a page id outside [0, num_pages) replaced by page 0; the
 * query tiles (up to 128 rows of one head) that met the bad value get O and
 * LSE written as NaN (a causal tile whose keys end before a bad page does
 * not meet it), and the next kaio_stream_synchronize (of a kaio_stream it
 * was launched on; one-shot calls too) returns KAIO_ERROR_OUT_OF_BOUNDS
 * naming the sequence and the value. A bad cu_seqlens_q pair (as the varlen
 * op defines it) gives an empty sequence but is not reported here.
 * Constraints, statuses, threads and asynchrony as the varlen forward; no
 * workspace, no allocation at launch, graph-capturable (a replayed graph's
 * bounds errors are not reported). Compute capability 8.0+.
 * ======================================================================== */

/* A prepared paged prefill.
 *   launch tensors: {Q, K pool, V pool, cu_seqlens_q, block_table,
 *                    seq_lens, O, LSE}
 * LSE may be a view with a NULL buffer: then it is not written. Launches
 * may come from several threads; a bounds error (bad seq_lens or
 * block_table entries) is reported through the device's op flag by the
 * first synchronisation of a stream it was launched on. Ownership: caller
 * owns *out; retains device. */
KAIO_API KAIO_NODISCARD kaio_status kaio_op_create_attention_paged_prefill(
    kaio_op **out, kaio_device *device, const kaio_attention_varlen_desc *desc,
    const kaio_attention_paged_desc *paged);

/* One-shot paged prefill; lse may be NULL or have a NULL buffer. Bad device
 * data gives NaN and is reported as for the prepared op. Nothing is
 * retained after the call. */
KAIO_API KAIO_NODISCARD kaio_status kaio_attention_paged_prefill(
    kaio_stream *stream, const kaio_tensor *q, const kaio_tensor *k_pool,
    const kaio_tensor *v_pool, const kaio_tensor *cu_seqlens_q, const kaio_tensor *block_table,
    const kaio_tensor *seq_lens, const kaio_tensor *o, const kaio_tensor *lse,
    const kaio_attention_varlen_desc *desc, const kaio_attention_paged_desc *paged);

KAIO_END_DECLS

#endif /* KAIO_H */
