package ui

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
)

// Sessions. A session is a random id in an HttpOnly, SameSite=Strict
// cookie scoped to /ui/. With a token configured, signing in puts the id
// in a server-side table with its expiry, and only ids of that table are
// signed in; without one, any well-formed id will do and the cookie is
// handed out on the first page. Either way the CSRF token of a session is
// the HMAC of its id under a random key of the process: a page carries it
// in a hidden field of each form, and every POST must send it back.
// Restarting the process signs every browser out.

const (
	sessionCookie = "dq_session"
	flashCookie   = "dq_flash"
	cookiePath    = "/ui/"
	idBytes       = 32
	maxSessions   = 10000 // the table's size; the oldest go first
	// loginFailures failed sign-ins per loginWindow are allowed; more are
	// refused with 429 until the window has passed.
	loginFailures = 10
	loginWindow   = time.Minute
)

// auth holds the sessions. It is safe for concurrent use.
type auth struct {
	token [sha256.Size]byte // sha256 of the token, compared in constant time
	on    bool              // a token is configured
	ttl   time.Duration
	now   func() time.Time
	key   []byte // HMAC key of CSRF tokens

	mu       sync.Mutex
	sessions map[string]time.Time // id -> expiry
	failures []time.Time          // recent failed sign-ins
}

func newAuth(token string, ttl time.Duration, now func() time.Time) (*auth, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("ui: session key: %w", err)
	}
	return &auth{
		token: sha256.Sum256([]byte(token)), on: token != "", ttl: ttl, now: now, key: key,
		sessions: map[string]time.Time{},
	}, nil
}

func newID() string {
	b := make([]byte, idBytes)
	rand.Read(b) // never fails (crypto/rand documents it)
	return base64.RawURLEncoding.EncodeToString(b)
}

// sessionID returns the well-formed session id r carries, or "".
func sessionID(r *http.Request) string {
	c, err := r.Cookie(sessionCookie)
	if err != nil {
		return ""
	}
	if b, err := base64.RawURLEncoding.DecodeString(c.Value); err != nil || len(b) != idBytes {
		return ""
	}
	return c.Value
}

// signedIn says whether r may see the dashboard.
func (a *auth) signedIn(r *http.Request) bool {
	if !a.on {
		return true
	}
	id := sessionID(r)
	if id == "" {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	exp, ok := a.sessions[id]
	if ok && !a.now().Before(exp) {
		delete(a.sessions, id)
		return false
	}
	return ok
}

// csrf returns the CSRF token of session id.
func (a *auth) csrf(id string) string {
	m := hmac.New(sha256.New, a.key)
	m.Write([]byte("csrf\x00" + id))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// ensureSession returns the session id of r, first handing out a new one
// when r has none (without a token only: with one, signing in does).
func (a *auth) ensureSession(w http.ResponseWriter, r *http.Request) string {
	if id := sessionID(r); id != "" || a.on {
		return id
	}
	id := newID()
	setCookie(w, r, sessionCookie, id, 0)
	r.AddCookie(&http.Cookie{Name: sessionCookie, Value: id}) // for the rest of this request
	return id
}

// checkPost returns "" when the POST r carries its session's CSRF token
// and comes from this origin, else why it is refused.
func (a *auth) checkPost(r *http.Request) string {
	if msg := sameOrigin(r); msg != "" {
		return msg
	}
	id := sessionID(r)
	if id == "" {
		return "No session: reload the page and try again."
	}
	got := r.PostFormValue("csrf")
	if got == "" || !hmac.Equal([]byte(got), []byte(a.csrf(id))) {
		return "Bad or missing CSRF token: reload the page and try again."
	}
	return ""
}

// sameOrigin refuses a request whose Origin header names another origin.
// Browsers send it with every POST; SameSite=Strict cookies already keep
// cross-site requests out, this is a second lock.
func sameOrigin(r *http.Request) string {
	o := r.Header.Get("Origin")
	if o == "" {
		return ""
	}
	u, err := url.Parse(o)
	if err != nil || !strings.EqualFold(u.Host, r.Host) {
		return "Cross-origin request refused."
	}
	return ""
}

// errTooManyLogins refuses sign-ins after too many failures.
var errTooManyLogins = errors.New("too many failed sign-ins: wait a minute")

// signIn checks token and returns a new session id.
func (a *auth) signIn(token string) (string, error) {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	kept := a.failures[:0]
	for _, t := range a.failures {
		if now.Sub(t) < loginWindow {
			kept = append(kept, t)
		}
	}
	a.failures = kept
	if len(a.failures) >= loginFailures {
		return "", errTooManyLogins
	}
	got := sha256.Sum256([]byte(token))
	if !a.on || subtle.ConstantTimeCompare(got[:], a.token[:]) != 1 {
		a.failures = append(a.failures, now)
		return "", errors.New("wrong token")
	}
	if len(a.sessions) >= maxSessions {
		a.evict(now)
	}
	id := newID()
	a.sessions[id] = now.Add(a.ttl)
	return id, nil
}

// evict removes expired sessions, and the oldest if none had expired.
// a.mu is held.
func (a *auth) evict(now time.Time) {
	var oldest string
	var oldestExp time.Time
	for id, exp := range a.sessions {
		if !now.Before(exp) {
			delete(a.sessions, id)
			continue
		}
		if oldest == "" || exp.Before(oldestExp) {
			oldest, oldestExp = id, exp
		}
	}
	if len(a.sessions) >= maxSessions {
		delete(a.sessions, oldest)
	}
}

// signOut ends session id.
func (a *auth) signOut(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.sessions, id)
}

// setCookie sets an HttpOnly, SameSite=Strict cookie on /ui/, Secure
// when r came over HTTPS (directly, or through a proxy that says so in
// X-Forwarded-Proto: trusting it can only make the cookie stricter);
// maxAge 0 is a session cookie, < 0 deletes it.
func setCookie(w http.ResponseWriter, r *http.Request, name, value string, maxAge int) {
	secure := r.TLS != nil || strings.EqualFold(r.Header.Get("X-Forwarded-Proto"), "https")
	http.SetCookie(w, &http.Cookie{
		Name: name, Value: value, Path: cookiePath, MaxAge: maxAge,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: secure,
	})
}

// localPath returns next when it is a path of the dashboard, else "/ui/",
// so that sign-in cannot redirect anywhere else.
func localPath(next string) string {
	if !strings.HasPrefix(next, "/ui/") || strings.ContainsAny(next, "\\\r\n") {
		return "/ui/"
	}
	return next
}

// loginPage shows the sign-in form (or goes on when no token is needed).
func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	next := localPath(r.URL.Query().Get("next"))
	if s.auth.signedIn(r) {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	s.render(w, r, http.StatusOK, "login", &loginView{Next: next})
}

// login checks the token of the sign-in form and starts a session.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	next := localPath(r.PostFormValue("next"))
	if msg := sameOrigin(r); msg != "" {
		s.errorPage(w, r, http.StatusForbidden, msg)
		return
	}
	if !s.auth.on {
		http.Redirect(w, r, next, http.StatusSeeOther)
		return
	}
	id, err := s.auth.signIn(r.PostFormValue("token"))
	if err != nil {
		code := http.StatusUnauthorized
		if errors.Is(err, errTooManyLogins) {
			code = http.StatusTooManyRequests
		}
		s.log.Warn("sign-in refused", "remote", r.RemoteAddr, "err", err)
		s.render(w, r, code, "login", &loginView{Next: next, Error: err.Error()})
		return
	}
	s.log.Info("signed in", "remote", r.RemoteAddr)
	setCookie(w, r, sessionCookie, id, int(s.o.SessionTTL/time.Second))
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the session.
func (s *Server) logout(w http.ResponseWriter, r *http.Request) {
	if id := sessionID(r); id != "" {
		s.auth.signOut(id)
	}
	setCookie(w, r, sessionCookie, "", -1)
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}
