//go:build amd64 && !purego

#include "textflag.h"

// The FIPS-197 key expansion with AESKEYGENASSIST (Intel's AES-NI white
// paper): X0 is the previous round key of the same parity, X1 the assist
// result; the new key is the running XOR of X0's words plus the broadcast
// word selected by SEL (0xff: RotWord/SubWord/Rcon, 0xaa: SubWord only).
#define EXPAND(SEL) \
	PSHUFD $SEL, X1, X1; \
	MOVOU  X0, X3; \
	PSLLO  $4, X3; \
	PXOR   X3, X0; \
	PSLLO  $4, X3; \
	PXOR   X3, X0; \
	PSLLO  $4, X3; \
	PXOR   X3, X0; \
	PXOR   X1, X0

#define ROUND128(RCON) \
	AESKEYGENASSIST $RCON, X0, X1; \
	EXPAND(0xff); \
	MOVOU X0, (DX); \
	ADDQ  $16, DX

// func expandKey128(key *byte, enc *[240]byte)
TEXT ·expandKey128(SB), NOSPLIT, $0-16
	MOVQ  key+0(FP), AX
	MOVQ  enc+8(FP), DX
	MOVOU (AX), X0
	MOVOU X0, (DX)
	ADDQ  $16, DX
	ROUND128(0x01)
	ROUND128(0x02)
	ROUND128(0x04)
	ROUND128(0x08)
	ROUND128(0x10)
	ROUND128(0x20)
	ROUND128(0x40)
	ROUND128(0x80)
	ROUND128(0x1b)
	ROUND128(0x36)
	PXOR X0, X0
	PXOR X1, X1
	PXOR X3, X3
	RET

// One AES-256 step: the even key (X0) from the odd one (X2) with RCON, then
// the odd key from the new even one. X0 and X2 swap roles through X4.
#define ROUND256(RCON) \
	AESKEYGENASSIST $RCON, X2, X1; \
	EXPAND(0xff); \
	MOVOU X0, (DX); \
	ADDQ  $16, DX; \
	MOVOU X0, X4; \
	MOVOU X2, X0; \
	AESKEYGENASSIST $0, X4, X1; \
	EXPAND(0xaa); \
	MOVOU X0, (DX); \
	ADDQ  $16, DX; \
	MOVOU X0, X2; \
	MOVOU X4, X0

// func expandKey256(key *byte, enc *[240]byte)
TEXT ·expandKey256(SB), NOSPLIT, $0-16
	MOVQ  key+0(FP), AX
	MOVQ  enc+8(FP), DX
	MOVOU (AX), X0
	MOVOU 16(AX), X2
	MOVOU X0, (DX)
	MOVOU X2, 16(DX)
	ADDQ  $32, DX
	ROUND256(0x01)
	ROUND256(0x02)
	ROUND256(0x04)
	ROUND256(0x08)
	ROUND256(0x10)
	ROUND256(0x20)
	// The 15th round key: an even key only.
	AESKEYGENASSIST $0x40, X2, X1
	EXPAND(0xff)
	MOVOU X0, (DX)
	PXOR  X0, X0
	PXOR  X1, X1
	PXOR  X2, X2
	PXOR  X3, X3
	PXOR  X4, X4
	RET

// func invertKeys(nr int, enc, dec *[240]byte)
// dec[0] = enc[nr], dec[i] = InvMixColumns(enc[nr-i]), dec[nr] = enc[0].
TEXT ·invertKeys(SB), NOSPLIT, $0-24
	MOVQ  nr+0(FP), CX
	MOVQ  enc+8(FP), AX
	MOVQ  dec+16(FP), DX
	MOVQ  CX, BX
	SHLQ  $4, BX
	ADDQ  AX, BX           // BX = &enc[nr]
	MOVOU (BX), X0
	MOVOU X0, (DX)
	ADDQ  $16, DX
	SUBQ  $16, BX
	DECQ  CX
inv:
	MOVOU  (BX), X0
	AESIMC X0, X1
	MOVOU  X1, (DX)
	ADDQ   $16, DX
	SUBQ   $16, BX
	DECQ   CX
	JNZ    inv
	MOVOU (AX), X0
	MOVOU X0, (DX)
	PXOR  X0, X0
	PXOR  X1, X1
	RET

// func encryptBlockAsm(nr int, xk *[240]byte, dst, src *byte)
TEXT ·encryptBlockAsm(SB), NOSPLIT, $0-32
	MOVQ   nr+0(FP), CX
	MOVQ   xk+8(FP), AX
	MOVQ   dst+16(FP), DX
	MOVQ   src+24(FP), BX
	MOVOU  (BX), X0
	MOVOU  (AX), X1
	PXOR   X1, X0
	ADDQ   $16, AX
	DECQ   CX
enc:
	MOVOU  (AX), X1
	AESENC X1, X0
	ADDQ   $16, AX
	DECQ   CX
	JNZ    enc
	MOVOU      (AX), X1
	AESENCLAST X1, X0
	MOVOU      X0, (DX)
	RET

// func decryptBlockAsm(nr int, xk *[240]byte, dst, src *byte)
TEXT ·decryptBlockAsm(SB), NOSPLIT, $0-32
	MOVQ   nr+0(FP), CX
	MOVQ   xk+8(FP), AX
	MOVQ   dst+16(FP), DX
	MOVQ   src+24(FP), BX
	MOVOU  (BX), X0
	MOVOU  (AX), X1
	PXOR   X1, X0
	ADDQ   $16, AX
	DECQ   CX
dec:
	MOVOU  (AX), X1
	AESDEC X1, X0
	ADDQ   $16, AX
	DECQ   CX
	JNZ    dec
	MOVOU      (AX), X1
	AESDECLAST X1, X0
	MOVOU      X0, (DX)
	RET
