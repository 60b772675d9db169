package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/delayq/delayq"
	"github.com/delayq/delayq/internal/cluster"
	"github.com/delayq/delayq/internal/keys"
	"github.com/delayq/delayq/internal/portable"
	"github.com/delayq/delayq/partition"
)

// clusterReport is the outcome of doctor --cluster; --json prints it.
type clusterReport struct {
	// Masters has a report per master, in the order of their first slot:
	// its checks, its and its replicas' settings (Backends), and what
	// the cluster says of it (Cluster).
	Masters   []*doctorReport `json:"masters"`
	Replicas  int             `json:"replicas"`
	Slots     int             `json:"slots"` // served by a master, of 16384
	Namespace string          `json:"namespace"`
	Topics    []topicSpread   `json:"topics"`
	Warnings  []string        `json:"warnings"` // about the whole cluster
	Hints     []string        `json:"hints"`    // the clocks'
	Passed    int             `json:"passed"`
	Failed    int             `json:"failed"`
}

// masterReport is what doctor --cluster read about one master:
// doctorReport.Cluster.
type masterReport struct {
	Slots int `json:"slots"`
	// Replicas are those CLUSTER SLOTS lists, or those the master's INFO
	// names when it names more; their settings are among the report's
	// backends.
	Replicas []string `json:"replicas"`
	// FullCoverage is its cluster-require-full-coverage; nil when it
	// could not be read.
	FullCoverage *bool    `json:"require_full_coverage,omitempty"`
	Warnings     []string `json:"warnings"`
}

// topicSpread is how the partitions of a topic spread over the masters:
// each partition sits on the slot of its hash tag {topic:p}.
type topicSpread struct {
	Topic      string         `json:"topic"`
	Partitions int            `json:"partitions"`
	Masters    map[string]int `json:"masters"`            // master -> partitions it serves
	Unserved   int            `json:"unserved,omitempty"` // partitions on a slot no master serves
	Warnings   []string       `json:"warnings"`
}

// clusterCheck is what doctor --cluster is asked: the client options of
// its flags, the seeds they list, the options of each node's dial, the
// samples of each timing, and whether to print JSON.
type clusterCheck struct {
	o       delayq.Options
	seeds   []string
	dial    portable.DialOptions
	samples int
	asJSON  bool
}

// doctorCluster implements doctor --cluster: the checks on each master of
// the cluster that k.seeds lead to, the settings of every node, the
// partitions of the namespace per master, the clocks. It fails when a
// check failed, or when no seed gave the slot map.
func doctorCluster(ctx context.Context, w io.Writer, k clusterCheck) error {
	o, seeds, opts, samples, asJSON := k.o, k.seeds, k.dial, k.samples, k.asJSON
	copts := opts
	copts.Cluster = true
	r, err := cluster.New(cluster.Options{
		Seeds: seeds,
		Dial: func(ctx context.Context, addr string) (*portable.Conn, error) {
			return portable.Dial(ctx, addr, copts)
		},
	})
	if err != nil {
		return fmt.Errorf("doctor: %w", err)
	}
	shards, err := r.Shards(ctx)
	if err != nil {
		return fmt.Errorf("doctor: %w", err)
	}
	if len(shards) == 0 {
		return fmt.Errorf("doctor: no master of the cluster of %s serves a slot (CLUSTER SLOTS is empty): was the cluster created?", strings.Join(seeds, ", "))
	}
	rep := &clusterReport{Namespace: o.Namespace, Topics: []topicSpread{}, Warnings: []string{}, Hints: []string{}}
	var masters, failed []string
	for _, sh := range shards {
		mr := checkMaster(ctx, r, sh, o.Namespace, opts, samples)
		rep.Masters = append(rep.Masters, mr)
		masters = append(masters, sh.Master)
		rep.Replicas += len(mr.Cluster.Replicas)
		rep.Slots += sh.Slots
		rep.Passed += mr.Passed
		rep.Failed += mr.Failed
		if mr.Failed > 0 {
			failed = append(failed, sh.Master)
		}
	}
	if n := cluster.Slots - rep.Slots; n > 0 {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("%d of the %d slots have no master: the partitions on them stop until one serves them "+
			"(and with cluster-require-full-coverage yes, every node refuses every command meanwhile)", n, cluster.Slots))
	}
	o.PoolSize = 1 // per master
	if c, err := delayq.New(o); err != nil {
		rep.Warnings = append(rep.Warnings, fmt.Sprintf("partitions: could not read the topics: %v", err))
	} else {
		rep.Topics, err = spreadTopics(ctx, c.Inspector(), r, o.Namespace, masters)
		if err != nil {
			rep.Warnings = append(rep.Warnings, fmt.Sprintf("partitions: could not read the topics: %v", err))
		}
		hints, err := clockHints(ctx, c.Inspector(), time.Now())
		if err != nil {
			hints = append(hints, fmt.Sprintf("clock: could not read the topics' clocks: %v", err))
		}
		rep.Hints = append(rep.Hints, hints...)
		c.Close()
	}
	if err := writeClusterReport(w, rep, asJSON); err != nil {
		return err
	}
	if rep.Failed > 0 {
		return fmt.Errorf("doctor: %d of %d checks failed on %s", rep.Failed, rep.Passed+rep.Failed, strings.Join(failed, ", "))
	}
	return nil
}

// checkMaster runs the checks on the master of sh, with scratch keys on a
// slot it serves, straight on a connection to it (as on a proxy: it
// serves them itself), then reads its settings and its replicas'.
func checkMaster(ctx context.Context, r *cluster.Router, sh cluster.Shard, namespace string, opts portable.DialOptions, samples int) *doctorReport {
	var rep *doctorReport
	if nonce, err := nonceOn(ctx, r, namespace, sh.Master); err != nil {
		rep = &doctorReport{Addr: sh.Master, Hints: []string{}}
		rep.add(checkResult{Name: "scratch keys", Error: err.Error()})
	} else {
		rep, _ = checkAddr(ctx, sh.Master, namespace, nonce, opts, samples)
	}
	m := &masterReport{Slots: sh.Slots, Replicas: slices.Clone(sh.Replicas), Warnings: []string{}}
	rep.Cluster = m
	// CLUSTER SLOTS may not list a replica yet (cluster.Router.Shards):
	// the master's INFO names those connected to it, by the address the
	// master sees, which may not be the one the cluster announces; so
	// only when it names more of them.
	if bi, ok := rep.addBackend(ctx, sh.Master, opts.Password); ok && len(bi.Replicas) > len(m.Replicas) {
		for _, a := range bi.Replicas {
			if !slices.Contains(m.Replicas, a) {
				m.Replicas = append(m.Replicas, a)
			}
		}
	}
	for _, a := range m.Replicas {
		rep.addBackend(ctx, a, opts.Password)
	}
	if len(m.Replicas) == 0 {
		m.Warnings = append(m.Warnings, fmt.Sprintf("master %s has no replica: when it fails, its slots stop until it comes back, "+
			"and with appendonly off its messages are lost", sh.Master))
	}
	full, err := portable.ClusterFullCoverage(ctx, sh.Master, opts.Password)
	switch {
	case err != nil:
		m.Warnings = append(m.Warnings, fmt.Sprintf("master %s: could not read cluster-require-full-coverage (%v): make sure it is no, "+
			"so that a failover stops only the partitions of the failed master", sh.Master, err))
	case full:
		m.FullCoverage = &full
		m.Warnings = append(m.Warnings, fmt.Sprintf("master %s: cluster-require-full-coverage is yes: while any slot has no master (a failover), "+
			"every node refuses every command (CLUSTERDOWN) and every topic stops; set it to no so that the partitions on the other masters go on", sh.Master))
	default:
		m.FullCoverage = &full
	}
	return rep
}

// nonceTries bounds the random nonces tried for a slot of a master: one
// that serves s slots takes 16384/s tries on average.
const nonceTries = 1 << 20

// nonceOn returns a nonce whose scratch keys sit on a slot master serves,
// as far as r's map says.
func nonceOn(ctx context.Context, r *cluster.Router, namespace, master string) (string, error) {
	for range nonceTries {
		nonce := newNonce()
		if owner, err := r.Addr(ctx, cluster.Slot(scratchPrefix(namespace, nonce))); err == nil && owner == master {
			return nonce, nil
		}
		if ctx.Err() != nil {
			return "", ctx.Err()
		}
	}
	return "", fmt.Errorf("no scratch key found on a slot of %s in %d tries", master, nonceTries)
}

// spreadTopics counts, for each topic of the namespace, how many of its
// partitions each master serves (the slot of the partition's keys), and
// warns when they spread unevenly.
func spreadTopics(ctx context.Context, ins *delayq.Inspector, r *cluster.Router, namespace string, masters []string) ([]topicSpread, error) {
	out := []topicSpread{}
	topics, err := ins.Topics(ctx)
	if err != nil {
		return out, err
	}
	for _, t := range topics {
		topic, n := t.Name, max(t.Partitions, t.Next) // every partition that may hold messages
		ts := topicSpread{Topic: topic, Partitions: n, Masters: map[string]int{}}
		for _, m := range masters {
			ts.Masters[m] = 0
		}
		for p := range n {
			owner, err := r.Addr(ctx, cluster.Slot(keys.Scheduled(namespace, topic, p)))
			if _, ok := ts.Masters[owner]; err != nil || !ok {
				ts.Unserved++
				continue
			}
			ts.Masters[owner]++
		}
		ts.Warnings = spreadWarnings(ts, masters)
		out = append(out, ts)
	}
	return out, nil
}

// spreadWarnings warns when the partitions of a topic sit on slots no
// master serves, when a master serves none of them while the topic has
// at least one per master, or when the most loaded master serves more
// than twice as many as the least loaded.
func spreadWarnings(ts topicSpread, masters []string) []string {
	ws := []string{}
	if ts.Unserved > 0 {
		ws = append(ws, fmt.Sprintf("topic %s: %d of its %d partitions are on slots no master serves: they stop until one does",
			ts.Topic, ts.Unserved, ts.Partitions))
	}
	if len(masters) == 0 || ts.Partitions < len(masters) {
		return ws
	}
	fix := "more partitions spread more evenly: delayq partitions --set"
	if 2*ts.Partitions <= partition.MaxPartitions {
		fix = fmt.Sprintf("more partitions spread more evenly: delayq partitions --topic %s --set %d", ts.Topic, 2*ts.Partitions)
	}
	var none []string
	least, most := masters[0], masters[0]
	for _, m := range masters {
		if ts.Masters[m] == 0 {
			none = append(none, m)
		}
		if ts.Masters[m] < ts.Masters[least] {
			least = m
		}
		if ts.Masters[m] > ts.Masters[most] {
			most = m
		}
	}
	switch {
	case len(none) > 0:
		who := "master " + none[0] + " serves"
		if len(none) > 1 {
			who = "masters " + strings.Join(none, ", ") + " serve"
		}
		ws = append(ws, fmt.Sprintf("topic %s: %s none of its %d partitions, though it has at least one per master: its load skips %s; %s",
			ts.Topic, who, ts.Partitions, plural(len(none), "that master", "those masters"), fix))
	case ts.Masters[most] > 2*ts.Masters[least]:
		ws = append(ws, fmt.Sprintf("topic %s: master %s serves %d of its %d partitions, more than twice the %d of master %s; %s",
			ts.Topic, most, ts.Masters[most], ts.Partitions, ts.Masters[least], least, fix))
	}
	return ws
}

// writeClusterReport prints the report as JSON, or as text: each
// master's report, then the cluster's: the partitions of each topic per
// master, the warnings, the clocks' hints and the summary.
func writeClusterReport(w io.Writer, rep *clusterReport, asJSON bool) error {
	if asJSON {
		return writeJSON(w, rep)
	}
	for _, mr := range rep.Masters {
		if err := writeDoctorText(w, mr); err != nil {
			return err
		}
		fmt.Fprintln(w)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "cluster: %s, %s, %d of %d slots served\n",
		counted(len(rep.Masters), "master"), counted(rep.Replicas, "replica"), rep.Slots, cluster.Slots)
	if len(rep.Topics) == 0 {
		fmt.Fprintf(&b, "no topic in namespace %s: no partition to spread yet\n", rep.Namespace)
	}
	for _, ts := range rep.Topics {
		parts := make([]string, 0, len(rep.Masters)+1)
		for _, mr := range rep.Masters {
			parts = append(parts, fmt.Sprintf("%s %d", mr.Addr, ts.Masters[mr.Addr]))
		}
		if ts.Unserved > 0 {
			parts = append(parts, fmt.Sprintf("no master %d", ts.Unserved))
		}
		fmt.Fprintf(&b, "topic %s: %s per master: %s\n", ts.Topic, counted(ts.Partitions, "partition"), strings.Join(parts, ", "))
		for _, x := range ts.Warnings {
			fmt.Fprintf(&b, "warn %s\n", x)
		}
	}
	for _, x := range rep.Warnings {
		fmt.Fprintf(&b, "warn %s\n", x)
	}
	for _, h := range rep.Hints {
		fmt.Fprintf(&b, "hint %s\n", h)
	}
	n := rep.Passed + rep.Failed
	if rep.Failed == 0 {
		fmt.Fprintf(&b, "all %d checks passed on %s\n", n, counted(len(rep.Masters), "master"))
	} else {
		fmt.Fprintf(&b, "%d of %d checks failed: delayq will not work on this cluster\n", rep.Failed, n)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeMasterText prints what doctor --cluster read about master addr:
// its slots, replicas and cluster-require-full-coverage, and the
// warnings.
func writeMasterText(b *strings.Builder, addr string, m *masterReport) {
	replicas := "no replica"
	if len(m.Replicas) > 0 {
		replicas = plural(len(m.Replicas), "replica ", "replicas ") + strings.Join(m.Replicas, ", ")
	}
	full := "?"
	if m.FullCoverage != nil {
		full = map[bool]string{true: "yes", false: "no"}[*m.FullCoverage]
	}
	fmt.Fprintf(b, "master %s: %s, %s, cluster-require-full-coverage %s\n", addr, counted(m.Slots, "slot"), replicas, full)
	for _, w := range m.Warnings {
		fmt.Fprintf(b, "warn %s\n", w)
	}
}
