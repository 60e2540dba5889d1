package app

// BreakListenerForTest closes the API server's listener under it, as a failing network would.
func BreakListenerForTest(a *App) { _ = a.ln.Close() }
