package kaio

// #include "shim.h"
import "C"

import "runtime"

// Chunked prefill over a paged KV cache: packed new queries, as the varlen
// forward's (AttentionVarlenDesc: TotalQ packed rows, MaxSeqlenQ the
// longest new-row count, MaxSeqlenK the longest length any seqLens entry
// may hold, TotalK 0), attending to each sequence's keys in the page pools
// of the paged decode op (kPool, vPool, blockTable, seqLens, laid out as
// for AttentionPaged). cuSeqlensQ is i32 1 x (B+1) prefix sums of the new
// rows. Bad seqLens or blockTable entries give NaN rows for that sequence
// and StatusOutOfBounds from the next Synchronize of the stream. kaio.h's
// "Paged prefill" section states the constraints.

// NewAttentionPagedPrefillOp prepares a paged prefill. Launch tensors: Q,
// K pool, V pool, cuSeqlensQ, blockTable, seqLens, O, LSE (Tensor{}: not
// written). Launches allocate nothing, may run from several goroutines
// and are graph-capturable.
func (d *Device) NewAttentionPagedPrefillOp(desc AttentionVarlenDesc, paged AttentionPagedDesc) (*Op, error) {
	cd, err := desc.c(false)
	if err != nil {
		return nil, err
	}
	cp, err := paged.c(false)
	if err != nil {
		return nil, err
	}
	var p *C.kaio_op
	var e C.kg_err
	s := C.kg_op_create_attention_paged_prefill(&p, d.raw(), &cd, &cp, &e)
	return d.madeOp(s, p, &e)
}

// AttentionPagedPrefill is the one-shot paged prefill; lse Tensor{}: not
// written.
func AttentionPagedPrefill(s *Stream, q, kPool, vPool, cuSeqlensQ, blockTable, seqLens, o, lse Tensor, desc AttentionVarlenDesc, paged AttentionPagedDesc) error {
	cd, err := desc.c(false)
	if err != nil {
		return err
	}
	cp, err := paged.c(false)
	if err != nil {
		return err
	}
	cq, ck, cv, ccq, cb, cs, co, cl := q.c(), kPool.c(), vPool.c(), cuSeqlensQ.c(), blockTable.c(), seqLens.c(), o.c(), lse.c()
	var e C.kg_err
	err = check(C.kg_attention_paged_prefill(s.raw(), &cq, &ck, &cv, &ccq, &cb, &cs, &co, &cl, &cd, &cp, &e), &e)
	runtime.KeepAlive(s)
	keepTensors(&q, &kPool, &vPool, &cuSeqlensQ, &blockTable, &seqLens, &o, &lse)
	return err
}
