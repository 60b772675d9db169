package testenv

import (
	"hash/crc32"
	"testing"
	"time"
)

// TestCodis brings up a cluster of two groups with replicas behind two
// proxies, and checks what the Codis scenarios rely on: both proxies
// route, a slot migration ends with the slot in its new group, a
// promoted replica takes over its group's keys, and the proxies count
// commands per opstr.
func TestCodis(t *testing.T) {
	c := StartCodis(t, CodisOptions{Groups: 2, Replicas: true, Proxies: 2})
	for _, p := range c.Proxies {
		if r, err := Do(p, "SET", "{k}", "v", "PX", "600000"); err != nil || r != "+OK" {
			t.Fatalf("SET through %s: %q %v", p, r, err)
		}
	}
	// Codis hashes a key's {tag} with CRC32 (IEEE) into 1024 slots.
	slot := int(crc32.ChecksumIEEE([]byte("k")) % 1024)
	gid := 2
	if slot >= 512 {
		gid = 1
	}
	c.MigrateSlots(t, slot, slot, gid)
	WaitFor(t, 60*time.Second, "the slot of {k} moved", func() bool {
		n, pending, err := c.SlotsOf(gid)
		return err == nil && n == 513 && pending == 0
	})
	if r, err := Do(c.Proxies[1], "GET", "{k}"); err != nil || r != "$v" {
		t.Fatalf("GET after the migration: %q %v", r, err)
	}
	c.Kill(t, c.Groups[gid-1][0])
	c.Promote(t, gid, c.Groups[gid-1][1])
	WaitFor(t, 10*time.Second, "the promoted replica serving the group of {k}", func() bool {
		r, err := Do(c.Proxies[0], "GET", "{k}")
		return err == nil && r == "$v"
	})
	if r, err := Do(c.Proxies[0], "SET", "{k}", "w", "PX", "600000"); err != nil || r != "+OK" {
		t.Fatalf("SET after the promote: %q %v", r, err)
	}
	ops, err := c.ProxyOps(0)
	if err != nil {
		t.Fatal(err)
	}
	calls := map[string]int64{}
	for _, op := range ops {
		calls[op.OpStr] = op.Calls
	}
	if calls["SET"] < 2 || calls["GET"] < 1 {
		t.Errorf("proxy 0 counters %+v, want SET and GET counted", ops)
	}
}
