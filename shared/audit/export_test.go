package audit

// Conforms exposes [Record.conforms] to the tests.
func Conforms(r *Record) bool { return r.conforms() }

// Bound exposes [Record.bound] to the tests.
func Bound(r *Record) { r.bound(r.Time) }

// NumEndings is one past the last [Ending], so the tests can tell that
// every ending has its spellings.
const NumEndings = numEndings
