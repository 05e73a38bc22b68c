/* C shims for the cgo package: each calls one kaio function and, when it
 * fails, copies the thread's last error in the same C call. A goroutine can
 * move to another OS thread between two cgo calls, and kaio's last error is
 * per OS thread, so reading it in a second cgo call could read another
 * call's text (golang-fips/openssl#231). Included by every file of the
 * package; everything is static inline. */
#ifndef KAIO_GO_SHIM_H
#define KAIO_GO_SHIM_H

#include <stdlib.h>
#include <kaio/kaio.h>

#if KAIO_VERSION_MAJOR != 0 || KAIO_VERSION_MINOR != 1
#error "kaio.dev/kaio is written against the libkaio 0.1 ABI"
#endif

/* The captured error: msg is malloc'ed (the Go side frees it), NULL on success. */
typedef struct kg_err {
    char *msg;
    int32_t driver_code;
} kg_err;

static inline kaio_status kg_capture(kaio_status s, kg_err *e) {
    if (s != KAIO_OK && e) {
        size_t n = kaio_last_error_copy(NULL, 0);
        e->msg = (char *)malloc(n + 1);
        if (e->msg) kaio_last_error_copy(e->msg, n + 1);
        e->driver_code = kaio_last_error_driver_code();
    }
    return s;
}

#define KG(call) return kg_capture((call), e)

static inline uint32_t kg_compiled_version(void) { return KAIO_VERSION_NUMBER; }

static inline kaio_status kg_probe(kaio_probe_info *i, kg_err *e) { KG(kaio_probe(i)); }
static inline kaio_status kg_device_count(int32_t *n, kg_err *e) { KG(kaio_device_count(n)); }
static inline kaio_status kg_device_open(kaio_device **o, int32_t ordinal, kg_err *e) { KG(kaio_device_open(o, ordinal)); }
static inline kaio_status kg_device_get_info(const kaio_device *d, kaio_device_info *i, kg_err *e) { KG(kaio_device_get_info(d, i)); }

static inline kaio_status kg_stream_create(kaio_stream **o, kaio_device *d, uint32_t flags, kg_err *e) { KG(kaio_stream_create(o, d, flags)); }
static inline kaio_status kg_stream_wrap(kaio_stream **o, kaio_device *d, void *cu, kg_err *e) { KG(kaio_stream_wrap(o, d, cu)); }
static inline kaio_status kg_stream_synchronize(kaio_stream *s, kg_err *e) { KG(kaio_stream_synchronize(s)); }
static inline kaio_status kg_stream_wait_event(kaio_stream *s, kaio_event *ev, kg_err *e) { KG(kaio_stream_wait_event(s, ev)); }

static inline kaio_status kg_event_create(kaio_event **o, kaio_device *d, uint32_t flags, kg_err *e) { KG(kaio_event_create(o, d, flags)); }
static inline kaio_status kg_event_record(kaio_event *ev, kaio_stream *s, kg_err *e) { KG(kaio_event_record(ev, s)); }
static inline kaio_status kg_event_synchronize(kaio_event *ev, kg_err *e) { KG(kaio_event_synchronize(ev)); }
static inline kaio_status kg_event_elapsed_ms(float *ms, kaio_event *a, kaio_event *b, kg_err *e) { KG(kaio_event_elapsed_ms(ms, a, b)); }

static inline kaio_status kg_buffer_create(kaio_buffer **o, kaio_device *d, uint64_t n, kg_err *e) { KG(kaio_buffer_create(o, d, n)); }
static inline kaio_status kg_buffer_wrap(kaio_buffer **o, kaio_device *d, uint64_t p, uint64_t n, kg_err *e) { KG(kaio_buffer_wrap(o, d, p, n)); }
static inline kaio_status kg_buffer_write(kaio_buffer *b, uint64_t off, const void *src, uint64_t n, kg_err *e) { KG(kaio_buffer_write(b, off, src, n)); }
static inline kaio_status kg_buffer_read(const kaio_buffer *b, uint64_t off, void *dst, uint64_t n, kg_err *e) { KG(kaio_buffer_read(b, off, dst, n)); }
static inline kaio_status kg_buffer_write_async(kaio_buffer *b, kaio_stream *s, uint64_t off, const void *src, uint64_t n, kg_err *e) { KG(kaio_buffer_write_async(b, s, off, src, n)); }
static inline kaio_status kg_buffer_read_async(const kaio_buffer *b, kaio_stream *s, uint64_t off, void *dst, uint64_t n, kg_err *e) { KG(kaio_buffer_read_async(b, s, off, dst, n)); }
static inline kaio_status kg_buffer_memset(kaio_buffer *b, kaio_stream *s, uint64_t off, uint8_t v, uint64_t n, kg_err *e) { KG(kaio_buffer_memset(b, s, off, v, n)); }
static inline kaio_status kg_buffer_copy(kaio_buffer *d, uint64_t doff, const kaio_buffer *s, uint64_t soff, uint64_t n, kaio_stream *st, kg_err *e) { KG(kaio_buffer_copy(d, doff, s, soff, n, st)); }

static inline kaio_status kg_op_create_silu_gate(kaio_op **o, kaio_device *d, kaio_dtype t, int64_t r, int64_t c, kg_err *e) { KG(kaio_op_create_silu_gate(o, d, t, r, c)); }
static inline kaio_status kg_op_create_gelu(kaio_op **o, kaio_device *d, kaio_dtype t, int64_t r, int64_t c, kaio_gelu_mode m, kg_err *e) { KG(kaio_op_create_gelu(o, d, t, r, c, m)); }
static inline kaio_status kg_op_create_rmsnorm(kaio_op **o, kaio_device *d, kaio_dtype t, int64_t r, int64_t c, float eps, kg_err *e) { KG(kaio_op_create_rmsnorm(o, d, t, r, c, eps)); }
static inline kaio_status kg_op_create_softmax(kaio_op **o, kaio_device *d, kaio_dtype t, int64_t r, int64_t c, kg_err *e) { KG(kaio_op_create_softmax(o, d, t, r, c)); }
static inline kaio_status kg_op_launch(const kaio_op *op, kaio_stream *s, const kaio_tensor *t, size_t n, kg_err *e) { KG(kaio_op_launch(op, s, t, n)); }
static inline kaio_status kg_silu_gate(kaio_stream *s, const kaio_tensor *x, const kaio_tensor *g, const kaio_tensor *o, kg_err *e) { KG(kaio_silu_gate(s, x, g, o)); }
static inline kaio_status kg_gelu(kaio_stream *s, const kaio_tensor *x, const kaio_tensor *o, kaio_gelu_mode m, kg_err *e) { KG(kaio_gelu(s, x, o, m)); }
static inline kaio_status kg_rmsnorm(kaio_stream *s, const kaio_tensor *x, const kaio_tensor *w, const kaio_tensor *o, float eps, kg_err *e) { KG(kaio_rmsnorm(s, x, w, o, eps)); }
static inline kaio_status kg_softmax(kaio_stream *s, const kaio_tensor *x, const kaio_tensor *o, kg_err *e) { KG(kaio_softmax(s, x, o)); }

static inline kaio_status kg_op_create_kv_cache_write(kaio_op **o, kaio_device *d, kaio_dtype t, int64_t n, int64_t w, int64_t r, kg_err *e) { KG(kaio_op_create_kv_cache_write(o, d, t, n, w, r)); }
static inline kaio_status kg_kv_cache_write(kaio_stream *s, const kaio_tensor *k, const kaio_tensor *v, const kaio_tensor *slots, const kaio_tensor *kc, const kaio_tensor *vc, kg_err *e) { KG(kaio_kv_cache_write(s, k, v, slots, kc, vc)); }

static inline kaio_status kg_matmul_desc_init(kaio_matmul_desc *d, kg_err *e) { KG(kaio_matmul_desc_init(d, sizeof *d)); }
static inline kaio_status kg_op_create_matmul(kaio_op **o, kaio_device *d, const kaio_matmul_desc *m, kg_err *e) { KG(kaio_op_create_matmul(o, d, m)); }
static inline kaio_status kg_matmul(kaio_stream *s, const kaio_tensor *a, const kaio_tensor *b, const kaio_tensor *c, const kaio_matmul_desc *m, kg_err *e) { KG(kaio_matmul(s, a, b, c, m)); }
/* kind: 0 _tc, 1 _tc_async, 2 _tc_bf16, 3 _tc_bf16_async (MatmulTCKind in Go). */
static inline kaio_status kg_matmul_tc(int kind, kaio_stream *s, const kaio_tensor *a, const kaio_tensor *b, const kaio_tensor *c, kg_err *e) {
    switch (kind) {
    case 0: KG(kaio_matmul_tc(s, a, b, c));
    case 1: KG(kaio_matmul_tc_async(s, a, b, c));
    case 2: KG(kaio_matmul_tc_bf16(s, a, b, c));
    default: KG(kaio_matmul_tc_bf16_async(s, a, b, c));
    }
}
static inline kaio_status kg_op_create_matmul_tc(int kind, kaio_op **o, kaio_device *d, int64_t m, int64_t n, int64_t k, kg_err *e) {
    switch (kind) {
    case 0: KG(kaio_op_create_matmul_tc(o, d, m, n, k));
    case 1: KG(kaio_op_create_matmul_tc_async(o, d, m, n, k));
    case 2: KG(kaio_op_create_matmul_tc_bf16(o, d, m, n, k));
    default: KG(kaio_op_create_matmul_tc_bf16_async(o, d, m, n, k));
    }
}
static inline kaio_status kg_matmul_backward_desc_init(kaio_matmul_backward_desc *d, kg_err *e) { KG(kaio_matmul_backward_desc_init(d, sizeof *d)); }
static inline kaio_status kg_op_create_matmul_backward(kaio_op **o, kaio_device *d, const kaio_matmul_backward_desc *m, kg_err *e) { KG(kaio_op_create_matmul_backward(o, d, m)); }
static inline kaio_status kg_matmul_tc_backward(kaio_stream *s, const kaio_tensor *dc, const kaio_tensor *a, const kaio_tensor *b, const kaio_tensor *da, const kaio_tensor *db, kg_err *e) { KG(kaio_matmul_tc_backward(s, dc, a, b, da, db)); }

static inline kaio_status kg_module_load_ptx(kaio_module **o, kaio_device *d, const char *ptx, kg_err *e) { KG(kaio_module_load_ptx(o, d, ptx)); }
static inline kaio_status kg_module_get_kernel(kaio_kernel **o, kaio_module *m, const char *name, kg_err *e) { KG(kaio_module_get_kernel(o, m, name)); }
static inline kaio_status kg_kernel_get_attributes(const kaio_kernel *k, kaio_kernel_attributes *a, kg_err *e) { KG(kaio_kernel_get_attributes(k, a)); }
static inline kaio_status kg_kernel_launch(const kaio_kernel *k, kaio_stream *s, const kaio_launch_config *c, const void *args, size_t n, kg_err *e) { KG(kaio_kernel_launch(k, s, c, args, n)); }

static inline kaio_status kg_op_create_quantize(kaio_op **o, kaio_device *d, kaio_quant_format f, kaio_quant_mode m, kaio_dtype t, int64_t r, int64_t c, kg_err *e) { KG(kaio_op_create_quantize(o, d, f, m, t, r, c)); }
static inline kaio_status kg_quantize(kaio_stream *s, const kaio_tensor *x, const kaio_tensor *q, kaio_quant_format f, kaio_quant_mode m, kg_err *e) { KG(kaio_quantize(s, x, q, f, m)); }
static inline kaio_status kg_op_create_dequantize(kaio_op **o, kaio_device *d, kaio_quant_format f, kaio_dtype t, int64_t r, int64_t c, kg_err *e) { KG(kaio_op_create_dequantize(o, d, f, t, r, c)); }
static inline kaio_status kg_dequantize(kaio_stream *s, const kaio_tensor *q, const kaio_tensor *y, kaio_quant_format f, kg_err *e) { KG(kaio_dequantize(s, q, y, f)); }
static inline kaio_status kg_op_create_quant_matmul(kaio_op **o, kaio_device *d, kaio_quant_format f, kaio_dtype at, kaio_dtype ot, int64_t m, int64_t n, int64_t k, kg_err *e) { KG(kaio_op_create_quant_matmul(o, d, f, at, ot, m, n, k)); }
static inline kaio_status kg_quant_matmul(kaio_stream *s, const kaio_tensor *a, const kaio_tensor *w, const kaio_tensor *c, kaio_quant_format f, kg_err *e) { KG(kaio_quant_matmul(s, a, w, c, f)); }

static inline kaio_status kg_matmul_int8_desc_init(kaio_matmul_int8_desc *d, kg_err *e) { KG(kaio_matmul_int8_desc_init(d, sizeof *d)); }
static inline kaio_status kg_op_create_matmul_int8(kaio_op **o, kaio_device *d, const kaio_matmul_int8_desc *m, kg_err *e) { KG(kaio_op_create_matmul_int8(o, d, m)); }
/* sa, sb: a view with a NULL buffer is passed as NULL (absent). */
static inline kaio_status kg_matmul_int8(kaio_stream *s, const kaio_tensor *a, const kaio_tensor *b, const kaio_tensor *sa, const kaio_tensor *sb, const kaio_tensor *c, const kaio_matmul_int8_desc *m, kg_err *e) { KG(kaio_matmul_int8(s, a, b, sa->buffer ? sa : NULL, sb->buffer ? sb : NULL, c, m)); }
static inline kaio_status kg_matmul_int4_desc_init(kaio_matmul_int4_desc *d, kg_err *e) { KG(kaio_matmul_int4_desc_init(d, sizeof *d)); }
static inline kaio_status kg_op_create_matmul_int4(kaio_op **o, kaio_device *d, const kaio_matmul_int4_desc *m, kg_err *e) { KG(kaio_op_create_matmul_int4(o, d, m)); }
static inline kaio_status kg_matmul_int4(kaio_stream *s, const kaio_tensor *a, const kaio_tensor *qw, const kaio_tensor *qz, const kaio_tensor *sc, const kaio_tensor *c, const kaio_matmul_int4_desc *m, kg_err *e) { KG(kaio_matmul_int4(s, a, qw, qz->buffer ? qz : NULL, sc, c, m)); }
static inline kaio_status kg_int4_repack_kaio(kaio_stream *s, const kaio_tensor *src, const kaio_tensor *dst, kg_err *e) { KG(kaio_int4_repack_kaio(s, src, dst)); }
static inline kaio_status kg_qkv_int4_desc_init(kaio_qkv_int4_desc *d, kg_err *e) { KG(kaio_qkv_int4_desc_init(d, sizeof *d)); }
static inline kaio_status kg_op_create_qkv_project_int4(kaio_op **o, kaio_device *d, const kaio_qkv_int4_desc *m, kg_err *e) { KG(kaio_op_create_qkv_project_int4(o, d, m)); }
static inline kaio_status kg_qkv_project_int4(kaio_stream *s, const kaio_tensor *t, size_t n, const kaio_qkv_int4_desc *m, kg_err *e) { KG(kaio_qkv_project_int4(s, t, n, m)); }
static inline kaio_status kg_qkv_int8_desc_init(kaio_qkv_int8_desc *d, kg_err *e) { KG(kaio_qkv_int8_desc_init(d, sizeof *d)); }
static inline kaio_status kg_op_create_qkv_project_int8(kaio_op **o, kaio_device *d, const kaio_qkv_int8_desc *m, kg_err *e) { KG(kaio_op_create_qkv_project_int8(o, d, m)); }
static inline kaio_status kg_qkv_project_int8(kaio_stream *s, const kaio_tensor *t, size_t n, const kaio_qkv_int8_desc *m, kg_err *e) { KG(kaio_qkv_project_int8(s, t, n, m)); }

static inline kaio_status kg_attention_desc_init(kaio_attention_desc *d, kg_err *e) { KG(kaio_attention_desc_init(d, sizeof *d)); }
static inline kaio_status kg_op_create_attention(kaio_op **o, kaio_device *d, const kaio_attention_desc *m, kg_err *e) { KG(kaio_op_create_attention(o, d, m)); }
static inline kaio_status kg_op_create_attention_backward(kaio_op **o, kaio_device *d, const kaio_attention_desc *m, kg_err *e) { KG(kaio_op_create_attention_backward(o, d, m)); }
static inline kaio_status kg_attention(kaio_stream *s, const kaio_tensor *q, const kaio_tensor *k, const kaio_tensor *v, const kaio_tensor *o, const kaio_tensor *lse, const kaio_attention_desc *m, kg_err *e) { KG(kaio_attention(s, q, k, v, o, lse->buffer ? lse : NULL, m)); }
static inline kaio_status kg_attention_tc(int causal, kaio_stream *s, const kaio_tensor *q, const kaio_tensor *k, const kaio_tensor *v, const kaio_tensor *o, kg_err *e) {
    if (causal) KG(kaio_attention_tc_causal(s, q, k, v, o));
    KG(kaio_attention_tc(s, q, k, v, o));
}
/* lse: a view with a NULL buffer means the forward without stats. */
static inline kaio_status kg_attention_flash(int causal, kaio_stream *s, const kaio_tensor *q, const kaio_tensor *k, const kaio_tensor *v, const kaio_tensor *o, const kaio_tensor *lse, kg_err *e) {
    if (lse->buffer) {
        if (causal) KG(kaio_attention_flash_causal_with_stats(s, q, k, v, o, lse));
        KG(kaio_attention_flash_with_stats(s, q, k, v, o, lse));
    }
    if (causal) KG(kaio_attention_flash_causal(s, q, k, v, o));
    KG(kaio_attention_flash(s, q, k, v, o));
}
static inline kaio_status kg_attention_flash_backward(int causal, kaio_stream *s, const kaio_tensor *dout, const kaio_tensor *q, const kaio_tensor *k, const kaio_tensor *v, const kaio_tensor *o, const kaio_tensor *lse, const kaio_tensor *dq, const kaio_tensor *dk, const kaio_tensor *dv, kg_err *e) {
    if (causal) KG(kaio_attention_flash_causal_backward(s, dout, q, k, v, o, lse, dq, dk, dv));
    KG(kaio_attention_flash_backward(s, dout, q, k, v, o, lse, dq, dk, dv));
}

static inline kaio_status kg_op_create_add_rmsnorm(kaio_op **o, kaio_device *d, kaio_dtype t, int64_t r, int64_t c, float eps, kg_err *e) { KG(kaio_op_create_add_rmsnorm(o, d, t, r, c, eps)); }
static inline kaio_status kg_op_create_layernorm(kaio_op **o, kaio_device *d, kaio_dtype t, int64_t r, int64_t c, float eps, kg_err *e) { KG(kaio_op_create_layernorm(o, d, t, r, c, eps)); }
static inline kaio_status kg_add_rmsnorm(kaio_stream *s, const kaio_tensor *x, const kaio_tensor *res, const kaio_tensor *w, const kaio_tensor *o, float eps, kg_err *e) { KG(kaio_add_rmsnorm(s, x, res, w, o, eps)); }
/* w, b: a view with a NULL buffer is passed as NULL (absent). */
static inline kaio_status kg_layernorm(kaio_stream *s, const kaio_tensor *x, const kaio_tensor *w, const kaio_tensor *b, const kaio_tensor *o, float eps, kg_err *e) { KG(kaio_layernorm(s, x, w->buffer ? w : NULL, b->buffer ? b : NULL, o, eps)); }

static inline kaio_status kg_rope_desc_init(kaio_rope_desc *d, kg_err *e) { KG(kaio_rope_desc_init(d, sizeof *d)); }
static inline kaio_status kg_op_create_rope(kaio_op **o, kaio_device *d, const kaio_rope_desc *m, kg_err *e) { KG(kaio_op_create_rope(o, d, m)); }
/* q, k: a view with a NULL buffer is passed as NULL (skipped). */
static inline kaio_status kg_rope(kaio_stream *s, const kaio_tensor *q, const kaio_tensor *k, const kaio_tensor *pos, const kaio_rope_desc *m, kg_err *e) { KG(kaio_rope(s, q->buffer ? q : NULL, k->buffer ? k : NULL, pos, m)); }
static inline kaio_status kg_op_create_rope_kv_cache_write(kaio_op **o, kaio_device *d, const kaio_rope_desc *m, kg_err *e) { KG(kaio_op_create_rope_kv_cache_write(o, d, m)); }
static inline kaio_status kg_rope_kv_cache_write(kaio_stream *s, const kaio_tensor *q, const kaio_tensor *k, const kaio_tensor *v, const kaio_tensor *pos, const kaio_tensor *slots, const kaio_tensor *kc, const kaio_tensor *vc, const kaio_rope_desc *m, kg_err *e) { KG(kaio_rope_kv_cache_write(s, q->buffer ? q : NULL, k, v->buffer ? v : NULL, pos, slots, kc, vc->buffer ? vc : NULL, m)); }

static inline kaio_status kg_attention_paged_desc_init(kaio_attention_paged_desc *d, kg_err *e) { KG(kaio_attention_paged_desc_init(d, sizeof *d)); }
static inline kaio_status kg_op_create_attention_paged(kaio_op **o, kaio_device *d, const kaio_attention_desc *m, const kaio_attention_paged_desc *p, kg_err *e) { KG(kaio_op_create_attention_paged(o, d, m, p)); }
static inline kaio_status kg_attention_paged(kaio_stream *s, const kaio_tensor *q, const kaio_tensor *kp, const kaio_tensor *vp, const kaio_tensor *bt, const kaio_tensor *sl, const kaio_tensor *o, const kaio_tensor *lse, const kaio_attention_desc *m, const kaio_attention_paged_desc *p, kg_err *e) { KG(kaio_attention_paged(s, q, kp, vp, bt, sl, o, lse->buffer ? lse : NULL, m, p)); }

static inline kaio_status kg_sampling_desc_init(kaio_sampling_desc *d, kg_err *e) { KG(kaio_sampling_desc_init(d, sizeof *d)); }
static inline kaio_status kg_op_create_sampling(kaio_op **o, kaio_device *d, const kaio_sampling_desc *m, kg_err *e) { KG(kaio_op_create_sampling(o, d, m)); }

static inline kaio_status kg_attention_varlen_desc_init(kaio_attention_varlen_desc *d, kg_err *e) { KG(kaio_attention_varlen_desc_init(d, sizeof *d)); }
static inline kaio_status kg_op_create_attention_varlen(kaio_op **o, kaio_device *d, const kaio_attention_varlen_desc *m, kg_err *e) { KG(kaio_op_create_attention_varlen(o, d, m)); }
static inline kaio_status kg_op_create_attention_varlen_backward(kaio_op **o, kaio_device *d, const kaio_attention_varlen_desc *m, kg_err *e) { KG(kaio_op_create_attention_varlen_backward(o, d, m)); }
static inline kaio_status kg_attention_varlen(kaio_stream *s, const kaio_tensor *q, const kaio_tensor *k, const kaio_tensor *v, const kaio_tensor *cq, const kaio_tensor *ck, const kaio_tensor *o, const kaio_tensor *lse, const kaio_attention_varlen_desc *m, kg_err *e) { KG(kaio_attention_varlen(s, q, k, v, cq, ck, o, lse->buffer ? lse : NULL, m)); }
static inline kaio_status kg_op_create_attention_paged_prefill(kaio_op **o, kaio_device *d, const kaio_attention_varlen_desc *m, const kaio_attention_paged_desc *p, kg_err *e) { KG(kaio_op_create_attention_paged_prefill(o, d, m, p)); }
static inline kaio_status kg_attention_paged_prefill(kaio_stream *s, const kaio_tensor *q, const kaio_tensor *kp, const kaio_tensor *vp, const kaio_tensor *cq, const kaio_tensor *bt, const kaio_tensor *sl, const kaio_tensor *o, const kaio_tensor *lse, const kaio_attention_varlen_desc *m, const kaio_attention_paged_desc *p, kg_err *e) { KG(kaio_attention_paged_prefill(s, q, kp, vp, cq, bt, sl, o, lse->buffer ? lse : NULL, m, p)); }

static inline kaio_status kg_lang_kernel_create(kaio_lang_kernel **o, kaio_device *d, const char *src, kg_err *e) { KG(kaio_lang_kernel_create(o, d, src)); }
static inline kaio_status kg_lang_compile_ptx(const char *src, char *buf, size_t cap, size_t *len, kg_err *e) { KG(kaio_lang_compile_ptx(src, buf, cap, len)); }
static inline kaio_status kg_lang_kernel_ptx(const kaio_lang_kernel *k, char *buf, size_t cap, size_t *len, kg_err *e) { KG(kaio_lang_kernel_ptx(k, buf, cap, len)); }
static inline kaio_status kg_lang_kernel_launch(const kaio_lang_kernel *k, kaio_stream *s, const kaio_tensor *t, size_t nt, const double *sc, size_t ns, kg_err *e) { KG(kaio_lang_kernel_launch(k, s, t, nt, sc, ns)); }
static inline kaio_status kg_lang_kernel_check(const kaio_lang_kernel *k, kg_err *e) { KG(kaio_lang_kernel_check(k)); }

#endif
