// Package policy declares what a sandboxed command may do: which host paths
// it reads and writes, which are denied, whether it has network, where it
// starts, how long it runs, which limits and priority apply, and its exact
// environment. A [Policy] is built in code (start from [Default]), from
// command-line flags or from a strict YAML file ([Load]), and composes:
// [Policy.Extend] widens a narrower policy.
//
// A policy only declares; package sandbox/isolated enforces it, and
// package sandbox/container maps it onto a container. [Policy.Normalize]
// checks a policy and makes its paths absolute; what it refuses matches
// [ErrConfig], one line naming the setting and the fix.
package policy
