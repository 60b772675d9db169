package ui_test

import (
	"context"
	"fmt"
	"html"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/ui"
	"github.com/delayq/delayq/partition"
)

// seedBig fills topic (64 partitions) with: 1,200 messages with ids of
// their own spread over the next hour, 130 more due at one and the same
// millisecond in partition 0 (more than a page of ties in one partition),
// and 40 with generated ids written together, which the library stores
// as segments. It returns every id and the shared due time.
func seedBig(t *testing.T, c *delayq.Client, topic string) (ids map[string]bool, tie time.Time) {
	t.Helper()
	ids = map[string]bool{}
	now := time.Now()
	var msgs []delayq.Message
	for i := range 1200 {
		id := fmt.Sprintf("order-%04d", i)
		msgs = append(msgs, delayq.Message{Topic: topic, ID: id, Body: []byte(fmt.Sprintf(`{"order":%d}`, i)),
			At: now.Add(time.Duration(i)*3*time.Second + time.Minute)})
		ids[id] = true
	}
	tie = now.Add(10 * time.Minute).Truncate(time.Millisecond)
	for i, k := 0, 0; k < 130; i++ {
		id := fmt.Sprintf("tie-%d", i)
		if partition.For(id, 64) != 0 {
			continue
		}
		msgs = append(msgs, delayq.Message{Topic: topic, ID: id, Body: []byte("tied"), At: tie})
		ids[id] = true
		k++
	}
	send(t, c, msgs...)
	var gen []delayq.Message
	for range 40 {
		gen = append(gen, delayq.Message{Topic: topic, Body: []byte("generated"), Delay: 20 * time.Minute})
	}
	res, err := c.SendBatch(context.Background(), gen)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range res {
		if r.Err != nil {
			t.Fatal(r.Err)
		}
		ids[r.ID] = true
	}
	return ids, tie
}

var (
	rowIDRE   = regexp.MustCompile(`<tr data-id="([^"]*)">`)
	nextRE    = regexp.MustCompile(`<a href="([^"]*)" id="next-page">`)
	dueCellRE = regexp.MustCompile(`<td><span title="[^"]*">([^<]*)</span> <span class="muted small">`)
)

// TestSixtyFourPartitions renders every page of a topic of 64
// partitions, and pages through its scheduled messages: each message
// comes exactly once, in due order, across ties larger than a page and
// segments.
func TestSixtyFourPartitions(t *testing.T) {
	f := newFixture(t, ui.Options{})
	c := f.client(64)
	ids, _ := seedBig(t, c, "big")
	b := f.http()
	for _, p := range []string{"/ui/", "/ui/topics/big", "/ui/topics/big/dead", "/ui/topics/big/scheduled", "/ui/topics/big/message?id=order-0001"} {
		start := time.Now()
		code, body := b.get(p)
		t.Logf("GET %s: %d, %d bytes in %v", p, code, len(body), time.Since(start))
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d\n%s", p, code, body)
		}
	}
	_, overview := b.get("/ui/")
	if want := fmt.Sprintf(`<td class="num c-scheduled">%s</td>`, num(len(ids))); !strings.Contains(overview, want) {
		t.Errorf("overview lacks %s", want)
	}
	_, topic := b.get("/ui/topics/big")
	if n := strings.Count(topic, "<tr data-partition="); n != 64 {
		t.Errorf("%d partition rows, want 64", n)
	}
	if n := strings.Count(topic, `<rect class="bar"`); n < 55 {
		t.Errorf("%d bars in the chart, want one per minute with messages", n)
	}

	seen := map[string]int{}
	var lastDue string
	dues := 0
	next, pages := "/ui/topics/big/scheduled?limit=50", 0
	for next != "" {
		pages++
		if pages > 100 {
			t.Fatal("more than 100 pages")
		}
		code, body := b.get(next)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d", next, code)
		}
		for _, m := range rowIDRE.FindAllStringSubmatch(body, -1) {
			seen[html.UnescapeString(m[1])]++
		}
		for _, m := range dueCellRE.FindAllStringSubmatch(body, -1) {
			if m[1] < lastDue && !strings.Contains(body, "seg</span>") {
				t.Errorf("due %s after %s", m[1], lastDue)
			}
			lastDue = max(lastDue, m[1])
			dues++
		}
		next = ""
		if m := nextRE.FindStringSubmatch(body); m != nil {
			next = html.UnescapeString(m[1])
		}
	}
	for id := range ids {
		if seen[id] != 1 {
			t.Errorf("%s listed %d times", id, seen[id])
		}
	}
	if len(seen) != len(ids) {
		t.Errorf("listed %d messages, want %d", len(seen), len(ids))
	}
	if dues != len(ids) {
		t.Errorf("read %d due times, want %d", dues, len(ids))
	}
	t.Logf("%d messages in %d pages", len(seen), pages)
}

func num(n int) string {
	s := strconv.Itoa(n)
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

// hostile are bodies, ids and errors that would run script if a page
// wrote them as HTML.
var hostile = []string{
	`<script>alert(1)</script>`,
	`<img src=x onerror=alert(2)>`,
	`"><svg onload=alert(3)>`,
	`javascript:alert(4)`,
}

// TestHostileContentEscaped checks the HTML of every page that shows a
// message: hostile ids, bodies and last errors come out as text.
func TestHostileContentEscaped(t *testing.T) {
	f := newFixture(t, ui.Options{})
	c := f.client(4)
	var msgs []delayq.Message
	for i, h := range hostile {
		msgs = append(msgs, delayq.Message{Topic: "evil", ID: fmt.Sprintf("body-%d", i), Body: []byte(h), Delay: time.Hour})
		msgs = append(msgs, delayq.Message{Topic: "evil", ID: h, Body: []byte("x"), Delay: time.Hour})
	}
	send(t, c, msgs...)
	kill(t, c, "evil", func(id string) string { return hostile[len(id)%len(hostile)] },
		delayq.Message{ID: "dead-1", Body: []byte(hostile[0])}, delayq.Message{ID: hostile[1] + "dead", Body: []byte(hostile[1])})
	b := f.http()
	pages := []string{"/ui/topics/evil/scheduled", "/ui/topics/evil/dead", "/ui/topics/evil/message?id=dead-1"}
	for i, h := range hostile {
		pages = append(pages, fmt.Sprintf("/ui/topics/evil/message?id=body-%d", i), "/ui/topics/evil/message?id="+urlQuery(h))
	}
	for _, p := range pages {
		code, body := b.get(p)
		if code != http.StatusOK {
			t.Fatalf("GET %s: %d", p, code)
		}
		for _, bad := range []string{"<script>alert", "<img src=x", "<svg onload", `href="javascript:`} {
			if strings.Contains(body, bad) {
				t.Errorf("GET %s: the page contains %q:\n%s", p, bad, body)
			}
		}
		if strings.Count(body, "<script") != 1 { // app.js only
			t.Errorf("GET %s: %d script elements", p, strings.Count(body, "<script"))
		}
	}
	_, body := b.get("/ui/topics/evil/message?id=body-0")
	if !strings.Contains(body, `<pre class="body" id="body-text">&lt;script&gt;alert(1)&lt;/script&gt;</pre>`) {
		t.Errorf("the body is not shown as text:\n%s", body)
	}
}

func urlQuery(s string) string {
	r := strings.NewReplacer("%", "%25", "&", "%26", "+", "%2B", " ", "%20", "#", "%23", "<", "%3C", ">", "%3E", `"`, "%22")
	return r.Replace(s)
}

// TestBinaryBody checks that a body that is not UTF-8 shows as hex and
// base64.
func TestBinaryBody(t *testing.T) {
	f := newFixture(t, ui.Options{})
	c := f.client(2)
	send(t, c, delayq.Message{Topic: "bin", ID: "b", Body: []byte{0xff, 0x00, '<', 'a', '>', 0x80}, Delay: time.Hour})
	_, body := f.http().get("/ui/topics/bin/message?id=b")
	for _, want := range []string{
		`<pre class="body" id="body-hex">00000000  ff 00 3c 61 3e 80`,
		`|..&lt;a&gt;.|`,
		`<pre class="body wrap" id="body-b64">/wA8YT6A</pre>`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("the page lacks %q:\n%s", want, body)
		}
	}
}

// The topic page shows the progress of a change of the partition count:
// the sources done, the messages moved and left to move, the settle time
// left, and that no consumer runs it; "1 consumer" in the singular.
func TestChangeProgress(t *testing.T) {
	f := newFixture(t, ui.Options{})
	c := f.client(4)
	ctx := context.Background()
	for i := range 40 {
		send(t, c, delayq.Message{Topic: "grow", ID: fmt.Sprintf("m-%d", i), Body: []byte("x"), Delay: time.Hour})
	}
	if _, err := c.Admin().SetPartitions(ctx, "grow", 8, delayq.PartitionsOptions{}); err != nil {
		t.Fatal(err)
	}
	b := f.http()
	code, page := b.get("/ui/topics/grow")
	if code != http.StatusOK {
		t.Fatalf("GET the topic page: %d\n%s", code, page)
	}
	for _, want := range []string{`id="change-progress"`, "Changing from 4 to 8 partitions", "0 of 4 source partitions done", "0 messages moved",
		"about 20 left to move (of 40 in the sources)", "settle time", `id="change-idle"`, "--cancel"} {
		if !strings.Contains(page, want) {
			t.Errorf("topic page lacks %q", want)
		}
	}
	if _, err := c.Admin().CancelPartitions(ctx, "grow"); err != nil {
		t.Fatal(err)
	}
	_, page = b.get("/ui/topics/grow")
	if !strings.Contains(page, "Change to 8 partitions cancelled: moving back to 4") {
		t.Error("topic page does not show the cancel")
	}
	k, err := c.NewConsumer(delayq.ConsumerOptions{Topic: "grow"}, func(context.Context, *delayq.Delivery) error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	kctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- k.Run(kctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, page = b.get("/ui/topics/grow")
		if strings.Contains(page, `<span class="big">1</span> consumer</div>`) && !strings.Contains(page, `id="change-idle"`) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the topic page never showed \"1 consumer\" and no idle warning:\n%s", page)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
