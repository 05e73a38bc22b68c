/*
 * The NCCL loader's failures, without NCCL or a GPU: a KAIO_NCCL_LIBRARY
 * naming a missing file, and one naming a library that is not NCCL (libm),
 * must each fail cleanly with a message naming the path and the fix.
 * Exit status 0 when both do, 1 otherwise.
 */
#define _POSIX_C_SOURCE 200809L /* setenv under -std=c99 */
#include "nccl_loader.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int expect_failure(const char *path, const char *must_say) {
    tp_nccl nccl;
    char err[1024];
    int rc;
    if (setenv(TP_NCCL_ENV, path, 1) != 0) {
        fprintf(stderr, "nccl_loader_check: setenv failed\n");
        return 1;
    }
    rc = tp_nccl_load(&nccl, err, sizeof err);
    if (rc == 0) {
        fprintf(stderr, "nccl_loader_check: %s loaded as NCCL (version %d)\n", path,
                nccl.version);
        tp_nccl_unload(&nccl);
        return 1;
    }
    printf("nccl_loader_check: %s -> %s\n", path, err);
    if (nccl.handle != NULL || nccl.all_reduce != NULL) {
        fprintf(stderr, "nccl_loader_check: a failed load left the struct set\n");
        return 1;
    }
    if (strstr(err, path) == NULL || strstr(err, TP_NCCL_ENV) == NULL ||
        strstr(err, must_say) == NULL) {
        fprintf(stderr, "nccl_loader_check: the message lacks the path, \"%s\" or \"%s\"\n",
                TP_NCCL_ENV, must_say);
        return 1;
    }
    return 0;
}

int main(void) {
    int failures = 0;
    failures += expect_failure("/nonexistent/kaio-test/libnccl.so.2", "cannot load NCCL");
    failures += expect_failure("libm.so.6", "has no ncclGetVersion");
    return failures == 0 ? 0 : 1;
}
