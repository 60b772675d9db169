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
	if got, want := Time(at), "2030-01-02T02:04:05.0000006Z"; got != want {
		t.Errorf("Time = %q, want %q", got, want)
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
