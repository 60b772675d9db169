package delayq

import (
	"cmp"
	"context"
	"fmt"
	"slices"
)

// maxDeleteMany bounds the ids one DeleteMany call takes.
const maxDeleteMany = 10000

// DeleteMany removes the messages of ids from topic, wherever each is
// (scheduled, in flight or dead), as Delete does each but with two round
// trips per partition for them all. found[i] says whether there was a
// message of ids[i] to remove: one delivered, deleted or never there is
// not an error. It takes up to 10,000 ids (ErrInvalid beyond).
func (c *Client) DeleteMany(ctx context.Context, topic string, ids []string) (found []bool, err error) {
	if len(ids) > maxDeleteMany {
		return nil, fmt.Errorf("%w: %d ids to delete from %s, at most %d a call", ErrInvalid, len(ids), topic, maxDeleteMany)
	}
	l, err := c.topicLayout(ctx, topic)
	if err != nil {
		return nil, err
	}
	// Per partition.
	type part struct {
		ids []string
		idx []int
	}
	var order []int
	byP := map[int]*part{}
	for i, id := range ids {
		if err := validateID(id); err != nil {
			return nil, err
		}
		for _, p := range places(l, id) {
			if byP[p] == nil {
				byP[p] = &part{}
				order = append(order, p)
			}
			byP[p].ids, byP[p].idx = append(byP[p].ids, id), append(byP[p].idx, i)
		}
	}
	// The partitions messages move out of first, as Delete looks in the
	// old place before the new.
	slices.SortStableFunc(order, func(a, b int) int {
		if sa, sb := l.IsSource(a), l.IsSource(b); sa != sb {
			if sa {
				return -1
			}
			return 1
		}
		return cmp.Compare(a, b)
	})
	found = make([]bool, len(ids))
	for _, p := range order {
		got, err := c.store.DeleteMany(ctx, topic, p, byP[p].ids)
		if err != nil {
			return nil, err
		}
		for j, ok := range got {
			found[byP[p].idx[j]] = found[byP[p].idx[j]] || ok
		}
	}
	return found, nil
}
