/* A thread with a stack of exactly the requested size (glibc places the
 * thread descriptor and TLS in it too), a PROT_NONE guard below it, painted
 * so the caller learns how much of it was ever touched. */
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>

#include "smallstack.h"

extern void kaioSmallStackRun(uintptr_t job);

enum { kGuard = 64 * 1024, kPaint = 0xA5 };

static void *start(void *job) {
    kaioSmallStackRun((uintptr_t)job);
    return NULL;
}

int ss_run(size_t size, uintptr_t job, size_t *used) {
    unsigned char *map = mmap(NULL, kGuard + size, PROT_READ | PROT_WRITE,
                              MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (map == MAP_FAILED) return -1;
    unsigned char *stack = map + kGuard;
    int rc = mprotect(map, kGuard, PROT_NONE);
    memset(stack, kPaint, size);
    pthread_attr_t attr;
    pthread_t t;
    if (rc == 0) rc = pthread_attr_init(&attr);
    if (rc == 0) {
        rc = pthread_attr_setstack(&attr, stack, size);
        if (rc == 0) rc = pthread_create(&t, &attr, start, (void *)job);
        if (rc == 0) rc = pthread_join(t, NULL);
        pthread_attr_destroy(&attr);
    }
    size_t untouched = 0;
    while (untouched < size && stack[untouched] == kPaint) ++untouched;
    *used = size - untouched;
    munmap(map, kGuard + size);
    return rc;
}
