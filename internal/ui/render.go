package ui

import (
	"bytes"
	"embed"
	"encoding/base64"
	"fmt"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"
)

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// pageNames are the templates of templates/ that are whole pages; each
// defines "title" and "content", and may define "live", the part the live
// refresh fetches again.
var pageNames = []string{"overview", "topic", "message", "scheduled", "dead", "schedules", "confirm", "login", "error"}

// pages holds one parsed template per page, each with the layout.
type pages struct {
	byName map[string]*template.Template
}

// parsePages parses the layout with each page.
func parsePages() (*pages, error) {
	base, err := template.New("layout.html").Funcs(funcs).ParseFS(templateFS, "templates/layout.html")
	if err != nil {
		return nil, fmt.Errorf("ui: templates: %w", err)
	}
	p := &pages{byName: map[string]*template.Template{}}
	for _, name := range pageNames {
		t, err := template.Must(base.Clone()).ParseFS(templateFS, "templates/"+name+".html")
		if err != nil {
			return nil, fmt.Errorf("ui: template %s: %w", name, err)
		}
		if t.Lookup("live") == nil {
			t, _ = t.New("live").Parse("")
		}
		p.byName[name] = t
	}
	return p, nil
}

// page is what every page gets besides its own view, as .Page.
type page struct {
	CSRF      string
	ReadOnly  bool
	Auth      bool // a token is configured: show "sign out"
	Flash     *flash
	Refresh   int // live refresh period in ms
	Now       time.Time
	Topic     string // the topic of the page, for the navigation
	Tab       string
	ServedBy  string // "worker" or "standalone"
	PathQuery string // the request's path and query, for the live refresh
}

// viewer is implemented by every page view: it receives the common part.
type viewer interface{ setPage(*page) }

// base is embedded by every view.
type base struct{ Page *page }

func (b *base) setPage(p *page) { b.Page = p }

// render writes page name with view v, or only its "live" part when r
// asks for the fragment. It renders to a buffer first, so that a
// template error is a clean 500.
func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, name string, v viewer) {
	t := s.pages.byName[name]
	p := &page{
		ReadOnly: s.o.ReadOnly, Auth: s.auth.on, Refresh: int(s.o.Refresh / time.Millisecond),
		Now: s.o.Now().UTC(), Topic: r.PathValue("topic"), ServedBy: "standalone",
		PathQuery: r.URL.RequestURI(), Tab: name,
	}
	if s.o.Counters != nil {
		p.ServedBy = "worker"
	}
	fragment := isFragment(r)
	if !fragment {
		id := s.auth.ensureSession(w, r)
		if id != "" {
			p.CSRF = s.auth.csrf(id)
		}
		p.Flash = takeFlash(w, r)
	}
	v.setPage(p)
	var buf bytes.Buffer
	tmpl := "layout"
	if fragment {
		tmpl = "live"
	}
	if err := t.ExecuteTemplate(&buf, tmpl, v); err != nil {
		s.log.Error("render", "page", name, "err", err)
		http.Error(w, "internal error rendering the page", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(code)
	w.Write(buf.Bytes())
}

// errorView is the error page.
type errorView struct {
	base
	Code    int
	Message string
}

// errorPage renders an error page with status code.
func (s *Server) errorPage(w http.ResponseWriter, r *http.Request, code int, msg string) {
	if isFragment(r) {
		http.Error(w, msg, code)
		return
	}
	s.render(w, r, code, "error", &errorView{Code: code, Message: msg})
}

// loginView is the sign-in page.
type loginView struct {
	base
	Next  string
	Error string
}

// flash is a one-time message shown on the page after an action.
type flash struct {
	Error   bool
	Message string
}

// setFlash stores a message for the next page, in a short-lived cookie.
func setFlash(w http.ResponseWriter, r *http.Request, isErr bool, format string, args ...any) {
	kind := "ok"
	if isErr {
		kind = "err"
	}
	msg := fmt.Sprintf(format, args...)
	if len(msg) > 1000 {
		msg = msg[:1000] + "…"
	}
	setCookie(w, r, flashCookie, base64.RawURLEncoding.EncodeToString([]byte(kind+"\x00"+msg)), 60)
}

// takeFlash returns the flash message of r, if any, and clears it.
func takeFlash(w http.ResponseWriter, r *http.Request) *flash {
	c, err := r.Cookie(flashCookie)
	if err != nil {
		return nil
	}
	setCookie(w, r, flashCookie, "", -1)
	b, err := base64.RawURLEncoding.DecodeString(c.Value)
	if err != nil {
		return nil
	}
	kind, msg, ok := strings.Cut(string(b), "\x00")
	if !ok {
		return nil
	}
	return &flash{Error: kind == "err", Message: msg}
}

// funcs are the template functions.
var funcs = template.FuncMap{
	"ts":    formatTime,
	"rel":   relTime,
	"dur":   formatDuration,
	"num":   formatNum,
	"bytes": formatBytes,
	"ms":    func(d time.Duration) int64 { return d.Milliseconds() },
	"add":   func(a, b int) int { return a + b },
	"plural": func(n any, one, many string) string {
		if fmt.Sprint(n) == "1" {
			return one
		}
		return many
	},
}

// formatTime formats t in UTC to the millisecond; the zero time is "—".
func formatTime(t time.Time) string {
	if t.IsZero() {
		return "—"
	}
	return t.UTC().Format("2006-01-02 15:04:05.000Z")
}

// relTime says how far t is from now: "in 4m32s" or "3.2s ago".
func relTime(now, t time.Time) string {
	if t.IsZero() {
		return ""
	}
	d := t.Sub(now)
	if d >= 0 {
		return "in " + formatDuration(d)
	}
	return formatDuration(-d) + " ago"
}

// formatDuration rounds d for people: 0s, 850ms, 4.2s, 4m32s, 2h05m, 3d4h.
func formatDuration(d time.Duration) string {
	if d < 0 {
		return "-" + formatDuration(-d)
	}
	switch {
	case d == 0:
		return "0s"
	case d < time.Second:
		return strconv.FormatInt(d.Milliseconds(), 10) + "ms"
	case d < 10*time.Second:
		return strconv.FormatFloat(d.Seconds(), 'f', 1, 64) + "s"
	case d < time.Minute:
		return strconv.Itoa(int(d.Round(time.Second).Seconds())) + "s"
	case d < time.Hour:
		d = d.Round(time.Second)
		return fmt.Sprintf("%dm%02ds", int(d.Minutes()), int(d.Seconds())%60)
	case d < 48*time.Hour:
		d = d.Round(time.Minute)
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	d = d.Round(time.Hour)
	return fmt.Sprintf("%dd%dh", int(d.Hours())/24, int(d.Hours())%24)
}

// formatNum writes n with thousands separators: 1,000,000.
func formatNum(n int64) string {
	s := strconv.FormatInt(n, 10)
	neg := strings.HasPrefix(s, "-")
	s = strings.TrimPrefix(s, "-")
	var b strings.Builder
	for i, c := range s {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteRune(c)
	}
	if neg {
		return "-" + b.String()
	}
	return b.String()
}

// formatBytes writes a size in B, KiB or MiB.
func formatBytes(n int) string {
	switch {
	case n < 1024:
		return strconv.Itoa(n) + " B"
	case n < 1<<20:
		return strconv.FormatFloat(float64(n)/1024, 'f', 1, 64) + " KiB"
	}
	return strconv.FormatFloat(float64(n)/(1<<20), 'f', 1, 64) + " MiB"
}
