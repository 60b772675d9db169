package config

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/BurntSushi/toml"
)

// Load reads and parses the file at path (see Parse). Errors name the
// file by its base name.
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	return Parse(data, filepath.Base(path))
}

// Parse parses a TOML configuration: the defaults, then what data sets.
// source names the data in errors (a file name). It rejects syntax errors
// (with their line), unknown keys and invalid values: each is an *Error
// naming the key, its line and what was expected, all of them joined with
// errors.Join. A Config it returns passes Validate.
func Parse(data []byte, source string) (*Config, error) {
	var raw rawConfig
	md, err := toml.Decode(string(data), &raw)
	if err != nil {
		var pe toml.ParseError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("%s line %d: %s", source, pe.Position.Line, pe.Message)
		}
		// Mismatched shapes, e.g. "topic = 1" or a [topic] table instead
		// of [[topic]]: the library's message names the key and line.
		return nil, fmt.Errorf("%s: %s", source, strings.TrimPrefix(err.Error(), "toml: "))
	}
	loc := locate(string(data))
	cfg := Default()
	cfg.Source = source
	var ps problems
	raw.convert(cfg, &ps)
	if len(ps) == 0 { // values of the wrong type were left at their defaults: check later
		ps = cfg.validate()
	}
	unknownKeys(&ps, md, loc, cfg)
	for _, p := range ps {
		p.Source = source
		if p.Line == 0 {
			p.Line = loc.line(p.Path)
		}
		if p.also != "" {
			if n := loc.line(p.also); n > 0 {
				p.Msg += fmt.Sprintf(" (line %d)", n)
			}
		}
	}
	if err := ps.err(); err != nil {
		return nil, err
	}
	return cfg, nil
}

// unknownKeys adds a problem for each key the decoder did not use
// (md.Undecoded), and for each key that matched a known one only by
// ignoring case (the decoder matches case-insensitively; we do not).
// cfg names the topics in the errors.
func unknownKeys(ps *problems, md toml.MetaData, loc *locator, cfg *Config) {
	bad := md.Undecoded()
	for _, k := range md.Keys() {
		if _, known := knownIn(k); !known && !contains(bad, k) {
			bad = append(bad, k)
		}
	}
	reported := map[string]bool{}
	for _, k := range bad {
		if hasUnknownParent(k, bad) {
			continue // [wrokre] is reported, not each of its keys
		}
		known, _ := knownIn(k)
		hits := loc.find(k)
		if len(hits) == 0 {
			hits = []located{{names: k, path: strings.Join(k, ".")}}
		}
		for _, h := range hits {
			if reported[h.path] {
				continue
			}
			reported[h.path] = true
			*ps = append(*ps, &Error{Path: h.path, Line: h.line, Table: tableName(h.path, k, cfg),
				Key: k[len(k)-1], Unknown: true, Msg: "known keys: " + strings.Join(known, ", ")})
		}
	}
}

func contains(keys []toml.Key, k toml.Key) bool {
	for _, x := range keys {
		if equalNames(x, k) {
			return true
		}
	}
	return false
}

func hasUnknownParent(k toml.Key, bad []toml.Key) bool {
	for _, b := range bad {
		if len(b) < len(k) && equalNames(b, k[:len(b)]) {
			return true
		}
	}
	return false
}

// tableName returns the display name of the table that holds the key
// named k at path (with indices), or "" for the top level.
func tableName(path string, k toml.Key, cfg *Config) string {
	switch {
	case len(k) < 2:
		return ""
	case k[0] != "topic":
		return "[" + strings.Join(k[:len(k)-1], ".") + "]"
	}
	i := -1
	if rest, ok := strings.CutPrefix(path, "topic["); ok {
		if j := strings.IndexByte(rest, ']'); j > 0 {
			if n, err := strconv.Atoi(rest[:j]); err == nil {
				i = n
			}
		}
	}
	name := ""
	if i >= 0 && i < len(cfg.Topics) {
		name = cfg.Topics[i].Name
	}
	if len(k) == 2 {
		return topicTable(name, i)
	}
	return "[" + strings.Join(k[:len(k)-1], ".") + "] of " + topicName(name, i)
}

// topicTable names the i-th [[topic]] table in errors.
func topicTable(name string, i int) string {
	if name == "" {
		return fmt.Sprintf("[[topic]] #%d", i+1)
	}
	return fmt.Sprintf("[[topic]] %q", name)
}

// knownIn returns the keys of the table that holds k, and whether k is
// one of them (with the same case).
func knownIn(k toml.Key) ([]string, bool) {
	t := reflect.TypeOf(rawConfig{})
	for i, name := range k {
		keys := tomlKeys(t)
		if t == reflect.TypeOf(value{}) { // a table of strings (headers): any key
			return nil, true
		}
		f, ok := fieldOf(t, name)
		if !ok {
			return keys, false
		}
		if i == len(k)-1 {
			return keys, true
		}
		t = f
		for t.Kind() == reflect.Slice || t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct {
			return keys, false
		}
	}
	return nil, true
}

// tomlKeys returns the toml tags of struct type t, sorted.
func tomlKeys(t reflect.Type) []string {
	if t.Kind() != reflect.Struct {
		return nil
	}
	var keys []string
	for i := 0; i < t.NumField(); i++ {
		if tag := t.Field(i).Tag.Get("toml"); tag != "" {
			keys = append(keys, tag)
		}
	}
	return keys
}

func fieldOf(t reflect.Type, key string) (reflect.Type, bool) {
	if t.Kind() != reflect.Struct || t == reflect.TypeOf(value{}) {
		return nil, false
	}
	for i := 0; i < t.NumField(); i++ {
		if t.Field(i).Tag.Get("toml") == key {
			return t.Field(i).Type, true
		}
	}
	return nil, false
}

// value is one TOML value kept as decoded (string, int64, float64, bool,
// time.Time, []any or map[string]any) so that its type is checked here,
// where the key's array index is known, rather than by the decoder.
type value struct {
	v   any
	set bool
}

// UnmarshalTOML keeps v.
func (x *value) UnmarshalTOML(v any) error {
	x.v, x.set = v, true
	return nil
}

// The file's schema. Field order is the order of "known keys" in errors.
type (
	rawConfig struct {
		Redis   rawRedis   `toml:"redis"`
		Worker  rawWorker  `toml:"worker"`
		HTTP    rawHTTP    `toml:"http"`
		Log     rawLog     `toml:"log"`
		Tracing rawTracing `toml:"tracing"`
		Topic   []rawTopic `toml:"topic"`
	}
	rawRedis struct {
		Addr         value `toml:"addr"`
		Password     value `toml:"password"`
		Namespace    value `toml:"namespace"`
		PoolSize     value `toml:"pool_size"`
		DialTimeout  value `toml:"dial_timeout"`
		ReadTimeout  value `toml:"read_timeout"`
		WriteTimeout value `toml:"write_timeout"`
		Cluster      value `toml:"cluster"`
	}
	rawWorker struct {
		ID              value `toml:"id"`
		Lease           value `toml:"lease"`
		PollInterval    value `toml:"poll_interval"`
		IdlePoll        value `toml:"idle_poll_interval"`
		ShutdownTimeout value `toml:"shutdown_timeout"`
	}
	rawHTTP struct {
		Listen       value `toml:"listen"`
		Token        value `toml:"token"`
		MaxBodyBytes value `toml:"max_body_bytes"`
	}
	rawLog struct {
		Format value `toml:"format"`
		Level  value `toml:"level"`
	}
	rawTopic struct {
		Name        value       `toml:"name"`
		Partitions  value       `toml:"partitions"`
		Concurrency value       `toml:"concurrency"`
		Timeout     value       `toml:"timeout"`
		MaxAttempts value       `toml:"max_attempts"`
		Backoff     value       `toml:"backoff"`
		OnDuplicate value       `toml:"on_duplicate"`
		MaxWait     value       `toml:"max_wait"`
		UniqueFor   value       `toml:"unique_for"`
		Handler     *rawHandler `toml:"handler"`
		Limits      *rawLimits  `toml:"limits"`
		Auto        *rawAuto    `toml:"auto_partitions"`
		Schedule    schedTables `toml:"schedule"`
	}
	rawHandler struct {
		Type    value `toml:"type"`
		URL     value `toml:"url"`
		Secret  value `toml:"secret"`
		Headers value `toml:"headers"`
		Command value `toml:"command"`
	}
)

// convert copies the values that are set into cfg, checking their types.
func (r *rawConfig) convert(cfg *Config, ps *problems) {
	c := converter{ps}
	at := func(table, key string) place { return child(table, "["+table+"]", key) }

	c.addrs(r.Redis.Addr, &cfg.Redis.Addr, at("redis", "addr"))
	c.str(r.Redis.Password, &cfg.Redis.Password, at("redis", "password"))
	c.str(r.Redis.Namespace, &cfg.Redis.Namespace, at("redis", "namespace"))
	c.integer(r.Redis.PoolSize, &cfg.Redis.PoolSize, at("redis", "pool_size"))
	c.duration(r.Redis.DialTimeout, &cfg.Redis.DialTimeout, at("redis", "dial_timeout"))
	c.duration(r.Redis.ReadTimeout, &cfg.Redis.ReadTimeout, at("redis", "read_timeout"))
	c.duration(r.Redis.WriteTimeout, &cfg.Redis.WriteTimeout, at("redis", "write_timeout"))
	c.boolean(r.Redis.Cluster, &cfg.Redis.Cluster, at("redis", "cluster"))

	c.str(r.Worker.ID, &cfg.Worker.ID, at("worker", "id"))
	c.duration(r.Worker.Lease, &cfg.Worker.Lease, at("worker", "lease"))
	c.duration(r.Worker.PollInterval, &cfg.Worker.PollInterval, at("worker", "poll_interval"))
	c.duration(r.Worker.IdlePoll, &cfg.Worker.IdlePollInterval, at("worker", "idle_poll_interval"))
	c.duration(r.Worker.ShutdownTimeout, &cfg.Worker.ShutdownTimeout, at("worker", "shutdown_timeout"))

	c.str(r.HTTP.Listen, &cfg.HTTP.Listen, at("http", "listen"))
	c.str(r.HTTP.Token, &cfg.HTTP.Token, at("http", "token"))
	c.integer(r.HTTP.MaxBodyBytes, &cfg.HTTP.MaxBodyBytes, at("http", "max_body_bytes"))

	c.str(r.Log.Format, &cfg.Log.Format, at("log", "format"))
	c.str(r.Log.Level, &cfg.Log.Level, at("log", "level"))

	c.tracing(&r.Tracing, &cfg.Tracing)

	for i, rt := range r.Topic {
		t := defaultTopic()
		path := fmt.Sprintf("topic[%d]", i)
		c.str(rt.Name, &t.Name, child(path, topicTable("", i), "name"))
		table := topicTable(t.Name, i)
		c.partitions(rt.Partitions, rt.Auto, &t, path, table, i)
		c.integer(rt.Concurrency, &t.Concurrency, child(path, table, "concurrency"))
		c.duration(rt.Timeout, &t.Timeout, child(path, table, "timeout"))
		c.integer(rt.MaxAttempts, &t.MaxAttempts, child(path, table, "max_attempts"))
		c.durations(rt.Backoff, &t.Backoff, child(path, table, "backoff"))
		c.onDuplicate(rt.OnDuplicate, &t.OnDuplicate, child(path, table, "on_duplicate"))
		c.duration(rt.MaxWait, &t.MaxWait, child(path, table, "max_wait"))
		c.optDuration(rt.UniqueFor, &t.UniqueFor, child(path, table, "unique_for"))
		if h := rt.Handler; h != nil {
			hp, ht := path+".handler", "[topic.handler] of "+topicName(t.Name, i)
			c.str(h.Type, &t.Handler.Type, child(hp, ht, "type"))
			c.str(h.URL, &t.Handler.URL, child(hp, ht, "url"))
			c.str(h.Secret, &t.Handler.Secret, child(hp, ht, "secret"))
			c.stringMap(h.Headers, &t.Handler.Headers, child(hp, ht, "headers"))
			c.strings(h.Command, &t.Handler.Command, child(hp, ht, "command"))
		}
		c.limits(rt.Limits, &t.Limits, path, t.Name, i)
		c.schedules(rt.Schedule, &t.Schedules, path, t.Name, i)
		cfg.Topics = append(cfg.Topics, t)
	}
}

// topicName names the i-th topic in errors: by its name when it has one.
func topicName(name string, i int) string {
	if name == "" {
		return fmt.Sprintf("topic #%d", i+1)
	}
	return fmt.Sprintf("topic %q", name)
}

// converter checks the TOML types of values.
type converter struct{ ps *problems }

// typeName names the TOML type of a decoded value.
func typeName(v any) string {
	switch v.(type) {
	case string:
		return "a string"
	case int64:
		return "an integer"
	case float64:
		return "a float"
	case bool:
		return "a boolean"
	case time.Time:
		return "a date-time"
	case []any, []map[string]any:
		return "an array"
	case map[string]any:
		return "a table"
	}
	return fmt.Sprintf("a %T", v)
}

func (c converter) boolean(x value, dst *bool, at place) {
	if !x.set {
		return
	}
	b, ok := x.v.(bool)
	if !ok {
		c.ps.add(at, "got %s; want true or false", typeName(x.v))
		return
	}
	*dst = b
}

func (c converter) str(x value, dst *string, at place) {
	if !x.set {
		return
	}
	s, ok := x.v.(string)
	if !ok {
		c.ps.add(at, "got %s; want a string", typeName(x.v))
		return
	}
	*dst = s
}

// addrs reads a string, or an array of strings joined with commas (the
// addresses of several proxies).
func (c converter) addrs(x value, dst *string, at place) {
	if !x.set {
		return
	}
	if _, ok := x.v.([]any); ok {
		var list []string
		c.strings(x, &list, at)
		if len(list) == 0 {
			c.ps.add(at, "the array is empty; want one or more addresses such as [\"10.0.0.1:19000\", \"10.0.0.2:19000\"]")
			return
		}
		*dst = strings.Join(list, ",")
		return
	}
	s, ok := x.v.(string)
	if !ok {
		c.ps.add(at, "got %s; want a string such as \"127.0.0.1:6379\" or an array of such strings", typeName(x.v))
		return
	}
	*dst = s
}

func (c converter) integer(x value, dst *int, at place) {
	if !x.set {
		return
	}
	n, ok := x.v.(int64)
	if !ok {
		c.ps.add(at, "got %s; want an integer", typeName(x.v))
		return
	}
	if n > math.MaxInt32 || n < math.MinInt32 {
		c.ps.add(at, "%d is out of range; want an integer below 2^31", n)
		return
	}
	*dst = int(n)
}

func parseDuration(v any) (time.Duration, string) {
	s, ok := v.(string)
	if !ok {
		return 0, fmt.Sprintf("got %s; want a duration string such as \"10s\" or \"1m30s\"", typeName(v))
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fmt.Sprintf("%q is not a duration; want a number with a unit (ns, us, ms, s, m, h) such as \"10s\" or \"1m30s\"", s)
	}
	return d, ""
}

func (c converter) duration(x value, dst *time.Duration, at place) {
	if !x.set {
		return
	}
	d, msg := parseDuration(x.v)
	if msg != "" {
		c.ps.add(at, "%s", msg)
		return
	}
	*dst = d
}

// optDuration reads a duration whose absence means something else than
// any value: dst stays nil when the key is not set.
func (c converter) optDuration(x value, dst **time.Duration, at place) {
	if !x.set {
		return
	}
	d, msg := parseDuration(x.v)
	if msg != "" {
		c.ps.add(at, "%s", msg)
		return
	}
	*dst = &d
}

func (c converter) durations(x value, dst *[]time.Duration, at place) {
	if !x.set {
		return
	}
	arr, ok := x.v.([]any)
	if !ok {
		c.ps.add(at, "got %s; want an array of duration strings such as [\"10s\", \"1m\"]", typeName(x.v))
		return
	}
	out := make([]time.Duration, 0, len(arr))
	for i, v := range arr {
		d, msg := parseDuration(v)
		if msg != "" {
			c.ps.add(place{path: fmt.Sprintf("%s[%d]", at.path, i), table: at.table, key: at.key},
				"element %d: %s", i+1, msg)
			return
		}
		out = append(out, d)
	}
	*dst = out
}

func (c converter) strings(x value, dst *[]string, at place) {
	if !x.set {
		return
	}
	arr, ok := x.v.([]any)
	if !ok {
		c.ps.add(at, "got %s; want an array of strings such as [\"prog\", \"arg\"]", typeName(x.v))
		return
	}
	out := make([]string, 0, len(arr))
	for i, v := range arr {
		s, ok := v.(string)
		if !ok {
			c.ps.add(place{path: fmt.Sprintf("%s[%d]", at.path, i), table: at.table, key: at.key},
				"element %d is %s; want a string", i+1, typeName(v))
			return
		}
		out = append(out, s)
	}
	*dst = out
}

func (c converter) stringMap(x value, dst *map[string]string, at place) {
	if !x.set {
		return
	}
	m, ok := x.v.(map[string]any)
	if !ok {
		c.ps.add(at, "got %s; want a table of strings such as {Authorization = \"Bearer x\"}", typeName(x.v))
		return
	}
	out := make(map[string]string, len(m))
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		s, ok := m[k].(string)
		if !ok {
			c.ps.add(place{path: at.path + "." + k, table: at.table, key: at.key},
				"header %q is %s; want a string", k, typeName(m[k]))
			return
		}
		out[k] = s
	}
	*dst = out
}
