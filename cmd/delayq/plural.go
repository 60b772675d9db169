package main

import "fmt"

// plural returns one when n is 1 and many otherwise, for the noun (or
// verb) that follows a count: fmt.Printf("%d %s", n, plural(n, "message",
// "messages")).
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// counted is n followed by noun, with an s unless n is 1: "1 message",
// "2 messages".
func counted[N int | int64](n N, noun string) string {
	return fmt.Sprintf("%d %s", n, plural(int(n), noun, noun+"s"))
}
