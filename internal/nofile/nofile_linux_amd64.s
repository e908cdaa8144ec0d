#include "textflag.h"

// func readLimit(lim *[2]uint64) (errno uintptr)
//
// prlimit64(0, RLIMIT_NOFILE, NULL, lim): 0, or the negated errno.
TEXT ·readLimit(SB),NOSPLIT,$0-16
	MOVQ	$302, AX // SYS_prlimit64
	MOVQ	$0, DI   // this process
	MOVQ	$7, SI   // RLIMIT_NOFILE
	MOVQ	$0, DX   // no new limit
	MOVQ	lim+0(FP), R10
	SYSCALL
	MOVQ	AX, errno+8(FP)
	RET
