module github.com/delayq/delayq

go 1.26.8

require (
	github.com/go-redsync/redsync/v4 v4.18.0
	github.com/gomodule/redigo v1.9.3
	github.com/spaolacci/murmur3 v1.1.0
)
