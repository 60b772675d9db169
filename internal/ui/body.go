package ui

import (
	"encoding/base64"
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// bodyView is a message body as the message page shows it: text when it
// is UTF-8, otherwise a hex dump and base64. Either is cut at
// maxBodyDisplay bytes (the download link has it all). The template
// escapes every string: a body is untrusted.
type bodyView struct {
	Len       int
	IsText    bool
	Text      string
	Hex       string
	Base64    string
	Truncated bool
}

// newBodyView formats body.
func newBodyView(body []byte) *bodyView {
	v := &bodyView{Len: len(body)}
	shown := body
	if len(shown) > maxBodyDisplay {
		shown, v.Truncated = shown[:maxBodyDisplay], true
	}
	if utf8.Valid(body) {
		v.IsText = true
		for len(shown) > 0 && !utf8.Valid(shown) { // a rune cut at the limit
			shown = shown[:len(shown)-1]
		}
		v.Text = string(shown)
		return v
	}
	v.Hex = hexDump(shown)
	v.Base64 = base64.StdEncoding.EncodeToString(shown)
	return v
}

// hexDump formats b as lines of 16 bytes: offset, hex, printable ASCII.
func hexDump(b []byte) string {
	var sb strings.Builder
	for off := 0; off < len(b); off += 16 {
		line := b[off:min(off+16, len(b))]
		fmt.Fprintf(&sb, "%08x  ", off)
		for i := range 16 {
			if i < len(line) {
				fmt.Fprintf(&sb, "%02x ", line[i])
			} else {
				sb.WriteString("   ")
			}
			if i == 7 {
				sb.WriteByte(' ')
			}
		}
		sb.WriteString(" |")
		for _, c := range line {
			if c >= 0x20 && c < 0x7f {
				sb.WriteByte(c)
			} else {
				sb.WriteByte('.')
			}
		}
		sb.WriteString("|\n")
	}
	return sb.String()
}

// preview is the first characters of a body for a list: its text up to
// n runes on one line, or "binary, N bytes".
func preview(body []byte, n int) string {
	if !utf8.Valid(body) {
		return fmt.Sprintf("(binary, %s)", formatBytes(len(body)))
	}
	var sb strings.Builder
	i := 0
	for _, r := range string(body) {
		if i == n {
			sb.WriteString("…")
			break
		}
		if unicode.IsControl(r) {
			r = ' '
		}
		sb.WriteRune(r)
		i++
	}
	return sb.String()
}
