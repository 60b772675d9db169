package portable

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gomodule/redigo/redis"
)

// Errors of a peer that answers, but will never serve us: waiting does
// not help, so they are not an outage, and whoever sees one at start
// gives up at once.
var (
	// ErrAuth: the server refused the password, or wants one (an
	// *AuthError).
	ErrAuth = errors.New("delayq: Redis refused the credentials")
	// ErrNotRedis: the peer does not speak Redis (a *NotRedisError).
	ErrNotRedis = errors.New("delayq: the peer does not speak Redis")
)

// AuthError is a refusal of the credentials: a failed AUTH, or a command
// answered NOAUTH or WRONGPASS. It matches ErrAuth, and As finds the
// redis.Error of its reply.
type AuthError struct {
	Addr  string      // as dialed
	Reply redis.Error // the server's words
}

func (e *AuthError) Error() string {
	return fmt.Sprintf("%s refused the credentials (check the password): %s", e.Addr, string(e.Reply))
}

// Is reports whether target is ErrAuth.
func (e *AuthError) Is(target error) bool { return target == ErrAuth }

// Unwrap returns the reply.
func (e *AuthError) Unwrap() error { return e.Reply }

// isAuthReply reports whether an error reply to a command other than
// AUTH refuses it for want of (the right) credentials. Matching the
// reply's code is the protocol's way: Redis 6+ and Twemproxy say NOAUTH
// before an AUTH, WRONGPASS after a bad one.
func isAuthReply(re redis.Error) bool {
	s := string(re)
	return strings.HasPrefix(s, "NOAUTH") || strings.HasPrefix(s, "WRONGPASS")
}

// NotRedisError says that the peer at Addr answered with something other
// than a Redis reply. It matches ErrNotRedis.
type NotRedisError struct {
	Addr  string // as dialed
	Start string // the first bytes it sent
}

func (e *NotRedisError) Error() string {
	return fmt.Sprintf("%s does not speak Redis (it answered %q): is it the right port?", e.Addr, e.Start)
}

// Is reports whether target is ErrNotRedis.
func (e *NotRedisError) Is(target error) bool { return target == ErrNotRedis }

// Refused reports whether err is a peer's refusal to ever serve us
// (ErrAuth, ErrNotRedis), as opposed to a failure that may end by itself.
func Refused(err error) bool {
	return errors.Is(err, ErrAuth) || errors.Is(err, ErrNotRedis)
}
