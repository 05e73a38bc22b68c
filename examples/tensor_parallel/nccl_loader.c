#define _POSIX_C_SOURCE 200809L /* dlopen under -std=c99 */
#include "nccl_loader.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char fix_hint[] =
    "set " TP_NCCL_ENV " to the path of libnccl.so.2 (pip's nvidia-nccl-cu12/-cu13 install "
    "it under site-packages/nvidia/nccl/lib/)";

/* Resolves one symbol into *slot. dlsym returns an object pointer; memcpy
 * moves it into the function pointer without the cast ISO C forbids. */
static int resolve(void *handle, const char *name, void *slot, size_t slot_size,
                   const char *path, char *err, size_t errcap) {
    void *sym = dlsym(handle, name);
    if (sym == NULL) {
        snprintf(err, errcap, "%s has no %s: is it NCCL 2.x? %s", path, name, fix_hint);
        return -1;
    }
    memcpy(slot, &sym, slot_size);
    return 0;
}

#define RESOLVE(field, name)                                                           \
    resolve(nccl->handle, name, (void *)&nccl->field, sizeof nccl->field, path, err, errcap)

int tp_nccl_load(tp_nccl *nccl, char *err, size_t errcap) {
    const char *env = getenv(TP_NCCL_ENV);
    const char *path = env != NULL && env[0] != '\0' ? env : TP_NCCL_DEFAULT_NAME;
    tp_nccl_result (*get_version)(int *) = NULL;
    tp_nccl_result r;

    if (errcap > 0) err[0] = '\0';
    memset(nccl, 0, sizeof *nccl);
    nccl->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (nccl->handle == NULL) {
        const char *why = dlerror();
        snprintf(err, errcap, "cannot load NCCL from %s%s: %s; %s", path,
                 env != NULL && env[0] != '\0' ? " (" TP_NCCL_ENV ")" : "",
                 why != NULL ? why : "unknown error", fix_hint);
        return -1;
    }
    if (resolve(nccl->handle, "ncclGetVersion", (void *)&get_version, sizeof get_version, path,
                err, errcap) != 0 ||
        RESOLVE(get_error_string, "ncclGetErrorString") != 0 ||
        RESOLVE(comm_init_all, "ncclCommInitAll") != 0 ||
        RESOLVE(comm_destroy, "ncclCommDestroy") != 0 ||
        RESOLVE(group_start, "ncclGroupStart") != 0 ||
        RESOLVE(group_end, "ncclGroupEnd") != 0 ||
        RESOLVE(all_reduce, "ncclAllReduce") != 0)
        goto fail;
    r = get_version(&nccl->version);
    /* The declared enum values are NCCL 2's; 2.x codes are 2000..29999. */
    if (r != TP_NCCL_SUCCESS || nccl->version < 2000 || nccl->version >= 30000) {
        snprintf(err, errcap, "%s: ncclGetVersion gave status %d, version %d; this example "
                 "needs NCCL 2.x; %s", path, r, nccl->version, fix_hint);
        goto fail;
    }
    return 0;

fail:
    dlclose(nccl->handle);
    memset(nccl, 0, sizeof *nccl);
    return -1;
}

void tp_nccl_unload(tp_nccl *nccl) {
    if (nccl->handle != NULL) dlclose(nccl->handle);
    memset(nccl, 0, sizeof *nccl);
}
