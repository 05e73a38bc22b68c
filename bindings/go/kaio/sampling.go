package kaio

// #include "shim.h"
import "C"

// SamplingFeature is a set of KAIO_SAMPLING_* bits: which parts of the
// sampler run, and so which launch views are present.
type SamplingFeature uint32

const (
	// SamplingRandom samples rows with temperature > 0 (temperature, rng);
	// without it every row is greedy (argmax, lowest index on ties).
	SamplingRandom SamplingFeature = C.KAIO_SAMPLING_RANDOM
	// SamplingTopK filters by top_k (needs SamplingRandom).
	SamplingTopK SamplingFeature = C.KAIO_SAMPLING_TOP_K
	// SamplingTopP filters by top_p (needs SamplingRandom).
	SamplingTopP SamplingFeature = C.KAIO_SAMPLING_TOP_P
	// SamplingMinP filters by min_p (needs SamplingRandom).
	SamplingMinP SamplingFeature = C.KAIO_SAMPLING_MIN_P
	// SamplingPenalties applies repetition, presence and frequency
	// penalties over prev (prev, prevLens, penalties; MaxPrev columns).
	SamplingPenalties SamplingFeature = C.KAIO_SAMPLING_PENALTIES
	// SamplingProbs writes the chosen token's probability and log-probability.
	SamplingProbs SamplingFeature = C.KAIO_SAMPLING_PROBS
	// SamplingTopPOfRow, with SamplingTopK and SamplingTopP, measures
	// top-p's mass over the whole row, so the kept tokens are those both
	// filters keep (candle's TopKThenTopP); without it top-p renormalises
	// over top-k's tokens (HF transformers, vLLM).
	SamplingTopPOfRow SamplingFeature = C.KAIO_SAMPLING_TOP_P_OF_ROW
)

// SamplingDesc describes a sampler from logits [Batch, Vocab] to one token
// id per row. Start from DefaultSamplingDesc and set Batch and Vocab;
// kaio.h ("Token sampling") has the semantics.
type SamplingDesc struct {
	DType    DType // logits: F32, F16 or BF16
	Batch    int64
	Vocab    int64
	MaxPrev  int64 // columns of prev with SamplingPenalties, else 0
	Features SamplingFeature
}

// DefaultSamplingDesc is libkaio's default: f32 logits, no features
// (greedy), Batch, Vocab and MaxPrev 0.
func DefaultSamplingDesc() SamplingDesc {
	d, err := SamplingDesc{}.c(true)
	if err != nil {
		panic(err)
	}
	return SamplingDesc{DType: DType(d.dtype), Batch: int64(d.batch), Vocab: int64(d.vocab),
		MaxPrev: int64(d.max_prev), Features: SamplingFeature(d.features)}
}

func (m SamplingDesc) c(defaults bool) (C.kaio_sampling_desc, error) {
	var d C.kaio_sampling_desc
	var e C.kg_err
	if err := check(C.kg_sampling_desc_init(&d, &e), &e); err != nil || defaults {
		return d, err
	}
	d.dtype = C.kaio_dtype(m.DType)
	d.batch, d.vocab, d.max_prev = C.int64_t(m.Batch), C.int64_t(m.Vocab), C.int64_t(m.MaxPrev)
	d.features = C.uint32_t(m.Features)
	return d, nil
}

// SamplingViews are the sampler's launch views by name. A "vector of B" is
// 1 x B or B x 1. Views of features the desc leaves off must be Tensor{};
// those it turns on must be present. Outputs must not overlap inputs.
type SamplingViews struct {
	Logits      Tensor // [B, V] of the desc's dtype
	Temperature Tensor // f32 vector of B (Random): > 0 samples, else greedy
	TopK        Tensor // i32 vector of B (TopK): <= 0 off
	TopP        Tensor // f32 vector of B (TopP): >= 1 or NaN off
	MinP        Tensor // f32 vector of B (MinP): <= 0 or NaN off
	RNG         Tensor // u32 or i32 [B, 4] (Random): seed lo, hi, offset lo, hi
	Prev        Tensor // i32 [B, MaxPrev] (Penalties): previous tokens
	PrevLens    Tensor // i32 vector of B (Penalties)
	Penalties   Tensor // f32 [B, 3] (Penalties): repetition, presence, frequency
	Tokens      Tensor // i32 vector of B: the output ids
	Probs       Tensor // f32 vector of B (Probs)
	Logprobs    Tensor // f32 vector of B (Probs)
}

// Tensors is the 12-view launch list in kaio.h's order.
func (v SamplingViews) Tensors() []Tensor {
	return []Tensor{v.Logits, v.Temperature, v.TopK, v.TopP, v.MinP, v.RNG,
		v.Prev, v.PrevLens, v.Penalties, v.Tokens, v.Probs, v.Logprobs}
}

// NewSamplingOp prepares a sampler (there is no one-shot form). Launch
// tensors: SamplingViews{...}.Tensors(). The same (seed, offset) gives the
// same token bit for bit; advance the offset per step. With
// SamplingPenalties the op owns an 8·B·V-byte workspace, so such an op must
// not run on two streams at once; otherwise launches may run from several
// goroutines at once.
func (d *Device) NewSamplingOp(desc SamplingDesc) (*Op, error) {
	cd, err := desc.c(false)
	if err != nil {
		return nil, err
	}
	var p *C.kaio_op
	var e C.kg_err
	s := C.kg_op_create_sampling(&p, d.raw(), &cd, &e)
	return d.madeOp(s, p, &e)
}
