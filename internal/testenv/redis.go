package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// backend is one redis-server with its own directory under Env.Dir.
type backend struct {
	idx        int
	dir        string
	confPath   string
	logPath    string
	outPath    string
	port       int
	appendOnly bool
	password   string // requirepass, when set
	p          *proc
}

func newBackend(root string, i int, appendOnly bool) (*backend, error) {
	dir := filepath.Join(root, "backend"+strconv.Itoa(i))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	return &backend{
		idx:        i,
		dir:        dir,
		confPath:   filepath.Join(dir, "redis.conf"),
		logPath:    filepath.Join(dir, "redis.log"),
		outPath:    filepath.Join(dir, "stdout.log"),
		appendOnly: appendOnly,
	}, nil
}

func (b *backend) addr() string { return "127.0.0.1:" + strconv.Itoa(b.port) }

func (b *backend) name() string { return fmt.Sprintf("redis-server backend %d", b.idx) }

// config renders redis.conf. Paths are quoted: Env.Dir may contain spaces.
func (b *backend) config() string {
	yesNo := "no"
	if b.appendOnly {
		yesNo = "yes"
	}
	lines := []string{
		"port " + strconv.Itoa(b.port),
		"bind 127.0.0.1",
		`save ""`,
		"appendonly " + yesNo,
		"appendfsync always",
		"dir " + strconv.Quote(b.dir),
		"logfile " + strconv.Quote(b.logPath),
		"daemonize no",
		"protected-mode no",
	}
	if b.password != "" {
		lines = append(lines, "requirepass "+strconv.Quote(b.password))
	}
	return strings.Join(lines, "\n") + "\n"
}

// startFresh picks a new port and starts the server, retrying on new ports
// when it dies before being ready (another process took the port).
func (b *backend) startFresh() error {
	var err error
	for try := 0; try < startTries; try++ {
		if b.port, err = freePort(); err != nil {
			return err
		}
		if err = os.WriteFile(b.confPath, []byte(b.config()), 0o644); err != nil {
			return err
		}
		err = b.launch()
		if err == nil || !b.p.exited() {
			return err
		}
	}
	return err
}

// startSame starts the server again on its port, with its directory (and
// so its append-only file).
func (b *backend) startSame() error {
	if b.p != nil && !b.p.exited() {
		return fmt.Errorf("%s is already running", b.name())
	}
	return b.launch()
}

// launch starts the process and waits until PING answers +PONG; on failure
// the process is killed and the error carries the log tail.
func (b *backend) launch() error {
	bin, err := lookBin("redis-server")
	if err != nil {
		return fmt.Errorf("%s", missingMsg("redis-server"))
	}
	p, err := startProc(b.name(), b.dir, b.outPath, bin, b.confPath)
	if err != nil {
		return err
	}
	b.p = p
	if err := waitReady(p, b.addr(), readyTimeout); err != nil {
		p.kill()
		return fmt.Errorf("%v%s", err, logTail(20, b.logPath, b.outPath))
	}
	return nil
}

func (b *backend) kill() {
	if b.p != nil {
		b.p.kill()
	}
}
