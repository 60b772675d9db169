package main

import "fmt"

// hints returns what the report suggests about the deployment.
func (d *doctor) hints(rep *doctorReport) []string {
	var hs []string
	if p, g := rep.RTT.Ping, rep.RTT.Get; p != nil && g != nil {
		if g.MedianMS >= 1.5*p.MedianMS && g.MedianMS-p.MedianMS >= 0.02 {
			hs = append(hs, fmt.Sprintf("PING answers faster than GET (median %.3fms vs %.3fms): a proxy that answers PING itself "+
				"(Twemproxy or Codis) is probably in front. With Twemproxy, set auto_eject_hosts: false.", p.MedianMS, g.MedianMS))
		} else {
			hs = append(hs, fmt.Sprintf("PING and GET take about as long (median %.3fms vs %.3fms): probably Redis itself, "+
				"or a proxy that forwards PING.", p.MedianMS, g.MedianMS))
		}
		if g.MedianMS > 2 {
			hs = append(hs, fmt.Sprintf("GET takes %.2fms at the median: every poll and claim pays that; run workers close to Redis.", g.MedianMS))
		}
	}
	if c := rep.find("EVAL"); c != nil {
		if sha := rep.find("EVALSHA"); c.OK && sha != nil && sha.OK {
			hs = append(hs, "EVAL and EVALSHA work: one-key scripts are allowed.")
		} else {
			hs = append(hs, "scripts do not work here: delayq needs one-key EVAL and EVALSHA.")
		}
	}
	if c := rep.find("EVAL struct"); c != nil && !c.OK {
		hs = append(hs, "scripts cannot use Lua's struct library: delayq's scripts read segments with it.")
	}
	if c := rep.find("EVALSHA NOSCRIPT"); c != nil {
		if c.OK {
			hs = append(hs, "an unknown EVALSHA answers NOSCRIPT on a live connection: the EVALSHA-then-EVAL fallback works.")
		} else {
			hs = append(hs, "an unknown EVALSHA does not answer NOSCRIPT on a live connection: delayq cannot load its scripts.")
		}
	}
	if d.lost {
		hs = append(hs, "the server closed the connection after a command, as Twemproxy does with a command shape it does not know.")
	}
	if d.opts.Password != "" {
		hs = append(hs, "AUTH was accepted.")
	}
	return hs
}
