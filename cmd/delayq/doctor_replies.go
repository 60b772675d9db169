package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/gomodule/redigo/redis"
)

// nilValue stands for a nil element in wantStrings.
const nilValue = "\x00nil"

func wantString(want string) func(any, error) error {
	return func(reply any, err error) error {
		got, err := redis.String(reply, err)
		if err != nil {
			return err
		}
		if got != want {
			return fmt.Errorf("got %q, want %q", got, want)
		}
		return nil
	}
}

func wantInt(want int64) func(any, error) error {
	return wantIntIn(want, want)
}

func wantIntIn(lo, hi int64) func(any, error) error {
	return func(reply any, err error) error {
		got, err := redis.Int64(reply, err)
		if err != nil {
			return err
		}
		if got < lo || got > hi {
			if lo == hi {
				return fmt.Errorf("got %d, want %d", got, lo)
			}
			return fmt.Errorf("got %d, want %d to %d", got, lo, hi)
		}
		return nil
	}
}

// anyInt accepts any integer reply.
func anyInt(reply any, err error) error {
	_, err = redis.Int64(reply, err)
	return err
}

func wantNil(reply any, err error) error {
	if err != nil {
		return err
	}
	if reply != nil {
		return fmt.Errorf("got %v, want nil", reply)
	}
	return nil
}

// wantStrings wants an array of bulk strings (nilValue for a nil).
func wantStrings(want ...string) func(any, error) error {
	return func(reply any, err error) error {
		vals, err := redis.Values(reply, err)
		if err != nil {
			return err
		}
		got := make([]string, len(vals))
		for i, v := range vals {
			if v == nil {
				got[i] = nilValue
				continue
			}
			s, err := redis.String(v, nil)
			if err != nil {
				return fmt.Errorf("element %d: %v", i, err)
			}
			got[i] = s
		}
		if !slices.Equal(got, want) {
			return fmt.Errorf("got %q, want %q", got, want)
		}
		return nil
	}
}

// wantScan wants an HSCAN or ZSCAN reply that ends the scan (cursor 0)
// and holds exactly the pairs of want. With COUNT 100 a small hash or
// sorted set comes back whole.
func wantScan(want map[string]string) func(any, error) error {
	return func(reply any, err error) error {
		vals, err := redis.Values(reply, err)
		if err != nil {
			return err
		}
		if len(vals) != 2 {
			return fmt.Errorf("got %d elements, want cursor and items", len(vals))
		}
		cursor, err := redis.String(vals[0], nil)
		if err != nil {
			return fmt.Errorf("cursor: %v", err)
		}
		items, err := redis.StringMap(vals[1], nil)
		if err != nil {
			return fmt.Errorf("items: %v", err)
		}
		if cursor != "0" || len(items) != len(want) {
			return fmt.Errorf("got cursor %s and %v, want cursor 0 and %v", cursor, items, want)
		}
		for k, v := range want {
			if items[k] != v {
				return fmt.Errorf("got %v, want %v", items, want)
			}
		}
		return nil
	}
}

// wantNoScript wants the NOSCRIPT error of an EVALSHA of an unknown
// script (matched by its text, as redigo's own fallback does).
func wantNoScript(reply any, err error) error {
	var rerr redis.Error
	switch {
	case errors.As(err, &rerr) && strings.HasPrefix(string(rerr), "NOSCRIPT"):
		return nil
	case err != nil:
		return fmt.Errorf("got error %q, want NOSCRIPT", err)
	}
	return fmt.Errorf("got %v, want a NOSCRIPT error", reply)
}
