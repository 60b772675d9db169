package delayq

// Inspector reads what a namespace holds: topics, their statistics,
// settings, schedules and dead messages, and exports. It writes nothing.
// Get one from Client.Inspector; it shares the client's connections and
// is safe for concurrent use.
type Inspector struct{ c *Client }

// Admin changes what a namespace holds beyond sending and consuming: a
// topic's settings (limits, uniqueness window, partitions, pause),
// schedules, dead messages, imports and deletion. Get one from
// Client.Admin; it shares the client's connections and is safe for
// concurrent use.
type Admin struct{ c *Client }

// Inspector returns the client's Inspector.
func (c *Client) Inspector() *Inspector { return c.inspector }

// Admin returns the client's Admin.
func (c *Client) Admin() *Admin { return c.admin }
