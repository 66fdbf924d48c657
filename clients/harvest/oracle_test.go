package harvest

import (
	"encoding/json"
	"fmt"

	"github.com/tidemarkhq/tidemark/clients"
)

// The encoding/json decoding of time entries that the single-pass decoder
// replaced, kept as the reference the differential fuzz target compares
// against.

type timeEntryJSON struct {
	common
	SpentDate string      `json:"spent_date"`
	Hours     json.Number `json:"hours"`
	Notes     *string     `json:"notes"`
	User      ref         `json:"user"`
	Project   ref         `json:"project"`
	Task      ref         `json:"task"`
	Client    ref         `json:"client"`
	Invoice   ref         `json:"invoice"`
	Billable  bool        `json:"billable"`
	IsLocked  bool        `json:"is_locked"`
	IsClosed  bool        `json:"is_closed"`
	IsBilled  bool        `json:"is_billed"`
	IsRunning bool        `json:"is_running"`
}

func timeEntry(j *timeEntryJSON, t *clients.TimeEntry, rec *clients.Record) *fieldErr {
	if fe := j.common.fill(rec); fe != nil {
		return fe
	}
	if j.SpentDate == "" {
		return &fieldErr{"spent_date", "missing"}
	}
	d, err := clients.ParseDate(j.SpentDate)
	if err != nil {
		return &fieldErr{"spent_date", fmt.Sprintf("want YYYY-MM-DD, got %q", j.SpentDate)}
	}
	if !validDecimal(string(j.Hours)) {
		return &fieldErr{"hours", "missing or not a number"}
	}
	var fe *fieldErr
	if t.UserID, fe = reqRef(string(j.User.ID), "user.id"); fe != nil {
		return fe
	}
	if t.ProjectID, fe = reqRef(string(j.Project.ID), "project.id"); fe != nil {
		return fe
	}
	if t.TaskID, fe = optRef(string(j.Task.ID), "task.id"); fe != nil {
		return fe
	}
	if t.ClientID, fe = optRef(string(j.Client.ID), "client.id"); fe != nil {
		return fe
	}
	if t.InvoiceID, fe = optRef(string(j.Invoice.ID), "invoice.id"); fe != nil {
		return fe
	}
	t.SpentDate = d
	t.Hours = clients.Decimal(j.Hours)
	t.Notes = j.Notes
	t.Billable, t.IsLocked, t.IsClosed, t.IsBilled, t.IsRunning = j.Billable, j.IsLocked, j.IsClosed, j.IsBilled, j.IsRunning
	rec.TimeEntry = t
	return nil
}

// oracleEntries decodes a page of time entries the encoding/json way.
func oracleEntries(body []byte) ([]clients.Record, bool) {
	var env struct {
		TimeEntries []json.RawMessage `json:"time_entries"`
		Links       *struct {
			Next *string `json:"next"`
		} `json:"links"`
	}
	if json.Unmarshal(body, &env) != nil || env.TimeEntries == nil || env.Links == nil {
		return nil, false
	}
	recs := make([]clients.Record, len(env.TimeEntries))
	for i, raw := range env.TimeEntries {
		var j timeEntryJSON
		if json.Unmarshal(raw, &j) != nil {
			return nil, false
		}
		recs[i].TimeEntry = new(clients.TimeEntry)
		if timeEntry(&j, recs[i].TimeEntry, &recs[i]) != nil {
			return nil, false
		}
		recs[i].Raw = raw
	}
	return recs, true
}

func recordText(r clients.Record) string {
	te := *r.TimeEntry
	notes := "<nil>"
	if te.Notes != nil {
		notes = *te.Notes
	}
	te.Notes = nil
	return fmt.Sprintf("%s %s %s %+v notes=%q", r.ID, r.Version.Format("2006-01-02T15:04:05.999999999Z07:00"), r.Raw, te, notes)
}
