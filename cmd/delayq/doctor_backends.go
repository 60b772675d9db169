package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/delayq/delayq/internal/portable"
)

// backendReport is what doctor read straight from one backend.
type backendReport struct {
	Addr            string   `json:"addr"`
	Version         string   `json:"version,omitempty"`
	MaxmemoryPolicy string   `json:"maxmemory_policy,omitempty"`
	AppendOnly      bool     `json:"appendonly"`
	Error           string   `json:"error,omitempty"`
	Warnings        []string `json:"warnings"`
}

// addBackend reads backend addr's settings (a failed check when it cannot)
// and warns, with the fix, about each that puts messages at risk. It
// returns what it read, and false when it could not.
func (rep *doctorReport) addBackend(ctx context.Context, addr, password string) (portable.BackendInfo, bool) {
	br := backendReport{Addr: addr, Warnings: []string{}}
	bi, err := portable.BackendSettings(ctx, addr, password)
	if err != nil {
		br.Error = err.Error()
		rep.add(checkResult{Name: "backend " + addr, Error: err.Error()})
		rep.Backends = append(rep.Backends, br)
		return bi, false
	}
	rep.add(checkResult{Name: "backend " + addr, OK: true})
	br.Version, br.MaxmemoryPolicy, br.AppendOnly = bi.Version, bi.MaxmemoryPolicy, bi.AOF
	br.Warnings = backendWarnings(bi)
	rep.Backends = append(rep.Backends, br)
	return bi, true
}

// backendWarnings says what in bi puts accepted messages at risk, and
// the fix.
func backendWarnings(bi portable.BackendInfo) []string {
	ws := []string{}
	if !versionAtLeast(bi.Version, 3, 2) {
		ws = append(ws, fmt.Sprintf("Redis %s is older than 3.2, the oldest delayq works with (Codis 3.2 backends are 3.2.11): upgrade", bi.Version))
	}
	switch bi.MaxmemoryPolicy {
	case "noeviction":
	case "":
		ws = append(ws, "INFO does not report maxmemory_policy: make sure it is noeviction (eviction deletes messages in silence)")
	default:
		ws = append(ws, fmt.Sprintf("maxmemory-policy is %s: eviction deletes messages in silence; set maxmemory-policy noeviction", bi.MaxmemoryPolicy))
	}
	if !bi.AOF {
		ws = append(ws, "appendonly is off: a restart loses every message written since the last snapshot; "+
			"set appendonly yes (appendfsync everysec loses up to a second of writes on a host crash, always loses none)")
	}
	return ws
}

// versionAtLeast reports whether version v ("3.2.11") is at least
// major.minor; an unreadable version is not.
func versionAtLeast(v string, major, minor int) bool {
	parts := strings.SplitN(v, ".", 3)
	if len(parts) < 2 {
		return false
	}
	ma, err1 := strconv.Atoi(parts[0])
	mi, err2 := strconv.Atoi(parts[1])
	if err1 != nil || err2 != nil {
		return false
	}
	return ma > major || ma == major && mi >= minor
}
