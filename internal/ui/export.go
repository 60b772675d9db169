package ui

import (
	"net/http"
	"time"

	"github.com/delayq/delayq"
)

// exportTopic handles GET /ui/topics/{topic}/export: the topic's JSON
// lines (delayq export's) as a download, for a signed-in browser. It is
// not bounded by DefaultRequestTimeout: an export takes as long as the
// topic is large (it paces itself). An error before the first line is an
// error page; one after it aborts the response, so that the browser
// reports a failed download rather than keeping a cut one.
func (s *Server) exportTopic(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := reqCtx(r)
	topic, n, err := s.topic(ctx, r)
	cancel()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	c, err := s.client(n)
	if err != nil {
		s.fail(w, r, err)
		return
	}
	started := false
	start := func() {
		if started {
			return
		}
		started = true
		h := w.Header()
		h.Set("Content-Type", "application/x-ndjson")
		h.Set("Content-Disposition", `attachment; filename="`+topic+`.jsonl"`)
		w.WriteHeader(http.StatusOK)
	}
	rc := http.NewResponseController(w)
	if _, err := c.ExportJSON(r.Context(), topic, writerFunc(func(p []byte) (int, error) {
		start()
		// The server's WriteTimeout bounds a whole response, and an
		// export may take longer: only a client that stops reading for
		// downloadStall cuts it.
		_ = rc.SetWriteDeadline(time.Now().Add(downloadStall))
		return w.Write(p)
	}), delayq.ExportOptions{}); err != nil {
		if started {
			s.log.Error("export cut short", "topic", topic, "err", err)
			panic(http.ErrAbortHandler)
		}
		s.fail(w, r, err)
		return
	}
	start()
}

// downloadStall is how long a download may wait for the browser to take
// its next bytes.
const downloadStall = time.Minute

// writerFunc is an io.Writer of a function.
type writerFunc func(p []byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
