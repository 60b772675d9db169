package delayq

import (
	"context"
	"fmt"
)

// TopicInfo is one topic of a namespace, as Topics lists it.
type TopicInfo struct {
	Name string `json:"topic"`
	// Partitions is the topic's partition count; while a change of it
	// runs, the count messages were placed in before the change.
	Partitions int `json:"partitions"`
	// Next is the count a change runs to; 0 when none runs.
	Next int `json:"next,omitempty"`
	// Live is the count of consumers whose heartbeat has not expired,
	// and Leaving of those handing their partitions over (shutting
	// down), which Live does not count.
	Live    int64 `json:"live_consumers"`
	Leaving int64 `json:"leaving_consumers,omitempty"`
}

// Topics lists the topics of the client's namespace, oldest first, with
// their partition counts and live consumers. It reads the namespace's
// registry of topics (written when a topic is created, removed by
// DeleteTopic), not the keyspace: it needs no SCAN and works through
// proxies. A topic listed whose metadata is gone (deleted meanwhile) has
// Partitions 0. It is safe for concurrent use.
func (ins *Inspector) Topics(ctx context.Context) ([]TopicInfo, error) {
	c := ins.c
	names, err := c.store.Topics(ctx)
	if err != nil {
		return nil, fmt.Errorf("topics: %w", err)
	}
	heads, err := c.store.TopicHeads(ctx, names, c.opts.Now().UnixMilli())
	if err != nil {
		return nil, err
	}
	out := make([]TopicInfo, len(heads))
	for i, h := range heads {
		out[i] = c.summary(h)
	}
	return out, nil
}
