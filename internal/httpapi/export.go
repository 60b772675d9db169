package httpapi

import (
	"net/http"
	"time"

	"github.com/delayq/delayq"
)

// export handles GET /v1/topics/{topic}/export?state=S,...: every message
// of the topic as JSON lines (delayq.Inspector.ExportJSON), a download named
// after the topic. An error before the first line is a JSON error
// response; one after it aborts the response, so that a client never
// takes a cut export for a whole one.
func (s *server) export(w http.ResponseWriter, r *http.Request) {
	topic, c, ok := s.topic(w, r)
	if !ok {
		return
	}
	var opts delayq.ExportOptions
	if v := r.URL.Query().Get("state"); v != "" {
		sts, err := delayq.ParseStates(v)
		if err != nil {
			s.fail(w, r, badField("state", "%v", err))
			return
		}
		opts.States = sts
	}
	out := &Download{W: w, Name: topic + ".jsonl"}
	if _, err := c.Inspector().ExportJSON(r.Context(), topic, out, opts); err != nil {
		if out.Started() {
			s.log.Error("export cut short", "topic", topic, "err", err)
			panic(http.ErrAbortHandler)
		}
		s.fail(w, r, err)
		return
	}
	out.Start() // an empty topic is an empty download
}

// downloadStall is how long a download may wait for the client to take
// its next bytes: the server's WriteTimeout bounds a whole response, and
// an export may take longer.
const downloadStall = time.Minute

// Download is a JSON lines download (an export's) as an io.Writer: it
// writes the headers before the first byte, so that an error before then
// can still be an error response, and moves the write deadline on before
// each write. The API and the dashboard serve exports through it.
type Download struct {
	W       http.ResponseWriter
	Name    string // the file name offered
	started bool
}

// Start writes the headers, once; a download of nothing calls it at its
// end.
func (d *Download) Start() {
	if d.started {
		return
	}
	d.started = true
	h := d.W.Header()
	h.Set("Content-Type", "application/x-ndjson")
	h.Set("Content-Disposition", `attachment; filename="`+d.Name+`"`)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")
	d.W.WriteHeader(http.StatusOK)
}

// Started says whether the headers went: an error after that must abort
// the response (panic(http.ErrAbortHandler)), so that a client never takes
// a cut download for a whole one.
func (d *Download) Started() bool { return d.started }

// Write starts the response, then writes p.
func (d *Download) Write(p []byte) (int, error) {
	d.Start()
	_ = http.NewResponseController(d.W).SetWriteDeadline(time.Now().Add(downloadStall)) // unsupported: the server's bound holds
	return d.W.Write(p)
}
