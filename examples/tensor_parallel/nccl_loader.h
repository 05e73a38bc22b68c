/*
 * nccl_loader: NCCL opened at run time, as libkaio opens the CUDA driver, so
 * the example builds without NCCL's headers or library.
 *
 * Only the few types and values the example uses are declared here, with
 * the values of NCCL's public header (nccl.h), which NCCL keeps stable
 * across 2.x: enums are C ints, a communicator is an opaque pointer and a
 * stream is a CUstream (cudaStream_t is the same type).
 */
#ifndef KAIO_EXAMPLE_NCCL_LOADER_H
#define KAIO_EXAMPLE_NCCL_LOADER_H

#include <stddef.h>

typedef int tp_nccl_result;                /* ncclResult_t; ncclSuccess is 0 */
typedef struct tp_nccl_comm_s *tp_nccl_comm; /* ncclComm_t                  */
typedef int tp_nccl_dtype;                 /* ncclDataType_t                */
typedef int tp_nccl_op;                    /* ncclRedOp_t                   */

enum { TP_NCCL_SUCCESS = 0 };
enum { TP_NCCL_FLOAT16 = 6, TP_NCCL_FLOAT32 = 7, TP_NCCL_BFLOAT16 = 9 };
enum { TP_NCCL_SUM = 0 };

/* The environment variable that names the library's path; unset, the
 * dynamic loader's search for libnccl.so.2 applies (LD_LIBRARY_PATH, ...). */
#define TP_NCCL_ENV "KAIO_NCCL_LIBRARY"
#define TP_NCCL_DEFAULT_NAME "libnccl.so.2"

typedef struct tp_nccl {
    void *handle;
    int version; /* ncclGetVersion's code, e.g. 22703 for 2.27.3 */
    const char *(*get_error_string)(tp_nccl_result result);
    tp_nccl_result (*comm_init_all)(tp_nccl_comm *comms, int ndev, const int *devlist);
    tp_nccl_result (*comm_destroy)(tp_nccl_comm comm);
    tp_nccl_result (*group_start)(void);
    tp_nccl_result (*group_end)(void);
    tp_nccl_result (*all_reduce)(const void *send, void *recv, size_t count, tp_nccl_dtype dtype,
                                 tp_nccl_op op, tp_nccl_comm comm, void *cu_stream);
} tp_nccl;

/* Opens NCCL (the path in $KAIO_NCCL_LIBRARY if set, else libnccl.so.2) and
 * resolves its functions. Returns 0 on success; otherwise -1, *nccl zeroed
 * and a message naming the library, the failing step and the fix in err
 * (always NUL-terminated when errcap > 0). Never aborts. */
int tp_nccl_load(tp_nccl *nccl, char *err, size_t errcap);

/* Closes the library. Accepts a zeroed or already unloaded struct. */
void tp_nccl_unload(tp_nccl *nccl);

#endif
