package portable

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
)

// SplitAddrs splits a comma-separated list of host:port addresses,
// checking each.
func SplitAddrs(list string) ([]string, error) {
	if strings.TrimSpace(list) == "" {
		return nil, errors.New("empty address")
	}
	var out []string
	for _, a := range strings.Split(list, ",") {
		a = strings.TrimSpace(a)
		_, port, err := net.SplitHostPort(a)
		if err != nil {
			return nil, fmt.Errorf("address %q of %q is not host:port", a, list)
		}
		// A port out of range or unknown would fail every dial, alike
		// an outage: refuse it here.
		if n, err := strconv.ParseUint(port, 10, 64); err == nil {
			if n < 1 || n > 65535 {
				return nil, fmt.Errorf("address %q: port %s is out of range (1-65535)", a, port)
			}
		} else if _, err := net.LookupPort("tcp", port); err != nil {
			return nil, fmt.Errorf("address %q: port %q is not a number", a, port)
		}
		out = append(out, a)
	}
	return out, nil
}
