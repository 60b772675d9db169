package delayq_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"sync/atomic"
	"time"

	"github.com/delayq/delayq"
)

// The examples run against $DELAYQ_ADDR, a Twemproxy the tests start (the
// command line reads the same variable).

// Close an unpaid order some time after it was placed, unless it is paid
// (deleted) first.
func Example() {
	ctx := context.Background()
	c, err := delayq.New(delayq.Options{Addr: os.Getenv("DELAYQ_ADDR")}) // Twemproxy, Codis or Redis
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	// In production: Delay: 30 * time.Minute.
	_, err = c.Send(ctx, delayq.Message{Topic: "orders", ID: "order-42", Body: []byte(`{"order":42}`), Delay: 200 * time.Millisecond})
	if errors.Is(err, delayq.ErrDuplicate) {
		fmt.Println("already scheduled")
	}

	closed := make(chan struct{})
	k, err := c.NewConsumer(delayq.ConsumerOptions{Topic: "orders"}, func(ctx context.Context, d *delayq.Delivery) error {
		fmt.Printf("closing %s (attempt %d): %s\n", d.ID, d.Attempt, d.Body)
		close(closed)
		return nil // ack
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	go k.Run(ctx)
	defer k.Shutdown(ctx)
	<-closed
	// Output: closing order-42 (attempt 1): {"order":42}
}

// A payment arrived: the timeout must never fire.
func ExampleClient_Delete() {
	ctx := context.Background()
	c, _ := delayq.New(delayq.Options{Addr: os.Getenv("DELAYQ_ADDR")})
	defer c.Close()
	c.Send(ctx, delayq.Message{Topic: "orders", ID: "order-43", Delay: 30 * time.Minute})
	for range 2 {
		err := c.Delete(ctx, "orders", "order-43")
		switch {
		case errors.Is(err, delayq.ErrNotFound):
			fmt.Println("already delivered or deleted")
		case err != nil:
			fmt.Println(err)
		default:
			fmt.Println("deleted: it will never be delivered")
		}
	}
	// Output:
	// deleted: it will never be delivered
	// already delivered or deleted
}

// Send many messages with a few pipelined commands per partition.
func ExampleClient_SendBatch() {
	ctx := context.Background()
	c, _ := delayq.New(delayq.Options{Addr: os.Getenv("DELAYQ_ADDR")})
	defer c.Close()
	var msgs []delayq.Message
	for i := range 100 {
		msgs = append(msgs, delayq.Message{Topic: "reminders", Body: []byte(fmt.Sprint(i)), Delay: time.Duration(i) * time.Minute})
	}
	res, err := c.SendBatch(ctx, msgs)
	if err != nil {
		fmt.Println(err)
		return
	}
	queued := 0
	for _, r := range res {
		if r.Err != nil {
			fmt.Println(r.ID, r.Err)
			continue
		}
		queued++
	}
	fmt.Println(queued, "queued")
	// Output: 100 queued
}

// Send from many goroutines without waiting a round trip per message: the
// outcome comes to a callback, and Close writes whatever is still queued.
func ExampleClient_SendAsync() {
	ctx := context.Background()
	c, _ := delayq.New(delayq.Options{Addr: os.Getenv("DELAYQ_ADDR")})
	var queued atomic.Int64
	for i := range 1000 {
		m := delayq.Message{Topic: "reminders-async", ID: fmt.Sprint("r-", i), Delay: time.Hour}
		err := c.SendAsync(ctx, m, func(res delayq.SendResult) {
			id, err := res.ID, res.Err
			if err != nil && !errors.Is(err, delayq.ErrDuplicate) {
				log.Printf("enqueue %s: %v", id, err) // enqueue it again with the same id
				return
			}
			queued.Add(1)
		})
		if err != nil {
			fmt.Println(err)
			return
		}
	}
	c.Close() // writes what is queued; every callback has run when it returns
	fmt.Println(queued.Load(), "queued")
	// Output: 1000 queued
}
