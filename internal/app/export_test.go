package app

// BuiltSources names the sources whose client this App holds now.
func (a *App) BuiltSources() []string { return a.builtSources() }
