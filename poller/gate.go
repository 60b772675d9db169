package poller

import (
	"context"
	"time"
)

// Gate holds a loop's claims to its topic's fleet-wide limits: a rate of
// starts and a cap on deliveries running at once. A claim the limits do
// not allow is not made, so what they hold back stays scheduled.
type Gate interface {
	// Take asks for up to n claims of messages due from from (now, or
	// the earliest due a look saw, if later), and grants g.N of them: the
	// loop claims at most that many, and starts the i-th message it
	// claimed (in due order) no sooner than g.Start(i). It asks again at
	// g.Retry (zero: at its next poll), or when g.Wake closes.
	Take(ctx context.Context, n int, from time.Time) (Grant, error)
	// Unused gives back the last k claims of g, which found no message.
	Unused(g Grant, k int)
	// Done frees the slots of n claimed messages of grants with Slots
	// whose deliveries ended, or that never started.
	Done(n int)
	// Reach is how far ahead of their due the loop may claim messages
	// now: under a rate limit, no farther than the starts a take grants
	// ahead, so that a message claimed ahead never waits for its start
	// beyond the rate's own reach. 0: as far as without limits.
	Reach() time.Duration
}

// Grant is what a Gate allows a loop to claim.
type Grant struct {
	N int
	// Start is when the i-th message of the grant may start (nil: at
	// its due).
	Start func(i int) time.Time
	Retry time.Time
	Wake  <-chan struct{}
	// Slots: each claim of the grant holds a slot of the concurrency
	// cap until Done.
	Slots bool
}

// gate asks Config.Gate for up to n claims of messages due from from (all
// of them without one), and returns the grant. When it grants fewer, the
// loop's next poll comes at the grant's Retry or Wake.
func (p *part) gate(ctx context.Context, n int, from time.Time) (Grant, error) {
	if p.cfg.Gate == nil {
		return Grant{N: n}, nil
	}
	g, err := p.cfg.Gate.Take(ctx, n, from)
	if err != nil {
		return Grant{}, err
	}
	g.N = min(g.N, n)
	p.gateWake = g.Wake
	return g, nil
}

// gateDone tells Config.Gate that n claimed messages ended, when they
// hold slots of the concurrency cap (see Grant.Slots).
func (p *part) gateDone(slots bool, n int) {
	if p.cfg.Gate != nil && slots && n > 0 {
		p.cfg.Gate.Done(n)
	}
}

// gateUnused gives the last k claims of g, which found no message, back
// to Config.Gate.
func (p *part) gateUnused(g Grant, k int) {
	if p.cfg.Gate != nil && k > 0 {
		p.cfg.Gate.Unused(g, k)
	}
}

// reach returns how far ahead of their due the loop claims messages, and
// how long before a message's due an idle loop looks again for it: 1.5
// and 1 poll intervals, or the gate's reach and two thirds of it.
func (p *part) reach() (reach, lead time.Duration) {
	reach, lead = p.cfg.PollInterval*3/2, p.cfg.PollInterval
	if p.cfg.Gate != nil {
		if r := p.cfg.Gate.Reach(); r > 0 && r < reach {
			reach, lead = r, r*2/3
		}
	}
	return reach, lead
}
