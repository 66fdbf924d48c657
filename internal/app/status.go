package app

import (
	"bytes"
	"cmp"
	"context"
	_ "embed"
	"fmt"
	"html/template"
	"net/http"
	"strings"
	"time"

	"github.com/tidemarkhq/tidemark/cursor"
	"github.com/tidemarkhq/tidemark/internal/metrics"
	"github.com/tidemarkhq/tidemark/upsert"
)

// The status page (GET / on the listen address): server-rendered with
// html/template and one embedded stylesheet, no JavaScript. It reads what
// `tidemark cursors` reads, so every replica shows the whole fleet; the
// chart is this replica's own last hour. It shows no token, URL or error
// body beyond what sync_runs holds (errors there are already redacted).

var (
	//go:embed status/status.html
	statusHTML string
	//go:embed status/status.css
	statusCSS  string
	statusTmpl = template.Must(template.New("status").Funcs(template.FuncMap{"words": words}).Parse(statusHTML))
)

// StatusRefresh is how often the page reloads itself (a meta refresh).
const StatusRefresh = 10

type statusPage struct {
	Now, Version, Member string
	Refresh              int
	CSS                  template.CSS
	Charts               []statusChart
	Sources              []*statusSource
	Backfills            []statusBackfill
	Refusals             []statusRefusal
}

type statusSource struct {
	Name, Kind, Schedule, Owner string
	State, Class, Wait          string
	Rows                        []statusRow
}

type statusRow struct {
	Resource, HighWater, Lag, LagClock string
	// Behind is how far behind the source the mirror is (since the last
	// complete pass); Lag the age of the newest change, no health signal.
	Behind, BehindClass          string
	LastRun, Status, Class, Note string
	Counts, Took, Next           string
}

type statusBackfill struct {
	Source, Resource, Range, Status, Class string
	Done, Total, Percent                   int
	Records                                int64
}

type statusRefusal struct{ At, Source, Resource, Error string }

type statusChart struct {
	ID, Title        string
	W, H             int
	Points           string
	Last, Max, Total int64
}

// statusHandler serves the status page.
func (a *App) statusHandler(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/" { // the mux pattern is "GET /{$}"; kept for direct calls
		http.NotFound(w, r)
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	page, err := a.statusPage(ctx, time.Now())
	if err != nil {
		a.Log.Warn().Err(err).Msg("status page")
		http.Error(w, "status unavailable: the database did not answer", http.StatusServiceUnavailable)
		return
	}
	var b bytes.Buffer
	if err := statusTmpl.Execute(&b, page); err != nil {
		http.Error(w, "status page: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.Write(b.Bytes())
}

func (a *App) statusPage(ctx context.Context, now time.Time) (*statusPage, error) {
	rows, err := a.CursorRows(ctx, "", now)
	if err != nil {
		return nil, err
	}
	store := cursor.New(a.Pool)
	bfs, err := store.Backfills(ctx, "")
	if err != nil {
		return nil, err
	}
	refused, err := store.Refusals(ctx, upsert.ErrTooManyTombstones.Error(), now.Add(-7*24*time.Hour))
	if err != nil {
		return nil, err
	}
	p := &statusPage{
		Now: now.UTC().Format("2006-01-02 15:04:05"), Version: a.Version, Member: a.memberName(),
		Refresh: StatusRefresh, CSS: template.CSS(statusCSS),
	}
	hist := a.Metrics.History(now)
	p.Charts = []statusChart{
		chartOf("records", "records applied per minute", hist, func(m metrics.Minute) int64 { return m.Records }),
		chartOf("requests", "requests per minute", hist, func(m metrics.Minute) int64 { return m.Requests }),
	}
	bySource := map[string]*statusSource{}
	for _, row := range rows {
		s, ok := bySource[row.Source]
		if !ok {
			s = &statusSource{Name: row.Source, State: "ok", Class: "ok", Owner: row.Owner}
			p.Sources = append(p.Sources, s)
			if sc, err := a.cfg().Source(row.Source); err == nil {
				s.Kind, s.Schedule = sc.Kind, sc.Schedule
			} else if row.Unserved == NoOwner {
				s.Kind = "configured on another replica"
			} else {
				s.Kind = "no longer configured"
			}
			bySource[row.Source] = s
		}
		sr := a.statusRow(row, now)
		switch {
		case row.WaitingUntil != nil:
			what := "quota"
			if row.WaitingReason != "quota" {
				what = "the rate limit (Retry-After)"
			}
			s.Wait = fmt.Sprintf("waiting for %s until %s (in %s)", what, hhmm(*row.WaitingUntil), row.WaitingUntil.Sub(now).Round(time.Second))
			s.State, s.Class = "waiting", "warn"
		}
		if sr.Class == "bad" {
			s.State, s.Class = "failing", "bad"
		} else if sr.Class == "warn" && s.Class == "ok" {
			s.State, s.Class = "attention", "warn"
		}
		s.Rows = append(s.Rows, sr)
		if row.Unserved != "" {
			// Nobody polls it: red whatever its last passes said.
			s.State, s.Class = row.Unserved, "bad"
		}
	}
	for _, b := range bfs {
		if cursor.Final(b.Status) {
			continue
		}
		sb := statusBackfill{Source: b.Source, Resource: b.Resource, Range: b.From.String() + " … " + b.To.String(),
			Status: b.Status, Class: "ok", Done: b.WindowsDone, Total: max(b.WindowsTotal, 1), Records: b.Records}
		if b.Status != cursor.StatusRunning {
			sb.Class = "warn"
		}
		sb.Percent = 100 * sb.Done / sb.Total
		p.Backfills = append(p.Backfills, sb)
	}
	for _, r := range refused {
		p.Refusals = append(p.Refusals, statusRefusal{At: r.StartedAt.UTC().Format("2006-01-02 15:04"), Source: r.Source,
			Resource: r.Resource, Error: r.Error})
	}
	return p, nil
}

func (a *App) statusRow(row CursorRow, now time.Time) statusRow {
	sr := statusRow{Resource: row.Resource, HighWater: "never", Lag: "-", LastRun: "-", Status: "not run yet",
		Class: "muted", Took: "-", Next: "-", Counts: "-", BehindClass: "muted"}
	sr.Behind, _ = LagWords(row)
	if row.BehindSeconds != nil {
		sr.BehindClass = "ok"
		if row.Late {
			sr.BehindClass = "warn"
		}
	}
	if row.HighWater != nil {
		sr.HighWater = row.HighWater.Format("2006-01-02 15:04:05")
		if l, ok := a.Metrics.LastLag(row.Source, row.Resource); ok {
			sr.Lag = Ago(l.Lag) + " ago"
			sr.LagClock = "the source's clock at the last pass here (" + hhmm(l.At) + ") minus the high water"
		} else {
			sr.Lag = Ago(time.Duration(*row.LagSeconds*float64(time.Second))) + " ago"
			sr.LagClock = "no pass ran on this replica: our clock minus the high water"
		}
	}
	if row.LastRunKind != "" {
		at := row.LastRunStartedAt
		sr.LastRun = row.LastRunKind + " " + hhmm(*at)
		sr.Status, sr.Class = row.LastRunStatus, "ok"
		c := row.LastRunCounts
		sr.Counts = fmt.Sprintf("%d / %d / %d / %d / %d / %d", c.Fetched, c.Inserted, c.Updated, c.Unchanged, c.Stale, c.Tombstoned)
		if row.LastRunFinishedAt != nil {
			sr.Took = short(row.LastRunFinishedAt.Sub(*at))
		} else {
			sr.Took = "running " + short(now.Sub(*at))
		}
		if row.LastRunStatus == cursor.StatusFailed {
			sr.Class, sr.Note = "bad", firstLine(row.LastRunError)
		}
	}
	if row.BackoffUntil != nil {
		sr.Class = "bad"
		sr.Note = fmt.Sprintf("backing off until %s after %d failures: %s", hhmm(*row.BackoffUntil), row.Failures, firstLine(row.BackoffError))
		if row.State != "" {
			sr.Note = row.State
		}
	}
	if row.Quarantined > 0 {
		sr.Note = strings.TrimPrefix(sr.Note+"; "+row.QuarantineNote, "; ")
		if sr.Class != "bad" {
			sr.Class = "warn"
		}
	}
	if row.ReconcileDueSince != nil {
		sr.Status += ", reconcile due"
	}
	if row.ReadMode != "" && row.ReadMode != "feed" {
		sr.Status += ", read by " + row.ReadMode
		if sr.Class == "ok" {
			sr.Class = "warn"
		}
	}
	if row.NextRunAt != nil {
		sr.Next = hhmm(*row.NextRunAt)
	}
	if row.Late && sr.Class == "ok" {
		sr.Class = "warn"
	}
	return sr
}

// chartOf draws one series as an SVG polyline, scaled to its own peak.
func chartOf(id, title string, hist []metrics.Minute, v func(metrics.Minute) int64) statusChart {
	c := statusChart{ID: id, Title: title, W: 300, H: 60}
	for _, m := range hist {
		c.Max = max(c.Max, v(m))
		c.Total += v(m)
	}
	if len(hist) > 0 {
		c.Last = v(hist[len(hist)-1])
	}
	scale := float64(cmp.Or(c.Max, 1))
	var pts []string
	for i, m := range hist {
		x := float64(i) * float64(c.W) / float64(max(len(hist)-1, 1))
		y := float64(c.H) - 2 - float64(v(m))/scale*float64(c.H-4)
		pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
	}
	c.Points = strings.Join(pts, " ")
	return c
}

// words keeps each word of s whole (a timestamp's date and time): a narrow
// column wraps between them, never at a date's hyphens. One outer span:
// a phone's card (a flex row) sees one item.
func words(s string) template.HTML {
	ws := strings.Fields(s)
	for i, w := range ws {
		ws[i] = `<span class="w">` + template.HTMLEscapeString(w) + `</span>`
	}
	return template.HTML("<span>" + strings.Join(ws, " ") + "</span>")
}

func hhmm(t time.Time) string {
	return t.UTC().Format("2006-01-02 15:04:05")
}

func short(d time.Duration) string {
	switch {
	case d < 0:
		return "-" + short(-d)
	case d < time.Second:
		return d.Round(time.Millisecond).String()
	case d < time.Hour:
		return d.Round(time.Second).String()
	case d >= 48*time.Hour:
		return fmt.Sprintf("%dd %dh", d/(24*time.Hour), d%(24*time.Hour)/time.Hour)
	default:
		return d.Round(time.Minute).String()
	}
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 200 {
		s = s[:197] + "..."
	}
	return s
}
