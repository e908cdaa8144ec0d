// Package tierkit holds what the tiers share to implement the
// [sandbox.Sandbox] contract the same way: the command plumbing (pipes, live
// output, bounded capture, stdin feeding), the shell-like program lookup,
// the one Glob walk over an [io/fs.FS], environment lists and the error
// shape of a failed path operation.
//
// It is internal: it is not part of the contract, and it changes whenever
// the tiers need it to. A program that uses hutch needs only package sandbox
// and a tier.
package tierkit
