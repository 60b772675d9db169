package store

import (
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

func newTestOutage() (*Outage, *testenv.Buffer) {
	var buf testenv.Buffer
	return newOutage([]string{"a:1", "b:2"}, slog.New(slog.NewTextHandler(&buf, nil))), &buf
}

// waitLog polls buf until it contains s.
func waitLog(t *testing.T, buf *testenv.Buffer, s string) {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); !strings.Contains(buf.String(), s); {
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log:\n%s", s, buf)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// An outage nobody waits for is not logged; one a consumer waits
// through is logged once when it starts, and summed up when the consumer
// has its partitions again, with the leases it lost.
func TestOutageLines(t *testing.T) {
	errDial := errors.New("dial tcp a:1: connect: connection refused")

	o, buf := newTestOutage()
	o.begin(errDial)
	o.begin(errDial)
	o.end("a:1")
	if buf.String() != "" || o.Quiet() {
		t.Fatalf("an outage nobody waited for: quiet %v, logged:\n%s", o.Quiet(), buf)
	}

	o, buf = newTestOutage()
	done := o.Wait(80 * time.Millisecond)
	defer done()
	o.begin(errDial)
	o.begin(errDial)
	if n := strings.Count(buf.String(), "outage: no address answers"); n != 1 || !o.Quiet() {
		t.Fatalf("outage start logged %d times (quiet %v):\n%s", n, o.Quiet(), buf)
	}
	o.LeaseLost()
	o.LeaseLost()
	o.end("b:2")
	if !o.Quiet() || strings.Contains(buf.String(), "outage over") {
		t.Fatalf("the summary did not wait for the partitions:\n%s", buf)
	}
	o.LeaseGained()
	o.LeaseGained()
	// A loss noticed after the end, within a lease, is the outage's too.
	time.Sleep(20 * time.Millisecond)
	if strings.Contains(buf.String(), "outage over") {
		t.Fatalf("the summary came before a lease had passed since the end:\n%s", buf)
	}
	o.LeaseLost()
	o.LeaseGained()
	waitLog(t, buf, "outage over")
	if !strings.Contains(buf.String(), "addr=b:2") || !strings.Contains(buf.String(), "leases_lost=3 partitions_retaken=3") || o.Quiet() {
		t.Errorf("summary (quiet %v):\n%s", o.Quiet(), buf)
	}

	// Partitions another process took: the summary comes after two leases.
	o.begin(errDial)
	o.LeaseLost()
	o.LeaseLost()
	ended := time.Now()
	o.end("a:1")
	o.LeaseGained()
	waitLog(t, buf, "partitions_retaken=1")
	if took := time.Since(ended); took < 160*time.Millisecond {
		t.Errorf("summary after %v, want two leases (160ms) when partitions are missing", took)
	}
	if n := strings.Count(buf.String(), "outage over"); n != 2 {
		t.Errorf("%d summaries of two outages:\n%s", n, buf)
	}
}

// A consumer that starts during an outage nobody waited for logs its
// start then; a retrying enqueue is summed up as soon as it ends.
func TestOutageWaitLate(t *testing.T) {
	o, buf := newTestOutage()
	o.begin(errors.New("refused"))
	done := o.Wait(0)
	if n := strings.Count(buf.String(), "outage: no address answers"); n != 1 {
		t.Fatalf("outage start logged %d times when a waiter came:\n%s", n, buf)
	}
	o.end("a:1")
	done()
	if !strings.Contains(buf.String(), "outage over") {
		t.Errorf("no summary at the end of an outage without consumers:\n%s", buf)
	}
}
