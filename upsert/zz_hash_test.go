package upsert

import "testing"

func BenchmarkZZHash(b *testing.B) {
	raw := entry(1, t0, t0, "a").Raw
	b.SetBytes(int64(len(raw)))
	for b.Loop() {
		ContentHash(raw)
	}
}
