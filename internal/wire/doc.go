// Package wire holds the two protocols hutch's host side and the inside
// of a sandbox speak, and the records they carry.
//
//   - A session's host talks to its init over one SOCK_SEQPACKET socket
//     pair ([SocketPair], [Conn]): each message is one JSON record
//     ([Request], [Response]), and file contents and command streams
//     travel through pipes passed along as SCM_RIGHTS.
//   - The container tier's host talks to the helper in the container over
//     a byte stream of frames ([Frame], [FrameReader], [FrameWriter]),
//     with flow control by credit ([Window], [Inbox]).
//
// [Job] is what the host hands a sandbox's init: the policy and the
// command; [Status] is how the command ended. Both sides import this
// package; it imports no part of either.
package wire
