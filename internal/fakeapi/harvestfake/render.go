package harvestfake

import (
	"cmp"
	"strconv"
	"time"
	"unicode/utf8"
)

// JSON rendering by appending: a page of 2000 entries is rendered per
// request, so it must be cheap. The shapes follow Harvest's documented
// objects, including fields the client ignores.

const hexDigits = "0123456789abcdef"

func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, s[start:i]...)
				b = append(b, `\ufffd`...)
				i++
				start = i
				continue
			}
			i += size
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"', '\\':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\t':
			b = append(b, '\\', 't')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

func appendTime(b []byte, t time.Time) []byte {
	b = append(b, '"')
	b = t.UTC().AppendFormat(b, "2006-01-02T15:04:05Z")
	return append(b, '"')
}

func appendKey(b []byte, k string) []byte {
	b = append(b, ',', '"')
	b = append(b, k...)
	return append(b, '"', ':')
}

func appendInt(b []byte, k string, v int64) []byte {
	return strconv.AppendInt(appendKey(b, k), v, 10)
}

func appendBool(b []byte, k string, v bool) []byte {
	return strconv.AppendBool(appendKey(b, k), v)
}

func appendStr(b []byte, k, v string) []byte { return appendString(appendKey(b, k), v) }

func appendNull(b []byte, k string) []byte { return append(appendKey(b, k), "null"...) }

// openObject starts an object with its id: {"id":id. The caller closes it.
func openObject(b []byte, id int64) []byte {
	return strconv.AppendInt(append(b, `{"id":`...), id, 10)
}

// appendRef appends ,"k":{"id":id,"name":name} and any more string fields
// after the name (pairs of key and value): a record's summary of another.
func appendRef(b []byte, k string, id int64, name string, more ...string) []byte {
	b = appendStr(openObject(appendKey(b, k), id), "name", name)
	for i := 0; i+1 < len(more); i += 2 {
		b = appendStr(b, more[i], more[i+1])
	}
	return append(b, '}')
}

func appendOptStr(b []byte, k string, v *string) []byte {
	if v == nil {
		return appendNull(b, k)
	}
	return appendString(appendKey(b, k), *v)
}

// renderOpts alter one record for fault injection.
type renderOpts struct {
	noUpdatedAt    bool
	wrongTypeStamp bool
}

func appendStamps(b []byte, created, updated time.Time, o renderOpts) []byte {
	b = appendTime(appendKey(b, "created_at"), created)
	switch {
	case o.noUpdatedAt:
	case o.wrongTypeStamp:
		b = strconv.AppendInt(appendKey(b, "updated_at"), updated.Unix(), 10)
	default:
		b = appendTime(appendKey(b, "updated_at"), updated)
	}
	return b
}

func (s *Server) appendTimeEntry(b []byte, e *TimeEntry, o renderOpts) []byte {
	b = openObject(b, e.ID)
	b = appendStr(b, "spent_date", e.SpentDate.String())

	u, _ := s.tables.users.lookup(e.UserID)
	b = appendRef(b, "user", e.UserID, u.FirstName+" "+u.LastName)
	if e.ClientID != 0 {
		c, _ := s.tables.clients.lookup(e.ClientID)
		b = appendRef(b, "client", e.ClientID, c.Name, "currency", c.Currency)
	} else {
		b = appendNull(b, "client")
	}
	p, _ := s.tables.projects.lookup(e.ProjectID)
	b = appendRef(b, "project", e.ProjectID, p.Name, "code", p.Code)
	if e.TaskID != 0 {
		t, _ := s.tables.tasks.lookup(e.TaskID)
		b = appendRef(b, "task", e.TaskID, t.Name)
	} else {
		b = appendNull(b, "task")
	}

	b = openObject(appendKey(b, "user_assignment"), e.ProjectID*1000+e.UserID%1000)
	b = append(b, `,"is_project_manager":false,"is_active":true,"use_default_rates":true,"budget":null`...)
	b = appendStamps(b, p.CreatedAt, p.CreatedAt, renderOpts{})
	b = append(b, `,"hourly_rate":100.0}`...)

	b = openObject(appendKey(b, "task_assignment"), e.ProjectID*1000+e.TaskID%1000)
	b = appendBool(b, "billable", e.Billable)
	b = append(b, `,"is_active":true`...)
	b = appendStamps(b, p.CreatedAt, p.CreatedAt, renderOpts{})
	b = append(b, `,"hourly_rate":100.0,"budget":null}`...)

	b = append(b, `,"external_reference":null`...)
	if e.InvoiceID != 0 {
		b = openObject(appendKey(b, "invoice"), e.InvoiceID)
		b = append(b, `,"number":"`...)
		b = strconv.AppendInt(b, e.InvoiceID%100000, 10)
		b = append(b, `"}`...)
	} else {
		b = appendNull(b, "invoice")
	}
	hours := e.HoursAt(s.Now())
	if hours == "" {
		hours = "0.0"
	}
	b = append(appendKey(b, "hours"), hours...)
	b = append(appendKey(b, "hours_without_timer"), hours...)
	b = append(appendKey(b, "rounded_hours"), hours...)
	b = appendOptStr(b, "notes", e.Notes)
	b = appendStamps(b, e.CreatedAt, e.UpdatedAt, o)
	b = appendBool(b, "is_locked", e.IsLocked)
	switch {
	case e.IsBilled:
		b = appendStr(b, "locked_reason", "Item Invoiced and Locked for this Time Period")
	case e.IsClosed:
		b = appendStr(b, "locked_reason", "Item Approved and Locked for this Time Period")
	default:
		b = appendNull(b, "locked_reason")
	}
	b = appendBool(b, "is_closed", e.IsClosed)
	b = appendStr(b, "approval_status", e.ApprovalStatus())
	b = appendBool(b, "is_billed", e.IsBilled)
	if e.IsRunning {
		b = appendTime(appendKey(b, "timer_started_at"), cmp.Or(e.TimerStartedAt, e.UpdatedAt))
	} else {
		b = appendNull(b, "timer_started_at")
	}
	b = append(b, `,"started_time":null,"ended_time":null`...)
	b = appendBool(b, "is_running", e.IsRunning)
	b = appendBool(b, "billable", e.Billable)
	b = appendBool(b, "budgeted", false)
	if e.Billable {
		b = append(b, `,"billable_rate":100.0`...)
	} else {
		b = append(b, `,"billable_rate":null`...)
	}
	b = append(b, `,"cost_rate":50.0`...)
	return append(b, '}')
}

func (s *Server) appendProject(b []byte, p *Project, o renderOpts) []byte {
	c, _ := s.tables.clients.lookup(p.ClientID)
	b = appendRef(openObject(b, p.ID), "client", p.ClientID, c.Name, "currency", c.Currency)
	b = appendStr(b, "name", p.Name)
	b = appendStr(b, "code", p.Code)
	b = appendBool(b, "is_active", p.IsActive)
	b = appendBool(b, "is_billable", p.IsBillable)
	b = append(b, `,"is_fixed_fee":false,"bill_by":"Project","budget":null,"budget_by":"none","budget_is_monthly":false,"notify_when_over_budget":false,"over_budget_notification_percentage":80.0,"show_budget_to_all":false,"cost_budget":null,"cost_budget_include_expenses":false,"hourly_rate":100.0,"fee":null,"notes":"","starts_on":null,"ends_on":null,"over_budget_notification_date":null`...)
	b = appendStamps(b, p.CreatedAt, p.UpdatedAt, o)
	return append(b, '}')
}

func (s *Server) appendClient(b []byte, c *Client, o renderOpts) []byte {
	b = openObject(b, c.ID)
	b = appendStr(b, "name", c.Name)
	b = appendBool(b, "is_active", c.IsActive)
	b = append(b, `,"address":null,"statement_key":"`...)
	b = strconv.AppendInt(b, c.ID*7919, 16)
	b = append(b, '"')
	b = appendStamps(b, c.CreatedAt, c.UpdatedAt, o)
	b = appendStr(b, "currency", c.Currency)
	return append(b, '}')
}

func (s *Server) appendUser(b []byte, u *User, o renderOpts) []byte {
	b = openObject(b, u.ID)
	b = appendStr(b, "first_name", u.FirstName)
	b = appendStr(b, "last_name", u.LastName)
	b = appendStr(b, "email", u.Email)
	b = append(b, `,"telephone":"","timezone":"Eastern Time (US & Canada)","weekly_capacity":126000,"has_access_to_all_future_projects":false,"is_contractor":false`...)
	b = appendBool(b, "is_active", u.IsActive)
	b = append(b, `,"calendar_integration_enabled":false,"calendar_integration_source":null,"can_create_projects":false,"roles":[],"access_roles":["member"],"permissions_claims":["timers:manage:own"],"avatar_url":"https://d3s3969qhosaug.cloudfront.net/v2/user.png","default_hourly_rate":100.0,"cost_rate":50.0`...)
	b = appendStamps(b, u.CreatedAt, u.UpdatedAt, o)
	return append(b, '}')
}

func (s *Server) appendTask(b []byte, t *Task, o renderOpts) []byte {
	b = openObject(b, t.ID)
	b = appendStr(b, "name", t.Name)
	b = append(b, `,"billable_by_default":true,"default_hourly_rate":100.0,"is_default":false`...)
	b = appendBool(b, "is_active", t.IsActive)
	b = appendStamps(b, t.CreatedAt, t.UpdatedAt, o)
	return append(b, '}')
}
