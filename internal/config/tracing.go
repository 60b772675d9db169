package config

import (
	"math"
	"net/url"
)

// Defaults of the [tracing] table.
const (
	// DefaultServiceName is the default of [tracing] service_name.
	DefaultServiceName = "delayq"
	// DefaultSampleRatio is the default of [tracing] sample_ratio.
	DefaultSampleRatio = 1.0
)

// Tracing is the [tracing] table: OpenTelemetry traces of the worker's
// deliveries (and of the enqueues of its HTTP API), exported over
// OTLP/HTTP. Without an Endpoint the worker sets up no tracer provider
// and exports nothing; the deliveries' handlers still pass on the trace
// context of messages that carry one.
type Tracing struct {
	// Endpoint is the http:// or https:// URL of an OTLP/HTTP collector,
	// such as "http://localhost:4318"; the path defaults to /v1/traces.
	// "" exports nothing (the default).
	Endpoint string
	// ServiceName is the service.name of the worker's spans. Default
	// DefaultServiceName.
	ServiceName string
	// SampleRatio is the share, 0 to 1, of the traces the worker starts
	// (deliveries of messages enqueued outside a trace) that it samples;
	// a delivery in a trace follows its enqueue's decision. Default
	// DefaultSampleRatio (all).
	SampleRatio float64
	// Headers are sent with each export (an API key, say).
	Headers map[string]string
}

// rawTracing is the schema of the [tracing] table.
type rawTracing struct {
	Endpoint    value `toml:"endpoint"`
	ServiceName value `toml:"service_name"`
	SampleRatio value `toml:"sample_ratio"`
	Headers     value `toml:"headers"`
}

// tracing converts the [tracing] table.
func (c converter) tracing(r *rawTracing, dst *Tracing) {
	at := func(key string) place { return child("tracing", "[tracing]", key) }
	c.str(r.Endpoint, &dst.Endpoint, at("endpoint"))
	c.str(r.ServiceName, &dst.ServiceName, at("service_name"))
	c.number(r.SampleRatio, &dst.SampleRatio, at("sample_ratio"))
	c.stringMap(r.Headers, &dst.Headers, at("headers"))
}

// number reads an integer or a float.
func (c converter) number(x value, dst *float64, at place) {
	if !x.set {
		return
	}
	switch v := x.v.(type) {
	case int64:
		*dst = float64(v)
	case float64:
		*dst = v
	default:
		c.ps.add(at, "got %s; want a number such as 0.25", typeName(x.v))
	}
}

// validate checks the [tracing] table. A key other than endpoint set
// without an endpoint would be silently ignored: it is refused instead.
func (t *Tracing) validate(ps *problems) {
	at := func(key string) place { return child("tracing", "[tracing]", key) }
	if t.Endpoint != "" {
		u, err := url.Parse(t.Endpoint)
		switch {
		case err != nil:
			ps.add(at("endpoint"), "%q is not a URL (%v); want the OTLP/HTTP URL of a collector such as \"http://localhost:4318\"", t.Endpoint, err)
		case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
			ps.add(at("endpoint"), "%q is not an http:// or https:// URL; want the OTLP/HTTP URL of a collector such as \"http://localhost:4318\"", t.Endpoint)
		}
	}
	if msg := checkText(t.ServiceName, 200, false); msg != "" {
		ps.add(at("service_name"), "%s; want a name such as %q", msg, DefaultServiceName)
	}
	if math.IsNaN(t.SampleRatio) || t.SampleRatio < 0 || t.SampleRatio > 1 {
		ps.add(at("sample_ratio"), "%v is not a ratio; want a number from 0 (none) to 1 (all)", t.SampleRatio)
	}
	for _, k := range sortedKeys(t.Headers) {
		checkHeader(ps, place{path: "tracing.headers." + k, table: "[tracing]", key: "headers"}, k, t.Headers[k])
	}
	if t.Endpoint != "" {
		return
	}
	for _, k := range []struct {
		key string
		set bool
	}{
		{"service_name", t.ServiceName != DefaultServiceName},
		{"sample_ratio", t.SampleRatio != DefaultSampleRatio},
		{"headers", len(t.Headers) > 0},
	} {
		if k.set {
			ps.add(at(k.key), "%s without an endpoint: nothing would be exported; set endpoint too, or remove %s", k.key, k.key)
		}
	}
}
