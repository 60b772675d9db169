// Package test holds delayq's end-to-end tests. They run the real delayq
// binary (bin/delayq, or the one named by DELAYQ_BIN) as separate
// processes against real redis-server and nutcracker processes started by
// internal/testenv, inject real faults (kill -9, SIGSTOP, proxy and
// backend restarts) and check every scenario against a ledger of the ids
// enqueued and delivered.
package test
