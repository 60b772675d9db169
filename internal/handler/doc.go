// Package handler turns a topic's [topic.handler] configuration into a
// delayq.Handler:
//
//   - "http" POSTs the body to a URL with X-Delayq-Topic, X-Delayq-Id,
//     X-Delayq-Attempt (1-based) and X-Delayq-Due (RFC 3339) headers, and
//     X-Delayq-Signature: sha256=<hex HMAC-SHA256 of the body> when a
//     secret is set. A 2xx response acks the message; any other status, a
//     connection error or the handler timeout retries it.
//   - "exec" runs a command in its own process group with the body on
//     stdin and DELAYQ_TOPIC, DELAYQ_ID, DELAYQ_ATTEMPT and DELAYQ_DUE in
//     its environment. Exit status 0 acks; any other status retries with
//     the tail of stderr in the error. When the handler's context ends
//     (timeout, shutdown, lost lease) the whole process group is killed.
//
// The handlers are safe for concurrent use: the consumer runs up to its
// concurrency of them at once.
//
// Files:
//
//   - handler.go: Options and New; the headers and environment variables
//     the handlers set
//   - http.go: the http handler (HTTP), its client and its signature (Sign)
//   - exec.go: the exec handler (Exec) and the tails of its output
//   - exec_unix.go: the command's own process group, killed as a whole
//     (Unix)
//   - exec_other.go: the command alone, without process groups (other
//     systems)
package handler
