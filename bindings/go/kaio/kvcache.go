package kaio

// #include "shim.h"
import "C"

import "runtime"

// The paged KV cache (vLLM / FlashInfer layout): each layer's K and V cache
// is [num_pages, page_size, Hkv, D], viewed as [num_pages·page_size, Hkv·D];
// a token's slot is page·page_size + offset.

// NewKVCacheWriteOp prepares the write of tokens new K (and V) rows of
// width = Hkv·D into caches of cacheRows = num_pages·page_size rows by a slot
// mapping. Launch tensors: k, v, slotMapping (i32 1 x tokens), kCache,
// vCache; v and vCache may both be Tensor{} (a K-only cache). A negative
// slot skips its token; a slot past the cache is skipped and reported by the
// next Synchronize as StatusOutOfBounds.
func (d *Device) NewKVCacheWriteOp(dtype DType, tokens, width, cacheRows int64) (*Op, error) {
	var p *C.kaio_op
	var e C.kg_err
	s := C.kg_op_create_kv_cache_write(&p, d.raw(), C.kaio_dtype(dtype), C.int64_t(tokens), C.int64_t(width), C.int64_t(cacheRows), &e)
	return d.madeOp(s, p, &e)
}

// KVCacheWrite is the one-shot write (see NewKVCacheWriteOp): row t of k goes
// to row slotMapping[t] of kCache, and likewise for v (Tensor{} v and vCache:
// a K-only cache).
func KVCacheWrite(s *Stream, k, v, slotMapping, kCache, vCache Tensor) error {
	ck, cv, cs, ckc, cvc := k.c(), v.c(), slotMapping.c(), kCache.c(), vCache.c()
	var e C.kg_err
	err := check(C.kg_kv_cache_write(s.raw(), &ck, &cv, &cs, &ckc, &cvc, &e), &e)
	runtime.KeepAlive(s)
	keepTensors(&k, &v, &slotMapping, &kCache, &vCache)
	return err
}
