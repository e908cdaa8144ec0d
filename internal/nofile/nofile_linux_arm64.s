#include "textflag.h"

// func readLimit(lim *[2]uint64) (errno uintptr)
//
// prlimit64(0, RLIMIT_NOFILE, NULL, lim): 0, or the negated errno.
TEXT ·readLimit(SB),NOSPLIT,$0-16
	MOVD	$0, R0 // this process
	MOVD	$7, R1 // RLIMIT_NOFILE
	MOVD	$0, R2 // no new limit
	MOVD	lim+0(FP), R3
	MOVD	$261, R8 // SYS_prlimit64
	SVC
	MOVD	R0, errno+8(FP)
	RET
