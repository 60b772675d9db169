package delayq

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/partition"
)

// maxPipeline bounds the records one EnqueueBatch round trip carries.
const maxPipeline = 1024

// writeKind is how a message is written (see store.Group).
type writeKind int

const (
	writeFresh   writeKind = iota // generated id, due freshAhead or later: no duplicate check
	writeAhead                    // given id, due freshAhead or later: check and index in one round trip
	writeChecked                  // due sooner: check, then index
	writeDead                     // an imported dead message: check, then index as dead
)

// freshAhead is how far ahead a message must be due for its record and
// index entry to be written in one round trip (store.Group.Fresh and
// Ahead): farther than consumers claim ahead (1.5 poll intervals).
const freshAhead = time.Minute

// retrying returns ctx under which a write of messages waits for Redis
// during an outage, for Options.RetryFor (see there).
func (c *Client) retrying(ctx context.Context) context.Context {
	if c.opts.RetryFor < 0 {
		return ctx
	}
	return store.WithRetry(ctx, c.opts.RetryFor)
}

// write stores the prepared messages: msgs[i] with its id and due time in
// res[i], unless res[i].Err is set already; parts is scratch space, one
// slot per message. It sets each message's outcome in res[i].Err; the
// error is for a failure of the whole write.
func (c *Client) write(ctx context.Context, now time.Time, msgs []Message, parts []int, res []EnqueueResult) error {
	ctx = c.retrying(ctx)
	if err := c.place(ctx, now, msgs, parts, res); err != nil {
		return err
	}
	kind := make([]writeKind, len(msgs))
	idx, puts := sortWrites(now, msgs, parts, res, kind)
	var groups []store.Group
	var members [][]int // the indexes of each group's messages
	for rest := idx; len(rest) > 0; {
		var g store.Group
		var m []int
		g, m, rest = cutGroup(now, msgs, parts, res, kind, rest)
		groups, members = append(groups, g), append(members, m)
	}
	if err := c.addGroups(ctx, groups, members, res); err != nil {
		return err
	}
	if len(puts) > 0 {
		if err := c.writePuts(ctx, now, msgs, parts, res, puts); err != nil {
			return err
		}
		groups, members = putGroups(msgs, parts, puts, groups, members)
	}
	setOutcomes(res)
	c.wake(ctx, now, groups, members, res)
	return nil
}

// sortWrites returns the messages to write (indexes into msgs) in groups
// of one topic, partition and kind, each group in the callers' order (a
// stable sort: after steering, the usual batch is one group already), and
// apart from them the sends with a policy (see isPut), in the callers'
// order. It sets each message's kind in kind[i]. Messages whose res[i].Err
// is set are in neither.
func sortWrites(now time.Time, msgs []Message, parts []int, res []EnqueueResult, kind []writeKind) (idx, puts []int) {
	idx = make([]int, 0, len(msgs))
	for i := range msgs {
		if res[i].Err != nil {
			continue
		}
		if isPut(&msgs[i]) {
			puts = append(puts, i)
			continue
		}
		switch ahead := res[i].Due.Sub(now) >= freshAhead; {
		case msgs[i].imported != nil && msgs[i].imported.dead:
			kind[i] = writeDead
		case ahead && msgs[i].ID == "":
			kind[i] = writeFresh // a generated id is new to the topic: no duplicate check
		case ahead:
			kind[i] = writeAhead
		default:
			kind[i] = writeChecked
		}
		idx = append(idx, i)
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if d := strings.Compare(msgs[a].Topic, msgs[b].Topic); d != 0 {
			return d
		}
		if d := cmp.Compare(parts[a], parts[b]); d != 0 {
			return d
		}
		return cmp.Compare(kind[a], kind[b])
	})
	return idx, puts
}

// cutGroup cuts the first group AddMany writes off idx, sorted by
// sortWrites: the messages of its first message's topic, partition and
// kind, with their records. It returns the group, the indexes of its
// messages and the rest of idx. A given id that came earlier in the group
// is left out, its result ErrDuplicate (see firstOfEach).
func cutGroup(now time.Time, msgs []Message, parts []int, res []EnqueueResult, kind []writeKind, idx []int) (g store.Group, members, rest []int) {
	first := idx[0]
	hi := 1
	for hi < len(idx) && msgs[idx[hi]].Topic == msgs[first].Topic && parts[idx[hi]] == parts[first] && kind[idx[hi]] == kind[first] {
		hi++
	}
	members, rest = idx[:hi], idx[hi:]
	if kind[first] != writeFresh && len(members) > 1 {
		members = firstOfEach(members, msgs, res)
	}
	g = store.Group{
		Topic: msgs[first].Topic, P: parts[first], Msgs: newMessages(now, msgs, res, members),
		Fresh: kind[first] == writeFresh, Ahead: kind[first] == writeAhead, Dead: kind[first] == writeDead,
	}
	return g, members, rest
}

// newMessages returns the records of the messages group (indexes into
// msgs), written now, with the fields an import keeps.
func newMessages(now time.Time, msgs []Message, res []EnqueueResult, group []int) []store.NewMessage {
	news := make([]store.NewMessage, len(group))
	recs := make([]store.Record, len(group)) // one allocation for the group
	for j, i := range group {
		recs[j] = store.Record{
			Due: res[i].Due.UnixMilli(), Created: now.UnixMilli(), Updated: now.UnixMilli(),
			MaxAttempts: msgs[i].MaxAttempts, Trace: msgs[i].trace, Body: msgs[i].Body,
		}
		news[j] = store.NewMessage{ID: res[i].ID, Record: &recs[j]}
		if imp := msgs[i].imported; imp != nil {
			imp.fill(&recs[j])
			news[j].DiedAt = imp.diedAt
		}
	}
	return news
}

// addGroups writes groups with store.AddMany, at most maxPipeline records
// per round trip (a group larger than that alone), and sets the result
// of each message of members[g].
func (c *Client) addGroups(ctx context.Context, groups []store.Group, members [][]int, res []EnqueueResult) error {
	for lo := 0; lo < len(groups); {
		hi, n := lo, 0
		for hi < len(groups) && (hi == lo || n+len(groups[hi].Msgs) <= maxPipeline) {
			n += len(groups[hi].Msgs)
			hi++
		}
		errs, err := c.store.AddMany(ctx, groups[lo:hi])
		if err != nil {
			return fmt.Errorf("enqueue %d messages: %w", n, err)
		}
		for gi := lo; gi < hi; gi++ {
			for j, i := range members[gi] {
				res[i].Err = errs[gi-lo][j]
			}
		}
		lo = hi
	}
	return nil
}

// putGroups returns groups and members with a group (no messages) for
// each partition the sends with a policy puts went to, for wake; it
// sorts puts. During a change of the count, a send that writePuts wrote
// to its old partition (putOld still set) went there, not to parts[i]:
// that partition's owner delivers it, so that is the one to wake.
func putGroups(msgs []Message, parts []int, puts []int, groups []store.Group, members [][]int) ([]store.Group, [][]int) {
	wrote := func(i int) int {
		if msgs[i].putOld > 0 {
			return msgs[i].putOld - 1
		}
		return parts[i]
	}
	slices.SortStableFunc(puts, func(a, b int) int {
		return cmp.Or(strings.Compare(msgs[a].Topic, msgs[b].Topic), cmp.Compare(wrote(a), wrote(b)))
	})
	for lo := 0; lo < len(puts); {
		hi := lo + 1
		for hi < len(puts) && msgs[puts[hi]].Topic == msgs[puts[lo]].Topic && wrote(puts[hi]) == wrote(puts[lo]) {
			hi++
		}
		groups = append(groups, store.Group{Topic: msgs[puts[lo]].Topic, P: wrote(puts[lo])})
		members = append(members, puts[lo:hi])
		lo = hi
	}
	return groups, members
}

// setOutcomes sets the outcome of each message written without a policy
// (those with one have theirs from writePuts) from its error.
func setOutcomes(res []EnqueueResult) {
	for i := range res {
		if res[i].Outcome == "" {
			res[i].Outcome = outcomeOf(res[i].Err)
		}
	}
}

// place records each message's topic on its first use and gives each
// message its partition (in parts[i]) in its topic's stored layout, and
// an id to each whose id is generated (in res[i].ID): steered while the
// count is at most maxSteerPartitions. During a change of the count, new
// messages go to their partition in the new count, and a given id is
// checked against the message of that id in its old partition too. A
// topic that cannot be read fails its messages (in res[i].Err), or the
// whole write when ctx ended.
func (c *Client) place(ctx context.Context, now time.Time, msgs []Message, parts []int, res []EnqueueResult) error {
	type topicRead struct {
		topic string
		l     store.Layout
		err   error
	}
	var seen []topicRead // a write has a topic or a few: a list beats a map
	layout := func(topic string) (store.Layout, error) {
		for _, t := range seen {
			if t.topic == topic {
				return t.l, t.err
			}
		}
		l, err := c.ensureTopic(ctx, topic)
		seen = append(seen, topicRead{topic, l, err})
		return l, err
	}
	var lookups []store.Lookup // given ids to look for in their old partition
	var lookedUp [][]int       // the messages of each lookup's ids
	var st steerer
	for i := range msgs {
		parts[i] = -1
		if res[i].Err != nil {
			continue
		}
		l, err := layout(msgs[i].Topic)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			res[i].Err = err
			continue
		}
		switch id, n := msgs[i].ID, l.PlaceCount(); {
		case id != "":
			parts[i] = l.Place(id)
			if old := l.Old(id); old != parts[i] {
				tp := store.TopicPartition{Topic: msgs[i].Topic, P: old}
				j := slices.IndexFunc(lookups, func(lk store.Lookup) bool { return lk.TopicPartition == tp })
				if j < 0 {
					j = len(lookups)
					lookups, lookedUp = append(lookups, store.Lookup{TopicPartition: tp}), append(lookedUp, nil)
				}
				lookups[j].IDs, lookedUp[j] = append(lookups[j].IDs, id), append(lookedUp[j], i)
			}
		case n <= maxSteerPartitions:
			res[i].ID, parts[i] = st.next(now, msgs[i].Topic, n)
		default:
			res[i].ID = NewID(now)
			parts[i] = partition.For(res[i].ID, n)
		}
	}
	if len(lookups) == 0 {
		return nil
	}
	// Before the write, which checks the new partition: a move writes
	// there before it removes the message from the old one.
	there, err := c.store.Exists(ctx, lookups)
	if err != nil && ctx.Err() != nil {
		return err
	}
	for j, lk := range lookups {
		for k, i := range lookedUp[j] {
			switch {
			case err != nil:
				res[i].Err = err
			case there[j][k] && isPut(&msgs[i]):
				msgs[i].putOld = lk.P + 1 // sent to the message where it lives
			case there[j][k]:
				res[i].Err = fmt.Errorf("%w: %q in topic %s", ErrDuplicate, lk.IDs[k], lk.Topic)
			}
		}
	}
	return nil
}

// firstOfEach returns the messages of group (indexes into msgs, in the
// callers' order) without those whose given id came earlier in it, whose
// result it sets to ErrDuplicate. Ids repeat only within a group: an id
// fixes its partition.
func firstOfEach(group []int, msgs []Message, res []EnqueueResult) []int {
	seen := make(map[string]bool, len(group))
	kept := group[:0]
	for _, i := range group {
		if id := msgs[i].ID; id != "" { // a generated id is unique: only given ones can repeat
			if seen[id] {
				res[i].Err = fmt.Errorf("%w: %q twice in one batch", ErrDuplicate, id)
				continue
			}
			seen[id] = true
		}
		kept = append(kept, i)
	}
	return kept
}

// isPut reports whether m is written with store.Puts: an id given, with
// Replace or Debounce.
func isPut(m *Message) bool { return m.ID != "" && m.OnDuplicate != Reject && m.imported == nil }

// writePuts writes the messages idx of msgs (see isPut) with store.Puts,
// every partition in one pipeline, and sets their results. During a change of the
// partition count, a message whose id was found in its old partition
// (Message.putOld, see place) is sent there, only if it is still there;
// if it moved meanwhile, to its new partition.
func (c *Client) writePuts(ctx context.Context, now time.Time, msgs []Message, parts []int, res []EnqueueResult, idx []int) error {
	type key struct {
		topic      string
		p          int
		old, ahead bool
	}
	var order []key
	byKey := map[key][]int{}
	for _, i := range idx {
		k := key{msgs[i].Topic, parts[i], msgs[i].putOld > 0, res[i].Due.Sub(now) >= freshAhead}
		if k.old {
			k.p = msgs[i].putOld - 1
		}
		if byKey[k] == nil {
			order = append(order, k)
		}
		byKey[k] = append(byKey[k], i)
	}
	groups := make([]store.PutGroup, len(order))
	for gi, k := range order {
		g := byKey[k]
		puts := make([]store.Put, len(g))
		for j, i := range g {
			m := &msgs[i]
			puts[j] = store.Put{ID: m.ID, Policy: string(m.OnDuplicate), Due: res[i].Due.UnixMilli(),
				MaxWait: m.MaxWait.Milliseconds(), MaxAttempts: m.MaxAttempts, Trace: m.trace, Body: m.Body}
		}
		groups[gi] = store.PutGroup{Topic: k.topic, P: k.p, Puts: puts, OnlyIfExists: k.old, Ahead: k.ahead}
	}
	out, err := c.store.Puts(ctx, groups, now.UnixMilli())
	if err != nil {
		return fmt.Errorf("enqueue %d messages: %w", len(idx), err)
	}
	var moved []int // sent to their old partition and found gone
	for gi, k := range order {
		for j, i := range byKey[k] {
			if out[gi][j].Outcome == 0 {
				moved = append(moved, i)
				continue
			}
			res[i].Due = time.UnixMilli(out[gi][j].Due)
			res[i].Outcome = putOutcomes[out[gi][j].Outcome]
		}
	}
	if len(moved) > 0 {
		for _, i := range moved {
			msgs[i].putOld = 0
		}
		return c.writePuts(ctx, now, msgs, parts, res, moved)
	}
	return nil
}

var putOutcomes = map[int]Outcome{
	store.PutCreated:   OutcomeCreated,
	store.PutReplaced:  OutcomeReplaced,
	store.PutDebounced: OutcomeDebounced,
}

// outcomeOf is the outcome of a message written without a policy (see
// Message.OnDuplicate), whose write ended with err: created, rejected as
// a duplicate, or none.
func outcomeOf(err error) Outcome {
	switch {
	case err == nil:
		return OutcomeCreated
	case errors.Is(err, ErrDuplicate):
		return OutcomeRejected
	}
	return ""
}

// WakeAhead: a message due sooner than this when written may fall due
// before its partition's owner looks again (an idle partition looks every
// ConsumerOptions.IdlePollInterval, at most 10s plus 10% jitter, and then
// claims what is due within 1.5 polls), so the write wakes the owner.
const WakeAhead = 12 * time.Second

// wake tells the owners of the partitions that got a message due within
// WakeAhead to poll now (see store.Wake): one command for the write,
// after its messages are written. A wake-up that is lost (the command
// fails, or the process dies before it) delays those messages by at most
// the owner's idle poll interval: it is only logged.
func (c *Client) wake(ctx context.Context, now time.Time, groups []store.Group, members [][]int, res []EnqueueResult) {
	var ps []store.TopicPartition
	soon := now.Add(WakeAhead)
	for gi, g := range groups {
		if g.Dead {
			continue // never delivered: no owner to wake
		}
		tp := store.TopicPartition{Topic: g.Topic, P: g.P}
		if len(ps) > 0 && ps[len(ps)-1] == tp {
			continue // groups of one partition are next to one another
		}
		for _, i := range members[gi] {
			if res[i].Err == nil && res[i].Due.Before(soon) {
				ps = append(ps, tp)
				break
			}
		}
	}
	c.wakeOwners(ctx, ps...)
}

// wakeOwners wakes the owners of partitions ps (see store.Wake). A lost
// wake-up only delays messages (see wake): it is logged at debug level.
func (c *Client) wakeOwners(ctx context.Context, ps ...store.TopicPartition) {
	if len(ps) == 0 {
		return
	}
	if err := c.store.Wake(ctx, ps); err != nil {
		c.log.Debug("wake the owners of partitions", "partitions", len(ps), "err", err)
	}
}
