package delayq

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/delayq/delayq/internal/clock"
	"github.com/delayq/delayq/internal/wire"
)

// Controls in exports. An export of a whole topic carries the topic's
// flow controls (its pause, fleet-wide limits and automatic partition
// count) on a line of its own, first, so that a topic moved to another
// cluster is held back, limited and scaled there as it was. An import
// applies each of them only where the destination topic has none of its
// own: a control set there (by hand, or by its workers' file) is the
// destination's decision, and stays; the import says which it kept.

// ExportedControls is a topic's flow controls as an export carries them
// (see ExportControls) and ImportControls applies them. A nil or zero
// field is a control the topic does not have.
type ExportedControls struct {
	// Paused: the topic was paused when it was exported, until
	// PausedUntil (zero: until resumed).
	Paused      bool
	PausedUntil time.Time
	// Limits are the topic's fleet-wide limits; nil when it has none.
	Limits *Limits
	// AutoPartitions is the topic's automatic partition count, its
	// defaults applied; nil when it is off.
	AutoPartitions *AutoPartitions
}

// IsZero reports whether the topic has no control to carry.
func (e ExportedControls) IsZero() bool {
	return !e.Paused && e.Limits == nil && e.AutoPartitions == nil
}

// ExportControls returns topic's flow controls, for an export of the
// topic: a timed pause that has ended is none. It writes nothing (a topic
// never used has none).
func (ins *Inspector) ExportControls(ctx context.Context, topic string) (ExportedControls, error) {
	c := ins.c
	if err := validateTopic(topic); err != nil {
		return ExportedControls{}, err
	}
	ctrl, ok, err := c.store.ReadControls(ctx, topic)
	if err != nil || !ok {
		return ExportedControls{}, err
	}
	var e ExportedControls
	if ctrl.PausedAt(c.opts.Now().UnixMilli()) {
		e.Paused = true
		if ctrl.PausedUntil > 0 {
			e.PausedUntil = time.UnixMilli(ctrl.PausedUntil)
		}
	}
	if l := fromStore(ctrl.Limits); !l.IsZero() {
		e.Limits = &l
	}
	e.AutoPartitions = autoFromStore(ctrl.Auto)
	return e, nil
}

// ControlsImport says what ImportControls did with each control of an
// export: the names ("pause", "limits", "automatic partitions") of those
// it applied, and of those it left as the topic had them.
type ControlsImport struct {
	Applied, Kept []string
}

// ImportControls applies the controls of an export to topic, each only
// where the topic has none of its own: a topic paused stays paused as it
// is; limits or an automatic count that were ever set on it (or cleared,
// or turned off: a decision too) stay. A timed pause whose end has passed
// is not applied. The topic must exist (an import creates it first); it
// fails with ErrInvalid for controls the library refuses, and writes
// none of them then.
func (adm *Admin) ImportControls(ctx context.Context, topic string, e ExportedControls) (ControlsImport, error) {
	c := adm.c
	var out ControlsImport
	if err := validateTopic(topic); err != nil {
		return out, err
	}
	if e.Limits != nil {
		if err := e.Limits.Validate(); err != nil {
			return out, err
		}
	}
	if e.AutoPartitions != nil {
		if err := e.AutoPartitions.Validate(); err != nil {
			return out, err
		}
	}
	note := func(name string, written bool) {
		if written {
			out.Applied = append(out.Applied, name)
		} else {
			out.Kept = append(out.Kept, name)
		}
	}
	if e.Paused && (e.PausedUntil.IsZero() || e.PausedUntil.After(c.opts.Now())) {
		var until int64
		if !e.PausedUntil.IsZero() {
			until = clock.CeilMS(e.PausedUntil).UnixMilli()
		}
		written, err := c.store.ProposePause(ctx, topic, until)
		if err != nil {
			return out, err
		}
		note("pause", written)
	}
	if e.Limits != nil {
		written, err := c.store.SetLimits(ctx, topic, storeLimits(*e.Limits), true)
		if err != nil {
			return out, err
		}
		note("limits", written)
	}
	if e.AutoPartitions != nil {
		written, err := c.store.SetAuto(ctx, topic, e.AutoPartitions.toStore(), true)
		if err != nil {
			return out, err
		}
		note("automatic partitions", written)
	}
	return out, nil
}

// controlsLineJSON is the line of a topic's controls in the export
// format: one member, "controls", which an importer that knows only
// messages refuses as an unknown field rather than misreading the line.
type controlsLineJSON struct {
	Controls *exportControlsJSON `json:"controls"`
}

// exportControlsJSON is ExportedControls in the export format.
type exportControlsJSON struct {
	Paused      bool      `json:"paused,omitempty"`
	PausedUntil string    `json:"paused_until,omitempty"`
	Limits      *Limits   `json:"limits,omitempty"` // see Limits.MarshalJSON
	Auto        *autoJSON `json:"auto_partitions,omitempty"`
}

type autoJSON struct {
	Min         int    `json:"min"`
	Max         int    `json:"max"`
	GrowAfter   string `json:"grow_after,omitempty"`
	ShrinkAfter string `json:"shrink_after,omitempty"`
	Cooldown    string `json:"cooldown,omitempty"`
}

// MarshalJSON encodes the controls as their line of the export format:
//
//	{"controls":{"paused":true,"paused_until":"2026-11-27T08:00:00.000Z",
//	 "limits":{"rate":"200/s","burst":20,"concurrency":10},
//	 "auto_partitions":{"min":4,"max":32,"grow_after":"10s",
//	 "shrink_after":"10m0s","cooldown":"10s"}}}
//
// A control the topic does not have is left out; the limits are as
// Limits.MarshalJSON writes them; durations are Go durations; times RFC 3339 in UTC with
// milliseconds.
func (e *ExportedControls) MarshalJSON() ([]byte, error) {
	v := exportControlsJSON{Paused: e.Paused}
	if e.Paused {
		v.PausedUntil = wire.Time(e.PausedUntil)
	}
	v.Limits = e.Limits
	if a := e.AutoPartitions; a != nil {
		v.Auto = &autoJSON{Min: a.Min, Max: a.Max, GrowAfter: durString(a.GrowAfter), ShrinkAfter: durString(a.ShrinkAfter), Cooldown: durString(a.Cooldown)}
	}
	out, err := appendLine(nil, controlsLineJSON{&v})
	if err != nil {
		return nil, fmt.Errorf("encode controls: %w", err)
	}
	return out, nil
}

func durString(d time.Duration) string {
	if d == 0 {
		return ""
	}
	return d.String()
}

// UnmarshalJSON reads the line of a topic's controls in the export
// format (see MarshalJSON). Unknown fields are errors, and each error
// names the field; the values themselves are checked by ImportControls.
func (e *ExportedControls) UnmarshalJSON(line []byte) error {
	var v controlsLineJSON
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return fmt.Errorf("invalid JSON: %v", err)
	}
	if dec.More() {
		return errors.New("invalid JSON: more than one value on the line")
	}
	j := v.Controls
	if j == nil {
		return errors.New(`"controls" is missing`)
	}
	out := ExportedControls{Paused: j.Paused}
	if j.PausedUntil != "" {
		if !j.Paused {
			return errors.New(`controls: "paused_until" without "paused"`)
		}
		t, err := time.Parse(time.RFC3339Nano, j.PausedUntil)
		if err != nil {
			return fmt.Errorf(`controls: "paused_until": %v`, err)
		}
		out.PausedUntil = t
	}
	out.Limits = j.Limits
	if a := j.Auto; a != nil {
		ap := &AutoPartitions{Min: a.Min, Max: a.Max}
		for _, f := range []struct {
			name, s string
			dst     *time.Duration
		}{{"grow_after", a.GrowAfter, &ap.GrowAfter}, {"shrink_after", a.ShrinkAfter, &ap.ShrinkAfter}, {"cooldown", a.Cooldown, &ap.Cooldown}} {
			if f.s == "" {
				continue
			}
			d, err := time.ParseDuration(f.s)
			if err != nil {
				return fmt.Errorf(`controls: "auto_partitions": %q: %v`, f.name, err)
			}
			*f.dst = d
		}
		out.AutoPartitions = ap
	}
	*e = out
	return nil
}
