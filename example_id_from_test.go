package delayq_test

import (
	"fmt"

	"github.com/delayq/delayq"
)

// One reminder per user per day: the id is derived from the user and the
// day, so a second send for them is a duplicate (ErrDuplicate by
// default), on any producer.
func ExampleIDFrom() {
	id := delayq.IDFrom("user-42", "2030-01-02")
	// c.Send(ctx, delayq.Message{Topic: "reminders", ID: id, Delay: time.Hour})
	fmt.Println(id)
	// Output:
	// 40889W2FRE7A68TKBHWYN7HWRT
}
