package main

import (
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
)

// output is the file "delayq export --out PATH" writes, chosen by what is
// at PATH when the export begins:
//
//   - nothing, or a regular file: a new file next to it (".NAME.NNNN"),
//     renamed over PATH once the export succeeded, so that PATH holds the
//     whole export or what it held before. A new file gets the mode the
//     umask gives (as a shell's "> PATH" would); a replaced one keeps its
//     permissions.
//   - a symbolic link: the same, for the file the link leads to (which may
//     not exist yet); the link stays.
//   - a directory: refused, before the export begins.
//   - anything else (a device, a fifo): written to directly, as a shell
//     writes to it; opening a fifo waits for its reader.
//
// Whatever fails, no temporary file is left. Its errors name PATH. It is
// not safe for concurrent use.
type output struct {
	path   string   // as given
	target string   // path with its links followed: what is replaced or written
	f      *os.File // the temporary file, or target itself when written directly
	temp   bool     // f is a temporary file, to rename over target
	done   bool     // committed or aborted
	werr   error    // the first write error, naming path
}

// maxLinks bounds the links followed from --out, as the kernel's limit does
// (ELOOP past 40).
const maxLinks = 40

// createOutput opens what the export writes for path (see output).
func createOutput(path string) (*output, error) {
	o := &output{path: path}
	target, err := followLinks(path)
	if err != nil {
		return nil, o.fail(err)
	}
	o.target = target
	fi, err := os.Stat(target)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		// A new file: 0666 less the umask, applied by the kernel.
		o.f, err = createTemp(target, 0o666)
		if err != nil {
			return nil, o.fail(err)
		}
		o.temp = true
	case err != nil:
		return nil, o.fail(err)
	case fi.IsDir():
		return nil, o.fail(syscall.EISDIR)
	case fi.Mode().IsRegular():
		mode := fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky)
		o.f, err = createTemp(target, mode.Perm())
		if err == nil {
			if err = o.f.Chmod(mode); err != nil { // the umask may have cut it
				o.f.Close()
				os.Remove(o.f.Name())
			}
		}
		if err != nil {
			return nil, o.fail(err)
		}
		o.temp = true
	default:
		o.f, err = os.OpenFile(target, os.O_WRONLY, 0)
		if err != nil {
			return nil, o.fail(err)
		}
	}
	return o, nil
}

// fail returns err as an error of the export to o.path, naming the file a
// link led to when it is not path itself.
func (o *output) fail(err error) error {
	var pe *fs.PathError
	var le *os.LinkError
	switch {
	case errors.As(err, &pe):
		err = pe.Err
	case errors.As(err, &le):
		err = le.Err
	}
	if errors.Is(err, syscall.EISDIR) {
		err = fmt.Errorf("%w (--out names the file to write)", err)
	}
	if o.target != "" && o.target != o.path {
		return fmt.Errorf("export to %s (a link to %s): %w", o.path, o.target, err)
	}
	return fmt.Errorf("export to %s: %w", o.path, err)
}

// Write writes p to the file. Its error names the path.
func (o *output) Write(p []byte) (int, error) {
	n, err := o.f.Write(p)
	if err != nil && o.werr == nil {
		o.werr = o.fail(err)
	}
	if err != nil {
		return n, o.werr
	}
	return n, nil
}

// Commit ends a successful export: the temporary file is synced, closed
// and renamed over the target (removed if any of that fails), or the file
// written directly is closed.
func (o *output) Commit() error {
	if o.done {
		return nil
	}
	o.done = true
	if !o.temp {
		if err := o.f.Close(); err != nil {
			return o.fail(err)
		}
		return nil
	}
	err := o.f.Sync()
	if cerr := o.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(o.f.Name(), o.target)
	}
	if err != nil {
		os.Remove(o.f.Name())
		return o.fail(err)
	}
	return nil
}

// Abort ends a failed export: the temporary file is removed (what was at
// the target stays as it was), or the file written directly is closed. It
// does nothing after Commit or Abort.
func (o *output) Abort() {
	if o.done {
		return
	}
	o.done = true
	o.f.Close()
	if o.temp {
		os.Remove(o.f.Name())
	}
}

// followLinks returns path with the symbolic links of its last element
// followed to the file they lead to, which may not exist.
func followLinks(path string) (string, error) {
	for range maxLinks {
		fi, err := os.Lstat(path)
		if errors.Is(err, fs.ErrNotExist) || err == nil && fi.Mode()&fs.ModeSymlink == 0 {
			return path, nil
		}
		if err != nil {
			return "", err
		}
		dest, err := os.Readlink(path)
		if err != nil {
			return "", err
		}
		if !filepath.IsAbs(dest) {
			// Relative to the link's directory as the kernel sees it:
			// ".." after a linked directory is its real parent.
			dir, err := filepath.EvalSymlinks(filepath.Dir(path))
			if err != nil {
				return "", err
			}
			dest = filepath.Join(dir, dest)
		}
		path = dest
	}
	return "", syscall.ELOOP
}

// createTemp creates a new file next to target, named ".NAME.NNNN" after
// target's NAME, with mode perm less the umask (os.CreateTemp's are 0600
// whatever the umask).
func createTemp(target string, perm fs.FileMode) (*os.File, error) {
	dir, base := filepath.Split(target)
	for range 1000 {
		name := filepath.Join(dir, "."+base+"."+strconv.FormatUint(uint64(rand.Uint32()), 10))
		f, err := os.OpenFile(name, os.O_RDWR|os.O_CREATE|os.O_EXCL, perm)
		if !errors.Is(err, fs.ErrExist) {
			return f, err
		}
	}
	return nil, fmt.Errorf("no free temporary name in %s", dir)
}
