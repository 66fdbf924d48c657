package app_test

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/rs/zerolog"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/cursor"
	"github.com/tidemarkhq/tidemark/internal/app"
	"github.com/tidemarkhq/tidemark/internal/config"
	"github.com/tidemarkhq/tidemark/internal/logtest"
	"github.com/tidemarkhq/tidemark/internal/pgtest"
	"github.com/tidemarkhq/tidemark/internal/slowdown"
	"github.com/tidemarkhq/tidemark/upsert"

	_ "github.com/tidemarkhq/tidemark/clients/provider/all"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

var screenshot = flag.Bool("screenshot", false, "write the status page's screenshots to docs/status-page-{390,1280,1920}.png")

// statusConfig is two simulated sources, so the page has more than one.
const statusConfig = `
database_url: ${DATABASE_URL}
sources:
  - name: alpha
    kind: simulated
    simulated: {seed: 1, users: 2, days: 20, mutations_per_tick: 5, every: 1s}
    schedule: "@every 1h"
    resources: [clients, projects, time_entries]
  - name: beta
    kind: simulated
    simulated: {seed: 2, users: 2, days: 20, mutations_per_tick: 5, every: 1s}
    schedule: "*/5 * * * *"
    resources: [users, time_entries]
`

// openApp opens an App on a fresh database with statusConfig and serves its
// ops endpoints; it returns the base URL.
func openApp(t *testing.T) (*app.App, string) {
	t.Helper()
	u := pgtest.URL(t)
	cfg, err := config.Parse("status.yaml", []byte(statusConfig), func(k string) (string, bool) {
		if k == "DATABASE_URL" {
			return u, true
		}
		return "", false
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	a, err := app.Open(ctx, cfg, u, "v0.0.0-test", zerolog.New(zerolog.NewTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(a.Close)
	srv, err := a.ServeOps("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	return a, "http://" + srv.Addr
}

// chromium finds Debian's chromium; under CI=true its absence fails the test
// (.ci/run installs it).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	if os.Getenv("CI") == "true" {
		t.Fatal("no chromium on PATH (CI=true, so this fails): apt-get install -y chromium")
	}
	t.Skip("no chromium on PATH: apt-get install -y chromium")
	return ""
}

// browser starts a headless Chromium with this machine's flags and a fresh
// profile. When it cannot start (say, while apt is installing or upgrading
// it), the test fails saying so, with Chromium's own output and what
// `chromium --version` answers, not with the first page action's error.
func browser(t *testing.T) context.Context {
	t.Helper()
	path := chromium(t)
	var out logtest.Buffer // Chromium's output, written from chromedp's goroutine
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path), chromedp.CombinedOutput(&out),
		chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true), chromedp.NoFirstRun,
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(t.TempDir()),
	}
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx)
	t.Cleanup(cancel2)
	ctx, cancel3 := context.WithTimeout(ctx, slowdown.Scale(90*time.Second))
	t.Cleanup(cancel3)
	if err := chromedp.Do(ctx); err != nil { // starts the browser
		vctx, vcancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer vcancel()
		ver, verr := exec.CommandContext(vctx, path, "--version").CombinedOutput()
		if verr != nil {
			ver = append(ver, " ("+verr.Error()+")"...)
		}
		t.Fatalf("Chromium could not start (%s): %v\n`%s --version`: %s\nits output:\n%s",
			path, err, path, strings.TrimSpace(string(ver)), out.String())
	}
	return ctx
}

const alphaEntries = `#source-alpha tr[data-resource="time_entries"]`

func run[T any](t *testing.T, ctx context.Context, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

func TestStatusPageInChromium(t *testing.T) {
	t.Parallel()
	a, base := openApp(t)
	ctx := browser(t)

	// Before any pass: every source and resource is there, never synced.
	if err := chromedp.Do(ctx,
		chromedp.EmulateViewport(390, 844), // a phone
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.CSS(`#source-beta`)),
	); err != nil {
		t.Fatal(err)
	}
	sources := run(t, ctx, chromedp.Evaluate[[]string](`[...document.querySelectorAll("section.source")].map(s => s.dataset.source)`))
	if strings.Join(sources, ",") != "alpha,beta" {
		t.Fatalf("sources shown: %v", sources)
	}
	if hw := run(t, ctx, chromedp.Text(chromedp.CSS(alphaEntries+" .hw"))); hw != "never" {
		t.Fatalf("high water before any pass: %q", hw)
	}
	// Readable on a phone: the page itself does not scroll sideways (wide
	// tables scroll inside their box).
	if run(t, ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > window.innerWidth + 1`)) {
		t.Fatal("the page is wider than a phone's screen")
	}

	// A pass of alpha, and a backfill queued for beta: the reloaded page
	// shows both.
	p, err := a.Poller(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := p.Incremental(context.Background(), "alpha"); err != nil {
		t.Fatal(err)
	}
	from := clients.Date{Year: 2026, Month: 1, Day: 1}
	if _, err := cursor.New(a.Pool).QueueBackfill(context.Background(), cursor.BackfillParams{Source: "beta",
		Resource: "time_entries", From: from, To: from.AddDays(59), WindowDays: 30}); err != nil {
		t.Fatal(err)
	}
	if err := chromedp.Do(ctx, chromedp.Reload(), chromedp.WaitVisible(chromedp.CSS(`#source-alpha`))); err != nil {
		t.Fatal(err)
	}
	hw := run(t, ctx, chromedp.Text(chromedp.CSS(alphaEntries+" .hw")))
	status := run(t, ctx, chromedp.Text(chromedp.CSS(alphaEntries+" td.status")))
	counts := run(t, ctx, chromedp.Text(chromedp.CSS(alphaEntries+" .counts")))
	if hw == "never" || !strings.HasPrefix(status, "ok") || strings.HasPrefix(counts, "0 /") {
		t.Fatalf("after a pass: high water %q, status %q, counts %q", hw, status, counts)
	}
	if progress := run(t, ctx, chromedp.AttributeValue(chromedp.CSS(`p.backfill progress`), "max")); progress.Value != "2" {
		t.Fatalf("backfill progress bar max = %q, want 2 windows", progress.Value)
	}
	if chart := run(t, ctx, chromedp.Text(chromedp.CSS(`#chart-records figcaption`))); strings.Contains(chart, " 0 in the hour") {
		t.Fatalf("chart shows no records after a pass: %q", chart)
	}

	// At a phone's, a laptop's and a large screen's width: no element
	// wider than the screen, and every column of every row in view
	// (cards on a phone; issue 26, 8).
	for _, w := range []int64{390, 1280, 1920} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(w, 900), chromedp.Reload(),
			chromedp.WaitVisible(chromedp.CSS(`#source-alpha`))); err != nil {
			t.Fatal(err)
		}
		if bad := run(t, ctx, chromedp.Evaluate[[]string](layoutCheck)); len(bad) > 0 {
			t.Errorf("at %d px:\n%s", w, strings.Join(bad, "\n"))
		}
		png := run(t, ctx, chromedp.FullScreenshot(100))
		name := fmt.Sprintf("status-page-%d.png", w)
		out := filepath.Join(t.TempDir(), name)
		if *screenshot {
			out = filepath.Join("..", "..", "docs", name)
		}
		if err := os.WriteFile(out, png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("screenshot: %s (%d bytes)", out, len(png))
	}
}

// layoutCheck lists what a reader cannot see without scrolling sideways:
// elements reaching past the viewport's edges, and cells of the sources'
// tables that are hidden, empty or clipped (with the page itself not wider
// than the viewport).
const layoutCheck = `(() => {
  const W = window.innerWidth, bad = [];
  if (document.documentElement.scrollWidth > W + 1) bad.push("page is " + document.documentElement.scrollWidth + " px wide");
  const name = el => el.tagName.toLowerCase() + (el.className && typeof el.className === "string" ? "." + el.className.split(" ").join(".") : "");
  for (const el of document.querySelectorAll("body *")) {
    const r = el.getBoundingClientRect();
    if (r.width > 0 && (r.left < -1 || r.right > W + 1)) bad.push(name(el) + " spans " + Math.round(r.left) + ".." + Math.round(r.right));
  }
  for (const td of document.querySelectorAll("section.source td")) {
    const r = td.getBoundingClientRect(), text = td.innerText.trim();
    const label = td.dataset.label;
    if (!text || r.width === 0 || r.height === 0) bad.push(label + " of " + td.parentElement.dataset.resource + " not shown");
    if (td.scrollWidth > td.clientWidth + 1) bad.push(label + " of " + td.parentElement.dataset.resource + " clipped");
  }
  return bad;
})()`

// Issue 30: on a laptop's screen (1280 px) and wider, each timestamp of
// the sources' tables (high water, last run, next run) stays on one line,
// also beside a long error note; the layout still fits (layoutCheck).
func TestStatusPageTimestampsOnOneLine(t *testing.T) {
	t.Parallel()
	a, base := openApp(t)
	ctx := browser(t)
	p, err := a.Poller(context.Background(), "")
	if err != nil {
		t.Fatal(err)
	}
	for _, src := range []string{"alpha", "beta"} {
		if _, err := p.Incremental(context.Background(), src); err != nil {
			t.Fatal(err)
		}
	}
	capped := "beta/users: users: " + clients.ErrCapped.Error() + ": the provider stopped at page 3 of the 9 its envelope announced"
	if err := cursor.New(a.Pool).PassFailed(context.Background(), "beta", "users", cursor.KindIncremental, 4, time.Now().Add(30*time.Minute), capped); err != nil {
		t.Fatal(err)
	}
	// A narrow laptop (1024 px) may wrap them, but everything fits.
	for _, w := range []int64{1024, 1280, 1920} {
		if err := chromedp.Do(ctx, chromedp.EmulateViewport(w, 900), chromedp.Navigate(base+"/"),
			chromedp.WaitVisible(chromedp.CSS(`#source-beta`))); err != nil {
			t.Fatal(err)
		}
		bad := run(t, ctx, chromedp.Evaluate[[]string](layoutCheck))
		if w >= 1280 {
			bad = append(bad, run(t, ctx, chromedp.Evaluate[[]string](timestampLines))...)
		}
		if len(bad) > 0 {
			t.Errorf("at %d px:\n%s", w, strings.Join(bad, "\n"))
		}
	}
}

// timestampLines lists the timestamp cells of the sources' tables whose
// text takes more than one line (its boxes at more than one height).
const timestampLines = `(() => {
  const bad = [];
  for (const td of document.querySelectorAll("section.source td.hw, section.source td.last, section.source td.next")) {
    const r = document.createRange();
    r.selectNodeContents(td);
    const tops = new Set([...r.getClientRects()].filter(b => b.width > 0).map(b => Math.round(b.top)));
    if (tops.size > 1) bad.push(td.dataset.label + " of " + td.closest("section").dataset.source + "/" +
      td.parentElement.dataset.resource + " on " + tops.size + " lines, " + Math.round(td.getBoundingClientRect().height) + " px high: " + JSON.stringify(td.innerText));
  }
  return bad;
})()`

// The page holds no secret: the database URL (with its password) and the
// tokens stay out of it.
func TestStatusPageHasNoSecrets(t *testing.T) {
	t.Parallel()
	a, base := openApp(t)
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || !strings.Contains(resp.Header.Get("Content-Type"), "text/html") {
		t.Fatalf("GET /: %d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	for _, secret := range []string{a.DBURL, "postgres://"} {
		if strings.Contains(string(body), secret) {
			t.Fatalf("the page shows %q", secret)
		}
	}
	for _, path := range []string{"/nope", "/index.html"} {
		r, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		r.Body.Close()
		if r.StatusCode != 404 {
			t.Fatalf("GET %s: %d, want 404", path, r.StatusCode)
		}
	}
}

// What goes wrong shows: a quota wait, a resource backing off with its
// error, a reconcile refused for too many tombstones.
func TestStatusPageShowsWaitsBackoffsAndRefusals(t *testing.T) {
	t.Parallel()
	a, base := openApp(t)
	ctx := context.Background()
	store := cursor.New(a.Pool)
	if err := cursor.SetWait(ctx, a.Pool, cursor.Wait{Source: "alpha", Until: time.Now().Add(40 * time.Minute), Reason: "quota"}); err != nil {
		t.Fatal(err)
	}
	if err := store.PassFailed(ctx, "beta", "users", cursor.KindIncremental, 3, time.Now().Add(time.Minute), "GET /users: 403 Forbidden"); err != nil {
		t.Fatal(err)
	}
	run := "20260101T000000-refused"
	if err := store.StartRun(ctx, cursor.StartRunParams{RunID: run, Source: "alpha", Resource: "time_entries", Kind: cursor.KindReconcile}); err != nil {
		t.Fatal(err)
	}
	refusal := "alpha/time_entries: reconcile: tombstone: " + upsert.ErrTooManyTombstones.Error() + ": 1500 rows not in the listing, the ceiling is 1000"
	if err := cursor.FinishRun(ctx, a.Pool, cursor.FinishRunParams{RunID: run, Status: cursor.StatusFailed, Error: refusal}); err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	page := string(b)
	for _, want := range []string{
		"waiting for quota until",                                          // alpha's wait
		"backing off until", "after 3 failures: GET /users: 403 Forbidden", // beta/users
		`class="bad refusal"`, "1500 rows not in the listing", // the refusal
		`<p class="note">waiting for quota until`, `<span class="pill bad">failing</span>`,
	} {
		if !strings.Contains(page, want) {
			t.Errorf("the page lacks %q", want)
		}
	}
	if t.Failed() {
		t.Log(page)
	}
}

// Issue 22: a resource whose listing stays capped shows as such, until
// when, and the command that retries it now, in `cursors` and on the page.
func TestCappedResourceShowsItsStateAndRecovery(t *testing.T) {
	t.Parallel()
	a, base := openApp(t)
	ctx := context.Background()
	until := time.Now().Add(30 * time.Minute).UTC().Truncate(time.Second)
	capped := "alpha/time_entries: time_entries: " + clients.ErrCapped.Error() + ": the provider stopped at page 3 of the 9 its envelope announced"
	if err := cursor.New(a.Pool).PassFailed(ctx, "alpha", "time_entries", cursor.KindIncremental, 4, until, capped); err != nil {
		t.Fatal(err)
	}
	want := "capped: the provider stopped at page 3 of the 9 its envelope announced; retry at " + until.Format(time.RFC3339) +
		"; run `tidemark sync --source alpha --resource time_entries` to retry now"
	rows, err := a.CursorRows(ctx, "alpha", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var got string
	for _, r := range rows {
		if r.Resource == "time_entries" {
			got = r.State
		}
	}
	if got != want {
		t.Errorf("state %q\nwant  %q", got, want)
	}
	if page := statusText(t, base); !strings.Contains(page, "tidemark sync --source alpha --resource time_entries") {
		t.Errorf("the page lacks the recovery command:\n%s", page)
	}
}

// Issue 22: a record that could not be stored shows, named with its error,
// in `cursors` and on the status page.
func TestQuarantinedRecordShows(t *testing.T) {
	t.Parallel()
	a, base := openApp(t)
	ctx := context.Background()
	if err := cursor.Quarantine(ctx, a.Pool, "beta", "users", "run-1", []cursor.Quarantined{
		{ID: "7\x00", Version: time.Now(), Raw: `{"id":"7"}`, Error: "record 0: id: contains a NUL byte"},
	}); err != nil {
		t.Fatal(err)
	}
	rows, err := a.CursorRows(ctx, "beta", time.Now())
	if err != nil {
		t.Fatal(err)
	}
	var note string
	for _, r := range rows {
		if r.Resource == "users" && r.Quarantined == 1 {
			note = r.QuarantineNote
		}
	}
	if !strings.Contains(note, `id 7\x00`) || !strings.Contains(note, "contains a NUL byte") {
		t.Errorf("quarantine note %q", note)
	}
	if page := statusText(t, base); !strings.Contains(page, "could not be stored") {
		t.Errorf("the page does not show the quarantined record:\n%s", page)
	}
}

// statusText is the status page at base.
func statusText(t *testing.T, base string) string {
	t.Helper()
	resp, err := http.Get(base + "/")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
