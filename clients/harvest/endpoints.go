package harvest

import (
	"github.com/tidemarkhq/tidemark/clients"
	"github.com/tidemarkhq/tidemark/schema"
)

// Endpoint is where Harvest serves a resource. Its records are read from
// the resource's declaration (package schema); only this entry is
// Harvest's own.
type Endpoint struct {
	// Path is the list's path under the base URL: the resource's name for
	// a top-level list, "company" for the company, and for a list nested
	// under its declaration's Parent the part after /{parent}/{id}/
	// ("payments" in /invoices/{id}/payments). The envelope's array is
	// always named after the resource.
	Path string
	// Since says the list takes updated_since (APIS.md; the Harvest OpenAPI
	// description): without it every pass lists it whole.
	Since bool
}

// Endpoints are the resources Harvest serves beyond the first five, whose
// lists each have a hand-written reader (refs.go, entries.go).
var Endpoints = map[clients.Resource]Endpoint{
	schema.Contacts.Name:               {Path: "contacts", Since: true},
	schema.ExpenseCategories.Name:      {Path: "expense_categories", Since: true},
	schema.Expenses.Name:               {Path: "expenses", Since: true},
	schema.InvoiceItemCategories.Name:  {Path: "invoice_item_categories", Since: true},
	schema.EstimateItemCategories.Name: {Path: "estimate_item_categories", Since: true},
	schema.Invoices.Name:               {Path: "invoices", Since: true},
	schema.InvoicePayments.Name:        {Path: "payments", Since: true},
	schema.InvoiceMessages.Name:        {Path: "messages", Since: true},
	schema.Estimates.Name:              {Path: "estimates", Since: true},
	schema.EstimateMessages.Name:       {Path: "messages", Since: true},
	schema.TaskAssignments.Name:        {Path: "task_assignments", Since: true},
	schema.UserAssignments.Name:        {Path: "user_assignments", Since: true},
	schema.Roles.Name:                  {Path: "roles"},
	schema.Company.Name:                {Path: "company"},
	schema.BillableRates.Name:          {Path: "billable_rates"},
	schema.CostRates.Name:              {Path: "cost_rates"},
}

// EndpointOf returns r's endpoint: its entry in Endpoints, else its name
// with updated_since (the first five).
func EndpointOf(r clients.Resource) Endpoint {
	if e, ok := Endpoints[r]; ok {
		return e
	}
	return Endpoint{Path: string(r), Since: true}
}

// declaredReaders read the records of the resources in Endpoints.
var declaredReaders = func() map[clients.Resource]*declared {
	m := map[clients.Resource]*declared{}
	for r := range Endpoints {
		t, _ := schema.Lookup(r)
		m[r] = newDeclared(t)
	}
	return m
}()
