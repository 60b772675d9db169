package store

import (
	"context"
	"fmt"
	"strconv"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// Controls are a topic's flow controls, fields of its meta HASH (see
// keys.MetaPaused), which every consumer of the topic follows.
type Controls struct {
	// Paused: no delivery of the topic starts until PausedUntil (unix ms)
	// or, when that is 0, until the topic is resumed.
	Paused      bool
	PausedUntil int64
	// Limits are the topic's fleet-wide limits; LimitsSet is false while
	// they were never set nor cleared.
	Limits    Limits
	LimitsSet bool
	// Auto is the topic's automatic partition count; AutoSet is false
	// while it was never set nor turned off.
	Auto    Auto
	AutoSet bool
}

// PausedAt reports whether the topic is paused at nowMS: a timed pause
// ends by itself at its PausedUntil.
func (c Controls) PausedAt(nowMS int64) bool {
	return c.Paused && (c.PausedUntil == 0 || nowMS < c.PausedUntil)
}

// controlsScript sets (ARGV[3] not empty) or deletes a field of a topic's
// meta HASH, only when the topic exists (its partitions field ARGV[1] is
// set): a control of a topic never used creates nothing. With ARGV[4]
// "nx" it sets the field only when it is not set, and returns 0 when it
// was. It returns -1 for a topic that does not exist.
var controlsScript = newScript(`
if not redis.call('HGET', KEYS[1], ARGV[1]) then return -1 end
if ARGV[3] == '' then return redis.call('HDEL', KEYS[1], ARGV[2]) end
if ARGV[4] == 'nx' and redis.call('HGET', KEYS[1], ARGV[2]) then return 0 end
redis.call('HSET', KEYS[1], ARGV[2], ARGV[3])
return 1
`)

// SetPause pauses topic until untilMS (0: until resumed), or resumes it
// (pause false), then bumps its controls' counter of the changes hash
// (keys.ControlsField) for its consumers to read the controls at once.
// It fails with ErrNoTopic for a topic that does not exist, and writes
// nothing then. Consumers read the controls every few seconds besides,
// so a bump lost on the way only delays the change by that.
func (s *Store) SetPause(ctx context.Context, topic string, pause bool, untilMS int64) error {
	val := ""
	if pause {
		val = strconv.FormatInt(max(untilMS, 0), 10)
	}
	_, err := s.setControl(ctx, topic, keys.MetaPaused, "pause", val, false)
	return err
}

// ProposePause pauses topic until untilMS (0: until resumed) only when
// it is not paused (its pause field is unset), and reports whether it
// did: an import's pause, which leaves the destination's own alone. It
// fails with ErrNoTopic for a topic that does not exist.
func (s *Store) ProposePause(ctx context.Context, topic string, untilMS int64) (written bool, err error) {
	return s.setControl(ctx, topic, keys.MetaPaused, "pause", strconv.FormatInt(max(untilMS, 0), 10), true)
}

// setControl sets field of topic's meta HASH to val (deletes it for ""),
// only if the field is unset with ifUnset, and reports whether it wrote;
// then bumps the topic's controls' counter of the changes hash
// (keys.ControlsField) for its consumers to read the controls at once. It
// fails with ErrNoTopic for a topic that does not exist, and writes
// nothing then. A bump that fails after the write is logged, not
// returned: the control is stored, and consumers read it within
// controlsEvery (5 s) anyway. what names the control in errors.
func (s *Store) setControl(ctx context.Context, topic, field, what, val string, ifUnset bool) (written bool, err error) {
	mode := ""
	if ifUnset {
		mode = "nx"
	}
	r, err := s.script(ctx, controlsScript, keys.Meta(s.ns, topic), keys.MetaPartitions, field, val, mode)
	if err != nil {
		return false, fmt.Errorf("%s of %s: %w", what, topic, err)
	}
	switch n, _ := redis.Int(r, nil); n {
	case -1:
		return false, NoTopic(topic)
	case 0:
		return false, nil
	}
	if _, err := s.do(ctx, s.bump(keys.ControlsField(topic))...); err != nil {
		// Stored is done: the consumers read the controls every few
		// seconds besides, so the change only comes later. Failing the
		// command would have its caller believe it was not made.
		s.log.Warn("control stored, but telling the topic's consumers at once failed: they follow it at their next read of the controls",
			"control", what, "topic", topic, "err", err)
	}
	return true, nil
}

// ReadControls returns topic's controls, and whether the topic exists,
// in one command.
func (s *Store) ReadControls(ctx context.Context, topic string) (Controls, bool, error) {
	meta := keys.Meta(s.ns, topic)
	r, err := s.do(ctx, cmd{"HMGET", []any{meta, keys.MetaPartitions, keys.MetaPaused, keys.MetaLimits, keys.MetaAuto}})
	if err != nil {
		return Controls{}, false, fmt.Errorf("controls of %s: %w", topic, err)
	}
	vals, err := redis.Values(r[0], nil)
	if err != nil || len(vals) != 4 {
		return Controls{}, false, fmt.Errorf("controls of %s: bad reply %v (%v)", topic, r[0], err)
	}
	var c Controls
	if vals[1] != nil {
		c.Paused = true
		if c.PausedUntil, err = redis.Int64(vals[1], nil); err != nil {
			return Controls{}, false, fmt.Errorf("controls of %s: field %q of %s: %w", topic, keys.MetaPaused, meta, err)
		}
	}
	if c.Limits, c.LimitsSet, err = decodeLimits(meta, vals[2]); err != nil {
		return Controls{}, false, fmt.Errorf("controls of %s: %w", topic, err)
	}
	if c.Auto, c.AutoSet, err = decodeAuto(meta, vals[3]); err != nil {
		return Controls{}, false, fmt.Errorf("controls of %s: %w", topic, err)
	}
	return c, vals[0] != nil, nil
}
