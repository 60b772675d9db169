package store

import (
	"context"
	"fmt"
	"strconv"

	"github.com/delayq/delayq/internal/keys"
)

// DoneWrite is what PutDones did with one Done.
type DoneWrite int

// Outcomes of PutDones.
const (
	// DoneTaken: the id holds something else in the partition (a
	// message, in a record or a segment, or another Done whose window
	// has not ended): nothing was written.
	DoneTaken DoneWrite = iota
	// DoneWritten: the id had no field (or a Done whose window had
	// ended): the Done was written.
	DoneWritten
	// DoneSame: the id held the same Done already (an import of the same
	// file again, or a lost reply's run): nothing to write.
	DoneSame
)

// putDonesMax bounds the ids of one putDonesScript call.
const putDonesMax = 256

// putDonesScript writes Dones where their ids hold nothing: for each id,
// the Done is written when the records HASH has no field for it and no
// segment holds it, or when its field holds a Done whose window ended
// (Until at or before now, the caller's clock: it counts as no record,
// as it does for a send); the same Done there already is left as it is.
// KEYS[1]: records HASH. ARGV[1]: now (unix ms); then id1, done1, id2, ...
// Returns one integer per id: DoneWritten, DoneSame or DoneTaken.
var putDonesScript = newScript(segLua + recordLua + fmt.Sprintf("local TAKEN, WRITTEN, SAME = %d, %d, %d\n", DoneTaken, DoneWritten, DoneSame) + `
local now = tonumber(ARGV[1])
local out = {}
for i = 2, #ARGV, 2 do
  local id, done = ARGV[i], ARGV[i + 1]
  local v = redis.call('HGET', KEYS[1], id)
  local held = not v and segHolds(id)
  local ended = false
  if v and v ~= done and isDone(v) then
    local _, till = doneTimes(v)
    ended = till <= now
  end
  if held then
    out[#out + 1] = TAKEN
  elseif v == done then
    out[#out + 1] = SAME
  elseif v and not ended then
    out[#out + 1] = TAKEN
  else
    redis.call('HSET', KEYS[1], id, done)
    out[#out + 1] = WRITTEN
  end
end
return out
`)

// DoneGroup is Dones to write into one partition (see PutDones): ids[i]
// gets Dones[i].
type DoneGroup struct {
	TopicPartition
	IDs   []string
	Dones []Done
}

// PutDones writes Dones (see Done), as an import carries finished ids
// from another topic: each id's Done is written into its group's
// partition only where the id holds nothing there (no record, no segment
// entry), or a Done whose window ended by now (unix ms, the caller's
// clock). It returns, for each id of each group, whether it wrote the
// Done (DoneWritten), found the same Done there (DoneSame), or left what
// the id holds (DoneTaken). Nothing is indexed: a Done is in no index.
//
// Every group goes in one pipeline, one call of a one-key script
// (putDonesScript) per putDonesMax ids at most; the pipeline is sent
// again after a lost reply (running it twice is harmless: a Done written
// by the first run is the same Done to the second).
func (s *Store) PutDones(ctx context.Context, groups []DoneGroup, now int64) ([][]DoneWrite, error) {
	var cmds []cmd
	n := 0
	for _, g := range groups {
		if len(g.IDs) != len(g.Dones) {
			return nil, fmt.Errorf("put dones in partition %d: %d ids, %d dones", g.P, len(g.IDs), len(g.Dones))
		}
		mk := keys.Records(s.ns, g.Topic, g.P)
		for lo := 0; lo < len(g.IDs); lo += putDonesMax {
			hi := min(lo+putDonesMax, len(g.IDs))
			args := append(scriptCall(putDonesScript, mk, 1+2*(hi-lo)), strconv.FormatInt(now, 10))
			for i := lo; i < hi; i++ {
				args = append(args, g.IDs[i], g.Dones[i].Encode())
			}
			cmds = append(cmds, cmd{"EVALSHA", args})
		}
		n += len(g.IDs)
	}
	out := make([][]DoneWrite, len(groups))
	if len(cmds) == 0 {
		return out, nil
	}
	r, err := s.doAgain(ctx, cmds...)
	if err != nil {
		return nil, fmt.Errorf("put %d dones: %w", n, err)
	}
	k := 0
	for gi, g := range groups {
		out[gi] = make([]DoneWrite, 0, len(g.IDs))
		for lo := 0; lo < len(g.IDs); lo += putDonesMax {
			hi := min(lo+putDonesMax, len(g.IDs))
			got, err := intsOf(r[k], hi-lo)
			if err != nil {
				return nil, fmt.Errorf("put dones in partition %d: %w", g.P, err)
			}
			k++
			for _, w := range got {
				out[gi] = append(out[gi], DoneWrite(w))
			}
		}
	}
	return out, nil
}
