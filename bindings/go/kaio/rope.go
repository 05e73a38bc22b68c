package kaio

// #include "shim.h"
import "C"

import "runtime"

// RopeStyle picks which elements of a head form a rotated pair.
type RopeStyle int32

const (
	// RopeHalfSplit pairs x[i] with x[i + rotary_dim/2] (GPT-NeoX, Llama,
	// HF's rotate_half).
	RopeHalfSplit RopeStyle = C.KAIO_ROPE_HALF_SPLIT
	// RopeInterleaved pairs x[2i] with x[2i+1] (GPT-J, rotate_every_two).
	RopeInterleaved RopeStyle = C.KAIO_ROPE_INTERLEAVED
)

// RopeScaling picks how the inverse frequencies are computed, as HF
// transformers' modeling_rope_utils.py does (in f32).
type RopeScaling int32

const (
	// RopeScalingNone is 1 / θ^(2i/r).
	RopeScalingNone RopeScaling = C.KAIO_ROPE_SCALING_NONE
	// RopeScalingLinear divides that by Factor.
	RopeScalingLinear RopeScaling = C.KAIO_ROPE_SCALING_LINEAR
	// RopeScalingLlama3 uses Factor, LowFreqFactor, HighFreqFactor and
	// OriginalMaxPositionEmbeddings.
	RopeScalingLlama3 RopeScaling = C.KAIO_ROPE_SCALING_LLAMA3
	// RopeScalingYarn uses Factor, OriginalMaxPositionEmbeddings, BetaFast,
	// BetaSlow, Truncate and the attention factor (AttentionFactor, or HF's
	// default from Factor, Mscale and MscaleAllDim when it is 0).
	RopeScalingYarn RopeScaling = C.KAIO_ROPE_SCALING_YARN
)

// RopeDesc describes rotary position embeddings applied in place to Q
// [T, HeadsQ·HeadDim] and K [T, HeadsK·HeadDim] (any row stride, so column
// ranges of one fused QKV output work). Start from DefaultRopeDesc and set
// the heads and HeadDim; kaio.h ("Rotary position embeddings") has the rules.
// Fields a scaling does not use are ignored.
type RopeDesc struct {
	Style   RopeStyle
	DType   DType // Q and K: F32, F16 or BF16
	Scaling RopeScaling
	HeadsQ  int64 // 0: Q always absent
	HeadsK  int64 // 0: K always absent
	HeadDim int64
	// RotaryDim is the rotated prefix of each head (even); 0 means HeadDim.
	RotaryDim                     int64
	Theta                         float64
	Factor                        float64
	LowFreqFactor, HighFreqFactor float64
	OriginalMaxPositionEmbeddings int64
	BetaFast, BetaSlow            float64
	AttentionFactor               float64 // YARN: 0 means HF's default
	Mscale, MscaleAllDim          float64 // YARN: 0 means unset
	// Truncate floors / ceils YARN's correction range, as HF does by default.
	Truncate bool
}

// DefaultRopeDesc is libkaio's default: half split, bf16, no scaling, θ
// 10000, factor 1, low / high frequency factors 1 / 4, original length
// 8192, betas 32 / 1, attention factor 0, mscales 0, truncate on; heads and
// HeadDim 0 (must be set).
func DefaultRopeDesc() RopeDesc {
	d, err := RopeDesc{}.c(true)
	if err != nil {
		panic(err)
	}
	return RopeDesc{Style: RopeStyle(d.style), DType: DType(d.dtype), Scaling: RopeScaling(d.scaling),
		HeadsQ: int64(d.heads_q), HeadsK: int64(d.heads_k), HeadDim: int64(d.head_dim), RotaryDim: int64(d.rotary_dim),
		Theta: float64(d.theta), Factor: float64(d.factor),
		LowFreqFactor: float64(d.low_freq_factor), HighFreqFactor: float64(d.high_freq_factor),
		OriginalMaxPositionEmbeddings: int64(d.original_max_position_embeddings),
		BetaFast:                      float64(d.beta_fast), BetaSlow: float64(d.beta_slow),
		AttentionFactor: float64(d.attention_factor), Mscale: float64(d.mscale), MscaleAllDim: float64(d.mscale_all_dim),
		Truncate: d.truncate != 0}
}

func (r RopeDesc) c(defaults bool) (C.kaio_rope_desc, error) {
	var d C.kaio_rope_desc
	var e C.kg_err
	if err := check(C.kg_rope_desc_init(&d, &e), &e); err != nil || defaults {
		return d, err
	}
	d.style, d.dtype, d.scaling = C.kaio_rope_style(r.Style), C.kaio_dtype(r.DType), C.kaio_rope_scaling(r.Scaling)
	d.heads_q, d.heads_k = C.int64_t(r.HeadsQ), C.int64_t(r.HeadsK)
	d.head_dim, d.rotary_dim = C.int64_t(r.HeadDim), C.int64_t(r.RotaryDim)
	d.theta, d.factor = C.double(r.Theta), C.double(r.Factor)
	d.low_freq_factor, d.high_freq_factor = C.double(r.LowFreqFactor), C.double(r.HighFreqFactor)
	d.original_max_position_embeddings = C.int64_t(r.OriginalMaxPositionEmbeddings)
	d.beta_fast, d.beta_slow = C.double(r.BetaFast), C.double(r.BetaSlow)
	d.attention_factor, d.mscale, d.mscale_all_dim = C.double(r.AttentionFactor), C.double(r.Mscale), C.double(r.MscaleAllDim)
	d.truncate = 0
	if r.Truncate {
		d.truncate = 1
	}
	return d, nil
}

// NewRopeOp prepares RoPE: checks desc and computes the inverse-frequency
// table once. Launch tensors: Q, K, positions (i32 1 x T); Q or K may be
// Tensor{} (skipped), not both; any T per launch. No workspace: launches on
// disjoint Q and K may run at once from several goroutines and streams.
func (d *Device) NewRopeOp(desc RopeDesc) (*Op, error) {
	cd, err := desc.c(false)
	if err != nil {
		return nil, err
	}
	var p *C.kaio_op
	var e C.kg_err
	s := C.kg_op_create_rope(&p, d.raw(), &cd, &e)
	return d.madeOp(s, p, &e)
}

// Rope is the one-shot RoPE, in place on q and k (either may be Tensor{},
// not both); positions is i32 1 x T. It computes the table on the host and
// allocates nothing on the device.
func Rope(s *Stream, q, k, positions Tensor, desc RopeDesc) error {
	cd, err := desc.c(false)
	if err != nil {
		return err
	}
	cq, ck, cp := q.c(), k.c(), positions.c()
	var e C.kg_err
	err = check(C.kg_rope(s.raw(), &cq, &ck, &cp, &cd, &e), &e)
	runtime.KeepAlive(s)
	keepTensors(&q, &k, &positions)
	return err
}

// NewRopeKVCacheWriteOp prepares RoPE fused with the paged KV-cache write: Q
// rotated in place, K rotated on its way into kCache at its slot (K itself is
// only read), V copied to vCache. Launch tensors: q, k, v, positions,
// slotMapping (i32 1 x T each), kCache, vCache; q may be Tensor{}, v and
// vCache both or neither. A negative slot skips the token's K and V; a slot
// past the cache is skipped and reported by the next Synchronize as
// StatusOutOfBounds. No workspace; launches from any goroutine.
func (d *Device) NewRopeKVCacheWriteOp(desc RopeDesc) (*Op, error) {
	cd, err := desc.c(false)
	if err != nil {
		return nil, err
	}
	var p *C.kaio_op
	var e C.kg_err
	s := C.kg_op_create_rope_kv_cache_write(&p, d.raw(), &cd, &e)
	return d.madeOp(s, p, &e)
}

// RopeKVCacheWrite is the one-shot form of NewRopeKVCacheWriteOp.
func RopeKVCacheWrite(s *Stream, q, k, v, positions, slotMapping, kCache, vCache Tensor, desc RopeDesc) error {
	cd, err := desc.c(false)
	if err != nil {
		return err
	}
	cq, ck, cv, cp, cs, ckc, cvc := q.c(), k.c(), v.c(), positions.c(), slotMapping.c(), kCache.c(), vCache.c()
	var e C.kg_err
	err = check(C.kg_rope_kv_cache_write(s.raw(), &cq, &ck, &cv, &cp, &cs, &ckc, &cvc, &cd, &e), &e)
	runtime.KeepAlive(s)
	keepTensors(&q, &k, &v, &positions, &slotMapping, &kCache, &vCache)
	return err
}
