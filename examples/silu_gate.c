/*
 * silu_gate: the libkaio tour in one C99 program.
 *
 * Computes out = x * sigmoid(x) * gate on the GPU twice, once with the one-shot
 * call and once with a prepared op handle, and checks every element against a
 * double-precision CPU reference.
 *
 * Exit status: 0 on success, 1 on any failure, 2 when there is no usable GPU.
 */
#include <kaio/kaio.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ROWS 4096
#define COLS 1024
#define N ((size_t)ROWS * COLS)

/* Single precision math rounded once on output: a few ulp of f32, with an
 * absolute floor for results that are near zero. */
#define RTOL 1e-5
#define ATOL 1e-6

/* The status name is fetched before kaio_last_error(), whose text is only
 * promised to last until the next kaio call on this thread. */
#define CHECK(call)                                                                  \
    do {                                                                             \
        kaio_status check_status_ = (call);                                          \
        if (check_status_ != KAIO_OK) {                                              \
            const char *check_name_ = kaio_status_name(check_status_);               \
            fprintf(stderr, "silu_gate: %s failed: %s: %s\n", #call, check_name_,    \
                    kaio_last_error());                                              \
            goto cleanup;                                                            \
        }                                                                            \
    } while (0)

/* Deterministic values in [-4, 4] that are never zero: the offset of half a
 * step keeps u off 1/2, and doing the sum in double keeps rounding from
 * landing on it. */
static void fill_random(float *v, size_t n, uint32_t seed) {
    size_t i;
    for (i = 0; i < n; ++i) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = (float)(-4.0 + 8.0 * (((seed >> 8) + 0.5) / 16777216.0));
    }
}

/* Largest error relative to the tolerance's own scale: |got - ref| divided by
 * |ref| + ATOL/RTOL, so the check |got - ref| <= RTOL*|ref| + ATOL passes
 * exactly when this is <= RTOL. Returns -1 if any element fails. */
static double max_rel_err(const float *x, const float *gate, const float *got, size_t n) {
    double worst = 0.0;
    size_t i;
    for (i = 0; i < n; ++i) {
        double xd = x[i];
        double ref = xd / (1.0 + exp(-xd)) * gate[i];
        double err = fabs((double)got[i] - ref);
        double rel = err / (fabs(ref) + ATOL / RTOL);
        if (!(err <= RTOL * fabs(ref) + ATOL)) { /* also catches NaN */
            fprintf(stderr, "silu_gate: element %zu (row %zu, col %zu): got %.9g, expected %.9g\n",
                    i, i / COLS, i % COLS, got[i], ref);
            return -1.0;
        }
        if (rel > worst) worst = rel;
    }
    return worst;
}

/* Returns 1 when a driver and at least one device are usable, else explains
 * why on stderr and returns 0. */
static int have_device(void) {
    kaio_probe_info probe;
    memset(&probe, 0, sizeof probe);
    probe.struct_size = sizeof probe;
    if (kaio_probe(&probe) != KAIO_OK) {
        fprintf(stderr, "silu_gate: kaio_probe failed: %s\n", kaio_last_error());
        return 0;
    }
    if (probe.driver_status != KAIO_OK || probe.device_count < 1) {
        fprintf(stderr, "silu_gate: no usable CUDA device: %s\n",
                probe.message[0] ? probe.message : "the driver reports 0 devices");
        return 0;
    }
    return 1;
}

int main(void) {
    const size_t bytes = N * sizeof(float);
    int exit_code = 1;
    double err_oneshot, err_op;
    kaio_device *dev = NULL;
    kaio_stream *stream = NULL;
    kaio_buffer *bx = NULL, *bgate = NULL, *bout = NULL;
    kaio_op *op = NULL;
    kaio_device_info info;
    kaio_tensor tensors[3];
    float *x = NULL, *gate = NULL, *out = NULL;

    if (!have_device()) return 2;

    x = malloc(bytes);
    gate = malloc(bytes);
    out = malloc(bytes);
    if (!x || !gate || !out) {
        fprintf(stderr, "silu_gate: out of host memory\n");
        goto cleanup;
    }

    CHECK(kaio_device_open(&dev, 0));
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    CHECK(kaio_device_get_info(dev, &info));
    printf("silu_gate: device 0: %s, compute capability %d.%d\n", info.name, info.cc_major,
           info.cc_minor);
    if (info.cc_major < 8) {
        fprintf(stderr, "silu_gate: no usable CUDA device: the built-in ops need compute "
                        "capability 8.0+, device 0 has %d.%d\n", info.cc_major, info.cc_minor);
        exit_code = 2;
        goto cleanup;
    }

    CHECK(kaio_stream_create(&stream, dev, KAIO_STREAM_NON_BLOCKING));
    CHECK(kaio_buffer_create(&bx, dev, bytes));
    CHECK(kaio_buffer_create(&bgate, dev, bytes));
    CHECK(kaio_buffer_create(&bout, dev, bytes));

    fill_random(x, N, 1u);
    fill_random(gate, N, 2u);
    CHECK(kaio_buffer_write(bx, 0, x, bytes));
    CHECK(kaio_buffer_write(bgate, 0, gate, bytes));

    tensors[0] = kaio_tensor_2d(bx, KAIO_DTYPE_F32, ROWS, COLS);
    tensors[1] = kaio_tensor_2d(bgate, KAIO_DTYPE_F32, ROWS, COLS);
    tensors[2] = kaio_tensor_2d(bout, KAIO_DTYPE_F32, ROWS, COLS);

    /* One-shot form: validates and launches in one call. The stream is
     * non-blocking, so the blocking read must wait for it explicitly. */
    CHECK(kaio_silu_gate(stream, &tensors[0], &tensors[1], &tensors[2]));
    CHECK(kaio_stream_synchronize(stream));
    CHECK(kaio_buffer_read(bout, 0, out, bytes));
    err_oneshot = max_rel_err(x, gate, out, N);
    if (err_oneshot < 0) goto cleanup;

    /* Prepared form: validated once, then launched as often as needed. The
     * output is poisoned with NaNs first so stale results cannot pass. */
    CHECK(kaio_op_create_silu_gate(&op, dev, KAIO_DTYPE_F32, ROWS, COLS));
    CHECK(kaio_buffer_memset(bout, stream, 0, 0xFF, bytes));
    CHECK(kaio_op_launch(op, stream, tensors, 3));
    CHECK(kaio_stream_synchronize(stream));
    CHECK(kaio_buffer_read(bout, 0, out, bytes));
    err_op = max_rel_err(x, gate, out, N);
    if (err_op < 0) goto cleanup;

    printf("silu_gate: OK (%zu elements, max rel err %.3g)\n", N,
           err_oneshot > err_op ? err_oneshot : err_op);
    exit_code = 0;

cleanup:
    /* Every _destroy accepts NULL and children keep their device alive, so
     * the order does not matter. */
    kaio_op_destroy(op);
    kaio_buffer_destroy(bx);
    kaio_buffer_destroy(bgate);
    kaio_buffer_destroy(bout);
    kaio_stream_destroy(stream);
    kaio_device_destroy(dev);
    free(x);
    free(gate);
    free(out);
    return exit_code;
}
