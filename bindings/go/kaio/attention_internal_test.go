package kaio

// White-box: AttentionDesc's NonDeterministic reaches the C desc as
// deterministic 0, and its zero value as libkaio's default 1.

import "testing"

func TestAttentionDescPassesDeterministic(t *testing.T) {
	def, err := AttentionDesc{}.c(true)
	if err != nil || def.deterministic != 1 {
		t.Fatalf("C default deterministic %d, %v", def.deterministic, err)
	}
	if DefaultAttentionDesc().NonDeterministic {
		t.Fatal("DefaultAttentionDesc is nondeterministic")
	}
	for _, c := range []struct {
		desc AttentionDesc
		want int32
	}{
		{DefaultAttentionDesc(), 1},
		{AttentionDesc{}, 1},
		{AttentionDesc{NonDeterministic: true}, 0},
	} {
		d, err := c.desc.c(false)
		if err != nil || int32(d.deterministic) != c.want {
			t.Errorf("%+v: deterministic %d, want %d (%v)", c.desc, d.deterministic, c.want, err)
		}
	}
}
