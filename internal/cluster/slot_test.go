package cluster

import "testing"

func TestSlot(t *testing.T) {
	if got := crc16("123456789"); got != 0x31C3 {
		t.Errorf("crc16(123456789) = %#x, want 0x31c3", got)
	}
	for _, c := range []struct {
		key  string
		want int
	}{
		{"123456789", 0x31C3},
		{"foo", 12182},
		{"{user1000}.following", Slot("user1000")},
		{"{user1000}.followers", Slot("user1000")},
		{"foo{}{bar}", int(crc16("foo{}{bar}") % Slots)},
		{"foo{{bar}}zap", Slot("{bar")},
		{"foo{bar}{zap}", Slot("bar")},
		{"dq:{orders:3}:s", Slot("orders:3")},
	} {
		if got := Slot(c.key); got != c.want {
			t.Errorf("Slot(%q) = %d, want %d", c.key, got, c.want)
		}
	}
}
