/*
 * tensor_parallel: a Llama attention block and MLP block split over two GPUs
 * with libkaio's ops and NCCL's all-reduce, checked against one GPU.
 *
 * Megatron-style split: the projections into a block (W_qkv by heads,
 * W_gate and W_up by intermediate columns) are column parallel, the ones out
 * of it (W_o, W_down) row parallel, so each GPU computes a partial sum of
 * the block's output and one all-reduce (sum) per block completes it. The
 * row-parallel projections write f32 and the all-reduce sums f32, so the
 * split changes only where the f32 sum over K is cut in two.
 *
 * One thread drives both GPUs: every kaio call is asynchronous, and NCCL's
 * group calls (ncclGroupStart/End) let one thread issue both ranks'
 * all-reduces, which it could not do one rank at a time. The all-reduces
 * run on the very CUstreams of the kaio streams (kaio_stream_native), so
 * they are ordered after the kernels that write their input.
 *
 * NCCL is opened at run time (nccl_loader.c): $KAIO_NCCL_LIBRARY, else
 * libnccl.so.2 on the loader's search path.
 *
 * Usage: tensor_parallel [REPS [TOKENS]]: REPS timed steps (default 20; 0
 * skips timing), TOKENS the prefill length (default 512).
 * Exit status: 0 when the two-GPU result matches, 1 on a mismatch or any
 * failure, 2 when NCCL or two usable GPUs are missing.
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime under -std=c99 */
#include "nccl_loader.h"
#include "tp_shard.h"

#include <kaio/kaio.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NRANKS 2
#define WARMUP 3
#define MAX_REPS 1000

/* Llama-2-7B's widths with grouped-query attention (8 kv heads); the token
 * count may be set on the command line. */
static tp_dims dims = {512, 4096, 11008, 32, 8, 128};
#define MAX_TOKENS 16384

/* Tolerance, relative to the reference output's RMS; the reasoning is in
 * README.md ("Tolerance"). */
#define TOL 1e-2

static uint16_t f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    u += 0x7FFFu + ((u >> 16) & 1u); /* round to nearest even; no NaNs here */
    return (uint16_t)(u >> 16);
}

/* Deterministic uniform values in [offset - scale, offset + scale], bf16. */
static uint16_t *random_bf16(size_t n, uint32_t seed, float offset, float scale) {
    uint16_t *v = malloc(n * sizeof *v);
    size_t i;
    if (v == NULL) return NULL;
    for (i = 0; i < n; ++i) {
        seed = seed * 1664525u + 1013904223u;
        v[i] = f32_to_bf16(offset + scale * (float)(2.0 * ((seed >> 8) / 16777216.0) - 1.0));
    }
    return v;
}

/* Unit-variance activations: uniform weights of variance 1 / fan_in. */
static int make_model(tp_host_model *m, uint16_t **owned) {
    const tp_dims *d = &dims;
    const size_t H = (size_t)d->hidden, I = (size_t)d->inter, D = (size_t)d->head_dim;
    const size_t qkv = ((size_t)d->heads_q + 2 * (size_t)d->heads_kv) * D;
    const size_t qd = (size_t)d->heads_q * D;
    const float sqrt3 = 1.7320508f;
    int i;
    owned[0] = random_bf16((size_t)d->tokens * H, 1u, 0.0f, sqrt3);
    owned[1] = random_bf16(H, 2u, 1.0f, 0.1f);
    owned[2] = random_bf16(H, 3u, 1.0f, 0.1f);
    owned[3] = random_bf16(qkv * H, 4u, 0.0f, sqrt3 / sqrtf((float)H));
    owned[4] = random_bf16(H * qd, 5u, 0.0f, sqrt3 / sqrtf((float)qd));
    owned[5] = random_bf16(I * H, 6u, 0.0f, sqrt3 / sqrtf((float)H));
    owned[6] = random_bf16(I * H, 7u, 0.0f, sqrt3 / sqrtf((float)H));
    owned[7] = random_bf16(H * I, 8u, 0.0f, sqrt3 / sqrtf((float)I));
    for (i = 0; i < 8; ++i)
        if (owned[i] == NULL) return -1;
    m->x = owned[0];
    m->attn_norm = owned[1];
    m->mlp_norm = owned[2];
    m->w_qkv = owned[3];
    m->w_o = owned[4];
    m->w_gate = owned[5];
    m->w_up = owned[6];
    m->w_down = owned[7];
    return 0;
}

/* 1 when at least two devices of compute capability 8.0+ are usable, else
 * says why on stderr and returns 0. */
static int have_two_devices(void) {
    kaio_probe_info probe;
    int32_t i;
    memset(&probe, 0, sizeof probe);
    probe.struct_size = sizeof probe;
    if (kaio_probe(&probe) != KAIO_OK || probe.driver_status != KAIO_OK) {
        fprintf(stderr, "tensor_parallel: no usable CUDA device: %s\n",
                probe.message[0] ? probe.message : kaio_last_error());
        return 0;
    }
    if (probe.device_count < NRANKS) {
        fprintf(stderr, "tensor_parallel: needs %d CUDA devices, the driver reports %d\n",
                NRANKS, probe.device_count);
        return 0;
    }
    for (i = 0; i < NRANKS; ++i) {
        kaio_device *dev = NULL;
        kaio_device_info info;
        memset(&info, 0, sizeof info);
        info.struct_size = sizeof info;
        if (kaio_device_open(&dev, i) != KAIO_OK || kaio_device_get_info(dev, &info) != KAIO_OK) {
            fprintf(stderr, "tensor_parallel: device %d: %s\n", i, kaio_last_error());
            kaio_device_destroy(dev);
            return 0;
        }
        kaio_device_destroy(dev);
        printf("tensor_parallel: device %d: %s, compute capability %d.%d\n", i, info.name,
               info.cc_major, info.cc_minor);
        if (info.cc_major < 8) {
            fprintf(stderr, "tensor_parallel: no usable CUDA device: the ops need compute "
                            "capability 8.0+, device %d has %d.%d\n", i, info.cc_major,
                    info.cc_minor);
            return 0;
        }
    }
    return 1;
}

/* Sums one block's partial outputs over the ranks, in place, on each rank's
 * kaio stream. */
static int all_reduce(const tp_nccl *nccl, tp_nccl_comm *comms, tp_shard *sh, int mlp) {
    const size_t count = (size_t)(dims.tokens * dims.hidden);
    tp_nccl_result r = nccl->group_start();
    int i;
    for (i = 0; i < NRANKS && r == TP_NCCL_SUCCESS; ++i) {
        void *p = (void *)(uintptr_t)kaio_buffer_device_ptr(mlp ? sh[i].y_mlp : sh[i].y_attn);
        r = nccl->all_reduce(p, p, count, TP_NCCL_FLOAT32, TP_NCCL_SUM, comms[i],
                             kaio_stream_native(sh[i].stream));
    }
    /* End the group even after a failed call, so NCCL's group state is reset. */
    {
        tp_nccl_result e = nccl->group_end();
        if (r == TP_NCCL_SUCCESS) r = e;
    }
    if (r != TP_NCCL_SUCCESS) {
        fprintf(stderr, "tensor_parallel: ncclAllReduce (%s block) failed: %s\n",
                mlp ? "MLP" : "attention", nccl->get_error_string(r));
        return -1;
    }
    return 0;
}

/* One step, both blocks, on n shards (n = 1: no all-reduce), waiting for it. */
static int step(tp_shard *sh, int n, const tp_nccl *nccl, tp_nccl_comm *comms) {
    int i;
    for (i = 0; i < n; ++i)
        if (tp_shard_attention(&sh[i], &dims) != KAIO_OK) return -1;
    if (n > 1 && all_reduce(nccl, comms, sh, 0) != 0) return -1;
    for (i = 0; i < n; ++i)
        if (tp_shard_mlp(&sh[i], &dims) != KAIO_OK) return -1;
    if (n > 1 && all_reduce(nccl, comms, sh, 1) != 0) return -1;
    for (i = 0; i < n; ++i) {
        kaio_status s = kaio_stream_synchronize(sh[i].stream);
        if (s != KAIO_OK) {
            fprintf(stderr, "tensor_parallel: kaio_stream_synchronize (device %d) failed: %s: "
                            "%s\n", i, kaio_status_name(s), kaio_last_error());
            return -1;
        }
    }
    return 0;
}

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec * 1e-6;
}

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Median wall-clock time of one step (enqueue to both streams drained). */
static double median_step_ms(tp_shard *sh, int n, const tp_nccl *nccl, tp_nccl_comm *comms,
                             int reps) {
    double t[MAX_REPS];
    int i;
    for (i = 0; i < WARMUP; ++i)
        if (step(sh, n, nccl, comms) != 0) return -1.0;
    for (i = 0; i < reps; ++i) {
        double t0 = now_ms();
        if (step(sh, n, nccl, comms) != 0) return -1.0;
        t[i] = now_ms() - t0;
    }
    qsort(t, (size_t)reps, sizeof t[0], cmp_double);
    return t[reps / 2];
}

static int read_f32(kaio_buffer *b, float *host, size_t n) {
    kaio_status s = kaio_buffer_read(b, 0, host, n * sizeof *host);
    if (s != KAIO_OK) {
        fprintf(stderr, "tensor_parallel: kaio_buffer_read failed: %s: %s\n",
                kaio_status_name(s), kaio_last_error());
        return -1;
    }
    return 0;
}

/* Compares the two-GPU output of one block (read from each rank) with the
 * one-GPU output; prints the errors; returns 1 when within TOL. */
static int check_block(const char *name, kaio_buffer *ref_buf, tp_shard *sh, int mlp,
                       float *ref, float *got0, float *got1) {
    const size_t n = (size_t)(dims.tokens * dims.hidden);
    double sum_sq = 0.0, max_abs = 0.0, rms;
    size_t i, equal = 0, worst = 0;
    int finite = 1, ranks_equal;
    if (read_f32(ref_buf, ref, n) || read_f32(mlp ? sh[0].y_mlp : sh[0].y_attn, got0, n) ||
        read_f32(mlp ? sh[1].y_mlp : sh[1].y_attn, got1, n))
        return 0;
    ranks_equal = memcmp(got0, got1, n * sizeof *got0) == 0;
    for (i = 0; i < n; ++i) {
        double e0 = fabs((double)got0[i] - ref[i]), e1 = fabs((double)got1[i] - ref[i]);
        double e = e0 > e1 ? e0 : e1;
        if (!isfinite(ref[i]) || !(e == e)) finite = 0; /* NaN or inf anywhere fails */
        sum_sq += (double)ref[i] * ref[i];
        if (e > max_abs) { max_abs = e; worst = i; }
        equal += got0[i] == ref[i];
    }
    rms = sqrt(sum_sq / (double)n);
    printf("tensor_parallel: %-9s block: max |2 GPUs - 1 GPU| = %.3g (at token %zu, col %zu: "
           "%.6g vs %.6g), rms(1 GPU) = %.4g, max/rms = %.3g (tolerance %.0e), %.1f%% "
           "bitwise equal, ranks %s\n", name, max_abs, worst / (size_t)dims.hidden,
           worst % (size_t)dims.hidden, got0[worst], ref[worst], rms, max_abs / rms, TOL,
           100.0 * (double)equal / (double)n, ranks_equal ? "bitwise equal" : "DIFFER");
    if (!(rms > 0.0)) printf("tensor_parallel: the one-GPU %s output is all zero\n", name);
    return finite && rms > 0.0 && max_abs <= TOL * rms;
}

/* A whole decimal argument in [lo, hi]; 0 when it is one. */
static int parse_long(const char *text, long lo, long hi, long *out) {
    char *end = NULL;
    long v = strtol(text, &end, 10);
    if (end == text || *end != '\0' || v < lo || v > hi) {
        fprintf(stderr, "tensor_parallel: \"%s\" is not a number from %ld to %ld\n", text,
                lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

int main(int argc, char **argv) {
    size_t out_elems;
    int exit_code = 1, ok, i;
    int devlist[NRANKS] = {0, 1};
    char err[1024];
    tp_nccl nccl;
    tp_nccl_comm comms[NRANKS] = {NULL, NULL};
    tp_host_model model;
    uint16_t *owned[8] = {NULL};
    tp_shard ref, tp[NRANKS];
    float *ref_out = NULL, *got0 = NULL, *got1 = NULL;
    double ms1, ms2;
    tp_nccl_result r;
    long reps = 20, tokens = dims.tokens;

    if (argc > 3 || (argc > 1 && parse_long(argv[1], 0, MAX_REPS, &reps) != 0) ||
        (argc > 2 && parse_long(argv[2], 1, MAX_TOKENS, &tokens) != 0)) {
        fprintf(stderr, "usage: tensor_parallel [REPS [TOKENS]]: REPS, the timed steps, from 0 "
                        "(no timing) to %d (default 20); TOKENS, the prefill length, from 1 to "
                        "%d (default 512)\n", MAX_REPS, MAX_TOKENS);
        return 1;
    }
    dims.tokens = tokens;
    out_elems = (size_t)(dims.tokens * dims.hidden);
    memset(&nccl, 0, sizeof nccl);
    memset(&ref, 0, sizeof ref);
    memset(tp, 0, sizeof tp);
    if (!have_two_devices()) return 2;
    if (tp_nccl_load(&nccl, err, sizeof err) != 0) {
        fprintf(stderr, "tensor_parallel: %s\n", err);
        return 2;
    }
    printf("tensor_parallel: NCCL %d.%d.%d; T %lld tokens (causal prefill), H %lld, I %lld, "
           "%lld q / %lld kv heads of %lld, bf16\n", nccl.version / 10000,
           nccl.version / 100 % 100, nccl.version % 100, (long long)dims.tokens,
           (long long)dims.hidden, (long long)dims.inter, (long long)dims.heads_q,
           (long long)dims.heads_kv, (long long)dims.head_dim);

    ref_out = malloc(out_elems * sizeof *ref_out);
    got0 = malloc(out_elems * sizeof *got0);
    got1 = malloc(out_elems * sizeof *got1);
    if (ref_out == NULL || got0 == NULL || got1 == NULL || make_model(&model, owned) != 0) {
        fprintf(stderr, "tensor_parallel: out of host memory\n");
        goto cleanup;
    }
    if (tp_shard_create(&ref, 0, 0, 1, &dims, &model) != KAIO_OK) goto cleanup;
    for (i = 0; i < NRANKS; ++i)
        if (tp_shard_create(&tp[i], devlist[i], i, NRANKS, &dims, &model) != KAIO_OK)
            goto cleanup;
    r = nccl.comm_init_all(comms, NRANKS, devlist);
    if (r != TP_NCCL_SUCCESS) {
        fprintf(stderr, "tensor_parallel: ncclCommInitAll failed: %s\n",
                nccl.get_error_string(r));
        comms[0] = comms[1] = NULL;
        goto cleanup;
    }

    if (step(&ref, 1, &nccl, NULL) != 0 || step(tp, NRANKS, &nccl, comms) != 0) goto cleanup;
    ok = check_block("attention", ref.y_attn, tp, 0, ref_out, got0, got1);
    ok &= check_block("MLP", ref.y_mlp, tp, 1, ref_out, got0, got1);

    if (reps > 0) {
        ms1 = median_step_ms(&ref, 1, &nccl, NULL, (int)reps);
        ms2 = median_step_ms(tp, NRANKS, &nccl, comms, (int)reps);
        if (ms1 < 0 || ms2 < 0) goto cleanup;
        printf("tensor_parallel: one step (attention + MLP blocks), wall clock from enqueue "
               "to streams drained, median of %ld: 1 GPU %.3f ms, 2 GPUs %.3f ms (x%.2f)\n",
               reps, ms1, ms2, ms1 / ms2);
    }
    printf("tensor_parallel: %s\n", ok ? "PASS" : "FAIL: the two-GPU result differs");
    exit_code = ok ? 0 : 1;

cleanup:
    for (i = 0; i < NRANKS; ++i)
        if (comms[i] != NULL) nccl.comm_destroy(comms[i]);
    for (i = 0; i < NRANKS; ++i) tp_shard_destroy(&tp[i]);
    tp_shard_destroy(&ref);
    tp_nccl_unload(&nccl);
    for (i = 0; i < 8; ++i) free(owned[i]);
    free(ref_out);
    free(got0);
    free(got1);
    return exit_code;
}
