package store

import (
	"context"
	"fmt"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// Schedules: a topic's definitions live in one HASH (keys.Schedules),
// name -> JSON whose first member is "version" (the root package encodes
// it). Each occurrence is an ordinary message of the topic whose id the
// root package derives from the schedule's name and version and the
// occurrence's time, steered into one partition per schedule; that
// partition's records HASH also holds the schedule's chain mark
// (keys.ScheduleMarkField), the id of the newest occurrence written.

// schedPutScript writes (ARGV[2] not empty) or deletes (empty) the
// definition ARGV[1], when the stored definition's version is ARGV[3]
// ("0": none stored; empty: any). It returns 1, or 0 when the version
// differed (a concurrent change: read again and retry).
var schedPutScript = newScript(`
local cur = redis.call('HGET', KEYS[1], ARGV[1])
local v = '0'
if cur then v = string.match(cur, '^{"version":(%d+)') or '-1' end
if ARGV[3] ~= '' and v ~= ARGV[3] then return 0 end
if ARGV[2] == '' then
  redis.call('HDEL', KEYS[1], ARGV[1])
else
  redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
end
return 1
`)

// schedChainScript writes an occurrence of a schedule into the records
// HASH of its partition, once ever, guarded by the schedule's mark
// (ARGV[1], its field): the id of the newest occurrence written, whose
// last colon-separated parts are version:ms:suffix.
//
//	ARGV[2] version of the definition the caller read
//	ARGV[3] the occurrence's time (unix ms)
//	ARGV[4] the occurrence's id (mode chain), or the new mark (retire)
//	ARGV[5] the occurrence's record (mode chain)
//	ARGV[6] mode: 'chain' writes the occurrence; 'retire' writes no
//	        occurrence but the mark ARGV[4], so that no chain of an older
//	        version writes one after it; 'forget' removes the mark.
//	ARGV[7] while the partition count changes, the schedule's mark in its
//	        partition of the old count ('' for none), which the change
//	        moves here (see MoveScan): the newer of the two guards.
//
// A mark of a newer version refuses everything (stale: 0). A mark of the
// same version at or past ARGV[3] refuses the chain (written already: 1).
// A mark of an older version names that version's pending occurrence,
// whose record (and running mark) is removed (its id is returned second,
// for the caller to remove its index entries). It returns {2, old} when the occurrence was
// written, {3, old} for retire and forget.
var schedChainScript = newScript(markLua + runningLua + `
local mark = redis.call('HGET', KEYS[1], ARGV[1])
local old = ''
local v = tonumber(ARGV[2])
local fv, fms = markOf(ARGV[7])
if fv and (fv > v or fv == v and ARGV[6] == 'chain' and fms >= tonumber(ARGV[3])) then
  if fv > v then return {0, ''} end
  return {1, ''}
end
if mark then
  local mv, mms = markOf(mark)
  if mv and mv > v then return {0, ''} end
  if mv and mv == v and ARGV[6] == 'chain' and mms >= tonumber(ARGV[3]) then return {1, ''} end
  if (not mv) or mv < v then
    if redis.call('HDEL', KEYS[1], mark) == 1 then old = mark end
    redis.call('HDEL', KEYS[1], RUNNING .. mark)
  end
end
if ARGV[6] == 'forget' then
  redis.call('HDEL', KEYS[1], ARGV[1])
  return {3, old}
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[4])
if ARGV[6] == 'retire' then return {3, old} end
if redis.call('HSETNX', KEYS[1], ARGV[4], ARGV[5]) == 0 then return {1, old} end
return {2, old}
`)

// GetSchedule returns the stored definition of name, nil if none.
func (s *Store) GetSchedule(ctx context.Context, topic, name string) ([]byte, error) {
	r, err := s.do(ctx, cmd{"HGET", []any{keys.Schedules(s.ns, topic), name}})
	if err != nil {
		return nil, fmt.Errorf("read schedule %q of topic %s: %w", name, topic, err)
	}
	if r[0] == nil {
		return nil, nil
	}
	return redis.Bytes(r[0], nil)
}

// PutSchedule writes def (JSON beginning {"version":N) as the definition
// of name, or deletes it when def is nil, if the stored version is
// expect (0: none stored). It returns false when it was not.
func (s *Store) PutSchedule(ctx context.Context, topic, name string, def []byte, expect int64) (bool, error) {
	r, err := s.script(ctx, schedPutScript, keys.Schedules(s.ns, topic), name, def, itoa(expect))
	if err != nil {
		return false, fmt.Errorf("write schedule %q of topic %s: %w", name, topic, err)
	}
	n, err := redis.Int(r, nil)
	return n == 1, err
}

// ScanSchedules reads one HSCAN page of the topic's definitions from
// cursor ("0" to begin): their names, definitions and the next cursor
// ("0" at the end).
func (s *Store) ScanSchedules(ctx context.Context, topic, cursor string, count int) (next string, names []string, defs [][]byte, err error) {
	r, err := s.do(ctx, cmd{"HSCAN", []any{keys.Schedules(s.ns, topic), cursor, "COUNT", count}})
	if err != nil {
		return "", nil, nil, fmt.Errorf("list schedules of topic %s: %w", topic, err)
	}
	next, kv, err := scanPage(r[0])
	if err != nil {
		return "", nil, nil, fmt.Errorf("list schedules of topic %s: %w", topic, err)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		names = append(names, string(kv[i]))
		defs = append(defs, kv[i+1])
	}
	return next, names, defs, nil
}

// ScheduleCount returns how many schedules topic has.
func (s *Store) ScheduleCount(ctx context.Context, topic string) (int64, error) {
	r, err := s.do(ctx, cmd{"HLEN", []any{keys.Schedules(s.ns, topic)}})
	if err != nil {
		return 0, fmt.Errorf("schedules of %s: %w", topic, err)
	}
	return redis.Int64(r[0], nil)
}

// Chain outcomes (see ChainSchedule).
const (
	ChainStale   = 0 // a newer version of the schedule wrote its mark: nothing written
	ChainWritten = 1 // that occurrence, or a later one of the version, was written before
	ChainAdded   = 2 // the occurrence was written now
	ChainRetired = 3 // retire or forget done
)

// ChainMode says what ChainSchedule does.
type ChainMode string

// Modes of ChainSchedule.
const (
	ChainOccurrence ChainMode = "chain"  // write the occurrence id (once ever)
	ChainRetire     ChainMode = "retire" // write no occurrence, only the mark id
	ChainForget     ChainMode = "forget" // remove the mark
)

// markLua declares markOf(mark): the version and time of a schedule's
// mark (an occurrence id "...:<version>:<ms>:<suffix>"), nil for an empty one.
const markLua = `
local function markOf(mark)
  local mv, mms = string.match(mark, ':(%d+):(%d+):[^:]*$')
  return tonumber(mv), tonumber(mms)
end
`

// mergeMarkScript writes a schedule's mark moved from the schedule's
// partition in the old count of a change into its partition in the new
// one, unless the mark there is as new or newer.
// KEYS[1]: records HASH. ARGV[1]: the mark's field, ARGV[2]: the mark.
// Returns 1 written, 0 left.
var mergeMarkScript = newScript(markLua + `
local cur = redis.call('HGET', KEYS[1], ARGV[1])
if cur then
  local cv, cms = markOf(cur)
  local mv, mms = markOf(ARGV[2])
  if cv and (not mv or cv > mv or cv == mv and cms >= mms) then return 0 end
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 1
`)

// ChainStep is one step of a schedule's chain (see ChainSchedule).
type ChainStep struct {
	Name    string
	Version int64     // of the definition the caller read
	Mode    ChainMode // what the step does
	// ID is the occurrence's id (ChainOccurrence), or the mark to write
	// (ChainRetire).
	ID     string
	DueMS  int64   // the occurrence's time, unix ms (ChainOccurrence)
	Record *Record // the occurrence's record (ChainOccurrence)
	// Floor, while the partition count changes, is the schedule's mark in
	// its partition of the old count ("" for none), read before the step.
	Floor string
}

// ChainSchedule runs one step of a schedule's chain in partition tp, where
// every occurrence of the schedule lands (see schedChainScript): it
// writes the occurrence step.ID due at step.DueMS with step.Record (mode
// ChainOccurrence), or retires or forgets the schedule's mark. An
// occurrence of an older version still pending is removed from the
// records and then from every index, and an occurrence written is indexed
// in the scheduled ZSET after its record, as any message. A crash between
// the two leaves a record the reconciler indexes. While the partition
// count changes, step.Floor is the schedule's mark in its partition of
// the old count (it only moves forward, and no chain writes there once
// every client places messages in the new count): the newer of it and
// tp's own guards the step. It returns the outcome and the id of the
// older occurrence removed, if any.
func (s *Store) ChainSchedule(ctx context.Context, tp TopicPartition, step ChainStep) (int, string, error) {
	mk := keys.Records(s.ns, tp.Topic, tp.P)
	var body []byte
	if step.Record != nil {
		body = step.Record.Encode()
	}
	name, id := step.Name, step.ID
	r, err := s.script(ctx, schedChainScript, mk, keys.ScheduleMarkField(name), itoa(step.Version), itoa(step.DueMS), id, body, string(step.Mode), step.Floor)
	if err != nil {
		return 0, "", fmt.Errorf("schedule %q of topic %s: chain %q: %w", name, tp.Topic, id, err)
	}
	vals, err := redis.Values(r, nil)
	if err != nil || len(vals) != 2 {
		return 0, "", fmt.Errorf("schedule %q of topic %s: chain %q: bad reply %v", name, tp.Topic, id, r)
	}
	outcome, _ := redis.Int(vals[0], nil)
	old, _ := redis.String(vals[1], nil)
	var cmds []cmd
	if outcome == ChainAdded {
		cmds = append(cmds, cmd{"ZADD", []any{keys.Scheduled(s.ns, tp.Topic, tp.P), step.DueMS, id}})
	}
	if old != "" {
		cmds = append(cmds,
			cmd{"ZREM", []any{keys.Scheduled(s.ns, tp.Topic, tp.P), old}},
			cmd{"ZREM", []any{keys.InFlight(s.ns, tp.Topic, tp.P), old}},
			cmd{"ZREM", []any{keys.Dead(s.ns, tp.Topic, tp.P), old}})
	}
	if len(cmds) > 0 {
		if _, err := s.do(ctx, cmds...); err != nil {
			return outcome, old, fmt.Errorf("schedule %q of topic %s: index %q: %w", name, tp.Topic, id, err)
		}
	}
	return outcome, old, nil
}

// ScheduleMark returns the id of the newest occurrence written for the
// schedule name in partition tp ("" if none).
func (s *Store) ScheduleMark(ctx context.Context, tp TopicPartition, name string) (string, error) {
	r, err := s.do(ctx, cmd{"HGET", []any{keys.Records(s.ns, tp.Topic, tp.P), keys.ScheduleMarkField(name)}})
	if err != nil {
		return "", fmt.Errorf("schedule %q of topic %s: read mark: %w", name, tp.Topic, err)
	}
	if r[0] == nil {
		return "", nil
	}
	return redis.String(r[0], nil)
}

// ScheduleMarkLive returns the schedule's mark in partition tp ("" if
// none) and whether the occurrence it names still has its record
// (scheduled, in flight or dead): a mark whose occurrence is gone, of a
// running schedule, is a chain cut (its occurrence deleted by id).
func (s *Store) ScheduleMarkLive(ctx context.Context, tp TopicPartition, name string) (string, bool, error) {
	mark, err := s.ScheduleMark(ctx, tp, name)
	if err != nil || mark == "" {
		return mark, false, err
	}
	r, err := s.do(ctx, cmd{"HGET", []any{keys.Records(s.ns, tp.Topic, tp.P), mark}})
	if err != nil {
		return mark, false, fmt.Errorf("schedule %q of topic %s: read occurrence %q: %w", name, tp.Topic, mark, err)
	}
	return mark, r[0] != nil, nil
}
