module github.com/hutchsandbox/hutch

go 1.26.8

require (
	github.com/bmatcuk/doublestar/v4 v4.10.4
	golang.org/x/sys v0.50.0
)
