package delayq_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/delayq/delayq"
)

// Stream a topic to another cluster: Export calls emit with each
// message, and Import writes them in batches with their ids, due times,
// attempts and states. Here both clients use the same server and the
// messages go to another topic.
func ExampleInspector_Export() {
	ctx := context.Background()
	from, err := delayq.New(delayq.Options{Addr: os.Getenv("DELAYQ_ADDR")})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer from.Close()
	to, err := delayq.New(delayq.Options{Addr: os.Getenv("DELAYQ_ADDR"), Partitions: 8}) // another cluster in practice
	if err != nil {
		fmt.Println(err)
		return
	}
	defer to.Close()
	for _, id := range []string{"invoice-1", "invoice-2", "invoice-3"} {
		if _, err := from.Send(ctx, delayq.Message{Topic: "invoices", ID: id, Body: []byte(id), Delay: time.Hour}); err != nil {
			fmt.Println(err)
			return
		}
	}

	var batch []delayq.ExportedMessage
	imported := 0
	flush := func() error {
		res, err := to.Admin().Import(ctx, "invoices-moved", batch)
		if err != nil {
			return err
		}
		for _, r := range res {
			if r.Err != nil {
				return r.Err // errors.Is(r.Err, delayq.ErrDuplicate): imported before
			}
			imported++
		}
		batch = batch[:0]
		return nil
	}
	st, err := from.Inspector().Export(ctx, "invoices", delayq.ExportOptions{}, func(m *delayq.ExportedMessage) error {
		if batch = append(batch, *m); len(batch) == 500 {
			return flush()
		}
		return nil
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		fmt.Println(err)
		return
	}
	in, err := to.Get(ctx, "invoices-moved", "invoice-2")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Printf("exported %d, imported %d; invoice-2 is %s, due in about %v\n",
		st.Exported, imported, in.State, time.Until(in.Due).Round(time.Hour))
	// Output: exported 3, imported 3; invoice-2 is scheduled, due in about 1h0m0s
}
