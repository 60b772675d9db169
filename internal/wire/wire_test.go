package wire

import (
	"testing"
	"time"
)

func TestTime(t *testing.T) {
	if got := Time(time.Time{}); got != "" {
		t.Errorf("Time(zero) = %q, want \"\"", got)
	}
	at := time.Date(2030, 1, 2, 3, 4, 5, 600, time.FixedZone("X", 3600))
	for _, tt := range []struct {
		at   time.Time
		want string
	}{
		{at, "2030-01-02T02:04:05.000Z"}, // below a millisecond: cut, not rounded
		{at.Add(500 * time.Millisecond), "2030-01-02T02:04:05.500Z"},
		{at.Add(123*time.Millisecond + 999*time.Microsecond), "2030-01-02T02:04:05.123Z"},
	} {
		if got := Time(tt.at); got != tt.want {
			t.Errorf("Time(%v) = %q, want %q", tt.at, got, tt.want)
		}
	}
}

func TestBody(t *testing.T) {
	if text, b64 := Body([]byte("héllo")); text == nil || *text != "héllo" || b64 != "" {
		t.Errorf("Body(UTF-8) = %v, %q", text, b64)
	}
	if text, b64 := Body([]byte("")); text == nil || *text != "" || b64 != "" {
		t.Errorf("Body(empty) = %v, %q; want an empty text", text, b64)
	}
	if text, b64 := Body([]byte{0xff, 0x00}); text != nil || b64 != "/wA=" {
		t.Errorf("Body(binary) = %v, %q; want base64 /wA=", text, b64)
	}
}
