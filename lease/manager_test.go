package lease_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
	"github.com/delayq/delayq/lease"
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
		select {
		case <-stop:
			handedOver()
			return nil
		case <-l.Done():
			return l.Ctx().Err()
		}
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
		m, err := lease.NewManager(lease.ManagerOptions{
			Topic: "mt", ID: id, Partitions: parts, Expiry: 3 * time.Second,
			Members: st, Redsync: rs,
			Name:  func(p int) string { return fmt.Sprintf("mt:%d:lease", p) },
			Value: func() string { return store0Value(id) },
			Work:  w.fn(id),
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			m.Run(ctx)
		}()
		return m, cancel, done
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
