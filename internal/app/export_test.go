package app

// BuiltSources names the sources whose client this App holds now.
func (a *App) BuiltSources() []string { return a.builtSources() }

// ShareClients makes a the daemon's kind of App: each source a slot whose
// client exists while the replica owns it (share.go).
func (a *App) ShareClients() { a.share = true }
