package simulated

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/clients/harvest"
	"github.com/tidemarkhq/tidemark/internal/fakeapi/harvestfake"
	"github.com/tidemarkhq/tidemark/schema"
)

// The rest of the account (issue 12): what invoicing, payroll and approvals
// read. Invoices follow the generated time entries (one per client and
// month, a line per project at 100 an hour), older ones are paid; every
// declared resource gets records, and churns through the generic mutation
// below, so that the demo shows each one in sync.

// rate is the simulated agency's hourly rate (harvestfake renders
// billable_rate 100.0 on billable entries).
const rate = 100

// invoiceLines are an invoice's billed hours per project, in cents.
type invoiceLines struct {
	client  int64
	at      time.Time
	cents   map[int64]int64 // project → amount
	hundred map[int64]int64 // project → hours × 100
}

func cents(c int64) clients.Decimal { return clients.Decimal(fmt.Sprintf("%d.%02d", c/100, c%100)) }

// hundredths parses "1.25" as 125.
func hundredths(h string) int64 {
	whole, frac, _ := cut(h, '.')
	w, _ := strconv.ParseInt(whole, 10, 64)
	f, _ := strconv.ParseInt((frac + "00")[:2], 10, 64)
	return w*100 + f
}

func cut(s string, sep byte) (string, string, bool) {
	for i := 0; i < len(s); i++ {
		if s[i] == sep {
			return s[:i], s[i+1:], true
		}
	}
	return s, "", false
}

// generateAccount adds everything but time entries and the first four
// resources, at created (reference data) or at each invoice's stamp.
func (t *Tracker) generateAccount(anchor, created time.Time, invoices map[int64]*invoiceLines) {
	r := t.rng
	put := func(res clients.Resource, d harvestfake.Doc) {
		if d.CreatedAt.IsZero() {
			d.CreatedAt = created
		}
		t.putDoc(res, d)
	}
	day := clients.DateOf(created)
	next := int64(60_000_000)
	id := func() int64 { next++; return next }
	sample := func(def *schema.Table, content string) schema.Values {
		col := "name"
		if _, ok := def.Column(col); !ok {
			col = ""
		}
		return harvestfake.Sample(def, content, col, day)
	}

	co := sample(schema.Company, "Tidemark Simulated Agency")
	co["full_domain"], co["week_start_day"], co["plan_type"] = "simulated.harvestapp.com", "Monday", "business-v4"
	co["is_active"], co["approval_feature"], co["expense_feature"], co["invoice_feature"], co["estimate_feature"] = true, true, true, true, true
	put(schema.Company.Name, harvestfake.Doc{ID: 1, Values: co})

	for i, c := range t.clients {
		v := sample(schema.Contacts, "")
		v["first_name"], v["last_name"], v["client_id"] = firstNames[(i*3)%len(firstNames)], lastNames[i%len(lastNames)], strconv.FormatInt(c, 10)
		v["email"] = fmt.Sprintf("billing%d@client.example", i)
		put(schema.Contacts.Name, harvestfake.Doc{ID: id(), Values: v})
	}
	var categories []int64
	for _, name := range []string{"Travel", "Meals", "Software", "Mileage"} {
		v := sample(schema.ExpenseCategories, name)
		v["is_active"] = true
		if name == "Mileage" {
			v["unit_name"], v["unit_price"] = "mile", clients.Decimal("0.67")
		}
		d := harvestfake.Doc{ID: id(), Values: v}
		put(schema.ExpenseCategories.Name, d)
		categories = append(categories, d.ID)
	}
	for _, name := range []string{"Service", "Product"} {
		v := sample(schema.InvoiceItemCategories, name)
		v["use_as_service"], v["use_as_expense"] = name == "Service", name == "Product"
		put(schema.InvoiceItemCategories.Name, harvestfake.Doc{ID: id(), Values: v})
		put(schema.EstimateItemCategories.Name, harvestfake.Doc{ID: id(), Values: sample(schema.EstimateItemCategories, name)})
	}
	for _, p := range t.projects {
		for k := range 3 {
			v := sample(schema.TaskAssignments, "")
			v["project_id"], v["task_id"] = strconv.FormatInt(p.ID, 10), strconv.FormatInt(t.tasks[(int(p.ID)+k)%len(t.tasks)], 10)
			v["billable"], v["is_active"], v["hourly_rate"] = p.IsBillable, true, cents(rate*100)
			put(schema.TaskAssignments.Name, harvestfake.Doc{ID: id(), Values: v})
		}
		for k := range 2 {
			v := sample(schema.UserAssignments, "")
			v["project_id"], v["user_id"] = strconv.FormatInt(p.ID, 10), strconv.FormatInt(t.users[(int(p.ID)+k)%len(t.users)], 10)
			v["is_project_manager"], v["use_default_rates"], v["is_active"] = k == 0, true, true
			put(schema.UserAssignments.Name, harvestfake.Doc{ID: id(), Values: v})
		}
	}
	for i, name := range []string{"Designers", "Developers"} {
		var members []int64
		for k, u := range t.users {
			if k%2 == i {
				members = append(members, u)
			}
		}
		v := sample(schema.Roles, name)
		b, _ := json.Marshal(members)
		v["user_ids"] = json.RawMessage(b)
		put(schema.Roles.Name, harvestfake.Doc{ID: id(), Values: v})
	}
	for _, u := range t.users {
		for _, res := range []*schema.Table{schema.BillableRates, schema.CostRates} {
			amount := int64(rate * 100)
			if res == schema.CostRates {
				amount = 45_00 + int64(r.IntN(30))*100
			}
			v := sample(res, "")
			v["amount"] = cents(amount)
			put(res.Name, harvestfake.Doc{ID: id(), Parent: u, Values: v})
		}
	}
	// Expenses: a few per user over the history.
	for _, u := range t.users {
		for range 3 {
			pr := t.projects[r.IntN(len(t.projects))]
			spent := anchor.AddDate(0, 0, -r.IntN(max(t.days, 1)))
			v := sample(schema.Expenses, "")
			v["notes"], v["spent_date"], v["total_cost"] = "Taxi to client", clients.DateOf(spent), cents(int64(1000+r.IntN(20000)))
			v["user_id"], v["project_id"], v["client_id"] = strconv.FormatInt(u, 10), strconv.FormatInt(pr.ID, 10), strconv.FormatInt(pr.ClientID, 10)
			v["expense_category_id"] = strconv.FormatInt(categories[r.IntN(len(categories))], 10)
			v["billable"], v["approval_status"] = pr.IsBillable, []string{"unsubmitted", "submitted", "approved"}[r.IntN(3)]
			at := minTime(spent.Add(20*time.Hour), anchor)
			put(schema.Expenses.Name, harvestfake.Doc{ID: id(), Values: v, CreatedAt: at})
		}
	}
	// Invoices from the billed entries; the ones older than 20 days paid.
	ids := make([]int64, 0, len(invoices))
	for inv := range invoices {
		ids = append(ids, inv)
	}
	slices.Sort(ids)
	for _, inv := range ids {
		il := invoices[inv]
		t.putInvoice(inv, il, anchor.AddDate(0, 0, -20), put)
	}
	// Estimates: one per client.
	for i, c := range t.clients {
		v := sample(schema.Estimates, "")
		v["client_id"], v["number"], v["state"] = strconv.FormatInt(c, 10), fmt.Sprintf("E%04d", i+1), "sent"
		v["currency"], v["issue_date"], v["subject"] = "EUR", day, "Next quarter"
		d := harvestfake.Doc{ID: id(), Values: v}
		var total int64
		for k := range 2 {
			lv := harvestfake.SampleLine(schema.Estimates.Children[0], day)
			q := int64(10 + 10*k)
			lv["kind"], lv["quantity"], lv["unit_price"], lv["amount"] = "Service", cents(q*100), cents(rate*100), cents(q*rate*100)
			d.Lines = append(d.Lines, harvestfake.Line{ID: d.ID*10 + int64(k), Values: lv})
			total += q * rate * 100
		}
		d.Values["amount"] = cents(total)
		put(schema.Estimates.Name, d)
		mv := sample(schema.EstimateMessages, "")
		mv["subject"], mv["sent_by_email"], mv["event_type"] = "Estimate for next quarter", "pm@agency.example", "send"
		put(schema.EstimateMessages.Name, harvestfake.Doc{ID: id(), Parent: d.ID, Values: mv})
	}
	t.nextDoc = next
}

// putInvoice stores an invoice with a line per project, a send message, and
// a payment in full when it was issued before paidBefore.
func (t *Tracker) putInvoice(inv int64, il *invoiceLines, paidBefore time.Time, put func(clients.Resource, harvestfake.Doc)) {
	day := clients.DateOf(il.at)
	v := harvestfake.Sample(schema.Invoices, "", "", day)
	projects := make([]int64, 0, len(il.cents))
	for p := range il.cents {
		projects = append(projects, p)
	}
	slices.Sort(projects)
	d := harvestfake.Doc{ID: inv, Values: v, CreatedAt: il.at, UpdatedAt: il.at}
	var total int64
	for k, p := range projects {
		lv := harvestfake.SampleLine(schema.Invoices.Children[0], day)
		lv["kind"], lv["project_id"] = "Service", strconv.FormatInt(p, 10)
		lv["quantity"], lv["unit_price"], lv["amount"] = cents(il.hundred[p]), cents(rate*100), cents(il.cents[p])
		d.Lines = append(d.Lines, harvestfake.Line{ID: inv*100 + int64(k), Values: lv})
		total += il.cents[p]
	}
	paid := il.at.Before(paidBefore)
	v["client_id"], v["number"], v["amount"], v["currency"] = strconv.FormatInt(il.client, 10), strconv.FormatInt(inv%100000, 10), cents(total), "EUR"
	v["issue_date"], v["due_date"], v["sent_at"], v["subject"] = day, day.AddDays(30), il.at, "Services "+day.String()[:7]
	v["state"], v["due_amount"] = "open", cents(total)
	if paid {
		v["state"], v["due_amount"], v["paid_at"] = "paid", cents(0), il.at.AddDate(0, 0, 20)
	}
	put(schema.Invoices.Name, d)
	mv := harvestfake.Sample(schema.InvoiceMessages, "", "", day)
	mv["subject"], mv["sent_by_email"], mv["event_type"] = "Invoice "+v["number"].(string), "billing@agency.example", "send"
	put(schema.InvoiceMessages.Name, harvestfake.Doc{ID: inv*10 + 1, Parent: inv, Values: mv, CreatedAt: il.at, UpdatedAt: il.at})
	if paid {
		pv := harvestfake.Sample(schema.InvoicePayments, "", "", day)
		pv["amount"], pv["paid_at"], pv["paid_date"], pv["notes"] = cents(total), il.at.AddDate(0, 0, 20), day.AddDays(20), "Bank transfer"
		at := il.at.AddDate(0, 0, 20)
		put(schema.InvoicePayments.Name, harvestfake.Doc{ID: inv*10 + 2, Parent: inv, Values: pv, CreatedAt: at, UpdatedAt: at})
	}
}

// accountResources are the resources the generic mutation churns.
var accountResources = func() []clients.Resource {
	var out []clients.Resource
	for _, r := range harvest.Resources {
		if _, ok := harvest.Endpoints[r]; ok {
			out = append(out, r)
		}
	}
	return out
}()

// touchAccount edits, creates or deletes one record of a resource read
// from its declaration, through the declaration alone: an edit changes the
// content column (a name, notes, an amount), a create copies a live record
// under a new id, a deletion removes one (never the company, never the
// last of a resource).
func (t *Tracker) touchAccount() {
	r := t.rng
	res := accountResources[r.IntN(len(accountResources))]
	live := t.docs[res]
	if len(live) == 0 {
		return
	}
	i := r.IntN(len(live))
	v, ok := t.fake.Get(res, live[i])
	if !ok {
		t.docs[res] = slices.Delete(live, i, i+1)
		return
	}
	d := v.(harvestfake.Doc)
	def, _ := schema.Lookup(res)
	now := t.stamp()
	switch k := r.IntN(10); {
	case k < 2 && !def.Singleton && len(live) > 1:
		t.fake.Delete(res, d.ID)
		t.docs[res] = slices.Delete(live, i, i+1)
	case k < 4 && !def.Singleton:
		t.nextDoc++
		d.ID, d.CreatedAt, d.UpdatedAt = t.nextDoc, now, now
		for j := range d.Lines {
			d.Lines[j].ID = d.ID*100 + int64(j)
		}
		if def.Parent != "" {
			if _, ok := t.fake.Get(def.Parent, d.Parent); !ok {
				return
			}
		}
		t.fake.PutDoc(res, d)
		t.docs[res] = append(t.docs[res], d.ID)
	default:
		d.Values = editContent(def, d.Values)
		d.UpdatedAt = now
		t.fake.PutDoc(res, d)
	}
}

// editContent changes the first text or numeric column that is no id.
func editContent(def *schema.Table, vs schema.Values) schema.Values {
	out := schema.Values{}
	for k, v := range vs {
		out[k] = v
	}
	for _, c := range def.Columns {
		if c.Name == def.ParentColumn || (len(c.Name) > 3 && c.Name[len(c.Name)-3:] == "_id") {
			continue
		}
		switch v := out[c.Name].(type) {
		case string:
			out[c.Name] = v + "·"
			return out
		case clients.Decimal:
			out[c.Name] = clients.Decimal(string(v) + "1")
			return out
		}
	}
	return out
}

// bulkSubmit submits one user's unsubmitted entries of the last fortnight
// for approval, with a single stamp.
func (t *Tracker) bulkSubmit() {
	user := t.users[t.rng.IntN(len(t.users))]
	now := t.stamp()
	from := clients.DateOf(now.AddDate(0, 0, -14))
	for _, e := range t.fake.TimeEntriesWhere(func(e *harvestfake.TimeEntry) bool {
		return e.UserID == user && !e.IsClosed && !e.Submitted && !e.IsRunning && !e.SpentDate.Before(from)
	}) {
		e.Submitted, e.UpdatedAt = true, now
		t.fake.PutTimeEntry(e)
	}
}

// putDoc stores a record and remembers its id for the mutations.
func (t *Tracker) putDoc(res clients.Resource, d harvestfake.Doc) {
	if d.UpdatedAt.IsZero() {
		d.UpdatedAt = d.CreatedAt
	}
	t.fake.PutDoc(res, d)
	t.docs[res] = append(t.docs[res], d.ID)
}

// payInvoice records a payment in full on an open invoice.
func (t *Tracker) payInvoice() {
	for _, id := range t.docs[schema.Invoices.Name] {
		v, ok := t.fake.Get(schema.Invoices.Name, id)
		if !ok {
			continue
		}
		d := v.(harvestfake.Doc)
		if d.Values["state"] != "open" {
			continue
		}
		now := t.stamp()
		day := clients.DateOf(now)
		pv := harvestfake.Sample(schema.InvoicePayments, "", "", day)
		pv["amount"], pv["paid_at"], pv["paid_date"], pv["notes"] = d.Values["due_amount"], now, day, "Card"
		t.nextDoc++
		t.putDoc(schema.InvoicePayments.Name, harvestfake.Doc{ID: t.nextDoc, Parent: id, Values: pv, CreatedAt: now})
		d.Values = maps.Clone(d.Values)
		d.Values["state"], d.Values["due_amount"], d.Values["paid_at"] = "paid", cents(0), now
		d.UpdatedAt = now
		t.fake.PutDoc(schema.Invoices.Name, d)
		return
	}
}
