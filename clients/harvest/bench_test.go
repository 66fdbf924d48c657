package harvest_test

import (
	"context"
	"testing"

	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/harvest"
	"github.com/tidemarkhq/tidemark/clients/httpx"
	"github.com/tidemarkhq/tidemark/internal/fakeapi/harvestfake"
)

// BenchmarkList lists 20,000 time entries in pages of 2,000 from the fake
// over loopback HTTP, without a rate limit: the client side of a backfill
// (request, read, decode) per record. The fake renders in this process, so
// its cost is in the figure too.
func BenchmarkList(b *testing.B) {
	f := harvestfake.New(harvestfake.Options{NoRateLimit: true})
	b.Cleanup(f.Close)
	seed(f, 20_000)
	p := harvest.Params{Name: "acme", BaseURL: f.URL(), AccountID: f.AccountID(), Token: f.Token(),
		Contact: "ops@example.com", Version: "bench", Logger: zerolog.Nop()}
	cfg := harvest.HTTPConfig(p)
	cfg.RateLimit = httpx.RateLimit{}
	p.HTTP = httpx.New(cfg)
	c, err := harvest.New(p)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	n := 0
	for b.Loop() {
		err := c.List(context.Background(), clients.TimeEntries, clients.Window{}, func(_ context.Context, pg clients.Page) error {
			n += len(pg.Records)
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "records/s")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n), "ns/record")
}
