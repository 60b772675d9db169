package lease_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/store"
	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/lease"
	"github.com/go-redsync/redsync/v4"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m, goleak.IgnoreTopFunction(testenv.SpawnerFunc))
}

// work is a Manager's Work that records which member runs which
// partition, and hands over at once when stopped.
type work struct {
	mu   sync.Mutex
	ran  map[int]string // partition -> member running it
	errs []error
}

func (w *work) fn(member string) lease.Work {
	return func(p int, l *lease.Lease, stop <-chan struct{}, handedOver func()) error {
		w.mu.Lock()
		if other, ok := w.ran[p]; ok {
			err := fmt.Errorf("partition %d run by %s and %s at once", p, other, member)
			w.errs = append(w.errs, err)
			w.mu.Unlock()
			return err
		}
		w.ran[p] = member
		w.mu.Unlock()
		defer func() {
			w.mu.Lock()
			delete(w.ran, p)
			w.mu.Unlock()
		}()
		return hold(l, stop, handedOver)
	}
}

// hold is a partition's Work once started: it returns when the partition
// is handed over (stop) or its lease is lost.
func hold(l *lease.Lease, stop <-chan struct{}, handedOver func()) error {
	select {
	case <-stop:
		handedOver()
		return nil
	case <-l.Done():
		return l.Ctx().Err()
	}
}

func (w *work) count(member string) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	n := 0
	for _, m := range w.ran {
		if m == member {
			n++
		}
	}
	return n
}

// Managers share a topic's partitions fairly, a joining member gets its
// share from the others through the change counter, and a leaving one
// hands all of its partitions over; no partition runs twice at once.
func TestManagerShares(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 2})
	st, rs := setup(t, env.Proxy)
	const parts = 6
	w := &work{ran: map[int]string{}}
	start := func(id string) (*lease.Manager, context.CancelFunc, chan struct{}) {
		return runManager(t, lease.ManagerOptions{
			Topic: "mt", ID: id, Partitions: parts, Expiry: 3 * time.Second,
			Members: st, Redsync: rs,
			Name:  func(p int) string { return fmt.Sprintf("mt:%d:lease", p) },
			Value: func() string { return store0Value(id) },
			Work:  w.fn(id),
		})
	}
	a, stopA, doneA := start("a")
	testenv.WaitFor(t, 10*time.Second, "a owning every partition", func() bool {
		return len(a.Owned()) == parts && w.count("a") == parts
	})
	b, stopB, doneB := start("b")
	testenv.WaitFor(t, 10*time.Second, "3 partitions each", func() bool {
		return len(a.Owned()) == 3 && len(b.Owned()) == 3 && w.count("b") == 3
	})
	stopA()
	<-doneA
	testenv.WaitFor(t, 10*time.Second, "b owning every partition", func() bool {
		return len(b.Owned()) == parts && w.count("b") == parts
	})
	stopB()
	<-doneB
	if n := len(b.Owned()); n != 0 {
		t.Errorf("b still owns %d partitions after Run returned", n)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, err := range w.errs {
		t.Error(err)
	}
}

// runManager starts a Manager of o; cancel stops it, and done closes
// when its Run has returned.
func runManager(t *testing.T, o lease.ManagerOptions) (m *lease.Manager, cancel context.CancelFunc, done chan struct{}) {
	t.Helper()
	m, err := lease.NewManager(o)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done = make(chan struct{})
	go func() {
		defer close(done)
		m.Run(ctx)
	}()
	return m, cancel, done
}

var valueSeq struct {
	sync.Mutex
	n int
}

// store0Value returns a lease value unique per acquisition.
func store0Value(id string) string {
	valueSeq.Lock()
	defer valueSeq.Unlock()
	valueSeq.n++
	return fmt.Sprintf("%s %d", id, valueSeq.n)
}

// A member whose leases are all quiet renews its membership for as long
// as they last (IdleFactor × Expiry); once one stops being quiet, it
// renews for the usual 3 heartbeats at once. A member killed while quiet
// (its Run never returns: no leave, no release) has its partitions taken
// over once its membership and its leases expire, within about
// IdleFactor × Expiry.
func TestManagerQuiet(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1})
	st, rs := setup(t, env.Backends[0])
	// The member that dies reaches Redis through the proxy, which stops.
	viaProxy, viaProxyRS := setup(t, env.Proxy)
	const (
		parts  = 2
		expiry = 900 * time.Millisecond
	)
	busy := make(chan struct{})
	var mu sync.Mutex
	runs := map[string]int{}
	start := func(id string, quiet bool, st *store.Store, rs *redsync.Redsync) (*lease.Manager, context.CancelFunc, chan struct{}) {
		return runManager(t, lease.ManagerOptions{
			Topic: "mq", ID: id, Partitions: parts, Expiry: expiry,
			Members: st, Redsync: rs,
			Name:  func(p int) string { return fmt.Sprintf("mq:%d:lease", p) },
			Value: func() string { return store0Value(id) },
			Work: func(p int, l *lease.Lease, stop <-chan struct{}, handedOver func()) error {
				mu.Lock()
				runs[id]++
				mu.Unlock()
				if quiet {
					l.SetIdle(time.Now().Add(time.Hour))
				}
				for b := busy; ; {
					select {
					case <-b:
						l.SetIdle(time.Time{})
						b = nil
					case <-stop:
						handedOver()
						return nil
					case <-l.Done():
						return l.Ctx().Err()
					}
				}
			},
		})
	}
	ctx := context.Background()
	expires := func(id string) time.Duration {
		t.Helper()
		ms, err := st.Members(ctx, "mq", 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.ID == id {
				return time.Until(time.UnixMilli(m.Expires))
			}
		}
		t.Fatalf("%s not a member", id)
		return 0
	}
	q, stopQ, doneQ := start("q", true, st, rs)
	testenv.WaitFor(t, 10*time.Second, "q's membership renewed for its quiet leases", func() bool {
		return len(q.Owned()) == parts && expires("q") > expiry*(lease.IdleFactor-1)
	})
	close(busy)
	testenv.WaitFor(t, expiry, "q's membership renewed for 3 heartbeats once busy", func() bool {
		return expires("q") <= expiry
	})
	stopQ()
	<-doneQ

	// A quiet member that dies keeps its partitions until its leases
	// expire, and no longer.
	busy = make(chan struct{})
	d, stopD, doneD := start("dead", true, viaProxy, viaProxyRS)
	testenv.WaitFor(t, 10*time.Second, "dead's membership renewed for its quiet leases", func() bool {
		return len(d.Owned()) == parts && expires("dead") > expiry*(lease.IdleFactor-1)
	})
	// As a process killed -9: no heartbeat, no extension, no release.
	env.StopProxy(t)
	killed := time.Now()
	s, stopS, doneS := start("survivor", false, st, rs)
	testenv.WaitFor(t, 3*lease.IdleFactor*expiry, "the survivor owning every partition", func() bool {
		return len(s.Owned()) == parts
	})
	took := time.Since(killed)
	t.Logf("quiet member's partitions taken over %v after it died (IdleFactor × Expiry = %v)", took, lease.IdleFactor*expiry)
	if took < (lease.IdleFactor-1)*expiry {
		t.Errorf("partitions taken over %v after the quiet member died, before its quiet leases expired (%v)", took, lease.IdleFactor*expiry)
	}
	if bound := lease.IdleFactor*expiry + expiry; took > bound {
		t.Errorf("partitions taken over %v after the quiet member died, want within %v", took, bound)
	}
	stopS()
	<-doneS
	stopD()
	<-doneD
}

// A member that holds its share of quiet leases, its membership renewed
// for as long as they last, renews it for the usual 3 heartbeats at once
// when its share grows and it takes a busy partition: were it to die
// then, the others would count it out once that lease expires, not
// IdleFactor × Expiry later.
func TestManagerQuietTakesBusy(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	st, rs := setup(t, env.Backends[0])
	const expiry = 900 * time.Millisecond
	var span atomic.Int64
	span.Store(1)
	changes := make(chan struct{}, 1)
	m, stop, done := runManager(t, lease.ManagerOptions{
		Topic: "mb", ID: "q", Partitions: 1, Expiry: expiry,
		Span:    func(context.Context) (int, error) { return int(span.Load()), nil },
		Changes: changes,
		Members: st, Redsync: rs,
		Name:  func(p int) string { return fmt.Sprintf("mb:%d:lease", p) },
		Value: func() string { return store0Value("q") },
		Work: func(p int, l *lease.Lease, stop <-chan struct{}, handedOver func()) error {
			if p == 0 {
				l.SetIdle(time.Now().Add(time.Hour))
			}
			return hold(l, stop, handedOver)
		},
	})
	defer func() {
		stop()
		<-done
	}()
	expires := func() time.Duration {
		t.Helper()
		ms, err := st.Members(context.Background(), "mb", 10)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range ms {
			if m.ID == "q" {
				return time.Until(time.UnixMilli(m.Expires))
			}
		}
		t.Fatal("q not a member")
		return 0
	}
	testenv.WaitFor(t, 10*time.Second, "q's membership renewed for its quiet lease", func() bool {
		return len(m.Owned()) == 1 && expires() > expiry*(lease.IdleFactor-1)
	})
	span.Store(2)
	changes <- struct{}{}
	testenv.WaitFor(t, 10*time.Second, "q owning the new partition", func() bool { return len(m.Owned()) == 2 })
	testenv.WaitFor(t, expiry, "q's membership renewed for 3 heartbeats once it took a busy partition", func() bool {
		return expires() <= expiry
	})
}

// A member short of its share that finds a partition still leased (its
// owner died: the lease runs out, nobody releases it) tries again within
// about a quarter of a heartbeat, so it takes the partition over soon
// after the lease expires rather than up to a heartbeat later.
func TestManagerRetriesTakenSoon(t *testing.T) {
	env := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true})
	st, rs := setup(t, env.Backends[0])
	const expiry = 12 * time.Second // a heartbeat of 4 s
	name := func(p int) string { return fmt.Sprintf("mr:%d:lease", p) }
	// Halfway between the member's second and third heartbeats (4 s and
	// 8 s, ± 10%).
	dead := rs.NewMutex(name(1), redsync.WithExpiry(6*time.Second), redsync.WithTries(1))
	if err := dead.Lock(); err != nil {
		t.Fatal(err)
	}
	expires := dead.Until()
	w := &work{ran: map[int]string{}}
	m, stop, done := runManager(t, lease.ManagerOptions{
		Topic: "mr", ID: "b", Partitions: 2, Expiry: expiry,
		Members: st, Redsync: rs, Name: name,
		Value: func() string { return store0Value("b") },
		Work:  w.fn("b"),
	})
	defer func() {
		stop()
		<-done
	}()
	testenv.WaitFor(t, 10*time.Second, "b owning both partitions", func() bool { return len(m.Owned()) == 2 })
	// The retry comes a quarter of a heartbeat after the failed try (1 s,
	// give or take 10%), and the take's round trips beside it; the next
	// heartbeat would be about 2 s after the expiry.
	if late := time.Since(expires); late > 1500*time.Millisecond {
		t.Errorf("b took the dead owner's partition %v after its lease expired, want within 1.5s (a heartbeat is 4s)", late.Round(time.Millisecond))
	}
}
