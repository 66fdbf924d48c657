package toggltest

import (
	"cmp"
	"encoding/json"
	"io"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/internal/fakeapi"
)

// The Reports API v3 detailed search, as the fake serves it:
//
//	POST /reports/api/v3/workspace/{wid}/search/time_entries
//
// with a JSON body (start_date, end_date as YYYY-MM-DD; page_size;
// first_id, first_row_number, first_timestamp for the next page) answering
// a bare JSON array of rows, one per time entry (grouped is not served):
//
//	{"user_id", "username", "project_id", "task_id", "billable",
//	 "description", "tag_ids", "billable_amount_in_cents",
//	 "hourly_rate_in_cents", "currency", "row_number",
//	 "time_entries": [{"id", "seconds", "start", "stop", "at", "at_tz"}]}
//
// and, when more rows follow, the X-Next-ID, X-Next-Row-Number and
// X-Next-Timestamp headers (the next row's entry id, its 1-based row number
// and its start in unix seconds). What the fake assumes where the docs are
// silent: rows are ordered by start then id; a day is a day in the entry's
// user's zone (Options.UserZones, else the token owner's, Options.TimeZone)
// and start/stop are written at that zone's offset; end_date is inclusive;
// the next page resumes at (first_timestamp, first_id) when both are sent
// (so a write between pages does not shift it), else at first_row_number;
// time_entry_ids filters by id; deleted entries are left out; running entries are served with stop null
// and negative seconds; page_size defaults to 50 and is capped by
// Options.ReportPageCap (default 200). GET /workspaces/{wid}/tags lists
// the tag names entries carry, each given an id on first sight.

// ReportQuery is a detailed search's request body as the fake received it.
type ReportQuery struct {
	StartDate      string  `json:"start_date"`
	EndDate        string  `json:"end_date"`
	PageSize       int     `json:"page_size"`
	FirstID        *int64  `json:"first_id"`
	FirstRowNumber *int64  `json:"first_row_number"`
	FirstTimestamp *int64  `json:"first_timestamp"`
	TimeEntryIDs   []int64 `json:"time_entry_ids"`
}

// ReportQueries returns the bodies of the detailed searches served so far.
func (s *Server) ReportQueries() []ReportQuery {
	s.late.Lock()
	defer s.late.Unlock()
	return slices.Clone(s.reportQueries)
}

// TagID returns the id the fake gives a tag name (assigning one).
func (s *Server) TagID(name string) int64 {
	s.late.Lock()
	defer s.late.Unlock()
	return s.tagID(name)
}

func (s *Server) tagID(name string) int64 {
	if s.tagIDs == nil {
		s.tagIDs = map[string]int64{}
	}
	id, ok := s.tagIDs[name]
	if !ok {
		id = int64(9000 + len(s.tagIDs) + 1)
		s.tagIDs[name] = id
	}
	return id
}

const reportsBase = "/reports/api/v3/workspace/"

// routeReports serves the detailed search; false: not its path.
func (s *Server) routeReports(w http.ResponseWriter, r *http.Request) bool {
	rest, ok := strings.CutPrefix(r.URL.Path, reportsBase)
	if !ok {
		return false
	}
	wid, tail, _ := strings.Cut(rest, "/")
	if tail != "search/time_entries" || r.Method != http.MethodPost {
		fakeapi.WriteJSON(w, http.StatusNotFound, `"Not Found"`)
		return true
	}
	if id, err := strconv.ParseInt(wid, 10, 64); err != nil || id != s.opts.WorkspaceID {
		fakeapi.WriteJSON(w, http.StatusForbidden, `"Incorrect username and/or password"`)
		return true
	}
	b, err := io.ReadAll(r.Body)
	var q ReportQuery
	if err == nil {
		err = json.Unmarshal(b, &q)
	}
	if err != nil {
		fakeapi.WriteJSON(w, http.StatusBadRequest, `"Invalid request body"`)
		return true
	}
	from, err1 := time.Parse(time.DateOnly, q.StartDate)
	to, err2 := time.Parse(time.DateOnly, q.EndDate)
	switch {
	case err1 != nil || err2 != nil:
		fakeapi.WriteJSON(w, http.StatusBadRequest, `"start_date and end_date must be dates (YYYY-MM-DD)"`)
		return true
	case to.Before(from):
		fakeapi.WriteJSON(w, http.StatusBadRequest, `"end_date must be greater than start_date"`)
		return true
	case to.Sub(from) > 366*24*time.Hour:
		fakeapi.WriteJSON(w, http.StatusBadRequest, `"The date range cannot exceed 366 days"`)
		return true
	case from.Year() < 2006:
		// Toggl started in 2006: earlier dates are refused (toggl_api_docs #220).
		fakeapi.WriteJSON(w, http.StatusBadRequest, `"Date start_date=`+q.StartDate+` is not in this century"`)
		return true
	}
	size := cmp.Or(q.PageSize, 50)
	size = min(size, cmp.Or(s.opts.ReportPageCap, 200))
	s.late.Lock()
	defer s.late.Unlock()
	s.reportQueries = append(s.reportQueries, q)
	type row struct {
		e    TimeEntry
		zone *time.Location
	}
	var list []row
	for _, e := range rows[TimeEntry](s.tables[clients.TimeEntries]) {
		if e.DeletedAt != nil || q.TimeEntryIDs != nil && !slices.Contains(q.TimeEntryIDs, e.ID) {
			continue
		}
		zone := s.zoneOf(e.UserID)
		day := clients.DateOf(e.Start.In(zone)).Time()
		if day.Before(from) || day.After(to) {
			continue
		}
		list = append(list, row{e, zone})
	}
	sort.Slice(list, func(i, j int) bool {
		a, b := list[i].e, list[j].e
		if !a.Start.Equal(b.Start) {
			return a.Start.Before(b.Start)
		}
		return a.ID < b.ID
	})
	first := 0
	switch {
	case q.FirstTimestamp != nil && q.FirstID != nil:
		first = sort.Search(len(list), func(i int) bool {
			e := list[i].e
			return e.Start.Unix() > *q.FirstTimestamp || e.Start.Unix() == *q.FirstTimestamp && e.ID >= *q.FirstID
		})
	case q.FirstRowNumber != nil:
		first = int(max(*q.FirstRowNumber-1, 0))
	}
	rowNumber := int64(1)
	if q.FirstRowNumber != nil {
		rowNumber = *q.FirstRowNumber
	}
	first = min(first, len(list))
	end := min(first+size, len(list))
	objs := make([]map[string]any, 0, end-first)
	for i, rw := range list[first:end] {
		objs = append(objs, s.reportRow(rw.e, rw.zone, rowNumber+int64(i)))
	}
	if end < len(list) {
		next := list[end].e
		w.Header().Set("X-Next-ID", strconv.FormatInt(next.ID, 10))
		w.Header().Set("X-Next-Row-Number", strconv.FormatInt(rowNumber+int64(end-first), 10))
		w.Header().Set("X-Next-Timestamp", strconv.FormatInt(next.Start.Unix(), 10))
	}
	page := 1
	if q.FirstRowNumber != nil {
		page = int((*q.FirstRowNumber-1)/int64(size)) + 1
	}
	out, err := json.Marshal(objs)
	if err != nil {
		panic(err)
	}
	s.WritePage(w, out, s.Malformed(string(clients.TimeEntries), page))
	return true
}

// zoneOf is a user's zone: Options.UserZones, else the token owner's.
func (s *Server) zoneOf(user int64) *time.Location {
	if z, ok := s.opts.UserZones[user]; ok && z != nil {
		return z
	}
	return s.userZone()
}

// reportRow renders an entry as a detailed search row.
func (s *Server) reportRow(e TimeEntry, zone *time.Location, n int64) map[string]any {
	f := func(t time.Time) string { return t.In(zone).Format("2006-01-02T15:04:05-07:00") }
	var stop any
	if e.Stop != nil {
		stop = f(*e.Stop)
	}
	tagIDs := make([]int64, 0, len(e.Tags))
	for _, t := range e.Tags {
		tagIDs = append(tagIDs, s.tagID(t))
	}
	var rate, amount any
	if e.Billable {
		rate = 10000
		if e.Duration > 0 {
			amount = e.Duration * 10000 / 3600
		}
	}
	return map[string]any{
		"user_id": e.UserID, "username": "User " + strconv.FormatInt(e.UserID, 10),
		"project_id": nullID(e.ProjectID), "task_id": nullID(e.TaskID), "billable": e.Billable,
		"description": e.Description, "tag_ids": tagIDs,
		"billable_amount_in_cents": amount, "hourly_rate_in_cents": rate, "currency": "USD",
		"row_number": n,
		"time_entries": []map[string]any{{
			"id": e.ID, "seconds": e.Duration, "start": f(e.Start), "stop": stop,
			"at": s.fmtTime(e.At), "at_tz": f(e.At),
		}},
	}
}

// writeTags answers GET /workspaces/{wid}/tags: every tag name entries
// carry (deleted entries' too), with the id the fake gave it.
func (s *Server) writeTags(w http.ResponseWriter) {
	s.late.Lock()
	defer s.late.Unlock()
	for _, e := range rows[TimeEntry](s.tables[clients.TimeEntries]) {
		for _, t := range e.Tags {
			s.tagID(t)
		}
	}
	type tag struct {
		ID          int64  `json:"id"`
		WorkspaceID int64  `json:"workspace_id"`
		Name        string `json:"name"`
		At          string `json:"at"`
	}
	out := make([]tag, 0, len(s.tagIDs))
	for name, id := range s.tagIDs {
		out = append(out, tag{ID: id, WorkspaceID: s.opts.WorkspaceID, Name: name, At: "2020-01-01T00:00:00+00:00"})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	b, err := json.Marshal(out)
	if err != nil {
		panic(err)
	}
	fakeapi.WriteJSON(w, http.StatusOK, string(b))
}
