// Package testenv starts and stops real redis-server and nutcracker
// (Twemproxy) processes for tests, on free loopback ports, in a temporary
// directory. There are no mocks: every suite that uses it talks to the real
// servers, either directly or through the proxy (see Env.Targets).
//
// The proxy is configured the way the design requires a deployment to be:
// one pool, ketama over fnv1a_64, auto_eject_hosts false and, deliberately,
// no hash_tag, so keys of one partition may land on different backends.
//
// Typical use:
//
//	env := testenv.Start(t, testenv.Options{})
//	for _, tg := range env.Targets() {
//		t.Run(tg.Name, func(t *testing.T) { runSuite(t, tg.Addr) })
//	}
//
// Files:
//
//   - testenv.go: Options, Env, Start and StartDaemon; stopping, starting,
//     pausing and restarting proxies and backends; WaitFor and Poll
//   - redis.go: one redis-server backend, in its own directory
//   - proxy.go: one nutcracker process, the problems in its log and its
//     stats
//   - cluster.go: a Redis Cluster (StartCluster): nodes, failovers, slot
//     moves, and Slot, the cluster's hashing of keys
//   - codis.go: a Codis 3.2 deployment (StartCodis): servers, dashboard,
//     proxies, failovers and slot migrations
//   - proc.go: child processes, free ports, and Ping and Do on a
//     connection of their own
//   - sysproc_linux.go: each child in its own process group, killed when
//     its parent dies (Linux)
//   - sysproc_other.go: each child in its own process group (other
//     systems)
//   - topic.go: whether a topic's keys are stored (TopicStored)
package testenv
