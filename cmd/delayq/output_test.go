//go:build linux || darwin

package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/delayq/delayq/internal/testenv"
)

// outExport is the export every test of --out makes: a topic of three
// messages on a server of the test's own.
const outExport = `{"id":"a","body":"x","delay_ms":60000}` + "\n" +
	`{"id":"b","body":"y","delay_ms":60000}` + "\n" +
	`{"id":"c","body_base64":"/w==","delay_ms":60000}` + "\n"

// startOut starts a server holding topic "out" (outExport's messages) and
// returns its address.
func startOut(t *testing.T) string {
	t.Helper()
	addr := testenv.Start(t, testenv.Options{Backends: 1, NoProxy: true}).Backends[0]
	var errb bytes.Buffer
	if err := run(context.Background(), []string{"send", "--addr", addr, "--topic", "out", "--stdin"}, strings.NewReader(outExport), io.Discard, &errb); err != nil {
		t.Fatalf("send: %v\n%s", err, errb.String())
	}
	return addr
}

// exportOut runs "delayq export --topic out --out path" against addr with
// the extra flags, and returns its stderr and error.
func exportOut(ctx context.Context, addr, path string, extra ...string) (string, error) {
	var out, errb bytes.Buffer
	args := append([]string{"export", "--addr", addr, "--topic", "out", "--out", path}, extra...)
	err := run(ctx, args, strings.NewReader(""), &out, &errb)
	if err == nil && out.Len() > 0 {
		err = errors.New("export with --out wrote to stdout: " + out.String())
	}
	return errb.String(), err
}

// mustExport runs exportOut and fails t on its error.
func mustExport(t *testing.T, addr, path string) {
	t.Helper()
	if stderr, err := exportOut(context.Background(), addr, path); err != nil || !strings.Contains(stderr, "exported 3 messages of out") {
		t.Fatalf("export --out %s: %v\n%s", path, err, stderr)
	}
}

// wantExported fails t unless data is the export of topic "out".
func wantExported(t *testing.T, what string, data []byte) {
	t.Helper()
	s := string(data)
	if strings.Count(s, "\n") != 3 || !strings.Contains(s, `"id":"a"`) || !strings.Contains(s, `"id":"b"`) || !strings.Contains(s, `"body_base64":"/w=="`) {
		t.Errorf("%s holds %q, want the 3 messages of the export", what, s)
	}
}

// noTemps fails t if a temporary file of an export to one of paths
// (".NAME.NNNN" next to it) is left.
func noTemps(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		left, err := filepath.Glob(filepath.Join(filepath.Dir(p), "."+filepath.Base(p)+".*"))
		if err != nil {
			t.Fatal(err)
		}
		if len(left) > 0 {
			t.Errorf("temporary files of %s left: %q", p, left)
		}
	}
}

// mode returns the permission bits of the file at path (not following a
// link).
func mode(t *testing.T, path string) fs.FileMode {
	t.Helper()
	fi, err := os.Lstat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode()
}

// TestExportOutReplaceKeepsMode: a regular file at --out is replaced by
// the export with the permissions it had.
func TestExportOutReplaceKeepsMode(t *testing.T) {
	t.Parallel()
	addr := startOut(t)
	dir := t.TempDir()
	file := filepath.Join(dir, "out.jsonl")
	if err := os.WriteFile(file, []byte("old\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, 0o640); err != nil {
		t.Fatal(err)
	}
	mustExport(t, addr, file)
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	wantExported(t, file, data)
	if m := mode(t, file); m != 0o640 {
		t.Errorf("replaced file has mode %v, want -rw-r----- as before", m)
	}
	noTemps(t, file)
}

// TestExportOutNewFileUmask: a new file at --out gets the mode the umask
// gives a new file. Not parallel: it sets the process's umask.
func TestExportOutNewFileUmask(t *testing.T) {
	addr := startOut(t)
	dir := t.TempDir()
	for _, tt := range []struct {
		umask int
		want  fs.FileMode
	}{{0o027, 0o640}, {0o002, 0o664}} {
		old := syscall.Umask(tt.umask)
		file := filepath.Join(dir, "new.jsonl")
		os.Remove(file)
		_, err := exportOut(context.Background(), addr, file)
		syscall.Umask(old)
		if err != nil {
			t.Fatal(err)
		}
		if m := mode(t, file); m != tt.want {
			t.Errorf("with umask %03o the new file has mode %v, want %v", tt.umask, m, tt.want)
		}
		noTemps(t, file)
	}
}

// TestExportOutSymlink: a link at --out is followed: the file it leads to
// gets the export (created if the link dangles), and the link stays.
func TestExportOutSymlink(t *testing.T) {
	t.Parallel()
	addr := startOut(t)
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	if err := os.Mkdir(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	target := filepath.Join(sub, "target.jsonl")
	if err := os.WriteFile(target, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ link, dest, target string }{
		{"link.jsonl", "sub/target.jsonl", target},                           // relative, to a file
		{"dangling.jsonl", "sub/new.jsonl", filepath.Join(sub, "new.jsonl")}, // to no file yet
		{"abs.jsonl", filepath.Join(dir, "link.jsonl"), target},              // absolute, to a link
	} {
		link := filepath.Join(dir, tt.link)
		if err := os.Symlink(tt.dest, link); err != nil {
			t.Fatal(err)
		}
		os.WriteFile(target, []byte("old\n"), 0o644)
		mustExport(t, addr, link)
		if m := mode(t, link); m&fs.ModeSymlink == 0 {
			t.Errorf("%s is no longer a link: mode %v", tt.link, m)
		} else if dest, err := os.Readlink(link); err != nil || dest != tt.dest {
			t.Errorf("%s now leads to %q (%v), want %q", tt.link, dest, err, tt.dest)
		}
		data, err := os.ReadFile(tt.target)
		if err != nil {
			t.Fatalf("%s -> %s: %v", tt.link, tt.dest, err)
		}
		wantExported(t, tt.target+" (through "+tt.link+")", data)
		noTemps(t, link, tt.target)
	}
	if m := mode(t, target); m != 0o644 {
		t.Errorf("the file behind the link has mode %v, want -rw-r--r-- as before", m)
	}
}

// TestExportOutFIFO: a fifo at --out is written to (its reader gets the
// export) and stays a fifo.
func TestExportOutFIFO(t *testing.T) {
	t.Parallel()
	addr := startOut(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "pipe")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// A second name for the fifo, to end its reader if the export took
	// the first away.
	keep := filepath.Join(dir, "keep")
	if err := os.Link(fifo, keep); err != nil {
		t.Fatal(err)
	}
	read := make(chan []byte)
	go func() {
		var data []byte
		if f, err := os.Open(fifo); err == nil { // waits for the writer
			data, _ = io.ReadAll(f)
			f.Close()
		}
		read <- data
	}()
	_, err := exportOut(context.Background(), addr, fifo)
	if m := mode(t, fifo); m&fs.ModeNamedPipe == 0 {
		t.Errorf("the fifo was replaced: mode %v", m)
		if w, err := os.OpenFile(keep, os.O_WRONLY|syscall.O_NONBLOCK, 0); err == nil {
			w.Close() // the reader sees the end
		}
	}
	data := <-read
	if err != nil {
		t.Fatal(err)
	}
	wantExported(t, "what the fifo's reader read", data)
	noTemps(t, fifo)
}

// devices returns paths of /dev/null and /dev/full for the test to write
// to: as root, nodes of the same devices in a directory of its own (an
// export that replaces what it writes to must not take the system's
// away), else the system's (which a user cannot replace).
func devices(t *testing.T) (null, full string) {
	t.Helper()
	if os.Geteuid() != 0 {
		return "/dev/null", "/dev/full"
	}
	dir := t.TempDir()
	null, full = filepath.Join(dir, "null"), filepath.Join(dir, "full")
	for _, d := range []struct {
		path         string
		major, minor int
	}{{null, 1, 3}, {full, 1, 7}} {
		var st syscall.Stat_t
		if err := syscall.Stat("/dev/"+filepath.Base(d.path), &st); err != nil {
			t.Fatal(err)
		}
		if err := syscall.Mknod(d.path, syscall.S_IFCHR|0o666, int(st.Rdev)); err != nil {
			t.Fatal(err)
		}
	}
	return null, full
}

// TestExportOutDevice: a device at --out is written to and stays a
// device; a write that fails (a full device) fails the export with an
// error naming it.
func TestExportOutDevice(t *testing.T) {
	t.Parallel()
	addr := startOut(t)
	null, full := devices(t)
	mustExport(t, addr, null)
	if m := mode(t, null); m&fs.ModeCharDevice == 0 {
		t.Errorf("%s is no longer a character device: mode %v", null, m)
	}
	stderr, err := exportOut(context.Background(), addr, full)
	if err == nil || !strings.Contains(err.Error(), "export to "+full+": ") || !errors.Is(err, syscall.ENOSPC) {
		t.Errorf("export to %s: %v, want an error naming it: no space left\n%s", full, err, stderr)
	}
	if strings.Contains(stderr, "exported 3") {
		t.Errorf("a failed export printed its summary:\n%s", stderr)
	}
	if m := mode(t, full); m&fs.ModeCharDevice == 0 {
		t.Errorf("%s is no longer a character device: mode %v", full, m)
	}
	noTemps(t, null, full)
}

// TestExportOutDirectory: a directory at --out, or a link to one, is
// refused with an error naming it, before anything is read (even with no
// server to read from), and nothing is left in it or next to it.
func TestExportOutDirectory(t *testing.T) {
	t.Parallel()
	addr := startOut(t)
	parent := t.TempDir()
	dir := filepath.Join(parent, "dir")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	link := filepath.Join(parent, "link")
	if err := os.Symlink("dir", link); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct{ path, addr, want string }{
		{dir, addr, "export to " + dir + ": is a directory"},
		{link, addr, "export to " + link + " (a link to " + dir + "): is a directory"},
		{dir, "127.0.0.1:1", "export to " + dir + ": is a directory"}, // nothing listens: not connected to
	} {
		stderr, err := exportOut(context.Background(), tt.addr, tt.path)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("export to %s (server %s): %v, want %q", tt.path, tt.addr, err, tt.want)
		}
		if strings.Contains(stderr, "exported") {
			t.Errorf("export to %s exported:\n%s", tt.path, stderr)
		}
	}
	if m := mode(t, link); m&fs.ModeSymlink == 0 {
		t.Errorf("the link to the directory is no longer a link: mode %v", m)
	}
	if left, err := os.ReadDir(dir); err != nil || len(left) > 0 {
		t.Errorf("the directory holds %v (%v), want nothing", left, err)
	}
	noTemps(t, dir, link)
}

// TestExportOutFailureLeavesNoTemp: an export that fails, whatever the
// failure (the topic, a cancel, the final rename), leaves no temporary
// file, and what was at --out stays as it was.
func TestExportOutFailureLeavesNoTemp(t *testing.T) {
	t.Parallel()
	addr := startOut(t)
	// started runs the export to path slowly (--rate 1: three seconds at
	// least for the three messages), calls during once its temporary
	// file exists, and returns its error.
	started := func(t *testing.T, ctx context.Context, dir, path string, during func()) error {
		t.Helper()
		done := make(chan error, 1)
		go func() {
			_, err := exportOut(ctx, addr, path, "--rate", "1")
			done <- err
		}()
		if !testenv.Poll(20*time.Second, func() bool {
			left, _ := filepath.Glob(filepath.Join(dir, "."+filepath.Base(path)+".*"))
			return len(left) > 0
		}) {
			t.Errorf("no temporary file for %s appeared", path)
		}
		during()
		return <-done
	}
	t.Run("topic", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		file := filepath.Join(dir, "out.jsonl")
		if err := os.WriteFile(file, []byte("old\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		var errb bytes.Buffer
		err := run(context.Background(), []string{"export", "--addr", addr, "--topic", "never-used", "--out", file}, strings.NewReader(""), io.Discard, &errb)
		if err == nil || !strings.Contains(err.Error(), "never-used") {
			t.Errorf("export of a topic never used: %v, want an error naming it", err)
		}
		if data, err := os.ReadFile(file); err != nil || string(data) != "old\n" {
			t.Errorf("%s holds %q (%v), want what it held", file, data, err)
		}
		noTemps(t, file)
	})
	t.Run("cancel", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		file := filepath.Join(dir, "out.jsonl")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		err := started(t, ctx, dir, file, cancel)
		if !errors.Is(err, context.Canceled) {
			t.Errorf("cancelled export: %v, want context.Canceled", err)
		}
		if _, err := os.Lstat(file); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("a cancelled export left %s: %v", file, err)
		}
		noTemps(t, file)
	})
	t.Run("rename", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		file := filepath.Join(dir, "out.jsonl")
		// A directory takes the place during the export: the rename at
		// its end fails.
		err := started(t, context.Background(), dir, file, func() {
			if err := os.Mkdir(file, 0o755); err != nil {
				t.Error(err)
			}
		})
		if err == nil || !strings.Contains(err.Error(), "export to "+file+": ") {
			t.Errorf("export whose rename fails: %v, want an error naming %s", err, file)
		}
		noTemps(t, file)
	})
}
