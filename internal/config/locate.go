package config

import (
	"sort"
	"strconv"
	"strings"
)

// located is one key of a TOML document and the line it is on.
type located struct {
	names []string // the key's full name, table names included, without array indices
	path  string   // canonical path with array indices, e.g. "topic[1].handler.url"
	line  int      // 1-based
}

// locator maps the keys of a TOML document that BurntSushi/toml accepted
// to their lines. It is a small scanner of its own because the library
// does not export key positions (see doc.go). It never fails: on anything
// it does not understand it stops, and lookups fall back to the nearest
// enclosing key it did see, or to line 0 (unknown).
type locator struct {
	src    string
	pos    int
	starts []int // byte offset of the start of each line

	keys   []located
	lines  map[string]int // path -> line of its first occurrence
	arrays map[string]int // canonical path of an array of tables -> elements so far
}

// locate scans src.
func locate(src string) *locator {
	l := &locator{src: src, lines: map[string]int{}, arrays: map[string]int{}, starts: []int{0}}
	for i := 0; i < len(src); i++ {
		if src[i] == '\n' {
			l.starts = append(l.starts, i+1)
		}
	}
	l.document()
	return l
}

// line returns the line of path, or of its nearest enclosing key or table
// that was seen, or 0.
func (l *locator) line(path string) int {
	for path != "" {
		if n, ok := l.lines[path]; ok {
			return n
		}
		i := strings.LastIndexAny(path, ".[")
		if i < 0 {
			return 0
		}
		path = path[:i]
	}
	return 0
}

// find returns the keys named names (without indices), in document order.
func (l *locator) find(names []string) []located {
	var out []located
	for _, k := range l.keys {
		if equalNames(k.names, names) {
			out = append(out, k)
		}
	}
	return out
}

func equalNames(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// lineAt returns the 1-based line of byte offset off.
func (l *locator) lineAt(off int) int {
	return sort.Search(len(l.starts), func(i int) bool { return l.starts[i] > off })
}

func (l *locator) record(names []string, path string, off int) {
	line := l.lineAt(off)
	l.keys = append(l.keys, located{names: append([]string(nil), names...), path: path, line: line})
	if _, ok := l.lines[path]; !ok {
		l.lines[path] = line
	}
}

func (l *locator) eof() bool { return l.pos >= len(l.src) }

func (l *locator) peek() byte {
	if l.eof() {
		return 0
	}
	return l.src[l.pos]
}

// skipSpace skips blanks, and also newlines and comments when lines is set.
func (l *locator) skipSpace(lines bool) {
	for !l.eof() {
		switch c := l.src[l.pos]; {
		case c == ' ' || c == '\t' || c == '\r':
			l.pos++
		case lines && c == '\n':
			l.pos++
		case lines && c == '#':
			l.skipLine()
		default:
			return
		}
	}
}

// skipLine moves to the start of the next line.
func (l *locator) skipLine() {
	if i := strings.IndexByte(l.src[l.pos:], '\n'); i >= 0 {
		l.pos += i + 1
	} else {
		l.pos = len(l.src)
	}
}

// document scans top-level items: table headers and key/value pairs.
func (l *locator) document() {
	var table []string // names of the current table
	tablePath := ""    // its canonical path
	for {
		l.skipSpace(true)
		if l.eof() {
			return
		}
		start := l.pos
		if l.peek() == '[' {
			array := strings.HasPrefix(l.src[l.pos:], "[[")
			if array {
				l.pos += 2
			} else {
				l.pos++
			}
			names, ok := l.key()
			if !ok {
				return
			}
			l.skipSpace(false)
			if array && strings.HasPrefix(l.src[l.pos:], "]]") {
				l.pos += 2
			} else if !array && l.peek() == ']' {
				l.pos++
			} else {
				return
			}
			table, tablePath = names, l.canon(names, array)
			l.record(table, tablePath, start)
			continue
		}
		before := l.pos
		if !l.keyValue(table, tablePath) || l.pos == before {
			return
		}
	}
}

// canon returns the canonical path of a table header, counting a new
// element when array is set ([[name]]).
func (l *locator) canon(names []string, array bool) string {
	var b strings.Builder
	for i, n := range names {
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(n)
		p := b.String()
		if array && i == len(names)-1 {
			k := l.arrays[p]
			l.arrays[p] = k + 1
			b.WriteString("[" + strconv.Itoa(k) + "]")
		} else if k, ok := l.arrays[p]; ok {
			b.WriteString("[" + strconv.Itoa(k-1) + "]")
		}
	}
	return b.String()
}

// keyValue scans "key = value" in the table names/path.
func (l *locator) keyValue(names []string, path string) bool {
	start := l.pos
	key, ok := l.key()
	if !ok {
		return false
	}
	l.skipSpace(false)
	if l.peek() != '=' {
		return false
	}
	l.pos++
	l.skipSpace(false)
	full := append(append([]string(nil), names...), key...)
	p := joinPath(path, key)
	l.record(full, p, start)
	return l.value(full, p)
}

func joinPath(path string, key []string) string {
	k := strings.Join(key, ".")
	if path == "" {
		return k
	}
	return path + "." + k
}

// key scans a dotted key of bare and quoted parts.
func (l *locator) key() ([]string, bool) {
	var parts []string
	for {
		l.skipSpace(false)
		part, ok := l.keyPart()
		if !ok {
			return nil, false
		}
		parts = append(parts, part)
		l.skipSpace(false)
		if l.peek() != '.' {
			return parts, true
		}
		l.pos++
	}
}

func (l *locator) keyPart() (string, bool) {
	switch l.peek() {
	case '"':
		return l.basicString()
	case '\'':
		return l.literalString()
	}
	start := l.pos
	for !l.eof() && !strings.ContainsRune(" \t\r\n=.#[]{},\"'", rune(l.src[l.pos])) {
		l.pos++
	}
	return l.src[start:l.pos], l.pos > start
}

// basicString scans "..." with escapes and returns its raw content.
func (l *locator) basicString() (string, bool) {
	l.pos++ // opening quote
	start := l.pos
	for !l.eof() {
		switch l.src[l.pos] {
		case '\\':
			l.pos += 2
		case '"':
			s := l.src[start:l.pos]
			l.pos++
			return unquote(s), true
		case '\n':
			return "", false
		default:
			l.pos++
		}
	}
	return "", false
}

// unquote decodes the escapes of a basic string's content, or returns it
// as is when they do not decode.
func unquote(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	if u, err := strconv.Unquote(`"` + s + `"`); err == nil {
		return u
	}
	return s
}

func (l *locator) literalString() (string, bool) {
	l.pos++
	i := strings.IndexAny(l.src[l.pos:], "'\n")
	if i < 0 || l.src[l.pos+i] != '\'' {
		return "", false
	}
	s := l.src[l.pos : l.pos+i]
	l.pos += i + 1
	return s, true
}

// multiline scans a multi-line basic or literal string that ends with delim.
func (l *locator) multiline(delim string) bool {
	l.pos += 3
	for !l.eof() {
		if delim == `"""` && l.src[l.pos] == '\\' {
			l.pos += 2
			continue
		}
		if strings.HasPrefix(l.src[l.pos:], delim) {
			l.pos += 3
			for n := 0; n < 2 && l.peek() == delim[0]; n++ { // up to two quotes may end the content
				l.pos++
			}
			return true
		}
		l.pos++
	}
	return false
}

// value scans one value of the key names/path, recording the keys of
// inline tables.
func (l *locator) value(names []string, path string) bool {
	switch {
	case strings.HasPrefix(l.src[l.pos:], `"""`):
		return l.multiline(`"""`)
	case strings.HasPrefix(l.src[l.pos:], `'''`):
		return l.multiline(`'''`)
	case l.peek() == '"':
		_, ok := l.basicString()
		return ok
	case l.peek() == '\'':
		_, ok := l.literalString()
		return ok
	case l.peek() == '[':
		l.pos++
		for i := 0; ; i++ {
			l.skipSpace(true)
			if l.peek() == ']' {
				l.pos++
				return true
			}
			before := l.pos
			elem := path + "[" + strconv.Itoa(i) + "]"
			if _, ok := l.lines[elem]; !ok {
				l.lines[elem] = l.lineAt(l.pos)
			}
			if !l.value(names, elem) || l.pos == before {
				return false
			}
			l.skipSpace(true)
			switch l.peek() {
			case ',':
				l.pos++
			case ']':
				l.pos++
				return true
			default:
				return false
			}
		}
	case l.peek() == '{':
		l.pos++
		for {
			l.skipSpace(true) // TOML 1.1 allows newlines in inline tables
			if l.peek() == '}' {
				l.pos++
				return true
			}
			before := l.pos
			if !l.keyValue(names, path) || l.pos == before {
				return false
			}
			l.skipSpace(true)
			switch l.peek() {
			case ',':
				l.pos++
			case '}':
				l.pos++
				return true
			default:
				return false
			}
		}
	}
	// A number, boolean or date: up to a delimiter (dates may hold a space).
	start := l.pos
	for !l.eof() && !strings.ContainsRune(",]}#\n", rune(l.src[l.pos])) {
		l.pos++
	}
	return l.pos > start
}
