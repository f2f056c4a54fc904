#include "textflag.h"

// func int80(nr, a1, a2, a3 uintptr) uintptr
TEXT ·int80(SB),NOSPLIT,$0-40
	MOVQ nr+0(FP), AX
	MOVQ a1+8(FP), BX
	MOVQ a2+16(FP), CX
	MOVQ a3+24(FP), DX
	INT $0x80
	MOVQ AX, ret+32(FP)
	RET

// func sysenter(nr, a1, a2, a3 uintptr) uintptr
//
// The kernel returns from a sysenter to the 32-bit vDSO, which a 64-bit
// process does not have: the process dies after the call (or at the
// instruction, on CPUs without sysenter in 64-bit mode). What the call
// did is what the probe's caller looks at.
TEXT ·sysenter(SB),NOSPLIT,$0-40
	MOVQ nr+0(FP), AX
	MOVQ a1+8(FP), BX
	MOVQ a2+16(FP), CX
	MOVQ a3+24(FP), DX
	SYSENTER
	MOVQ AX, ret+32(FP)
	RET
