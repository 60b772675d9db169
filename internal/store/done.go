package store

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/delayq/delayq/internal/keys"
	"github.com/gomodule/redigo/redis"
)

// FinishedError is the ErrDuplicate of a send whose id is a finished
// message's, within its uniqueness window (see Done): the message was
// delivered already, and is never revived.
type FinishedError struct {
	Topic, ID string
	Done      Done
}

func (e *FinishedError) Error() string {
	return fmt.Sprintf("%v: %q in topic %s was delivered at %s; its id is taken until %s", ErrDuplicate, e.ID, e.Topic,
		time.UnixMilli(e.Done.Finished).UTC().Format(time.RFC3339Nano), time.UnixMilli(e.Done.Until).UTC().Format(time.RFC3339Nano))
}

// Unwrap makes a FinishedError match ErrDuplicate.
func (e *FinishedError) Unwrap() error { return ErrDuplicate }

// SetUniqueFor stores topic's default uniqueness window (ms; 0 for none,
// which is stored too: see keys.MetaUniqueFor). With ifUnset it writes
// only where the topic's window was never set (a worker's file), and
// reports whether it wrote. It fails with ErrNoTopic for a topic that
// does not exist. Senders read it with the topic's layout, within a
// second.
func (s *Store) SetUniqueFor(ctx context.Context, topic string, ms int64, ifUnset bool) (written bool, err error) {
	return s.setControl(ctx, topic, keys.MetaUniqueFor, "uniqueness window", strconv.FormatInt(ms, 10), ifUnset)
}

// reviveScript writes the records of sends a duplicate check refused
// whose id turned out free: over a Done whose window ended, if the field
// still holds it as read, or where the field is gone (the reconciler
// removed that Done, or the message was acked or deleted, since the
// check) and no segment holds the id. A field that holds anything else
// (a send, an ack meanwhile) is left as it is.
// KEYS[1]: records HASH. ARGV: id1, done1 ("" for a field read as
// gone), record1, id2, ...
// Returns one integer per id: 1 written, 0 not (the id is taken).
var reviveScript = newScript(segLua + `
local out = {}
for i = 1, #ARGV, 3 do
  local id = ARGV[i]
  local v = redis.call('HGET', KEYS[1], id)
  if v == ARGV[i + 1] or not v and not segHolds(id) then
    redis.call('HSET', KEYS[1], id, ARGV[i + 2])
    out[#out + 1] = 1
  else
    out[#out + 1] = 0
  end
end
return out
`)

// dupRef is a message a group's duplicate check refused: its group, its
// place in the group, and where its reply is among the first round
// trip's replies (at, and k within a script's array reply, -1 for a
// plain command's).
type dupRef struct {
	g, i, at, k int
}

// settleDones runs between AddMany's first and second round trips, and
// only when a duplicate check refused some id: it reads the refused ids'
// fields (one round trip), and for each that holds a Done rather than a
// message decides by the message's creation time (the send's clock):
// within the window, the send is refused as finished (finished[g][i]);
// past it, the record is written over the Done (reviveScript, one more
// round trip), and the refusal in the replies r is turned into an
// acceptance, so the rest of AddMany indexes it as a message created.
// A field found gone is an id freed since the check (a Done the
// reconciler removed, a message acked or deleted): it is written too,
// unless a segment holds the id.
func (s *Store) settleDones(ctx context.Context, groups []Group, per []int, r []any) (finished [][]*FinishedError, err error) {
	refs := refusedIDs(groups, per, r)
	if len(refs) == 0 {
		return nil, nil
	}
	var reads []cmd
	byGroup := map[int][]dupRef{}
	var order []int
	for _, d := range refs {
		if byGroup[d.g] == nil {
			order = append(order, d.g)
		}
		byGroup[d.g] = append(byGroup[d.g], d)
	}
	for _, g := range order {
		hmget := []any{keys.Records(s.ns, groups[g].Topic, groups[g].P)}
		for _, d := range byGroup[g] {
			hmget = append(hmget, groups[g].Msgs[d.i].ID)
		}
		reads = append(reads, cmd{"HMGET", hmget})
	}
	vals, err := s.doAgain(ctx, reads...)
	if err != nil {
		return nil, fmt.Errorf("read %d duplicates: %w", len(refs), err)
	}
	var revives []cmd
	var revived [][]dupRef
	for n, g := range order {
		raw, err := redis.ByteSlices(vals[n], nil)
		if err != nil || len(raw) != len(byGroup[g]) {
			return nil, fmt.Errorf("read duplicates in partition %d: bad reply %v (%v)", groups[g].P, vals[n], err)
		}
		var args []any
		var these []dupRef
		for j, d := range byGroup[g] {
			done, ok := DecodeDone(raw[j])
			if !ok && raw[j] != nil {
				continue // a message's: a duplicate
			}
			m := groups[g].Msgs[d.i]
			if ok && done.Until > m.Record.Created {
				if finished == nil {
					finished = make([][]*FinishedError, len(groups))
				}
				if finished[g] == nil {
					finished[g] = make([]*FinishedError, len(groups[g].Msgs))
				}
				finished[g][d.i] = &FinishedError{Topic: groups[g].Topic, ID: m.ID, Done: done}
				continue
			}
			if args == nil {
				args = scriptCall(reviveScript, keys.Records(s.ns, groups[g].Topic, groups[g].P), 3*len(byGroup[g]))
			}
			args = append(args, m.ID, raw[j], m.Record.Encode()) // raw nil: sent as ""
			these = append(these, d)
		}
		if args != nil {
			revives = append(revives, cmd{"EVALSHA", args})
			revived = append(revived, these)
		}
	}
	if len(revives) == 0 {
		return finished, nil
	}
	rr, err := s.doAgain(ctx, revives...)
	if err != nil {
		return nil, fmt.Errorf("write over %d ended windows: %w", len(revives), err)
	}
	for n, these := range revived {
		ok, err := intsOf(rr[n], len(these))
		if err != nil {
			return nil, fmt.Errorf("write over ended windows: %w", err)
		}
		for j, d := range these {
			if ok[j] == 1 {
				accept(r, d)
			}
		}
	}
	return finished, nil
}

// refusedIDs lists the messages whose duplicate check, in the replies r
// of AddMany's first round trip (per commands a group), refused their id.
// Fresh groups have no check.
func refusedIDs(groups []Group, per []int, r []any) []dupRef {
	var out []dupRef
	at := 0
	for g, grp := range groups {
		n := per[g]
		first := at
		at += n
		if len(grp.Msgs) == 0 || grp.Fresh && !grp.Dead {
			continue
		}
		if grp.Ahead && !grp.Dead {
			n-- // the last is ZADD NX's count
		}
		if n == 1 {
			if arr, ok := r[first].([]any); ok { // one script for the group
				for i, v := range arr {
					if x, _ := redis.Int(v, nil); x == 0 {
						out = append(out, dupRef{g: g, i: i, at: first, k: i})
					}
				}
				continue
			}
		}
		for i := 0; i < n && i < len(grp.Msgs); i++ {
			if x, _ := redis.Int(r[first+i], nil); x == 0 {
				out = append(out, dupRef{g: g, i: i, at: first + i, k: -1})
			}
		}
	}
	return out
}

// accept turns the refusal d in the first round trip's replies r into an
// acceptance.
func accept(r []any, d dupRef) {
	if d.k < 0 {
		r[d.at] = int64(1)
		return
	}
	r[d.at].([]any)[d.k] = int64(1)
}
