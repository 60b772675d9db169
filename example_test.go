package delayq_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/delayq/delayq"
)

// Close an unpaid order 30 minutes after it was placed, unless it is paid
// (deleted) first.
func Example() {
	ctx := context.Background()
	c, err := delayq.New(delayq.Options{Addr: "127.0.0.1:22121"}) // Twemproxy, Codis or Redis
	if err != nil {
		fmt.Println(err)
		return
	}
	defer c.Close()

	_, err = c.Enqueue(ctx, delayq.Message{Topic: "orders", ID: "order-42", Body: []byte(`{"order":42}`), Delay: 30 * time.Minute})
	if errors.Is(err, delayq.ErrDuplicate) {
		fmt.Println("already scheduled")
	}

	k, err := c.NewConsumer(delayq.ConsumerOptions{Topic: "orders"}, func(ctx context.Context, d *delayq.Delivery) error {
		fmt.Printf("closing %s (attempt %d, due %s)\n", d.ID, d.Attempt, d.Due)
		return nil // ack
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	go k.Run(ctx)
	defer k.Shutdown(ctx)
}

// A payment arrived: the timeout must never fire.
func ExampleClient_Delete() {
	ctx := context.Background()
	c, _ := delayq.New(delayq.Options{Addr: "127.0.0.1:22121"})
	defer c.Close()
	if err := c.Delete(ctx, "orders", "order-42"); errors.Is(err, delayq.ErrNotFound) {
		fmt.Println("already delivered or deleted")
	}
}

// Send many messages with a few pipelined commands per partition.
func ExampleClient_EnqueueBatch() {
	ctx := context.Background()
	c, _ := delayq.New(delayq.Options{Addr: "127.0.0.1:22121"})
	defer c.Close()
	var msgs []delayq.Message
	for i := range 100 {
		msgs = append(msgs, delayq.Message{Topic: "reminders", Body: []byte(fmt.Sprint(i)), Delay: time.Duration(i) * time.Second})
	}
	res, err := c.EnqueueBatch(ctx, msgs)
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range res {
		if r.Err != nil {
			fmt.Println(r.ID, r.Err)
		}
	}
}

// Send from many goroutines without waiting a round trip per message: the
// outcome comes to a callback, and Close writes whatever is still queued.
func ExampleClient_EnqueueAsync() {
	ctx := context.Background()
	c, _ := delayq.New(delayq.Options{Addr: "127.0.0.1:22121"})
	defer c.Close()
	for i := range 1000 {
		m := delayq.Message{Topic: "reminders", ID: fmt.Sprint("r-", i), Delay: time.Hour}
		err := c.EnqueueAsync(ctx, m, func(id string, err error) {
			if err != nil && !errors.Is(err, delayq.ErrDuplicate) {
				log.Printf("enqueue %s: %v", id, err) // enqueue it again with the same id
			}
		})
		if err != nil {
			fmt.Println(err)
			return
		}
	}
}
