/*
 * tp_shard: one device's share of a Llama attention block and MLP block.
 *
 * With n shards, shard r holds
 *   attention  the q heads [r·Hq/n, (r+1)·Hq/n) and kv heads [r·Hkv/n, ...):
 *              their rows of W_qkv (column parallel) and their columns of
 *              W_o (row parallel);
 *   MLP        the rows [r·I/n, (r+1)·I/n) of W_gate and W_up (column
 *              parallel) and those columns of W_down (row parallel).
 * Each block ends in a row-parallel projection written in f32, so its output
 * on one shard is a partial sum: the all-reduce (sum) over the shards is the
 * block's output. n = 1 is the one-GPU model with full weights.
 * Weights are nn.Linear's [out_features, in_features], bf16.
 */
#ifndef KAIO_EXAMPLE_TP_SHARD_H
#define KAIO_EXAMPLE_TP_SHARD_H

#include <kaio/kaio.h>

#include <stdint.h>

typedef struct tp_dims {
    int64_t tokens;   /* T: one causal prefill of T tokens               */
    int64_t hidden;   /* H                                               */
    int64_t inter;    /* I: the MLP's intermediate size                  */
    int64_t heads_q;  /* Hq                                              */
    int64_t heads_kv; /* Hkv (GQA: Hq a multiple of Hkv)                 */
    int64_t head_dim; /* D                                               */
} tp_dims;

/* The full model's weights and input on the host, bf16 bits. */
typedef struct tp_host_model {
    const uint16_t *x;         /* [T, H] the block input                  */
    const uint16_t *attn_norm; /* [1, H]                                  */
    const uint16_t *mlp_norm;  /* [1, H]                                  */
    const uint16_t *w_qkv;     /* [(Hq + 2·Hkv)·D, H]: q, then k, then v  */
    const uint16_t *w_o;       /* [H, Hq·D]                               */
    const uint16_t *w_gate;    /* [I, H]                                  */
    const uint16_t *w_up;      /* [I, H]                                  */
    const uint16_t *w_down;    /* [H, I]                                  */
} tp_host_model;

typedef struct tp_shard {
    kaio_device *device;
    kaio_stream *stream;
    int64_t heads_q, heads_kv, inter; /* this shard's part */
    kaio_buffer *x, *attn_norm, *mlp_norm, *positions;
    kaio_buffer *w_qkv, *w_o, *w_gate, *w_up, *w_down;
    kaio_buffer *xn, *qkv, *attn, *gate, *up;
    kaio_buffer *y_attn, *y_mlp; /* [T, H] f32: partial sums until all-reduced */
} tp_shard;

/* Opens device `ordinal`, makes a stream and uploads shard `rank` of `n`.
 * On failure prints why (naming the call) and returns its status; the
 * shard may be partly built, tp_shard_destroy frees it. */
kaio_status tp_shard_create(tp_shard *shard, int32_t ordinal, int rank, int n,
                            const tp_dims *dims, const tp_host_model *model);
void tp_shard_destroy(tp_shard *shard);

/* Enqueue one block on the shard's stream (no host synchronisation):
 * y_attn = o_proj(attention(rope(qkv_proj(rmsnorm(x)))))   partial sum
 * y_mlp  = down(silu(gate(rmsnorm(x))) · up(rmsnorm(x)))  partial sum */
kaio_status tp_shard_attention(tp_shard *shard, const tp_dims *dims);
kaio_status tp_shard_mlp(tp_shard *shard, const tp_dims *dims);

#endif
