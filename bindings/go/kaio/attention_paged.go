package kaio

// #include "shim.h"
import "C"

import "runtime"

// Paged attention: decode attention (AttentionDecode's kernels) with K and V
// read from page pools in the vLLM / FlashInfer layout, as NewKVCacheWriteOp
// writes them. The K and V pools are [num_pages·page_size, Hkv·D] views of
// the desc's dtype; blockTable is i32 [B, max_pages_per_seq] (entry (b, i)
// is the page of sequence b's tokens i·page_size ...); seqLens is i32 1 x B,
// each sequence's KV length including its Sq new rows. Q, O and LSE are as
// for NewAttentionOp. desc: Variant Auto or Decode, SeqQ <= 16, HeadDim 64,
// 128 or 256, SeqK the longest length any sequence may have. Device data
// is not checked on the host: a bad length or page id reads inside the
// pools only and writes that sequence's O and LSE as NaN, and the next
// Synchronize of the stream returns StatusOutOfBounds naming it (one-shot
// calls too).

// AttentionPagedDesc is the paging of the KV pools. Start from
// DefaultAttentionPagedDesc.
type AttentionPagedDesc struct {
	PageSize int32 // tokens per page: 16, 32, 64, 128 or 256
}

// DefaultAttentionPagedDesc is libkaio's default: pages of 16 tokens.
func DefaultAttentionPagedDesc() AttentionPagedDesc {
	d, err := AttentionPagedDesc{}.c(true)
	if err != nil {
		panic(err)
	}
	return AttentionPagedDesc{PageSize: int32(d.page_size)}
}

func (a AttentionPagedDesc) c(defaults bool) (C.kaio_attention_paged_desc, error) {
	var d C.kaio_attention_paged_desc
	var e C.kg_err
	if err := check(C.kg_attention_paged_desc_init(&d, &e), &e); err != nil || defaults {
		return d, err
	}
	d.page_size = C.int32_t(a.PageSize)
	return d, nil
}

// NewAttentionPagedOp prepares paged decode attention. Launch tensors: Q,
// K pool, V pool, blockTable, seqLens, O, LSE (Tensor{}: not written). The
// op owns the key-split workspace: launches allocate
// nothing and are graph-capturable, but one op must not run on two streams
// at once.
func (d *Device) NewAttentionPagedOp(desc AttentionDesc, paged AttentionPagedDesc) (*Op, error) {
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
	s := C.kg_op_create_attention_paged(&p, d.raw(), &cd, &cp, &e)
	return d.madeOp(s, p, &e)
}

// AttentionPaged is the one-shot paged decode attention: no key split,
// nothing allocated; bad device data is reported as for the op. lse
// Tensor{}: not written.
func AttentionPaged(s *Stream, q, kPool, vPool, blockTable, seqLens, o, lse Tensor, desc AttentionDesc, paged AttentionPagedDesc) error {
	cd, err := desc.c(false)
	if err != nil {
		return err
	}
	cp, err := paged.c(false)
	if err != nil {
		return err
	}
	cq, ck, cv, cb, cs, co, cl := q.c(), kPool.c(), vPool.c(), blockTable.c(), seqLens.c(), o.c(), lse.c()
	var e C.kg_err
	err = check(C.kg_attention_paged(s.raw(), &cq, &ck, &cv, &cb, &cs, &co, &cl, &cd, &cp, &e), &e)
	runtime.KeepAlive(s)
	keepTensors(&q, &kPool, &vPool, &blockTable, &seqLens, &o, &lse)
	return err
}
