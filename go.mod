module github.com/hutchsandbox/hutch

go 1.26.8

require (
	github.com/bmatcuk/doublestar/v4 v4.10.4
	golang.org/x/sys v0.50.0
)

require (
	github.com/inconshreveable/mousetrap v1.1.0 // indirect
	github.com/spf13/cobra v1.10.2 // indirect
	github.com/spf13/pflag v1.0.10 // indirect
	go.etcd.io/bbolt v1.5.0 // indirect
)
