package delayq

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// seenLimits waits until consumer k follows its topic's limits as want.
func seenLimits(t *testing.T, k *Consumer, want Limits) {
	t.Helper()
	waitFor(t, 2*time.Second, "consumer sees limits "+want.String(), func() bool { return fromStore(k.ctrl.limits()) == want })
}

// Limits are stored per topic, read back, validated, refused for a topic
// that does not exist; a consumer's own limits are set only on a topic
// whose limits were never set nor cleared.
func TestLimitsStored(t *testing.T) {
	ctx := context.Background()
	c := newClient(t, testAddr(t), Options{Partitions: 2})
	if err := c.Admin().SetLimits(ctx, "nosuch", Limits{Rate: 5}); !errors.Is(err, ErrNoTopic) {
		t.Fatalf("SetLimits of a topic that does not exist: %v, want ErrNoTopic", err)
	}
	if _, err := c.Send(ctx, Message{Topic: "lim", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []Limits{{Rate: -1}, {Burst: 3}, {Rate: 1, Burst: -1}, {Concurrency: -2}, {Rate: 2e6}} {
		if err := c.Admin().SetLimits(ctx, "lim", bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("SetLimits(%+v): %v, want ErrInvalid", bad, err)
		}
	}
	if l, err := c.Inspector().Limits(ctx, "lim"); err != nil || !l.IsZero() {
		t.Fatalf("limits never set: %+v, %v", l, err)
	}
	want := Limits{Rate: 200, Burst: 40, Concurrency: 20}
	if err := c.Admin().SetLimits(ctx, "lim", want); err != nil {
		t.Fatal(err)
	}
	if l, err := c.Inspector().Limits(ctx, "lim"); err != nil || l != want {
		t.Fatalf("Limits: %+v, %v, want %+v", l, err, want)
	}
	ts, err := c.Inspector().Stats(ctx, "lim")
	if err != nil || ts.Limits.Limits != want {
		t.Fatalf("stats limits: %+v, %v", ts.Limits, err)
	}
	// A topic's owner proposing others leaves the stored limits alone...
	propose := func(topic string, l Limits, written bool, stored Limits) {
		t.Helper()
		p, err := c.Admin().ProposeTopic(ctx, TopicConfig{Topic: topic, Limits: &l})
		if err != nil {
			t.Fatal(err)
		}
		w := Proposed{Setting: "limits", Proposed: l.String(), Stored: stored.String(), Written: written}
		if len(p.Settings) != 1 || p.Settings[0] != w {
			t.Errorf("ProposeTopic(%s, limits %v): %+v, want %+v", topic, l, p.Settings, w)
		}
	}
	propose("lim", Limits{Rate: 1}, false, want)
	k := runConsumer(t, c, ConsumerOptions{Topic: "lim"}, newRecorder().handle)
	seenLimits(t, k, want)
	// ...and so does one after they were cleared: cleared is decided.
	if err := c.Admin().SetLimits(ctx, "lim", Limits{}); err != nil {
		t.Fatal(err)
	}
	propose("lim", Limits{Concurrency: 3}, false, Limits{})
	k2 := runConsumer(t, c, ConsumerOptions{Topic: "lim"}, newRecorder().handle)
	seenLimits(t, k2, Limits{})
	// A topic whose limits were never decided takes the proposed ones.
	if _, err := c.Send(ctx, Message{Topic: "lim2", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	propose("lim2", Limits{Concurrency: 3}, true, Limits{Concurrency: 3})
	k3 := runConsumer(t, c, ConsumerOptions{Topic: "lim2"}, newRecorder().handle)
	seenLimits(t, k3, Limits{Concurrency: 3})
}

// ParseRate reads the units, FormatRate writes what it reads.
func TestParseRate(t *testing.T) {
	for in, want := range map[string]float64{"200/s": 200, "200": 200, "0.5": 0.5, "600/m": 10, "30/m": 0.5, "36/h": 0.01} {
		got, err := ParseRate(in)
		if err != nil || got != want {
			t.Errorf("ParseRate(%q) = %v, %v, want %v", in, got, err, want)
		}
		back, err := ParseRate(FormatRate(got))
		if err != nil || back != got {
			t.Errorf("ParseRate(FormatRate(%v) = %q) = %v, %v", got, FormatRate(got), back, err)
		}
	}
	// One rule for the unit, by magnitude; the number as short as reads back.
	for r, want := range map[float64]string{200: "200/s", 2.5: "2.5/s", 1: "1/s", 0.5: "30/m", 0.02: "1.2/m", 1.0 / 60: "1/m",
		0.0001: "0.36/h", MinRate: "1/h", 0.01: "36/h", 1.0 / 3: "20/m", 0: "0/s"} {
		if got := FormatRate(r); got != want {
			t.Errorf("FormatRate(%v) = %q, want %q", r, got, want)
		}
		if back, err := ParseRate(FormatRate(r)); err != nil || back != r {
			t.Errorf("ParseRate(FormatRate(%v) = %q) = %v, %v", r, FormatRate(r), back, err)
		}
	}
	if r, err := ParseRate("0/s"); r != 0 || err != nil {
		t.Errorf("ParseRate(0/s) = %v, %v, want 0 (no rate limit)", r, err)
	}
	for _, bad := range []string{"", "-3/s", "5/d", "x/s", "1e999"} {
		if _, err := ParseRate(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseRate(%q): %v, want ErrInvalid", bad, err)
		}
	}
}

// Rates below MinRate are refused, pointing at a pause.
func TestRateFloor(t *testing.T) {
	for _, r := range []float64{1e-9, MinRate / 2} {
		err := Limits{Rate: r}.Validate()
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "pause") {
			t.Errorf("Limits{Rate: %g}.Validate() = %v, want ErrInvalid pointing at pause", r, err)
		}
	}
	if err := (Limits{Rate: MinRate}).Validate(); err != nil {
		t.Errorf("the floor itself: %v", err)
	}
	ctx := context.Background()
	c := newClient(t, testAddr(t), Options{Partitions: 2})
	if _, err := c.Send(ctx, Message{Topic: "floor", Delay: time.Hour}); err != nil {
		t.Fatal(err)
	}
	if err := c.Admin().SetLimits(ctx, "floor", Limits{Rate: 1e-9}); !errors.Is(err, ErrInvalid) {
		t.Errorf("SetLimits(rate 1e-9/s): %v, want ErrInvalid", err)
	}
	if l, err := c.Inspector().Limits(ctx, "floor"); err != nil || !l.IsZero() {
		t.Errorf("a refused rate was stored: %+v, %v", l, err)
	}
	if r, err := ParseRate("1/h"); err != nil || r != MinRate {
		t.Errorf("ParseRate(1/h) = %v, %v, want the floor %v", r, err, MinRate)
	}
}
