#ifndef KAIO_GO_SMALLSTACK_H
#define KAIO_GO_SMALLSTACK_H
#include <stddef.h>
#include <stdint.h>
/* Runs kaioSmallStackRun(job) on a new thread with a `size`-byte stack;
 * sets *used to the bytes of it ever touched. 0 or an errno-style code. */
int ss_run(size_t size, uintptr_t job, size_t *used);
#endif
