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

// maxPipeline bounds the records one SendBatch round trip carries.
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

// pendingWrite is a message of a write, and what the write learns of it.
// The caller sets msg and res; the rest is the write's, zero until then.
type pendingWrite struct {
	msg *Message // read, never written
	// res is the message's id and due time as prepared, unless res.Err
	// is set already; the write sets its outcome.
	res  SendResult
	p    int       // its partition in its topic's stored layout (see place)
	kind writeKind // how it is written (see sortWrites)
	// putOld is 1 + the old partition of the id during a change of the
	// partition count, when the id was found there (see writePuts).
	putOld int
	// uniqueFor is the message's uniqueness window in ms: its own, or
	// for a given id its topic's default (see place).
	uniqueFor int64
}

// results returns the outcomes of ws, in its order.
func results(ws []pendingWrite) []SendResult {
	res := make([]SendResult, len(ws))
	for i := range ws {
		res[i] = ws[i].res
	}
	return res
}

// write stores the prepared messages of ws (see pendingWrite). It sets
// each message's outcome in its res.Err; the error is for a failure of
// the whole write.
func (c *Client) write(ctx context.Context, now time.Time, ws []pendingWrite) error {
	ctx = c.retrying(ctx)
	if err := c.place(ctx, now, ws); err != nil {
		return err
	}
	idx, puts := sortWrites(now, ws)
	var groups []store.Group
	var members [][]int // the indexes of each group's messages
	for rest := idx; len(rest) > 0; {
		var g store.Group
		var m []int
		g, m, rest = cutGroup(now, ws, rest)
		groups, members = append(groups, g), append(members, m)
	}
	if err := c.addGroups(ctx, groups, members, ws); err != nil {
		return err
	}
	if len(puts) > 0 {
		if err := c.writePuts(ctx, now, ws, puts); err != nil {
			return err
		}
		groups, members = putGroups(ws, puts, groups, members)
	}
	setOutcomes(ws)
	c.wake(ctx, now, groups, members, ws)
	return nil
}

// sortWrites returns the messages to write (indexes into ws) in groups
// of one topic, partition and kind, each group in the callers' order (a
// stable sort: after steering, the usual batch is one group already), and
// apart from them the sends with a policy (see isPut), in the callers'
// order. It sets each message's kind. Messages whose res.Err is set are in
// neither.
func sortWrites(now time.Time, ws []pendingWrite) (idx, puts []int) {
	idx = make([]int, 0, len(ws))
	for i := range ws {
		w := &ws[i]
		if w.res.Err != nil {
			continue
		}
		if isPut(w.msg) {
			puts = append(puts, i)
			continue
		}
		switch ahead := w.res.Due.Sub(now) >= freshAhead; {
		case w.msg.imported != nil && w.msg.imported.dead:
			w.kind = writeDead
		case ahead && w.msg.ID == "":
			w.kind = writeFresh // a generated id is new to the topic: no duplicate check
		case ahead:
			w.kind = writeAhead
		default:
			w.kind = writeChecked
		}
		idx = append(idx, i)
	}
	slices.SortStableFunc(idx, func(a, b int) int {
		if d := strings.Compare(ws[a].msg.Topic, ws[b].msg.Topic); d != 0 {
			return d
		}
		if d := cmp.Compare(ws[a].p, ws[b].p); d != 0 {
			return d
		}
		return cmp.Compare(ws[a].kind, ws[b].kind)
	})
	return idx, puts
}

// cutGroup cuts the first group AddMany writes off idx, sorted by
// sortWrites: the messages of its first message's topic, partition and
// kind, with their records. It returns the group, the indexes of its
// messages and the rest of idx. A given id that came earlier in the group
// is left out, its result ErrDuplicate (see firstOfEach).
func cutGroup(now time.Time, ws []pendingWrite, idx []int) (g store.Group, members, rest []int) {
	first := &ws[idx[0]]
	hi := 1
	for hi < len(idx) && ws[idx[hi]].msg.Topic == first.msg.Topic && ws[idx[hi]].p == first.p && ws[idx[hi]].kind == first.kind {
		hi++
	}
	members, rest = idx[:hi], idx[hi:]
	if first.kind != writeFresh && len(members) > 1 {
		members = firstOfEach(members, ws)
	}
	g = store.Group{
		Topic: first.msg.Topic, P: first.p, Msgs: newMessages(now, ws, members),
		Fresh: first.kind == writeFresh, Ahead: first.kind == writeAhead, Dead: first.kind == writeDead,
	}
	return g, members, rest
}

// newMessages returns the records of the messages group (indexes into
// ws), written now, with the fields an import keeps.
func newMessages(now time.Time, ws []pendingWrite, group []int) []store.NewMessage {
	news := make([]store.NewMessage, len(group))
	recs := make([]store.Record, len(group)) // one allocation for the group
	for j, i := range group {
		m, res := ws[i].msg, &ws[i].res
		recs[j] = store.Record{
			Due: res.Due.UnixMilli(), Created: now.UnixMilli(), Updated: now.UnixMilli(),
			MaxAttempts: m.MaxAttempts, Trace: m.trace, UniqueFor: ws[i].uniqueFor, Body: m.Body,
		}
		news[j] = store.NewMessage{ID: res.ID, Record: &recs[j]}
		if imp := m.imported; imp != nil {
			imp.fill(&recs[j])
			news[j].DiedAt = imp.diedAt
		}
	}
	return news
}

// addGroups writes groups with store.AddMany, at most maxPipeline records
// per round trip (a group larger than that alone), and sets the result
// of each message of members[g] (indexes into ws).
func (c *Client) addGroups(ctx context.Context, groups []store.Group, members [][]int, ws []pendingWrite) error {
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
				ws[i].res.Err = errs[gi-lo][j]
			}
		}
		lo = hi
	}
	return nil
}

// putGroups returns groups and members with a group (no messages) for
// each partition the sends with a policy puts (indexes into ws) went to,
// for wake; it sorts puts. During a change of the count, a send that
// writePuts wrote to its old partition (putOld still set) went there, not
// to its partition p: that partition's owner delivers it, so that is the
// one to wake.
func putGroups(ws []pendingWrite, puts []int, groups []store.Group, members [][]int) ([]store.Group, [][]int) {
	wrote := func(i int) int {
		if ws[i].putOld > 0 {
			return ws[i].putOld - 1
		}
		return ws[i].p
	}
	slices.SortStableFunc(puts, func(a, b int) int {
		return cmp.Or(strings.Compare(ws[a].msg.Topic, ws[b].msg.Topic), cmp.Compare(wrote(a), wrote(b)))
	})
	for lo := 0; lo < len(puts); {
		hi := lo + 1
		for hi < len(puts) && ws[puts[hi]].msg.Topic == ws[puts[lo]].msg.Topic && wrote(puts[hi]) == wrote(puts[lo]) {
			hi++
		}
		groups = append(groups, store.Group{Topic: ws[puts[lo]].msg.Topic, P: wrote(puts[lo])})
		members = append(members, puts[lo:hi])
		lo = hi
	}
	return groups, members
}

// setOutcomes sets the outcome of each message written without a policy
// (those with one have theirs from writePuts) from its error.
func setOutcomes(ws []pendingWrite) {
	for i := range ws {
		if res := &ws[i].res; res.Outcome == "" {
			res.Outcome = outcomeOf(res.Err)
		}
	}
}

// place records each message's topic on its first use and gives each
// message its partition (p; -1 for one that fails) in its topic's stored
// layout, and an id to each whose id is generated (in res.ID): steered
// while the count is at most maxSteerPartitions. During a change of the
// count, new messages go to their partition in the new count, and a given
// id is checked against the message of that id in its old partition too.
// A topic that cannot be read fails its messages (in res.Err), or the
// whole write when ctx ended.
func (c *Client) place(ctx context.Context, now time.Time, ws []pendingWrite) error {
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
	var old oldPlaces // given ids to look for in their old partition
	var st steerer
	for i := range ws {
		w := &ws[i]
		w.p = -1
		if w.res.Err != nil {
			continue
		}
		l, err := layout(w.msg.Topic)
		if err != nil {
			if ctx.Err() != nil {
				return err
			}
			w.res.Err = err
			continue
		}
		w.uniqueFor = windowMS(w.msg.UniqueFor)
		if w.msg.UniqueFor == 0 && w.msg.ID != "" && w.msg.imported == nil {
			w.uniqueFor = l.UniqueFor // a given id takes its topic's default
		}
		switch id, n := w.msg.ID, l.PlaceCount(); {
		case id != "":
			w.p = l.Place(id)
			if p := l.Old(id); p != w.p {
				old.add(store.TopicPartition{Topic: w.msg.Topic, P: p}, id, i)
			}
		case n <= maxSteerPartitions:
			w.res.ID, w.p = st.next(now, w.msg.Topic, n)
		default:
			w.res.ID = NewID(now)
			w.p = partition.For(w.res.ID, n)
		}
	}
	if len(old.lookups) == 0 {
		return nil
	}
	// Before the write, which checks the new partition: a move writes
	// there before it removes the message from the old one.
	there, err := c.store.Exists(ctx, old.lookups, now.UnixMilli())
	if err != nil && ctx.Err() != nil {
		return err
	}
	for j, lk := range old.lookups {
		for k, i := range old.of[j] {
			switch w := &ws[i]; {
			case err != nil:
				w.res.Err = err
			case there[j][k].Done != nil:
				w.res.Err = &FinishedError{Topic: lk.Topic, ID: lk.IDs[k], Done: *there[j][k].Done}
			case there[j][k].There && isPut(w.msg):
				w.putOld = lk.P + 1 // sent to the message where it lives
			case there[j][k].There:
				w.res.Err = fmt.Errorf("%w: %q in topic %s", ErrDuplicate, lk.IDs[k], lk.Topic)
			}
		}
	}
	return nil
}

// oldPlaces are the ids a write looks for in their old partitions during
// a change of the partition count (see store.Exists), by partition, with
// the writer's index of each.
type oldPlaces struct {
	lookups []store.Lookup
	of      [][]int
}

// add looks for id, the writer's i-th, in partition tp.
func (o *oldPlaces) add(tp store.TopicPartition, id string, i int) {
	j := slices.IndexFunc(o.lookups, func(lk store.Lookup) bool { return lk.TopicPartition == tp })
	if j < 0 {
		j = len(o.lookups)
		o.lookups, o.of = append(o.lookups, store.Lookup{TopicPartition: tp}), append(o.of, nil)
	}
	o.lookups[j].IDs, o.of[j] = append(o.lookups[j].IDs, id), append(o.of[j], i)
}

// firstOfEach returns the messages of group (indexes into ws, in the
// callers' order) without those whose given id came earlier in it, whose
// result it sets to ErrDuplicate. Ids repeat only within a group: an id
// fixes its partition.
func firstOfEach(group []int, ws []pendingWrite) []int {
	seen := make(map[string]bool, len(group))
	kept := group[:0]
	for _, i := range group {
		if id := ws[i].msg.ID; id != "" { // a generated id is unique: only given ones can repeat
			if seen[id] {
				ws[i].res.Err = fmt.Errorf("%w: %q twice in one batch", ErrDuplicate, id)
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

// writePuts writes the messages idx of ws (see isPut) with store.Puts,
// every partition in one pipeline, and sets their results. During a change of the
// partition count, a message whose id was found in its old partition
// (pendingWrite.putOld, see place) is sent there, only if it is still there;
// if it moved meanwhile, to its new partition.
func (c *Client) writePuts(ctx context.Context, now time.Time, ws []pendingWrite, idx []int) error {
	type key struct {
		topic      string
		p          int
		old, ahead bool
	}
	var order []key
	byKey := map[key][]int{}
	for _, i := range idx {
		w := &ws[i]
		k := key{w.msg.Topic, w.p, w.putOld > 0, w.res.Due.Sub(now) >= freshAhead}
		if k.old {
			k.p = w.putOld - 1
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
			m := ws[i].msg
			puts[j] = store.Put{ID: m.ID, Policy: string(m.OnDuplicate), Due: ws[i].res.Due.UnixMilli(),
				MaxWait: m.MaxWait.Milliseconds(), MaxAttempts: m.MaxAttempts, Trace: m.trace, UniqueFor: ws[i].uniqueFor, Body: m.Body}
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
			if out[gi][j].Outcome == store.PutDone {
				ws[i].res.Err = &FinishedError{Topic: k.topic, ID: ws[i].msg.ID, Done: store.Done{Finished: out[gi][j].Due, Until: out[gi][j].Until}}
				ws[i].res.Outcome = OutcomeFinished
				continue
			}
			ws[i].res.Due = time.UnixMilli(out[gi][j].Due)
			ws[i].res.Outcome = putOutcomes[out[gi][j].Outcome]
		}
	}
	if len(moved) > 0 {
		for _, i := range moved {
			ws[i].putOld = 0
		}
		return c.writePuts(ctx, now, ws, moved)
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
	case err == nil: // before errors.As, whose target escapes: no allocation for a created message
		return OutcomeCreated
	case isFinished(err):
		return OutcomeFinished
	case errors.Is(err, ErrDuplicate):
		return OutcomeRejected
	}
	return ""
}

// isFinished reports whether err is a *FinishedError.
func isFinished(err error) bool {
	var fe *FinishedError
	return errors.As(err, &fe)
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
func (c *Client) wake(ctx context.Context, now time.Time, groups []store.Group, members [][]int, ws []pendingWrite) {
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
			if ws[i].res.Err == nil && ws[i].res.Due.Before(soon) {
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
