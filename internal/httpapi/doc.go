// Package httpapi is the worker daemon's HTTP API for producers written in
// any language: enqueue, get, delete and reschedule messages, read a
// topic's stats, and list, requeue and purge its dead messages; plus
// /healthz, /readyz and Prometheus /metrics.
//
// Routes (JSON in and out; {id} may hold any UTF-8, percent-escaped):
//
//	POST   /v1/topics/{topic}/messages                 201 {"id","due","outcome"} (200 replaced or debounced)
//	GET    /v1/topics/{topic}/messages/{id}            200 message
//	DELETE /v1/topics/{topic}/messages/{id}            204
//	POST   /v1/topics/{topic}/messages/{id}/reschedule 200 {"id","due"}
//	GET    /v1/topics/{topic}/stats                    200 delayq.TopicStats
//	GET    /v1/topics/{topic}/dead?limit=N             200 {"messages":[...]}
//	POST   /v1/topics/{topic}/dead/{id}/requeue        200 {"requeued":1}
//	DELETE /v1/topics/{topic}/dead                     200 {"purged":N}
//	GET    /v1/topics/{topic}/export?state=S,...       200 JSON lines (delayq export's)
//	DELETE /v1/topics/{topic}?force=true               200 {"deleted": delayq.TopicUsage}
//	POST   /v1/topics/{topic}/pause                    200 {"topic","paused","paused_until"}
//	POST   /v1/topics/{topic}/resume                   200 {"topic","paused"}
//	GET    /v1/topics/{topic}/limits                   200 {"topic","rate","burst","concurrency","started_last_second","running"}
//	PUT    /v1/topics/{topic}/limits                   200 the same, after the write ({} clears)
//	DELETE /v1/topics/{topic}/limits                   200 the same, cleared
//	GET    /v1/topics/{topic}/unique-for               200 {"topic","unique_for_ms"}
//	PUT    /v1/topics/{topic}/unique-for               200 the same, after the write ({"unique_for":"0s"} clears)
//	GET    /v1/topics/{topic}/schedules                200 {"schedules":[...]}
//	GET    /v1/topics/{topic}/schedules/{name}         200 schedule
//	PUT    /v1/topics/{topic}/schedules/{name}         200 schedule (added; with ?replace=true or replaced)
//	POST   /v1/topics/{topic}/schedules/{name}/pause   200 schedule
//	POST   /v1/topics/{topic}/schedules/{name}/resume  200 schedule
//	DELETE /v1/topics/{topic}/schedules/{name}         204
//	GET    /healthz, /readyz, /metrics
//
// A pause body is empty (until resumed), {"for": "5m"} or {"until":
// "<RFC 3339>"}; a resume body is empty. Both fail with 404 for a topic
// that does not exist, and create nothing.
//
// A limits body is {"rate": "200/s", "burst": 20, "concurrency": 10}: the
// rate a string as "delayq limits --rate" takes it ("600/m", "100/h") or
// a number per second; it replaces every limit, and a field absent (or
// null, or 0) is no limit (for burst: the default, a tenth of a second's
// worth of the rate), so {} clears them. Answers omit the limits not
// set. The routes fail with 404 for a topic that does not exist, and
// create nothing.
//
// A unique-for body is {"unique_for": "24h"} (a Go duration; "0s" for
// none): the topic's default uniqueness window, which a message sent with
// an id of its own and no unique_for gets (delayq.Admin.SetUniqueFor).
// The routes fail with 404 for a topic that does not exist, and create
// nothing.
//
// An enqueue body is
//
//	{"id": "order-42", "body": "text", "delay": "30m", "max_attempts": 5}
//
// where id is optional (one is generated), the body is "body" (UTF-8 text)
// or "body_base64", and the due time is one of "delay" (a Go duration),
// "delay_ms" (an integer) or "at" (RFC 3339), or none for now
// (DecodeMessage reads it; "delayq send --stdin" reads its lines with it
// too). "on_duplicate" says what to do if the id exists in the topic:
// "reject" (409, the default), "replace" or "debounce" (see
// delayq.Message.OnDuplicate); with debounce, "max_wait" (a Go duration)
// or "max_wait_ms" bounds the window. A body that sets neither gets its
// topic's default (Options.Duplicates: the worker's [[topic]]
// on_duplicate and max_wait); max_wait on a message that does not
// debounce is a 400. The answer's "outcome" says what the enqueue did:
// "created" (201), "replaced" or "debounced" (200), with "due" the due
// time stored (for a debounce, capped by max_wait); a duplicate rejected
// answers 409 {"error","id","outcome":"rejected"}. "unique_for" (a Go
// duration; none: the topic's default for a given id) keeps the id taken
// for that long after the message's delivery succeeded (see
// delayq.Message.UniqueFor): within it, every enqueue of the id, whatever
// its on_duplicate, answers 409 {"error","id","outcome":"finished",
// "state":"done","finished","unique_until"}, when the delivery was acked
// and when the id is free again; a negative or unparsable unique_for is a
// 400. A reschedule body has exactly one of the three time fields. Times
// in responses are RFC 3339 in UTC with three-digit milliseconds
// (wire.TimeLayout); a message's body comes back as "body" when it is
// valid UTF-8 and as "body_base64" otherwise.
//
// Errors are {"error": "..."}, with "field" naming the request field at
// fault when there is one: 400 for bad input (malformed JSON, unknown
// fields, two time fields, a negative delay, a bad topic or id), 401 for a
// missing or wrong bearer token, 404 for no such message, schedule or
// topic (a topic exists once a message, a consumer or a schedule wrote to
// it: no other route creates one), 409 for a duplicate id, a reschedule
// of a message that is not scheduled, a PUT of a schedule name in use
// without ?replace=true and the delete of a topic in use without force
// (messages or schedules in it, a live consumer, a change of its count),
// 413 for a body over the limit, 500 for the rest (logged). Stop a
// topic's consumers and producers before deleting it.
//
// Files:
//
//   - server.go: Options, New, the routes, the bearer token, errors as
//     JSON, /healthz, /readyz and /metrics
//   - handlers.go: the routes of messages, stats, dead letters and topics
//   - decode.go: the enqueue and reschedule bodies (DecodeMessage), and
//     errors naming their field
//   - duplicate.go: a body's on_duplicate, max_wait and unique_for, and
//     the defaults of what it does not set (Duplicates)
//   - pause.go: the pause and resume routes
//   - limits.go: the limits routes
//   - unique_for.go: the routes of a topic's default uniqueness window
//     (TopicUniqueFor)
//   - schedules.go: the schedule routes
//   - export.go: the export route and its download (Download)
package httpapi
