package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/tidemarkhq/tidemark/clients/simulated"
	"github.com/tidemarkhq/tidemark/internal/fakeapi/harvestfake"
)

// simInfo is what a serve-sim child prints on its first stdout line.
type simInfo struct {
	URL       string `json:"url"`
	Token     string `json:"token"`
	AccountID string `json:"account_id"`
	// Control serves the fake's request log (GET /requests) and clears it
	// (POST /reset).
	Control string `json:"control"`
	// From and To bound the generated spent dates.
	From string `json:"from"`
	To   string `json:"to"`
}

// loggedRequest is one entry of the fake's request log, as the control
// endpoint serves it.
type loggedRequest struct {
	At     int64 `json:"at"` // unix nanoseconds, the fake's arrival time
	Status int   `json:"status"`
}

// serveSim is the hidden `serve-sim` subcommand: it generates a simulated
// tracker in this (child) process, so that its records never count towards
// the measured process's memory, prints where it listens and serves until
// its stdin closes.
func serveSim(args []string) error {
	fs := flag.NewFlagSet("serve-sim", flag.ExitOnError)
	entries := fs.Int("entries", 1000, "time entries to generate")
	users := fs.Int("users", 20, "users")
	days := fs.Int("days", 365, "days of history")
	limited := fs.Bool("limited", false, "enforce Harvest's 100 requests per 15 s")
	recent := fs.Duration("recent", 0, "when > 0, restamp every entry's updated_at within this long before now")
	seed := fs.Int64("seed", 1, "seed")
	age := fs.Duration("age", 0, "history ends this long before now (idle sources: nothing within their overlap)")
	_ = fs.Parse(args)

	tr, err := simulated.New(simulated.Params{
		Seed: *seed, Users: *users, Days: *days, Entries: *entries, NoRateLimit: !*limited,
		Anchor: anchorAgo(*age),
	})
	if err != nil {
		return err
	}
	defer tr.Close()
	fake := tr.Server()
	if *recent > 0 {
		// Every entry edited within the window, one second apart at most, so
		// that an incremental pass with that overlap re-delivers all of them.
		now := fake.Now().UTC().Truncate(time.Second)
		r := rand.New(rand.NewPCG(uint64(*seed), 7))
		es := fake.TimeEntriesWhere(func(*harvestfake.TimeEntry) bool { return true })
		for i := range es {
			es[i].UpdatedAt = now.Add(-time.Minute - time.Duration(r.Int64N(int64(*recent-2*time.Minute)/int64(time.Second)))*time.Second)
			if es[i].CreatedAt.After(es[i].UpdatedAt) {
				es[i].CreatedAt = es[i].UpdatedAt
			}
		}
		fake.LoadTimeEntries(es)
	}
	lo, hi := "", ""
	for _, e := range fake.TimeEntriesWhere(func(*harvestfake.TimeEntry) bool { return true }) {
		d := e.SpentDate.String()
		if lo == "" || d < lo {
			lo = d
		}
		if d > hi {
			hi = d
		}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /requests", func(w http.ResponseWriter, _ *http.Request) {
		reqs := fake.Requests()
		out := make([]loggedRequest, len(reqs))
		for i, r := range reqs {
			out[i] = loggedRequest{At: r.At.UnixNano(), Status: r.Status}
		}
		_ = json.NewEncoder(w).Encode(out)
	})
	mux.HandleFunc("POST /reset", func(w http.ResponseWriter, _ *http.Request) {
		fake.ResetRequests()
		w.WriteHeader(http.StatusNoContent)
	})
	go func() { _ = http.Serve(ln, mux) }()

	info := simInfo{URL: tr.URL(), Token: tr.Token(), AccountID: tr.AccountID(),
		Control: "http://" + ln.Addr().String(), From: lo, To: hi}
	b, _ := json.Marshal(info)
	fmt.Println(string(b))
	// Serve until the parent closes our stdin (or dies).
	_, _ = io.Copy(io.Discard, bufio.NewReader(os.Stdin))
	return nil
}

// anchorAgo is the generation anchor age before now; zero: the default.
func anchorAgo(age time.Duration) time.Time {
	if age <= 0 {
		return time.Time{}
	}
	return time.Now().Add(-age)
}
