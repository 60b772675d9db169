package config

import (
	"fmt"
	"net"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/partition"
)

// minLease is the shortest lease delayq's consumer accepts.
const minLease = 30 * time.Millisecond

// Validate checks the values of c, for example after command-line flags
// changed them. Its errors are those of Parse without lines.
func (c *Config) Validate() error { return c.validate().err() }

func (c *Config) validate() problems {
	var ps problems
	at := func(table, key string) place { return child(table, "["+table+"]", key) }

	r := c.Redis
	for _, a := range strings.Split(r.Addr, ",") { // several proxies
		checkAddr(&ps, at("redis", "addr"), strings.TrimSpace(a), false)
	}
	if err := partition.ValidateTopic(r.Namespace); err != nil {
		ps.add(at("redis", "namespace"), "%v; want 1 to %d bytes of A-Z a-z 0-9 . _ -", err, partition.MaxTopicLen)
	}
	atLeast(&ps, at("redis", "pool_size"), r.PoolSize, 1)
	positive(&ps, at("redis", "dial_timeout"), r.DialTimeout, time.Nanosecond, "2s")
	positive(&ps, at("redis", "read_timeout"), r.ReadTimeout, time.Nanosecond, "3s")
	positive(&ps, at("redis", "write_timeout"), r.WriteTimeout, time.Nanosecond, "3s")

	w := c.Worker
	if msg := checkText(w.ID, 200, false); msg != "" {
		ps.add(at("worker", "id"), "%s; want a name for this worker such as \"host-1\"", msg)
	}
	positive(&ps, at("worker", "lease"), w.Lease, minLease, "10s")
	positive(&ps, at("worker", "poll_interval"), w.PollInterval, time.Millisecond, "1s")
	positive(&ps, at("worker", "idle_poll_interval"), w.IdlePollInterval, time.Millisecond, "10s")
	if w.IdlePollInterval > delayq.DefaultIdlePollInterval {
		ps.add(at("worker", "idle_poll_interval"), "%v is longer than %v, the most producers' wake-ups cover; want at most %v", w.IdlePollInterval, delayq.DefaultIdlePollInterval, delayq.DefaultIdlePollInterval)
	}
	positive(&ps, at("worker", "shutdown_timeout"), w.ShutdownTimeout, time.Millisecond, "30s")

	h := c.HTTP
	if h.Listen != "" {
		checkAddr(&ps, at("http", "listen"), h.Listen, true)
	}
	if h.Token != "" {
		if msg := checkText(h.Token, 4096, true); msg != "" {
			ps.add(at("http", "token"), "%s; want a bearer token of printable characters without spaces", msg)
		}
	}
	atLeast(&ps, at("http", "max_body_bytes"), h.MaxBodyBytes, 1)

	switch c.Log.Format {
	case "text", "json":
	default:
		ps.add(at("log", "format"), "%q is not a log format; want \"text\" or \"json\"", c.Log.Format)
	}
	switch c.Log.Level {
	case "debug", "info", "warn", "error":
	default:
		ps.add(at("log", "level"), "%q is not a log level; want \"debug\", \"info\", \"warn\" or \"error\"", c.Log.Level)
	}

	c.Tracing.validate(&ps)

	first := map[string]int{} // topic name -> index of its first table
	for i := range c.Topics {
		c.Topics[i].validate(&ps, i, first)
	}
	return ps
}

func (t *Topic) validate(ps *problems, i int, first map[string]int) {
	path, table := fmt.Sprintf("topic[%d]", i), topicTable(t.Name, i)
	at := func(key string) place { return child(path, table, key) }
	if err := partition.ValidateTopic(t.Name); err != nil {
		ps.add(at("name"), "%v; want 1 to %d bytes of A-Z a-z 0-9 . _ -", err, partition.MaxTopicLen)
	} else if j, dup := first[t.Name]; dup {
		ps.add(at("name"), "duplicate topic name %q; it is the name of [[topic]] #%d already", t.Name, j+1)
		(*ps)[len(*ps)-1].also = fmt.Sprintf("topic[%d].name", j)
	} else {
		first[t.Name] = i
	}
	if t.Partitions != 0 { // 0: not set
		if err := partition.ValidateCount(t.Partitions); err != nil {
			ps.add(at("partitions"), "%v; want a count such as 16", err)
		}
	}
	atLeast(ps, at("concurrency"), t.Concurrency, 1)
	positive(ps, at("timeout"), t.Timeout, time.Millisecond, "30s")
	atLeast(ps, at("max_attempts"), t.MaxAttempts, 1)
	if len(t.Backoff) == 0 {
		ps.add(at("backoff"), "the array is empty; want at least one duration such as [\"10s\", \"1m\"]")
	}
	for k, b := range t.Backoff {
		if b < 0 {
			ps.add(place{path: fmt.Sprintf("%s.backoff[%d]", path, k), table: table, key: "backoff"},
				"element %d, %v, is negative; want durations of 0s or more such as [\"10s\", \"1m\"]", k+1, b)
		}
	}
	t.validateDuplicates(ps, at)
	t.Handler.validate(ps, path+".handler", "[topic.handler] of "+topicName(t.Name, i))
	t.validateLimits(ps, i)
	t.validateAuto(ps, i)
	t.validateSchedules(ps, i)
}

func (h *Handler) validate(ps *problems, path, table string) {
	at := func(key string) place { return child(path, table, key) }
	unused := func(key, typ string) {
		ps.add(at(key), "a handler of type %q does not use %s; remove it", typ, key)
	}
	switch h.Type {
	case HandlerHTTP:
		checkURL(ps, at("url"), h.URL)
		for _, name := range sortedKeys(h.Headers) {
			checkHeader(ps, place{path: path + ".headers." + name, table: table, key: "headers"}, name, h.Headers[name])
		}
		if len(h.Command) > 0 {
			unused("command", h.Type)
		}
	case HandlerExec:
		switch {
		case len(h.Command) == 0:
			ps.add(at("command"), "missing; want the program and its arguments such as [\"sh\", \"-c\", \"cat >/dev/null\"]")
		case h.Command[0] == "":
			ps.add(at("command"), "the program name is empty; want the program and its arguments such as [\"/usr/local/bin/handle\", \"--flag\"]")
		}
		for k, a := range h.Command {
			if strings.IndexByte(a, 0) >= 0 {
				ps.add(at("command"), "element %d holds a NUL byte; want arguments without NUL", k+1)
			}
		}
		if h.URL != "" {
			unused("url", h.Type)
		}
		if h.Secret != "" {
			unused("secret", h.Type)
		}
		if len(h.Headers) > 0 {
			unused("headers", h.Type)
		}
	case "":
		ps.add(at("type"), "missing; want a [topic.handler] table with type = \"http\" (and url) or type = \"exec\" (and command)")
	default:
		ps.add(at("type"), "%q is not a handler type; want \"http\" or \"exec\"", h.Type)
	}
}

// positive adds a problem unless d >= min (and positive).
func positive(ps *problems, at place, d, min time.Duration, example string) {
	switch {
	case d <= 0:
		ps.add(at, "%v is not positive; want a duration such as %q", d, example)
	case d < min:
		ps.add(at, "%v is below %v; want a duration of at least %v such as %q", d, min, min, example)
	}
}

// atLeast adds a problem unless n >= min.
func atLeast(ps *problems, at place, n, min int) {
	if n < min {
		ps.add(at, "%d is below %d; want an integer of %d or more", n, min, min)
	}
}

// checkAddr checks a host:port; port 0 (any free port) only for listen.
func checkAddr(ps *problems, at place, s string, listen bool) {
	example := "127.0.0.1:6379"
	if listen {
		example = "127.0.0.1:8090"
	}
	_, port, err := net.SplitHostPort(s)
	if err != nil {
		ps.add(at, "%q is not host:port; want an address such as %q", s, example)
		return
	}
	n, err := strconv.Atoi(port)
	if err != nil || n < 0 || n > 65535 || n == 0 && !listen {
		ps.add(at, "%q has no valid port; want an address such as %q", s, example)
	}
}

// checkText returns what is wrong with s (empty, too long, control
// characters, and spaces when noSpace is set), or "".
func checkText(s string, maxLen int, noSpace bool) string {
	switch {
	case s == "":
		return "it is empty"
	case len(s) > maxLen:
		return fmt.Sprintf("it is %d bytes, more than %d", len(s), maxLen)
	}
	for _, r := range s {
		if unicode.IsControl(r) || r == unicode.ReplacementChar || noSpace && unicode.IsSpace(r) {
			return fmt.Sprintf("it holds %q", r)
		}
	}
	return ""
}

func checkURL(ps *problems, at place, s string) {
	if s == "" {
		ps.add(at, "missing; want the http:// or https:// URL to POST messages to")
		return
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		ps.add(at, "%q is not an http:// or https:// URL with a host; want one such as \"https://example.com/hooks/orders\"", s)
	}
}

// reservedHeaders are set by the http handler itself.
var reservedHeaders = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection"}

func checkHeader(ps *problems, at place, name, val string) {
	if !validHeaderName(name) {
		ps.add(at, "%q is not a header name; want letters, digits and !#$%%&'*+-.^_`|~ such as \"Authorization\"", name)
		return
	}
	if strings.HasPrefix(strings.ToLower(name), "x-delayq-") {
		ps.add(at, "header %q is set by delayq; want another name", name)
	}
	for _, r := range reservedHeaders {
		if strings.EqualFold(name, r) {
			ps.add(at, "header %q is set by the HTTP client; remove it", name)
		}
	}
	if strings.ContainsAny(val, "\r\n\x00") {
		ps.add(at, "the value of header %q holds a line break or NUL; want a single line", name)
	}
}

func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0 {
			continue
		}
		return false
	}
	return true
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
