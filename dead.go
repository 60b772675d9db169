package delayq

import (
	"context"

	"github.com/delayq/delayq/internal/store"
)

// ListDead returns up to limit dead messages of topic (limit <= 0: 100),
// in partition order.
func (ins *Inspector) ListDead(ctx context.Context, topic string, limit int) ([]*Info, error) {
	c := ins.c
	l, err := c.topicLayout(ctx, topic)
	if err != nil {
		return nil, err
	}
	if limit <= 0 {
		limit = 100
	}
	var out []*Info
	for p := 0; p < l.Span() && len(out) < limit; p++ {
		list, err := c.store.ListDead(ctx, store.TopicPartition{Topic: topic, P: p}, limit-len(out))
		if err != nil {
			return nil, err
		}
		for _, e := range list {
			if e.Record == nil {
				continue
			}
			in := infoOf(topic, e.ID, p, e.Record)
			in.State, in.DiedAt = StateDead, msTime(e.DiedAt)
			out = append(out, in)
		}
	}
	return out, nil
}

// deadBatch bounds the ids one dead-set operation touches per partition and step.
const deadBatch = 500

// RequeueDead moves dead messages back to scheduled, due now, with their
// attempts reset: the given ids, or every dead message of the topic when
// none are given. It returns how many it moved.
func (adm *Admin) RequeueDead(ctx context.Context, topic string, ids ...string) (int, error) {
	c := adm.c
	return c.deadOp(ctx, topic, ids, func(p int, ids []string) (int, error) {
		n, err := c.store.RequeueDead(ctx, store.TopicPartition{Topic: topic, P: p}, ids, c.opts.Now().UnixMilli(), deadBatch)
		if n > 0 {
			c.wakeOwners(ctx, store.TopicPartition{Topic: topic, P: p})
		}
		return n, err
	})
}

// PurgeDead deletes dead messages: the given ids, or every dead message of
// the topic when none are given. It returns how many it deleted.
func (adm *Admin) PurgeDead(ctx context.Context, topic string, ids ...string) (int, error) {
	c := adm.c
	return c.deadOp(ctx, topic, ids, func(p int, ids []string) (int, error) {
		return c.store.PurgeDead(ctx, store.TopicPartition{Topic: topic, P: p}, ids, deadBatch)
	})
}

func (c *Client) deadOp(ctx context.Context, topic string, ids []string, op func(p int, ids []string) (int, error)) (int, error) {
	l, err := c.topicLayout(ctx, topic)
	if err != nil {
		return 0, err
	}
	total := 0
	if len(ids) > 0 {
		byP := map[int][]string{}
		for _, id := range ids {
			if err := validateID(id); err != nil {
				return total, err
			}
			for _, p := range places(l, id) {
				byP[p] = append(byP[p], id)
			}
		}
		for p, list := range byP {
			n, err := op(p, list)
			total += n
			if err != nil {
				return total, err
			}
		}
		return total, nil
	}
	for p := range l.Span() {
		for {
			n, err := op(p, nil)
			total += n
			if err != nil {
				return total, err
			}
			if n < deadBatch {
				break
			}
		}
	}
	return total, nil
}
