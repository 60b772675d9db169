package config

import (
	"strings"
	"testing"
)

// TestTracingTable: the [tracing] table's keys and defaults, and every
// problem named with its key, value and line.
func TestTracingTable(t *testing.T) {
	cfg, err := Parse(nil, "c.toml")
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Tracing; got.Endpoint != "" || got.ServiceName != DefaultServiceName || got.SampleRatio != DefaultSampleRatio || got.Headers != nil {
		t.Errorf("defaults: %+v", got)
	}
	cfg, err = Parse([]byte(`[tracing]
endpoint = "https://otlp.example.com:4318/v1/traces"
service_name = "billing-worker"
sample_ratio = 0.25
headers = { "Authorization" = "Bearer abc" }
`), "c.toml")
	if err != nil {
		t.Fatal(err)
	}
	want := Tracing{Endpoint: "https://otlp.example.com:4318/v1/traces", ServiceName: "billing-worker", SampleRatio: 0.25}
	if got := cfg.Tracing; got.Endpoint != want.Endpoint || got.ServiceName != want.ServiceName || got.SampleRatio != want.SampleRatio ||
		len(got.Headers) != 1 || got.Headers["Authorization"] != "Bearer abc" {
		t.Errorf("tracing %+v, want %+v with an Authorization header", got, want)
	}
	if cfg, err := Parse([]byte("[tracing]\nendpoint = \"http://localhost:4318\"\nsample_ratio = 0\n"), "c.toml"); err != nil || cfg.Tracing.SampleRatio != 0 {
		t.Errorf("sample_ratio = 0: %+v, %v", cfg, err)
	}

	for _, tc := range []struct{ table, want string }{
		{"[tracing]\nendpoint = \"localhost:4318\"\n",
			`invalid value of "endpoint" in [tracing] at c.toml line 2: "localhost:4318" is not an http:// or https:// URL; want the OTLP/HTTP URL of a collector such as "http://localhost:4318"`},
		{"[tracing]\nendpoint = 4318\n",
			`invalid value of "endpoint" in [tracing] at c.toml line 2: got an integer; want a string`},
		{"[tracing]\nendpoint = \"http://localhost:4318\"\nsample_ratio = 1.5\n",
			`invalid value of "sample_ratio" in [tracing] at c.toml line 3: 1.5 is not a ratio; want a number from 0 (none) to 1 (all)`},
		{"[tracing]\nendpoint = \"http://localhost:4318\"\nsample_ratio = \"half\"\n",
			`invalid value of "sample_ratio" in [tracing] at c.toml line 3: got a string; want a number such as 0.25`},
		{"[tracing]\nendpoint = \"http://localhost:4318\"\nservice_name = \"\"\n",
			`invalid value of "service_name" in [tracing] at c.toml line 3: it is empty; want a name such as "delayq"`},
		{"[tracing]\nendpoint = \"http://localhost:4318\"\nheaders = { \"Bad Name\" = \"x\" }\n",
			`invalid value of "headers" in [tracing] at c.toml line 3: "Bad Name" is not a header name`},
		{"[tracing]\nservice_name = \"billing\"\n",
			`invalid value of "service_name" in [tracing] at c.toml line 2: service_name without an endpoint: nothing would be exported; set endpoint too, or remove service_name`},
		{"[log]\nlevel = \"info\"\n[tracing]\nsample_ratio = 0.5\n",
			`invalid value of "sample_ratio" in [tracing] at c.toml line 4: sample_ratio without an endpoint`},
		{"[tracing]\nendpoint = \"http://localhost:4318\"\nsampler = \"always\"\n",
			`unknown key "sampler" in [tracing] at c.toml line 3; known keys: endpoint, service_name, sample_ratio, headers`},
	} {
		_, err := Parse([]byte(tc.table), "c.toml")
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error\n  %v\nwant one containing\n  %s", tc.table, err, tc.want)
		}
	}
}
