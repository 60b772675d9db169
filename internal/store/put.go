package store

import (
	"context"
	"fmt"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// Policies of Put: what a send does to a message whose id exists.
const (
	PolicyReplace  = "replace"
	PolicyDebounce = "debounce"
)

// Outcomes of Put, one per message.
const (
	PutCreated   = 1
	PutReplaced  = 2
	PutDebounced = 3
	putGone      = -1 // OnlyIfExists, and the id has no record
	// PutDone: the id is a finished message's, within its uniqueness
	// window (see Done): nothing written; the result's Due is the
	// message's Finished.
	PutDone = -3
	// putEarlier is added to the outcome of a send that moved its message
	// earlier: its index entry may be later than its record.
	putEarlier   = 10
	putInSegment = -2 // the id is held by a segment: explode it first
)

// Started is the First of a record whose delivery started (see Start):
// the next send of its id opens a new debounce window.
const Started = -1

// Put is a send of one message with a policy for an existing id.
type Put struct {
	ID     string
	Policy string // PolicyReplace or PolicyDebounce
	// Due is the event's due (unix ms); for PolicyDebounce, the event's
	// time plus its delay, capped by the window's MaxWait (ms, 0: none).
	Due         int64
	MaxWait     int64
	MaxAttempts int
	// Trace is the event's traceparent (see Record.Trace), "" for none:
	// a replaced or debounced message takes the latest event's.
	Trace string
	// UniqueFor is the message's uniqueness window (see Record.UniqueFor):
	// a replaced or debounced message takes the latest event's.
	UniqueFor int64
	Body      []byte
}

// PutResult is what a Put did: PutCreated, PutReplaced or PutDebounced,
// and the due stored.
type PutResult struct {
	Outcome int
	Due     int64
	Until   int64 // a PutDone's: when the id is free again
}

// recordLua declares, for the scripts that read or write a record in
// Lua, its header (see Record.Encode): readHeader(v) returns its due,
// created, updated and first times, and where the rest of the record
// begins; flagsOf(v) the flags of its version byte (recordTraced);
// writeHeader(due, created, updated, first, flags) encodes the header of
// a record with a First, fixed width (recordVersionFirst), with flags,
// which must be those of the record whose rest follows it; isDone(v)
// says whether v is a Done, and doneTimes(v) returns its Finished and
// Until; struct.pack(DONE_FMT, DONE, finished, window) encodes one.
var recordLua = fmt.Sprintf(`
local V2, HEADER2, VERSIONS = %d, '>Bi7i7i7i7', %d
local function flagsOf(v)
  local b = string.byte(v, 1)
  return b - b %% VERSIONS
end
local function reads(v, pos)
  local n, mul = 0, 1
  while true do
    local b = string.byte(v, pos)
    pos = pos + 1
    if b < 128 then
      n = n + b * mul
      break
    end
    n = n + (b - 128) * mul
    mul = mul * 128
  end
  if n %% 2 == 0 then return n / 2, pos end
  return -(n + 1) / 2, pos
end
local function readHeader(v)
  if string.byte(v, 1) %% VERSIONS == V2 then
    local _, due, created, updated, first, pos = struct.unpack(HEADER2, v)
    return due, created, updated, first, pos
  end
  local due, dc, du, pos
  due, pos = reads(v, 2)
  dc, pos = reads(v, pos)
  du, pos = reads(v, pos)
  return due, due + dc, due + dc + du, 0, pos
end
local function writeHeader(due, created, updated, first, flags)
  return struct.pack(HEADER2, V2 + flags, due, created, updated, first)
end
local DONE, DONE_LEN, DONE_FMT = %d, %d, '>Bi6I5'
local function isDone(v)
  return #v == DONE_LEN and string.byte(v, 1) == DONE
end
local function doneTimes(v)
  local _, finished, window = struct.unpack(DONE_FMT, v)
  return finished, finished + window
end
`, recordVersionFirst, recordVersionMask+1, recordVersionDone, doneLen)

// setRecordLua declares runningLua's names and setRecord(id, rec), which
// writes id's record in the records HASH KEYS[1] and, where a delivery of
// id started (its running mark), sets the mark to REPLACED: that
// delivery's ack then compares the record with the one it delivered, and
// leaves this one (see Store.Ack). Every write over a record that may be
// running goes through it.
var setRecordLua = runningLua + `
local function setRecord(id, rec)
  redis.call('HSET', KEYS[1], id, rec)
  if redis.call('HGET', KEYS[1], RUNNING .. id) then
    redis.call('HSET', KEYS[1], RUNNING .. id, REPLACED)
  end
end
`

// putScript decides, for each message, what its send does, and writes the
// record: one decision per message, atomic on the records HASH, whatever
// other producers send for the same id at once.
//
//   - no record: the message is created, with the record the caller
//     encoded (its window opening now, its due capped by it);
//   - PolicyReplace: the record takes the event's due, body, max
//     attempts and trace (with the trace flag of its version byte), its
//     attempts reset; its created time stays; a new window opens now;
//   - PolicyDebounce: the same, with the due capped by the window: the
//     window opened at the record's First (or its creation), unless a
//     delivery of the record started (First is Started: see Start): the
//     event then opens a new window, now.
//
// A Done within its window refuses every policy (PutDone, with its
// Finished): a finished message is never revived. One whose window has
// passed counts as no record.
//
// Every replacement moves Updated past the old one, so an outcome of a
// delivery of the old record sees the change (see Record.Header). A
// delivery of the id that started (its running mark: see StartMany)
// counts as started for the window, as First at Started does.
// Run again (ARGV[2] has an "a": the connection of an earlier run of
// the same send broke, see Puts), a message whose record is the one this
// send writes is left as it is, with the outcome the lost run had: the
// record it sends byte for byte is created; one that differs from it in
// its header only, with Updated from this send's now on, was replaced or
// debounced by it (its index entry to be lowered, as for a send that
// moved it earlier). No other write has run on such a record since (each
// moves Updated, or changes the rest), and a start of its delivery only
// marks it (see Start): writing it again would reset a debounce window
// that is already this send's, and bump Updated under a delivery of it,
// which would be delivered again.
// KEYS[1]: records HASH. ARGV[1]: now (ms), ARGV[2]: flags, "1" to write
// only ids that have a record (the old partition of a change), "a" for a
// run again; then for each
// message: id, policy (its first letter), due asked, max wait, and the
// record of the message created (due capped by its window, created,
// updated and first now; its header fixed-width, as every record with a
// First).
// Returns {outcome, due, until} per message; the due of a message
// created is its record's (0 in the reply); until is a PutDone's Done's
// Until (0 for every other outcome).
var putScript = newScript(segLua + recordLua + setRecordLua + fmt.Sprintf("local EARLIER, HEADER_LEN, DONE_OUT = %d, %d, %d\n", putEarlier, headerFirstLen, PutDone) + `
local now = tonumber(ARGV[1])
local onlyIfExists, again = string.find(ARGV[2], '1', 1, true), string.find(ARGV[2], 'a', 1, true)
-- mine reports whether v is the record rec this send writes (1: as
-- created, 2: as rewritten from an older one), stored by a lost run.
local function mine(v, rec)
  if v == rec then return 1 end
  if string.byte(v, 1) ~= string.byte(rec, 1) or string.sub(v, HEADER_LEN + 1) ~= string.sub(rec, HEADER_LEN + 1) then
    return nil
  end
  local _, _, updated = readHeader(v)
  if updated >= now then return 2 end
  return nil
end
local out = {}
for i = 3, #ARGV, 5 do
  local extra = 0
  local id, policy, rec = ARGV[i], ARGV[i + 1], ARGV[i + 4]
  local held = false
  if #id == ID_LEN then
    local seg = redis.call('HGET', KEYS[1], SEG .. string.sub(id, 1, PREFIX_LEN))
    held = seg and segFind(seg, string.sub(id, PREFIX_LEN + 1)) and not redis.call('HGET', KEYS[1], id)
  end
  local v = nil
  if held then
    out[#out + 1] = -2
    out[#out + 1] = 0
  else
    v = redis.call('HGET', KEYS[1], id)
    local finished = nil
    if v and isDone(v) then
      local f, till = doneTimes(v)
      v = nil
      if till > now then finished, extra = f, till end
    end
    local was = v and again and mine(v, rec)
    if finished then
      out[#out + 1] = DONE_OUT
      out[#out + 1] = finished
    elseif was == 1 then
      out[#out + 1] = 1
      out[#out + 1] = 0
      v = nil
    elseif was == 2 then
      local due = readHeader(v)
      out[#out + 1] = (policy == 'd' and 3 or 2) + EARLIER
      out[#out + 1] = due
      v = nil
    elseif v then
    elseif onlyIfExists then
      out[#out + 1] = -1
      out[#out + 1] = 0
    else
      setRecord(id, rec)
      out[#out + 1] = 1
      out[#out + 1] = 0
    end
  end
  if v then
    local due, maxWait = tonumber(ARGV[i + 2]), tonumber(ARGV[i + 3])
    local oldDue, created, updated, first = readHeader(v)
    local outcome, window = 2, now
    if policy == 'd' then
      outcome = 3
      if redis.call('HGET', KEYS[1], RUNNING .. id) then
        window = now
      elseif first > 0 then
        window = first
      elseif first == 0 then
        window = created
      end
      if maxWait > 0 and window + maxWait < due then
        due = window + maxWait
      end
    end
    setRecord(id, writeHeader(due, created, math.max(now, updated + 1), window, flagsOf(rec)) .. string.sub(rec, HEADER_LEN + 1))
    if oldDue > due then outcome = outcome + EARLIER end
    out[#out + 1] = outcome
    out[#out + 1] = due
  end
  out[#out + 1] = extra
end
return out
`)

// indexEarlierScript sets the scheduled entries of ids to the given due,
// unless they have an earlier one: an entry earlier than its record is
// harmless (a claim holds or returns the message to its record's due),
// a later one would make it late, and writers of one id race.
// KEYS[1]: scheduled ZSET. ARGV: due1, id1, due2, id2, ...
var indexEarlierScript = newScript(`
for i = 1, #ARGV, 2 do
  local cur = redis.call('ZSCORE', KEYS[1], ARGV[i + 1])
  if not cur or tonumber(ARGV[i]) < tonumber(cur) then
    redis.call('ZADD', KEYS[1], ARGV[i], ARGV[i + 1])
  end
end
return 1
`)

// PutGroup is the sends of one partition of a topic for Puts.
type PutGroup struct {
	Topic string
	P     int
	Puts  []Put
	// OnlyIfExists: the old partition of a change, where the ids may
	// still live: messages without a record are left out (Outcome 0).
	OnlyIfExists bool
	// Ahead: every message is due later than any consumer claims ahead
	// (as Group.Ahead): its index entry goes with the decision, in one
	// round trip, at the due asked; a second one lowers the entries of
	// the sends a debounce window capped.
	Ahead bool
}

// Puts sends messages with a policy for ids that exist (see putScript),
// every partition's in one pipeline: the decisions and records, then the
// index entries (indexEarlierScript) and, for a dead message a send
// revives, the removal of its dead entry: two round trips, as an enqueue
// of given ids; for an Ahead group whose ids are all new, one (the entries
// go with the decisions, ZADD NX, as for Group.Ahead). res[g][i] is the result of
// groups[g].Puts[i]. A message held in a segment has it exploded first,
// and its group is sent again, once.
//
// Under WithRetry, a round trip whose connection broke runs again (see
// redo): the first tells putScript so, which finds the records its lost
// run wrote and reports them as that run would have (see putScript); its
// ZADD NX and ZREM leave the same state however often they run, and so
// does the second round trip (entries only lowered, dead entries
// removed).
func (s *Store) Puts(ctx context.Context, groups []PutGroup, nowMS int64) ([][]PutResult, error) {
	res, todo := putJobs(groups)
	for try := 0; len(todo) > 0; try++ {
		if try > 1 {
			return nil, fmt.Errorf("send to partition %d: an id still in a segment", groups[todo[0].g].P)
		}
		var (
			replies []any
			sent    []putSent
		)
		err := s.redo(ctx, func(c redis.Conn, again bool) error {
			var first []cmd
			first, sent = s.putCmds(groups, todo, nowMS, again)
			var err error
			replies, err = roundTrip(ctx, c, first)
			return err
		})
		if err != nil {
			return nil, fmt.Errorf("send to %d partitions: %w", len(todo), err)
		}
		second, again, err := s.putDecisions(ctx, groups, todo, sent, replies, res)
		if err != nil {
			return nil, err
		}
		if len(second) > 0 {
			if _, err := s.doAgain(ctx, second...); err != nil {
				// The records are written: the reconciler indexes them.
				return nil, fmt.Errorf("index the sends of %d partitions: %w", len(todo), err)
			}
		}
		todo = again
	}
	return res, nil
}

// putJob is what a round of Puts sends of a group: groups[g].Puts[i] for
// each i of idxs (all of them in the first round, then those a segment
// held).
type putJob struct {
	g    int
	idxs []int
}

// putSent is what the first round trip of a round of Puts sent for a job:
// where the reply of its putScript call is among the replies; whether its
// index entries went with it (ahead: the ZADD NX and the ZREM of its dead
// entries follow that reply); and the due of each of its messages if
// created, the entry sent.
type putSent struct {
	at    int
	ahead bool
	dues  []int64
}

// putJobs returns the results of groups, to be filled, and the jobs of
// the first round of Puts: every send of every group.
func putJobs(groups []PutGroup) ([][]PutResult, []putJob) {
	res := make([][]PutResult, len(groups))
	var todo []putJob
	for g := range groups {
		res[g] = make([]PutResult, len(groups[g].Puts))
		idxs := make([]int, len(groups[g].Puts))
		for i := range idxs {
			idxs[i] = i
		}
		todo = append(todo, putJob{g, idxs})
	}
	return res, todo
}

// putCmds returns the first round trip of a round of Puts: the commands
// of each job in turn (groupPutCmds), and what they sent for each; again:
// it runs again after its connection broke.
func (s *Store) putCmds(groups []PutGroup, todo []putJob, nowMS int64, again bool) ([]cmd, []putSent) {
	var cmds []cmd
	sent := make([]putSent, len(todo))
	for j, jb := range todo {
		gc, ahead, dues := s.groupPutCmds(groups[jb.g], jb.idxs, nowMS, again)
		sent[j] = putSent{at: len(cmds), ahead: ahead, dues: dues}
		cmds = append(cmds, gc...)
	}
	return cmds, sent
}

// groupPutCmds returns the commands that send the puts idxs of gr: the
// putScript call that decides and writes their records and, for an Ahead
// group that is not OnlyIfExists (ahead), the index entries at the due of
// each message if created (ZADD NX) and the removal of their dead
// entries; with those dues. again: the putScript call runs again (its
// "a" flag).
func (s *Store) groupPutCmds(gr PutGroup, idxs []int, nowMS int64, again bool) (cmds []cmd, ahead bool, dues []int64) {
	args := scriptCall(putScript, keys.Records(s.ns, gr.Topic, gr.P), 2+5*len(idxs))
	flags := ""
	if gr.OnlyIfExists {
		flags = "1"
	}
	if again {
		flags += "a"
	}
	args = append(args, nowMS, flags)
	zadd := []any{keys.Scheduled(s.ns, gr.Topic, gr.P), "NX"}
	dead := []any{keys.Dead(s.ns, gr.Topic, gr.P)}
	dues = make([]int64, len(idxs))
	for k, i := range idxs {
		m := gr.Puts[i]
		rec := m.created(nowMS)
		dues[k] = rec.Due
		args = append(args, m.ID, m.Policy[:1], m.Due, m.MaxWait, rec.Encode())
		zadd = append(zadd, rec.Due, m.ID)
		dead = append(dead, m.ID)
	}
	cmds = []cmd{{"EVALSHA", args}}
	// Due past the claims' reach: the entries go with the decisions (an
	// entry earlier than its record is harmless; the second round trip
	// lowers those that may be later), and a dead message lives again.
	if ahead = gr.Ahead && !gr.OnlyIfExists; ahead {
		cmds = append(cmds, cmd{"ZADD", zadd}, cmd{"ZREM", dead})
	}
	return cmds, ahead, dues
}

// putDecisions reads the replies of the first round trip of a round of
// Puts (putCmds), job by job: it fills res with each job's decisions
// (groupDecisions) and explodes the segments that held some of its ids.
// It returns the second round trip, and the jobs of the sends a segment
// held, for the next round.
func (s *Store) putDecisions(ctx context.Context, groups []PutGroup, todo []putJob, sent []putSent, replies []any, res [][]PutResult) (second []cmd, again []putJob, err error) {
	for j, jb := range todo {
		gr := groups[jb.g]
		cmds, held, err := s.groupDecisions(gr, jb.idxs, sent[j], replies, res[jb.g])
		if err != nil {
			return nil, nil, err
		}
		if len(held) > 0 {
			// Exploded, its messages back in scheduled under their
			// own ids (see explode), then sent again.
			if _, err := s.explodeFor(ctx, TopicPartition{Topic: gr.Topic, P: gr.P}, gr.Puts); err != nil {
				return nil, nil, err
			}
			again = append(again, putJob{jb.g, held})
		}
		second = append(second, cmds...)
	}
	return second, again, nil
}

// groupDecisions reads the decisions of the puts idxs of gr from the
// replies (as sent says) into res, the results of gr: the outcome and due
// of each, none for a message left out (putGone), and for one a segment
// holds, none either: it is held, to be sent again. It returns what the
// second round trip sends for gr: the index entries that may be later
// than their records, lowered (indexEarlierScript), and, unless the first
// round trip sent it, the removal of the dead entries of the messages the
// sends revived.
func (s *Store) groupDecisions(gr PutGroup, idxs []int, sent putSent, replies []any, res []PutResult) (cmds []cmd, held []int, err error) {
	vals, err := redis.Int64s(replies[sent.at], nil)
	if err != nil || len(vals) != 3*len(idxs) {
		return nil, nil, fmt.Errorf("send to partition %d: bad reply %v (%v)", gr.P, replies[sent.at], err)
	}
	added := 0
	if sent.ahead {
		added, _ = redis.Int(replies[sent.at+1], nil)
	}
	var index, unindex []any
	dead := []any{keys.Dead(s.ns, gr.Topic, gr.P)}
	for k, i := range idxs {
		m := gr.Puts[i]
		o, due, until := vals[3*k], vals[3*k+1], vals[3*k+2]
		earlier := o > putEarlier/2
		if earlier {
			o -= putEarlier
		}
		entry := sent.dues[k]
		if o == PutCreated {
			due = entry
		}
		switch o {
		case putInSegment:
			held = append(held, i)
		case putGone:
		case PutDone:
			res[i] = PutResult{Outcome: PutDone, Due: due, Until: until}
			if sent.ahead {
				// The entry sent with the decision, if it went in, is
				// this send's: no message stands behind it.
				if unindex == nil {
					unindex = scriptCall(unindexScript, keys.Scheduled(s.ns, gr.Topic, gr.P), 2*len(idxs))
				}
				unindex = append(unindex, entry, m.ID)
			}
		default:
			res[i] = PutResult{Outcome: int(o), Due: due}
			if !sent.ahead && o != PutCreated {
				dead = append(dead, m.ID) // a dead message lives again
			}
			// The entry sent with the decision stands unless it may be
			// later than the record: the message moved earlier than its
			// entry, its window capped it below the entry sent, or some
			// id of the group had an entry already (a message created
			// may have had a stale, later one).
			if !sent.ahead || earlier || due < entry || (o == PutCreated && added < len(idxs)) {
				index = append(index, due, m.ID)
			}
		}
	}
	if len(index) > 0 {
		cmds = append(cmds, s.indexCmd(TopicPartition{Topic: gr.Topic, P: gr.P}, index))
	}
	if len(dead) > 1 {
		cmds = append(cmds, cmd{"ZREM", dead})
	}
	if unindex != nil {
		cmds = append(cmds, cmd{"EVALSHA", unindex})
	}
	return cmds, held, nil
}

// created is the record of m if its send creates it at nowMS: its window
// opens now, and caps its due.
func (m Put) created(nowMS int64) *Record {
	due := m.Due
	if m.Policy == PolicyDebounce && m.MaxWait > 0 {
		due = min(due, nowMS+m.MaxWait)
	}
	return &Record{Due: due, Created: nowMS, Updated: nowMS, First: nowMS, MaxAttempts: m.MaxAttempts, Trace: m.Trace, UniqueFor: m.UniqueFor, Body: m.Body}
}

// indexCmd is the pipelined call of indexEarlierScript on partition tp's
// scheduled set with args (due1, id1, ...).
func (s *Store) indexCmd(tp TopicPartition, args []any) cmd {
	return cmd{"EVALSHA", append(scriptCall(indexEarlierScript, keys.Scheduled(s.ns, tp.Topic, tp.P), len(args)), args...)}
}

// explodeFor explodes the segments that may hold the ids of puts.
func (s *Store) explodeFor(ctx context.Context, tp TopicPartition, puts []Put) ([]Claimed, error) {
	var segs []string
	seen := map[string]bool{}
	for _, m := range puts {
		if len(m.ID) != SegmentIDLen {
			continue
		}
		f := keys.SegmentField(m.ID[:SegmentPrefixLen])
		if !seen[f] {
			seen[f] = true
			segs = append(segs, f)
		}
	}
	return s.explode(ctx, tp, segs, nil, 0, 0)
}
