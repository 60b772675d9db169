package ui

import (
	"net/http"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/httpapi"
)

// exportTopic handles GET /ui/topics/{topic}/export: the topic's JSON
// lines (delayq export's) as a download, for a signed-in browser. It is
// not bounded by DefaultRequestTimeout: an export takes as long as the
// topic is large (it paces itself). An error before the first line is an
// error page; one after it aborts the response, so that the browser
// reports a failed download rather than keeping a cut one.
func (s *Server) exportTopic(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := reqCtx(r)
	topic, _, err := s.topic(ctx, r)
	cancel()
	if err != nil {
		s.fail(w, r, err)
		return
	}
	out := &httpapi.Download{W: w, Name: topic + ".jsonl"}
	if _, err := s.ins.ExportJSON(r.Context(), topic, out, delayq.ExportOptions{}); err != nil {
		if out.Started() {
			s.log.Error("export cut short", "topic", topic, "err", err)
			panic(http.ErrAbortHandler)
		}
		s.fail(w, r, err)
		return
	}
	out.Start()
}
