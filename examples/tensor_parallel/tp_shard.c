#include "tp_shard.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The status name is fetched before kaio_last_error(), whose text lasts only
 * until the next kaio call on this thread. */
#define CHECK(call)                                                                     \
    do {                                                                                \
        kaio_status check_status_ = (call);                                             \
        if (check_status_ != KAIO_OK) {                                                 \
            const char *check_name_ = kaio_status_name(check_status_);                  \
            fprintf(stderr, "tensor_parallel: %s failed: %s: %s\n", #call, check_name_, \
                    kaio_last_error());                                                 \
            return check_status_;                                                       \
        }                                                                               \
    } while (0)

#define BF16 KAIO_DTYPE_BF16

/* Copies rows [row0, row0 + nrows), columns [col0, col0 + ncols) of a
 * row-major matrix with `cols` columns to dst, contiguous. */
static uint16_t *gather(uint16_t *dst, const uint16_t *src, int64_t cols, int64_t row0,
                        int64_t nrows, int64_t col0, int64_t ncols) {
    int64_t r;
    for (r = 0; r < nrows; ++r)
        memcpy(dst + r * ncols, src + (row0 + r) * cols + col0, (size_t)ncols * sizeof *dst);
    return dst + nrows * ncols;
}

static kaio_status upload(kaio_buffer **out, kaio_device *dev, const void *host, size_t bytes) {
    CHECK(kaio_buffer_create(out, dev, bytes));
    CHECK(kaio_buffer_write(*out, 0, host, bytes));
    return KAIO_OK;
}

/* Gathers the block [row0, +nrows) × [col0, +ncols) and uploads it. */
static kaio_status upload_slice(kaio_buffer **out, kaio_device *dev, const uint16_t *src,
                                int64_t cols, int64_t row0, int64_t nrows, int64_t col0,
                                int64_t ncols) {
    size_t bytes = (size_t)(nrows * ncols) * sizeof(uint16_t);
    uint16_t *tmp = malloc(bytes);
    kaio_status s;
    if (tmp == NULL) {
        fprintf(stderr, "tensor_parallel: out of host memory (%zu bytes)\n", bytes);
        return KAIO_ERROR_OUT_OF_HOST_MEMORY;
    }
    gather(tmp, src, cols, row0, nrows, col0, ncols);
    s = upload(out, dev, tmp, bytes);
    free(tmp);
    return s;
}

/* This shard's rows of W_qkv: its q heads, then its k heads, then its v
 * heads, so its projection output is [q | k | v] like the full one. */
static kaio_status upload_qkv(tp_shard *s, int rank, const tp_dims *d, const uint16_t *w_qkv) {
    const int64_t D = d->head_dim, H = d->hidden;
    const int64_t rows = (s->heads_q + 2 * s->heads_kv) * D;
    size_t bytes = (size_t)(rows * H) * sizeof(uint16_t);
    uint16_t *tmp = malloc(bytes), *end;
    kaio_status st;
    if (tmp == NULL) {
        fprintf(stderr, "tensor_parallel: out of host memory (%zu bytes)\n", bytes);
        return KAIO_ERROR_OUT_OF_HOST_MEMORY;
    }
    end = gather(tmp, w_qkv, H, rank * s->heads_q * D, s->heads_q * D, 0, H);
    end = gather(end, w_qkv, H, (d->heads_q + rank * s->heads_kv) * D, s->heads_kv * D, 0, H);
    gather(end, w_qkv, H, (d->heads_q + d->heads_kv + rank * s->heads_kv) * D,
           s->heads_kv * D, 0, H);
    st = upload(&s->w_qkv, s->device, tmp, bytes);
    free(tmp);
    return st;
}

kaio_status tp_shard_create(tp_shard *s, int32_t ordinal, int rank, int n, const tp_dims *d,
                            const tp_host_model *m) {
    const int64_t T = d->tokens, H = d->hidden, D = d->head_dim;
    int32_t *pos;
    int64_t t;
    kaio_status st;

    memset(s, 0, sizeof *s);
    s->heads_q = d->heads_q / n;
    s->heads_kv = d->heads_kv / n;
    s->inter = d->inter / n;
    CHECK(kaio_device_open(&s->device, ordinal));
    CHECK(kaio_stream_create(&s->stream, s->device, KAIO_STREAM_NON_BLOCKING));

    CHECK(upload(&s->x, s->device, m->x, (size_t)(T * H) * 2));
    CHECK(upload(&s->attn_norm, s->device, m->attn_norm, (size_t)H * 2));
    CHECK(upload(&s->mlp_norm, s->device, m->mlp_norm, (size_t)H * 2));
    pos = malloc((size_t)T * sizeof *pos);
    if (pos == NULL) {
        fprintf(stderr, "tensor_parallel: out of host memory\n");
        return KAIO_ERROR_OUT_OF_HOST_MEMORY;
    }
    for (t = 0; t < T; ++t) pos[t] = (int32_t)t;
    st = upload(&s->positions, s->device, pos, (size_t)T * sizeof *pos);
    free(pos);
    if (st != KAIO_OK) return st;

    CHECK(upload_qkv(s, rank, d, m->w_qkv));
    CHECK(upload_slice(&s->w_o, s->device, m->w_o, d->heads_q * D, 0, H,
                       rank * s->heads_q * D, s->heads_q * D));
    CHECK(upload_slice(&s->w_gate, s->device, m->w_gate, H, rank * s->inter, s->inter, 0, H));
    CHECK(upload_slice(&s->w_up, s->device, m->w_up, H, rank * s->inter, s->inter, 0, H));
    CHECK(upload_slice(&s->w_down, s->device, m->w_down, d->inter, 0, H, rank * s->inter,
                       s->inter));

    CHECK(kaio_buffer_create(&s->xn, s->device, (size_t)(T * H) * 2));
    CHECK(kaio_buffer_create(&s->qkv, s->device,
                             (size_t)(T * (s->heads_q + 2 * s->heads_kv) * D) * 2));
    CHECK(kaio_buffer_create(&s->attn, s->device, (size_t)(T * s->heads_q * D) * 2));
    CHECK(kaio_buffer_create(&s->gate, s->device, (size_t)(T * s->inter) * 2));
    CHECK(kaio_buffer_create(&s->up, s->device, (size_t)(T * s->inter) * 2));
    CHECK(kaio_buffer_create(&s->y_attn, s->device, (size_t)(T * H) * 4));
    CHECK(kaio_buffer_create(&s->y_mlp, s->device, (size_t)(T * H) * 4));
    return KAIO_OK;
}

void tp_shard_destroy(tp_shard *s) {
    kaio_buffer *bufs[] = {s->x,     s->attn_norm, s->mlp_norm, s->positions, s->w_qkv,
                           s->w_o,   s->w_gate,    s->w_up,     s->w_down,    s->xn,
                           s->qkv,   s->attn,      s->gate,     s->up,        s->y_attn,
                           s->y_mlp};
    size_t i;
    for (i = 0; i < sizeof bufs / sizeof bufs[0]; ++i) kaio_buffer_destroy(bufs[i]);
    kaio_stream_destroy(s->stream);
    kaio_device_destroy(s->device);
    memset(s, 0, sizeof *s);
}

/* C (f32 or bf16) = A · Bᵀ, B an nn.Linear weight [N, K]. The one-shot call
 * never splits K, so each output is one f32 sum in the kernel's order. */
static kaio_status linear(kaio_stream *stream, const kaio_tensor *a, const kaio_tensor *w,
                          const kaio_tensor *c) {
    kaio_matmul_desc desc;
    CHECK(kaio_matmul_desc_init(&desc, sizeof desc));
    desc.in_dtype = BF16;
    desc.out_dtype = c->dtype;
    desc.trans_b = KAIO_TRANS_T;
    CHECK(kaio_matmul(stream, a, w, c, &desc));
    return KAIO_OK;
}

/* A column range [col0, col0 + cols) of a row-major [rows, stride] buffer. */
static kaio_tensor columns(kaio_buffer *buf, int64_t rows, int64_t stride, int64_t col0,
                           int64_t cols) {
    kaio_tensor t = kaio_tensor_2d(buf, BF16, rows, cols);
    t.offset_bytes = (uint64_t)col0 * 2;
    t.row_stride = stride;
    return t;
}

kaio_status tp_shard_attention(tp_shard *s, const tp_dims *d) {
    const int64_t T = d->tokens, H = d->hidden, D = d->head_dim;
    const int64_t qkv_cols = (s->heads_q + 2 * s->heads_kv) * D;
    kaio_tensor x = kaio_tensor_2d(s->x, BF16, T, H);
    kaio_tensor norm_w = kaio_tensor_2d(s->attn_norm, BF16, 1, H);
    kaio_tensor xn = kaio_tensor_2d(s->xn, BF16, T, H);
    kaio_tensor w_qkv = kaio_tensor_2d(s->w_qkv, BF16, qkv_cols, H);
    kaio_tensor qkv = kaio_tensor_2d(s->qkv, BF16, T, qkv_cols);
    kaio_tensor q = columns(s->qkv, T, qkv_cols, 0, s->heads_q * D);
    kaio_tensor k = columns(s->qkv, T, qkv_cols, s->heads_q * D, s->heads_kv * D);
    kaio_tensor v = columns(s->qkv, T, qkv_cols, (s->heads_q + s->heads_kv) * D,
                            s->heads_kv * D);
    kaio_tensor pos = kaio_tensor_2d(s->positions, KAIO_DTYPE_I32, 1, T);
    kaio_tensor o = kaio_tensor_2d(s->attn, BF16, T, s->heads_q * D);
    kaio_tensor w_o = kaio_tensor_2d(s->w_o, BF16, H, s->heads_q * D);
    kaio_tensor y = kaio_tensor_2d(s->y_attn, KAIO_DTYPE_F32, T, H);
    kaio_rope_desc rope;
    kaio_attention_desc attn;

    CHECK(kaio_rmsnorm(s->stream, &x, &norm_w, &xn, 1e-5f));
    CHECK(linear(s->stream, &xn, &w_qkv, &qkv));

    CHECK(kaio_rope_desc_init(&rope, sizeof rope));
    rope.dtype = BF16;
    rope.heads_q = s->heads_q;
    rope.heads_k = s->heads_kv;
    rope.head_dim = D;
    CHECK(kaio_rope(s->stream, &q, &k, &pos, &rope));

    /* Heads are independent, so this shard's heads see exactly what they
     * see in the full model: query head h reads kv head h / (Hq / Hkv),
     * and the split keeps whole groups together. */
    CHECK(kaio_attention_desc_init(&attn, sizeof attn));
    attn.dtype = BF16;
    attn.mask = KAIO_ATTENTION_CAUSAL;
    attn.batch = 1;
    attn.seq_q = T;
    attn.seq_k = T;
    attn.heads_q = s->heads_q;
    attn.heads_kv = s->heads_kv;
    attn.head_dim = D;
    CHECK(kaio_attention(s->stream, &q, &k, &v, &o, NULL, &attn));
    CHECK(linear(s->stream, &o, &w_o, &y));
    return KAIO_OK;
}

kaio_status tp_shard_mlp(tp_shard *s, const tp_dims *d) {
    const int64_t T = d->tokens, H = d->hidden;
    kaio_tensor x = kaio_tensor_2d(s->x, BF16, T, H);
    kaio_tensor norm_w = kaio_tensor_2d(s->mlp_norm, BF16, 1, H);
    kaio_tensor xn = kaio_tensor_2d(s->xn, BF16, T, H);
    kaio_tensor w_gate = kaio_tensor_2d(s->w_gate, BF16, s->inter, H);
    kaio_tensor w_up = kaio_tensor_2d(s->w_up, BF16, s->inter, H);
    kaio_tensor w_down = kaio_tensor_2d(s->w_down, BF16, H, s->inter);
    kaio_tensor gate = kaio_tensor_2d(s->gate, BF16, T, s->inter);
    kaio_tensor up = kaio_tensor_2d(s->up, BF16, T, s->inter);
    kaio_tensor y = kaio_tensor_2d(s->y_mlp, KAIO_DTYPE_F32, T, H);

    CHECK(kaio_rmsnorm(s->stream, &x, &norm_w, &xn, 1e-5f));
    CHECK(linear(s->stream, &xn, &w_gate, &gate));
    CHECK(linear(s->stream, &xn, &w_up, &up));
    CHECK(kaio_silu_gate(s->stream, &gate, &up, &gate)); /* in place */
    CHECK(linear(s->stream, &gate, &w_down, &y));
    return KAIO_OK;
}
