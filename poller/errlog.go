package poller

import (
	"log/slog"
	"sync"
	"time"
)

// Error logging of partition loops. A Redis or proxy outage makes every
// loop of a process fail at each turn; logged per loop, one outage of two
// seconds filled the logs with hundreds of warnings. An ErrLog shared by
// the loops logs the first error of an outage as a warning, the errors
// that follow it within outageQuiet of one another at debug level, and a
// reminder warning every outageRemind while they go on. During an outage
// the process logs as a whole (see NewErrLog), every error is logged at
// debug level.
const (
	outageQuiet  = 5 * time.Second
	outageRemind = time.Minute
)

// ErrLog logs the errors of the partition loops of a process (see above).
// Safe for concurrent use.
type ErrLog struct {
	log   *slog.Logger
	quiet func() bool

	mu       sync.Mutex
	last     time.Time // the last error
	warned   time.Time // the last warning
	since    time.Time // the outage's first error
	suppress int       // errors logged at debug level since the last warning
}

// NewErrLog returns an ErrLog writing to log. quiet, when not nil,
// reports whether an outage that the process logs as a whole runs: the
// errors are then all logged at debug level, and do not count as the
// start of a burst.
func NewErrLog(log *slog.Logger, quiet func() bool) *ErrLog {
	return &ErrLog{log: log, quiet: quiet}
}

// Log logs msg and err, with attrs, as a warning when it starts an outage
// or reminds of one, and at debug level otherwise.
func (e *ErrLog) Log(msg string, err error, attrs ...any) {
	if e.quiet != nil && e.quiet() {
		e.log.Debug(msg, append(attrs, "err", err)...)
		return
	}
	now := time.Now()
	e.mu.Lock()
	var warn []any
	switch {
	case now.Sub(e.last) >= outageQuiet:
		e.since, e.warned, e.suppress = now, now, 0
		warn = []any{"note", "errors that follow within 5s of each other are logged at debug level"}
	case now.Sub(e.warned) >= outageRemind:
		warn = []any{"errors_since", e.since.UTC().Format(time.RFC3339), "errors_not_shown", e.suppress}
		e.warned, e.suppress = now, 0
	default:
		e.suppress++
	}
	e.last = now
	e.mu.Unlock()
	args := append(append(attrs, "err", err), warn...)
	if warn != nil {
		e.log.Warn(msg, args...)
		return
	}
	e.log.Debug(msg, args...)
}
