package main

// plural returns one when n is 1 and many otherwise, for the noun (or
// verb) that follows a count: fmt.Printf("%d %s", n, plural(n, "message",
// "messages")).
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
