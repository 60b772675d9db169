package config

import (
	"errors"
	"os"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
)

// minimal is a valid file with one topic; tests append to or edit it.
const minimal = `[redis]
addr = "127.0.0.1:6379"

[[topic]]
name = "a"
[topic.handler]
type = "exec"
command = ["true"]
`

func TestShippedConfig(t *testing.T) {
	cfg, err := Load("../../config.toml")
	if err != nil {
		t.Fatalf("the shipped config.toml does not parse: %v", err)
	}
	if cfg.Source != "config.toml" {
		t.Errorf("Source = %q", cfg.Source)
	}
	if cfg.Redis.Addr != "127.0.0.1:22121" || cfg.Redis.Namespace != "dq" || cfg.HTTP.Listen != "127.0.0.1:8090" {
		t.Errorf("redis/http: %+v %+v", cfg.Redis, cfg.HTTP)
	}
	if len(cfg.Topics) != 2 {
		t.Fatalf("topics: %+v", cfg.Topics)
	}
	o, r := cfg.Topic("orders"), cfg.Topic("reminders")
	if o == nil || r == nil {
		t.Fatalf("want topics orders and reminders, got %+v", cfg.Topics)
	}
	if o.Handler.Type != HandlerHTTP || o.Handler.URL != "http://127.0.0.1:8080/hooks/orders" ||
		o.Handler.Headers["Content-Type"] != "application/json" {
		t.Errorf("orders handler: %+v", o.Handler)
	}
	if r.Handler.Type != HandlerExec || !reflect.DeepEqual(r.Handler.Command, []string{"sh", "-c", `echo "reminder $DELAYQ_ID (attempt $DELAYQ_ATTEMPT, due $DELAYQ_DUE): $(cat)" >>"${REMINDERS_LOG:-/dev/null}"`}) {
		t.Errorf("reminders handler: %+v", r.Handler)
	}
	if r.Concurrency != 4 || r.MaxAttempts != 5 || r.Timeout != 10*time.Second ||
		!reflect.DeepEqual(r.Backoff, []time.Duration{5 * time.Second, 30 * time.Second, 2 * time.Minute}) {
		t.Errorf("reminders: %+v", r)
	}
	// The sample shows every key with its default, except where it says
	// otherwise (addr, listen and the topics).
	def := Default()
	def.Redis.Addr, def.HTTP.Listen = cfg.Redis.Addr, cfg.HTTP.Listen
	if cfg.Redis != def.Redis || cfg.Worker != def.Worker || cfg.HTTP != def.HTTP || cfg.Log != def.Log {
		t.Errorf("the sample's values differ from the defaults:\n got %+v %+v %+v %+v\nwant %+v %+v %+v %+v",
			cfg.Redis, cfg.Worker, cfg.HTTP, cfg.Log, def.Redis, def.Worker, def.HTTP, def.Log)
	}
	if o.Partitions != delayq.DefaultPartitions || o.Concurrency != delayq.DefaultConcurrency ||
		o.Timeout != delayq.DefaultTimeout || o.MaxAttempts != delayq.DefaultMaxAttempts {
		t.Errorf("orders should show the topic defaults: %+v", o)
	}
}

func TestDefaults(t *testing.T) {
	cfg, err := Parse(nil, "empty.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := Default()
	want.Source = "empty.toml"
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("empty file:\n got %+v\nwant %+v", cfg, want)
	}
	if cfg.Redis.Addr != DefaultAddr || cfg.Redis.PoolSize != delayq.DefaultPoolSize || cfg.HTTP.MaxBodyBytes != 1<<20 ||
		cfg.HTTP.Listen != "" || cfg.Log.Level != "info" || cfg.Log.Format != "text" || cfg.Worker.Lease != 10*time.Second ||
		!strings.Contains(cfg.Worker.ID, "-") {
		t.Errorf("defaults: %+v", cfg)
	}
	cfg, err = Parse([]byte(minimal), "m.toml")
	if err != nil {
		t.Fatal(err)
	}
	tp := cfg.Topics[0]
	if tp.Partitions != 0 || tp.Concurrency != delayq.DefaultConcurrency || tp.Timeout != delayq.DefaultTimeout ||
		tp.MaxAttempts != delayq.DefaultMaxAttempts || !reflect.DeepEqual(tp.Backoff, delayq.DefaultBackoff) {
		t.Errorf("topic defaults: %+v", tp)
	}
	// The default ladder is a copy: changing it does not change delayq's.
	tp.Backoff[0] = time.Hour
	if delayq.DefaultBackoff[0] == time.Hour {
		t.Error("Topic.Backoff aliases delayq.DefaultBackoff")
	}
}

func TestValues(t *testing.T) {
	src := `
[redis]
addr = "redis.local:6380"
password = "pw"
namespace = "ns.1"
pool_size = 7
dial_timeout = "100ms"
read_timeout = "1m"
write_timeout = "1h2m3s"
cluster = true
[worker]
id = "w1"
lease = "2s"
poll_interval = "250ms"
shutdown_timeout = "5s"
[http]
listen = ":0"
token = "t0k3n"
max_body_bytes = 10
[log]
format = "json"
level = "debug"
[tracing]
endpoint = "http://collector:4318"
service_name = "w"
sample_ratio = 0.5
headers = { "X-Key" = "k" }
[[topic]]
name = "web"
partitions = 4
concurrency = 2
timeout = "3s"
max_attempts = 3
backoff = ["1s", "0s"]
[topic.handler]
type = "http"
url = "https://example.com/x?y=1"
secret = "s"
headers = { Authorization = "Bearer x", "X-Extra" = "1" }
[[topic]]
name = "cmd"
handler = { type = "exec", command = ["/bin/echo", "hi"] }
`
	cfg, err := Parse([]byte(src), "v.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := &Config{
		Redis: Redis{Addr: "redis.local:6380", Password: "pw", Namespace: "ns.1", PoolSize: 7,
			DialTimeout: 100 * time.Millisecond, ReadTimeout: time.Minute, WriteTimeout: time.Hour + 2*time.Minute + 3*time.Second, Cluster: true},
		Worker: Worker{ID: "w1", Lease: 2 * time.Second, PollInterval: 250 * time.Millisecond, IdlePollInterval: 10 * time.Second, ShutdownTimeout: 5 * time.Second},
		HTTP:   HTTP{Listen: ":0", Token: "t0k3n", MaxBodyBytes: 10},
		Log:    Log{Format: "json", Level: "debug"},
		Tracing: Tracing{Endpoint: "http://collector:4318", ServiceName: "w", SampleRatio: 0.5,
			Headers: map[string]string{"X-Key": "k"}},
		Topics: []Topic{
			{Name: "web", Partitions: 4, Concurrency: 2, Timeout: 3 * time.Second, MaxAttempts: 3,
				Backoff: []time.Duration{time.Second, 0},
				Handler: Handler{Type: "http", URL: "https://example.com/x?y=1", Secret: "s",
					Headers: map[string]string{"Authorization": "Bearer x", "X-Extra": "1"}}},
			{Name: "cmd", Concurrency: delayq.DefaultConcurrency, Timeout: delayq.DefaultTimeout,
				MaxAttempts: delayq.DefaultMaxAttempts, Backoff: delayq.DefaultBackoff,
				Handler: Handler{Type: "exec", Command: []string{"/bin/echo", "hi"}}},
		},
		Source: "v.toml",
	}
	if !reflect.DeepEqual(cfg, want) {
		t.Errorf("\n got %+v\nwant %+v", cfg, want)
	}
	if cfg.Log.SlogLevel().String() != "DEBUG" {
		t.Errorf("SlogLevel = %v", cfg.Log.SlogLevel())
	}
	if cfg.Topic("nope") != nil || cfg.Topic("cmd") != &cfg.Topics[1] {
		t.Error("Topic lookup")
	}
}

// firstError returns the first *Error of err, failing t if there is none.
func firstError(t *testing.T, err error) *Error {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("want a *config.Error, got %T: %v", err, err)
	}
	return e
}

func TestUnknownKeys(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		key       string
		line      int
		want      string // the whole message
	}{
		{"worker typo", "[worker]\nid = \"w\"\npolll_interval = \"1s\"\n", "polll_interval", 3,
			`unknown key "polll_interval" in [worker] at c.toml line 3; known keys: id, lease, poll_interval, idle_poll_interval, shutdown_timeout`},
		{"unknown table", "[redis]\naddr = \"h:1\"\n\n[wroker]\nid = \"x\"\nlease = \"1s\"\n", "wroker", 4,
			`unknown key "wroker" at c.toml line 4; known keys: redis, worker, http, log, tracing, topic`},
		{"top-level key", "debug = true\n", "debug", 1,
			`unknown key "debug" at c.toml line 1; known keys: redis, worker, http, log, tracing, topic`},
		{"case differs", "[worker]\nLease = \"1s\"\n", "Lease", 2,
			`unknown key "Lease" in [worker] at c.toml line 2; known keys: id, lease, poll_interval, idle_poll_interval, shutdown_timeout`},
		{"second topic", minimal + "\n[[topic]]\nname = \"b\"\nconcurency = 3\n[topic.handler]\ntype = \"exec\"\ncommand = [\"x\"]\n",
			"concurency", 12,
			`unknown key "concurency" in [[topic]] "b" at c.toml line 12; known keys: name, partitions, concurrency, timeout, max_attempts, backoff, on_duplicate, max_wait, unique_for, handler, limits, auto_partitions, schedule`},
		{"handler key", minimal + "urll = \"http://x\"\n", "urll", 9,
			`unknown key "urll" in [topic.handler] of topic "a" at c.toml line 9; known keys: type, url, secret, headers, command`},
		{"dotted", "redis.adr = \"x:1\"\n", "adr", 1,
			`unknown key "adr" in [redis] at c.toml line 1; known keys: addr, password, namespace, pool_size, dial_timeout, read_timeout, write_timeout, cluster`},
		{"sub-table", "[http.tls]\ncert = \"x\"\n", "tls", 1,
			`unknown key "tls" in [http] at c.toml line 1; known keys: listen, token, max_body_bytes`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), "c.toml")
			e := firstError(t, err)
			if !e.Unknown || e.Key != tc.key || e.Line != tc.line || e.Error() != tc.want {
				t.Errorf("got  %q (key %q line %d unknown %v)\nwant %q", e.Error(), e.Key, e.Line, e.Unknown, tc.want)
			}
		})
	}
}

func TestUnknownKeysInEveryTopic(t *testing.T) {
	src := "[[topic]]\nname = \"a\"\nbad = 1\n[topic.handler]\ntype = \"exec\"\ncommand = [\"x\"]\n" +
		"[[topic]]\nname = \"b\"\nbad = 2\n[topic.handler]\ntype = \"exec\"\ncommand = [\"x\"]\n"
	_, err := Parse([]byte(src), "c.toml")
	msg := err.Error()
	for _, want := range []string{`"bad" in [[topic]] "a" at c.toml line 3`, `"bad" in [[topic]] "b" at c.toml line 9`} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
}

func TestBadValues(t *testing.T) {
	// topic returns a file with one topic whose table ends with extra and
	// whose handler table is handler.
	topic := func(extra, handler string) string {
		return "[[topic]]\nname = \"t\"\n" + extra + "\n[topic.handler]\n" + handler + "\n"
	}
	execH := "type = \"exec\"\ncommand = [\"true\"]"
	for _, tc := range []struct {
		name, src string
		key       string
		line      int
		want      string // substring of the message
	}{
		{"bad duration", "[worker]\nlease = \"10 seconds\"\n", "lease", 2, `"10 seconds" is not a duration`},
		{"duration not a string", "[worker]\nlease = 10\n", "lease", 2, "got an integer; want a duration string"},
		{"negative duration", "[redis]\nread_timeout = \"-1s\"\n", "read_timeout", 2, "-1s is not positive"},
		{"zero duration", "[worker]\nshutdown_timeout = \"0s\"\n", "shutdown_timeout", 2, "0s is not positive"},
		{"lease too short", "[worker]\nlease = \"10ms\"\n", "lease", 2, "below 30ms"},
		{"idle poll too long", "[worker]\nidle_poll_interval = \"11s\"\n", "idle_poll_interval", 2, "11s is longer than 10s"},
		{"negative pool", "[redis]\npool_size = -3\n", "pool_size", 2, "-3 is below 1"},
		{"int as string", "[redis]\npool_size = \"8\"\n", "pool_size", 2, "got a string; want an integer"},
		{"bool as string", "[redis]\ncluster = \"yes\"\n", "cluster", 2, "got a string; want true or false"},
		{"huge int", "[http]\nmax_body_bytes = 99999999999\n", "max_body_bytes", 2, "out of range"},
		{"bad addr", "[redis]\naddr = \"localhost\"\n", "addr", 2, `"localhost" is not host:port`},
		{"bad port", "[redis]\naddr = \"h:0\"\n", "addr", 2, "no valid port"},
		{"bad listen", "[http]\nlisten = \"8090\"\n", "listen", 2, "not host:port"},
		{"token with space", "[http]\ntoken = \"a b\"\n", "token", 2, "bearer token"},
		{"bad namespace", "[redis]\nnamespace = \"a b\"\n", "namespace", 2, "only A-Z a-z 0-9"},
		{"bad log level", "[log]\nlevel = \"verbose\"\n", "level", 2, `"verbose" is not a log level; want "debug", "info", "warn" or "error"`},
		{"bad log format", "[log]\nformat = \"xml\"\n", "format", 2, `want "text" or "json"`},
		{"bad topic name", "[[topic]]\nname = \"a/b\"\n[topic.handler]\n" + execH + "\n", "name", 2, "only A-Z a-z 0-9 . _ -"},
		{"missing topic name", "[[topic]]\npartitions = 4\n[topic.handler]\n" + execH + "\n", "name", 1, "topic name is empty"},
		{"duplicate topic", topic("", execH) + topic("", execH), "name", 8, `duplicate topic name "t"; it is the name of [[topic]] #1 already (line 2)`},
		{"zero partitions", topic("partitions = 0", execH), "partitions", 3, "out of range"},
		{"zero concurrency", topic("concurrency = 0", execH), "concurrency", 3, "0 is below 1"},
		{"negative max_attempts", topic("max_attempts = -1", execH), "max_attempts", 3, "-1 is below 1"},
		{"zero timeout", topic(`timeout = "0s"`, execH), "timeout", 3, "not positive"},
		{"empty backoff", topic("backoff = []", execH), "backoff", 3, "empty"},
		{"bad backoff step", topic(`backoff = ["1s", "soon"]`, execH), "backoff", 3, `element 2: "soon" is not a duration`},
		{"negative backoff step", topic(`backoff = ["1s",
  "-5s"]`, execH), "backoff", 4, "element 2, -5s, is negative"},
		{"backoff not an array", topic(`backoff = "1s"`, execH), "backoff", 3, "want an array of duration strings"},
		{"no handler", "[[topic]]\nname = \"t\"\n", "type", 1, "missing; want a [topic.handler] table"},
		{"unknown handler type", topic("", `type = "grpc"`), "type", 5, `"grpc" is not a handler type; want "http" or "exec"`},
		{"http without url", topic("", `type = "http"`), "url", 4, "missing; want the http:// or https:// URL"},
		{"ftp url", topic("", "type = \"http\"\nurl = \"ftp://x/y\""), "url", 6, `"ftp://x/y" is not an http:// or https:// URL`},
		{"url without host", topic("", "type = \"http\"\nurl = \"http:///y\""), "url", 6, "with a host"},
		{"bad header name", topic("", "type = \"http\"\nurl = \"http://x\"\nheaders = { \"Bad Name\" = \"v\" }"), "headers", 7, `"Bad Name" is not a header name`},
		{"reserved header", topic("", "type = \"http\"\nurl = \"http://x\"\n[topic.handler.headers]\nX-Delayq-Id = \"v\""), "headers", 8, "set by delayq"},
		{"header not a string", topic("", "type = \"http\"\nurl = \"http://x\"\nheaders = { A = 1 }"), "headers", 7, `header "A" is an integer`},
		{"exec without command", topic("", `type = "exec"`), "command", 4, "missing; want the program"},
		{"exec empty program", topic("", "type = \"exec\"\ncommand = [\"\"]"), "command", 6, "program name is empty"},
		{"exec command not strings", topic("", "type = \"exec\"\ncommand = [\"a\", 2]"), "command", 6, "element 2 is an integer"},
		{"exec with url", topic("", execH+"\nurl = \"http://x\""), "url", 7, `type "exec" does not use url`},
		{"http with command", topic("", "type = \"http\"\nurl = \"http://x\"\ncommand = [\"x\"]"), "command", 7, `does not use command`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.src), "c.toml")
			e := firstError(t, err)
			if e.Unknown || e.Key != tc.key || e.Line != tc.line || !strings.Contains(e.Error(), tc.want) || !strings.Contains(e.Error(), "c.toml") {
				t.Errorf("got %q (key %q line %d)\nwant key %q line %d and %q", e.Error(), e.Key, e.Line, tc.key, tc.line, tc.want)
			}
		})
	}
}

func TestErrorNamesTopic(t *testing.T) {
	src := minimal + "[[topic]]\nname = \"second\"\ntimeout = \"x\"\n[topic.handler]\n" + "type = \"http\"\nurl = \"mailto:x\"\n"
	_, err := Parse([]byte(src), "c.toml")
	msg := err.Error()
	for _, want := range []string{
		`invalid value of "timeout" in [[topic]] "second" at c.toml line 11: "x" is not a duration`,
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("error lacks %q:\n%s", want, msg)
		}
	}
	// Type errors stop before the semantic checks; fix it and see the URL.
	_, err = Parse([]byte(strings.Replace(src, `"x"`, `"1s"`, 1)), "c.toml")
	if want := `invalid value of "url" in [topic.handler] of topic "second" at c.toml line 14`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("got %v\nwant %q", err, want)
	}
}

func TestManyErrorsInLineOrder(t *testing.T) {
	src := "[log]\nlevel = \"loud\"\nformat = \"xml\"\n[worker]\nlease = \"-1s\"\nfoo = 1\n"
	_, err := Parse([]byte(src), "c.toml")
	var lines []int
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		lines = append(lines, e.(*Error).Line)
	}
	if !reflect.DeepEqual(lines, []int{2, 3, 5, 6}) {
		t.Errorf("lines %v, want [2 3 5 6]:\n%v", lines, err)
	}
}

func TestSyntaxError(t *testing.T) {
	_, err := Parse([]byte("[redis]\naddr = \"x:1\"\npool_size = = 3\n"), "s.toml")
	if err == nil || !strings.HasPrefix(err.Error(), "s.toml line 3: ") {
		t.Errorf("got %v, want an error at s.toml line 3", err)
	}
	_, err = Parse([]byte("[topic]\nname = \"x\"\n"), "s.toml")
	if err == nil || !strings.Contains(err.Error(), "topic") {
		t.Errorf("[topic] instead of [[topic]]: got %v", err)
	}
}

func TestLoad(t *testing.T) {
	_, err := Load(t.TempDir() + "/missing.toml")
	if !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
	p := t.TempDir() + "/w.toml"
	if err := os.WriteFile(p, []byte("[worker]\nleese = \"1s\"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err = Load(p)
	if err == nil || !strings.Contains(err.Error(), `unknown key "leese" in [worker] at w.toml line 2`) {
		t.Errorf("got %v", err)
	}
}

func TestValidate(t *testing.T) {
	cfg, err := Parse([]byte(minimal), "m.toml")
	if err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	cfg.Redis.Addr = "nope" // as a bad --addr flag would
	cfg.Log.Level = "loud"
	err = cfg.Validate()
	e := firstError(t, err)
	if e.Key != "addr" || e.Line != 0 || e.Error() != `invalid value of "addr" in [redis]: "nope" is not host:port; want an address such as "127.0.0.1:6379"` {
		t.Errorf("got %q", e.Error())
	}
	if !strings.Contains(err.Error(), `"loud" is not a log level`) {
		t.Errorf("second problem missing: %v", err)
	}
}

// orders is a file of one topic, "orders", with an exec handler: keys
// (each line ending in a newline) go into its [[topic]] table, tables
// after its [topic.handler] table.
func orders(keys, tables string) []byte {
	return []byte("[[topic]]\nname = \"orders\"\n" + keys + "[topic.handler]\ntype = \"exec\"\ncommand = [\"cat\"]\n" + tables)
}
