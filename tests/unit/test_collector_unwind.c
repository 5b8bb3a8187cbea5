/* Unit tests of the unwinder's pure parts: the step function shared with
 * BPF (bpf/unwind_step.h) on hand-made frames for every rule kind, the
 * userspace walk (collector/unwind/unwind_user.c) on synthetic stacks (frame
 * limit, end of the stack copy) and on this process's own stack with
 * tables built from its mapped files (it must reach _start through the
 * return addresses __builtin_return_address reports), and the table
 * registry (collector/unwind/unwind_maps.c) without BPF (lookups equal to the
 * reference lookup, references, idle expiry, the byte budget, the builder
 * thread) and, as root, with BPF maps shaped like the sampler's. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <bpf/bpf.h>

#include "collector/base/counters.h"
#include "collector/proc/elfinfo.h"
#include "collector/proc/procmaps.h"
#include "collector/proc/procsrc.h"
#include "collector/unwind/table/unwind_paged.h"
#include "collector/unwind/unwind_maps.h"
#include "collector/unwind/unwind_user.h"

#define LIBC "/lib/x86_64-linux-gnu/libc.so.6"

/* ---- the step function on a fake stack ---------------------------------------- */

/* 64 KiB of "stack" at a fake address. */
#define STACK_ADDR 0x7ffd00000000ull
static uint64_t mem[8192];

static int mem_read(void *ctx, void *dst, uint32_t size, uint64_t addr)
{
	(void)ctx;
	if (addr < STACK_ADDR || addr + size > STACK_ADDR + sizeof(mem))
		return -1;
	memcpy(dst, (const char *)mem + (addr - STACK_ADDR), size);
	return 0;
}

#define OPAL_UNWIND_READ(ctx, dst, size, addr) mem_read((ctx), (dst), (size), (addr))
#include "bpf/unwind_step.h"

static uint64_t slot(size_t i)   /* address of mem[i] */
{
	return STACK_ADDR + i * 8;
}

static struct opal_unwind_regs leaf_regs(uint64_t pc, uint64_t sp)
{
	struct opal_unwind_regs r;

	memset(&r, 0, sizeof(r));
	for (int i = 0; i < OPAL_UNWIND_NREGS; i++)
		r.r[i] = 0x1000 + (uint64_t)i;   /* recognizable values */
	r.r[OPAL_DWARF_PC] = pc;
	r.r[OPAL_DWARF_RSP] = sp;
	r.valid = OPAL_REGS_ALL_VALID;
	r.flags = OPAL_REGS_EXACT_PC;
	return r;
}

static struct opal_unwind_body body(uint8_t cfa, int32_t cfa_off, uint8_t ra, int16_t ra_off)
{
	struct opal_unwind_body b;

	memset(&b, 0, sizeof(b));
	b.cfa = cfa;
	b.cfa_off = cfa_off;
	b.ra = ra;
	b.ra_off = ra_off;
	return b;
}

/* A frame-pointer frame: CFA = RBP + 16, RA at CFA - 8, RBP at CFA - 16. */
static struct opal_unwind_body rbp_body(void)
{
	struct opal_unwind_body b = body(OPAL_UNWIND_PACK(OPAL_CFA_REG, OPAL_DWARF_RBP), 16,
					 OPAL_UNWIND_PACK(OPAL_REG_AT_CFA, 0), -8);
	b.rbp = OPAL_UNWIND_PACK(OPAL_REG_AT_CFA, 0);
	b.rbp_off = -16;
	return b;
}

static int step(const struct opal_unwind_body *b, struct opal_unwind_regs *r)
{
	__u64 sc[17];

	return opal_unwind_step(b, r, sc, NULL);
}

static void test_step_rsp_based(void **state)
{
	(void)state;
	struct opal_unwind_regs r = leaf_regs(0x401000, slot(100));
	struct opal_unwind_body b =
		body(OPAL_UNWIND_PACK(OPAL_CFA_REG, OPAL_DWARF_RSP), 32,
		     OPAL_UNWIND_PACK(OPAL_REG_AT_CFA, 0), -8);

	b.rbp = OPAL_UNWIND_PACK(OPAL_REG_AT_CFA, 0);
	b.rbp_off = -16;
	b.rbx = OPAL_UNWIND_PACK(OPAL_REG_SAME, 0);
	mem[103] = 0x402222;   /* CFA - 8 = slot(104) - 8 */
	mem[102] = 0xbbbb;     /* saved RBP */
	assert_int_equal(step(&b, &r), OPAL_STEP_OK);
	assert_int_equal(r.r[OPAL_DWARF_PC], 0x402222);
	assert_int_equal(r.r[OPAL_DWARF_RSP], slot(104));
	assert_int_equal(r.r[OPAL_DWARF_RBP], 0xbbbb);
	assert_int_equal(r.r[OPAL_DWARF_RBX], 0x1000 + OPAL_DWARF_RBX);   /* same */
	assert_int_equal(r.valid, (1u << OPAL_DWARF_PC) | (1u << OPAL_DWARF_RSP) |
					  (1u << OPAL_DWARF_RBP) | (1u << OPAL_DWARF_RBX));
	assert_int_equal(r.flags, 0);   /* a return address: look up at PC - 1 */
}

static void test_step_rbp_and_deref(void **state)
{
	(void)state;
	/* alloca: CFA = RBP + 16, RBP saved at CFA - 16 */
	struct opal_unwind_regs r = leaf_regs(0x401000, slot(10));
	r.r[OPAL_DWARF_RBP] = slot(50);
	struct opal_unwind_body b = rbp_body();
	mem[51] = 0x403333;
	mem[50] = slot(80);
	assert_int_equal(step(&b, &r), OPAL_STEP_OK);
	assert_int_equal(r.r[OPAL_DWARF_PC], 0x403333);
	assert_int_equal(r.r[OPAL_DWARF_RSP], slot(52));
	assert_int_equal(r.r[OPAL_DWARF_RBP], slot(80));

	/* DRAP: CFA = *(RBP - 24) + 0, RBP saved at [RBP] (AT_REG) */
	r = leaf_regs(0x401000, slot(10));
	r.r[OPAL_DWARF_RBP] = slot(40);
	b = body(OPAL_UNWIND_PACK(OPAL_CFA_DEREF, OPAL_DWARF_RBP), -24,
		 OPAL_UNWIND_PACK(OPAL_REG_AT_CFA, 0), -8);
	b.rbp = OPAL_UNWIND_PACK(OPAL_REG_AT_REG, OPAL_DWARF_RBP);
	b.rbp_off = 0;
	mem[37] = slot(90);    /* [RBP - 24]: the CFA */
	mem[89] = 0x404444;    /* CFA - 8 */
	mem[40] = slot(120);   /* [RBP] */
	assert_int_equal(step(&b, &r), OPAL_STEP_OK);
	assert_int_equal(r.r[OPAL_DWARF_PC], 0x404444);
	assert_int_equal(r.r[OPAL_DWARF_RSP], slot(90));
	assert_int_equal(r.r[OPAL_DWARF_RBP], slot(120));

	/* a CFA based on R10 needs R10: known in the leaf only */
	r.r[10] = slot(200);
	r.valid &= ~(1u << 10);
	b = body(OPAL_UNWIND_PACK(OPAL_CFA_REG, 10), 0, OPAL_UNWIND_PACK(OPAL_REG_AT_CFA, 0), -8);
	assert_int_equal(step(&b, &r), -OPAL_UERR_REG_UNKNOWN);
}

/* A Go function that called on the system stack (time.now around the
 * vDSO, collector/unwind/table/unwind_go.h): CFA = RBP + 16 on the
 * goroutine's stack, below this frame's RSP, is taken only with
 * OPAL_CFA_AUX_STACK_SWITCH. */
static void test_step_stack_switch(void **state)
{
	(void)state;
	struct opal_unwind_regs r = leaf_regs(0x401000, slot(500));
	r.flags = 0;
	r.r[OPAL_DWARF_RBP] = slot(50);
	struct opal_unwind_body b = rbp_body();
	mem[51] = 0x405555;
	mem[50] = slot(70);
	struct opal_unwind_regs saved = r;
	assert_int_equal(step(&b, &r), -OPAL_UERR_BAD_FRAME);   /* not marked: refused */
	r = saved;
	b.aux = OPAL_CFA_AUX_STACK_SWITCH;
	assert_int_equal(step(&b, &r), OPAL_STEP_OK);
	assert_int_equal(r.r[OPAL_DWARF_PC], 0x405555);
	assert_int_equal(r.r[OPAL_DWARF_RSP], slot(52));
	assert_int_equal(r.r[OPAL_DWARF_RBP], slot(70));
	/* the mark means nothing on an RSP-based rule */
	r = leaf_regs(0x401000, slot(500));
	b = body(OPAL_UNWIND_PACK(OPAL_CFA_REG, OPAL_DWARF_RSP), -64,
		 OPAL_UNWIND_PACK(OPAL_REG_AT_CFA, 0), -8);
	b.aux = OPAL_CFA_AUX_STACK_SWITCH;
	assert_int_equal(step(&b, &r), -OPAL_UERR_BAD_FRAME);
}

static void test_step_plt(void **state)
{
	(void)state;
	/* psABI PLT entry: CFA = RSP + 8, + 8 from byte 11 of the entry on */
	struct opal_unwind_body b =
		body(OPAL_UNWIND_PACK(OPAL_CFA_PLT, OPAL_DWARF_RSP), 8,
		     OPAL_UNWIND_PACK(OPAL_REG_AT_CFA, 0), -8);
	b.aux = 11;
	struct opal_unwind_regs r = leaf_regs(0x401020, slot(20));   /* & 15 == 0 */
	mem[20] = 0x405555;
	assert_int_equal(step(&b, &r), OPAL_STEP_OK);
	assert_int_equal(r.r[OPAL_DWARF_PC], 0x405555);
	assert_int_equal(r.r[OPAL_DWARF_RSP], slot(21));
	r = leaf_regs(0x40102b, slot(20));   /* & 15 == 11: after the push */
	mem[21] = 0x406666;
	assert_int_equal(step(&b, &r), OPAL_STEP_OK);
	assert_int_equal(r.r[OPAL_DWARF_PC], 0x406666);
	assert_int_equal(r.r[OPAL_DWARF_RSP], slot(22));
}

static void test_step_signal_frame(void **state)
{
	(void)state;
	/* __restore_rt: RSP at a ucontext; the sigcontext 40 bytes in */
	struct opal_unwind_regs r = leaf_regs(0x7f0000001000, slot(300));
	r.flags = 0;
	struct opal_unwind_body b = body(OPAL_UNWIND_PACK(OPAL_CFA_SIGNAL, OPAL_DWARF_RSP), 0, 0, 0);
	size_t sc = 300 + OPAL_SIGFRAME_MCONTEXT / 8;
	for (int i = 0; i < 17; i++)
		mem[sc + (size_t)i] = 0x5000 + (uint64_t)i;   /* r8 .. rip in sigcontext order */
	mem[sc + 15] = slot(500);   /* rsp */
	mem[sc + 16] = 0x407777;    /* rip */
	assert_int_equal(step(&b, &r), OPAL_STEP_OK);
	assert_int_equal(r.r[OPAL_DWARF_PC], 0x407777);
	assert_int_equal(r.r[OPAL_DWARF_RSP], slot(500));
	assert_int_equal(r.r[OPAL_DWARF_RBP], 0x5000 + 10);
	assert_int_equal(r.r[OPAL_DWARF_RBX], 0x5000 + 11);
	assert_int_equal(r.r[0], 0x5000 + 13);   /* rax */
	assert_int_equal(r.r[5], 0x5000 + 8);    /* rdi */
	assert_int_equal(r.r[8], 0x5000 + 0);    /* r8 */
	assert_int_equal(r.r[15], 0x5000 + 7);   /* r15 */
	assert_int_equal(r.valid, OPAL_REGS_ALL_VALID);
	assert_int_equal(r.flags, OPAL_REGS_EXACT_PC);   /* interrupted, not called */
	/* the sigcontext beyond readable memory */
	r = leaf_regs(0x7f0000001000, STACK_ADDR + sizeof(mem) - 16);
	assert_int_equal(step(&b, &r), -OPAL_UERR_UNREADABLE);
}

static void test_step_ra_in_register_and_outermost(void **state)
{
	(void)state;
	/* vfork-style: RA popped into RDI, CFA = RSP (nothing on the stack) */
	struct opal_unwind_regs r = leaf_regs(0x401000, slot(30));
	r.r[5] = 0x408888;
	struct opal_unwind_body b = body(OPAL_UNWIND_PACK(OPAL_CFA_REG, OPAL_DWARF_RSP), 0,
					 OPAL_UNWIND_PACK(OPAL_REG_IN_REG, 5), 0);
	assert_int_equal(step(&b, &r), OPAL_STEP_OK);
	assert_int_equal(r.r[OPAL_DWARF_PC], 0x408888);
	assert_int_equal(r.r[OPAL_DWARF_RSP], slot(30));
	/* ... but a RA in a register the caller frame lost: error */
	b.ra = OPAL_UNWIND_PACK(OPAL_REG_IN_REG, 5);
	b.cfa_off = 8;
	assert_int_equal(step(&b, &r), -OPAL_UERR_REG_UNKNOWN);
	/* the same CFA == RSP with RA on the stack would not move: refused */
	r = leaf_regs(0x401000, slot(30));
	b = body(OPAL_UNWIND_PACK(OPAL_CFA_REG, OPAL_DWARF_RSP), 0,
		 OPAL_UNWIND_PACK(OPAL_REG_AT_CFA, 0), -8);
	assert_int_equal(step(&b, &r), -OPAL_UERR_BAD_FRAME);
	b.cfa_off = -8;
	assert_int_equal(step(&b, &r), -OPAL_UERR_BAD_FRAME);

	/* _start, clone: RA undefined ends the walk; so does a zero RA */
	b = body(OPAL_UNWIND_PACK(OPAL_CFA_REG, OPAL_DWARF_RSP), 8,
		 OPAL_UNWIND_PACK(OPAL_REG_UNDEFINED, 0), 0);
	assert_int_equal(step(&b, &r), OPAL_STEP_END);
	b.ra = OPAL_UNWIND_PACK(OPAL_REG_AT_CFA, 0);
	b.ra_off = -8;
	mem[30] = 0;
	assert_int_equal(step(&b, &r), OPAL_STEP_END);

	/* no unwind info, unrepresentable CFI */
	b.cfa = OPAL_UNWIND_PACK(OPAL_CFA_GAP, 0);
	assert_int_equal(step(&b, &r), -OPAL_UERR_NO_UNWIND_INFO);
	b.cfa = OPAL_UNWIND_PACK(OPAL_CFA_INVALID, 0);
	assert_int_equal(step(&b, &r), -OPAL_UERR_INVALID_CFI);
	/* an unreadable return address */
	r = leaf_regs(0x401000, STACK_ADDR + sizeof(mem));
	b = body(OPAL_UNWIND_PACK(OPAL_CFA_REG, OPAL_DWARF_RSP), 8,
		 OPAL_UNWIND_PACK(OPAL_REG_AT_CFA, 0), -8);
	assert_int_equal(step(&b, &r), -OPAL_UERR_UNREADABLE);
}

static void test_fp_step(void **state)
{
	(void)state;
	struct opal_unwind_regs r = leaf_regs(0x401000, slot(10));
	r.r[OPAL_DWARF_RBP] = slot(20);
	mem[20] = slot(40);     /* caller's RBP */
	mem[21] = 0x409999;     /* return address */
	assert_int_equal(opal_unwind_fp_step(&r, 0, NULL), OPAL_STEP_OK);
	assert_int_equal(r.r[OPAL_DWARF_PC], 0x409999);
	assert_int_equal(r.r[OPAL_DWARF_RSP], slot(22));
	assert_int_equal(r.r[OPAL_DWARF_RBP], slot(40));
	/* an RBP below RSP is no frame */
	r = leaf_regs(0x401000, slot(30));
	r.r[OPAL_DWARF_RBP] = slot(20);
	assert_int_equal(opal_unwind_fp_step(&r, 0, NULL), -OPAL_UERR_BAD_FRAME);
	/* RBP = 0 marks the outermost frame (psABI; _start zeroes it) */
	r = leaf_regs(0x401000, slot(30));
	r.r[OPAL_DWARF_RBP] = 0;
	assert_int_equal(opal_unwind_fp_step(&r, 0, NULL), OPAL_STEP_END);
}

/* A frame-pointer step at the leaf's prologue or return, where RBP is
 * still the caller's: the return address comes from RSP. */
static void fp_prologue_case(uint64_t code, size_t ra_slot)
{
	struct opal_unwind_regs r = leaf_regs(0x401000, slot(10));

	r.r[OPAL_DWARF_RBP] = slot(60);   /* the caller's frame */
	mem[10] = 0x40bbbb;               /* pushed RBP (after the push) */
	mem[ra_slot] = 0x40aaaa;
	mem[60] = slot(80);
	mem[61] = 0x40cccc;               /* the caller's return address */
	assert_int_equal(opal_unwind_fp_step(&r, code, NULL), OPAL_STEP_OK);
	assert_int_equal(r.r[OPAL_DWARF_PC], 0x40aaaa);
	assert_int_equal(r.r[OPAL_DWARF_RSP], slot(ra_slot + 1));
	assert_int_equal(r.r[OPAL_DWARF_RBP], slot(60));
	assert_int_equal(r.valid, (1u << OPAL_DWARF_RSP) | (1u << OPAL_DWARF_PC) |
					  (1u << OPAL_DWARF_RBP));
	assert_int_equal(r.flags, 0);
	/* the caller's step is a plain frame-pointer step */
	assert_int_equal(opal_unwind_fp_step(&r, code, NULL), OPAL_STEP_OK);
	assert_int_equal(r.r[OPAL_DWARF_PC], 0x40cccc);
	mem[ra_slot] = 0;
}

static void test_fp_step_prologue(void **state)
{
	(void)state;
	fp_prologue_case(0x9090e5894855ull, 10);   /* push %rbp; mov %rsp,%rbp */
	fp_prologue_case(0xe5894855fa1e0ff3ull, 10);   /* endbr64; push %rbp */
	fp_prologue_case(0x9090909090e58948ull, 11);   /* mov %rsp,%rbp */
	fp_prologue_case(0x90909090909090c3ull, 10);   /* ret */
	fp_prologue_case(0x909090909090c3f3ull, 10);   /* rep ret */
	/* at a return address the bytes say nothing: a plain step */
	struct opal_unwind_regs r = leaf_regs(0x401000, slot(10));
	r.flags = 0;
	r.r[OPAL_DWARF_RBP] = slot(60);
	mem[10] = 0x40aaaa;
	mem[60] = slot(80);
	mem[61] = 0x40cccc;
	assert_int_equal(opal_unwind_fp_step(&r, 0x55ull, NULL), OPAL_STEP_OK);
	assert_int_equal(r.r[OPAL_DWARF_PC], 0x40cccc);
	/* any other instruction at the leaf: a plain step */
	r = leaf_regs(0x401000, slot(10));
	r.r[OPAL_DWARF_RBP] = slot(60);
	assert_int_equal(opal_unwind_fp_step(&r, 0x9090c35dull, NULL), OPAL_STEP_OK);
	assert_int_equal(r.r[OPAL_DWARF_PC], 0x40cccc);
	/* a return address 0 at RSP ends the walk */
	r = leaf_regs(0x401000, slot(10));
	mem[10] = 0;
	assert_int_equal(opal_unwind_fp_step(&r, 0xc3ull, NULL), OPAL_STEP_END);
	/* no RSP, no step */
	r = leaf_regs(0x401000, slot(10));
	r.valid = 1u << OPAL_DWARF_RBP;
	assert_int_equal(opal_unwind_fp_step(&r, 0xc3ull, NULL), -OPAL_UERR_REG_UNKNOWN);
}

/* JIT code: CPython's perf trampoline by its tail bytes, frame pointers
 * otherwise, and never an outermost frame. */
static void test_jit_step(void **state)
{
	(void)state;
	/* at "add $8,%rsp; ret": the return address 8 bytes above RSP;
	 * RBP and RBX pass through */
	struct opal_unwind_regs r = leaf_regs(0x7f0000001000, slot(10));
	r.flags = 0;
	mem[11] = 0x40aaaa;
	assert_int_equal(opal_unwind_jit_step(&r, 0x9090c308c48348ull, NULL), OPAL_STEP_OK);
	assert_int_equal(r.r[OPAL_DWARF_PC], 0x40aaaa);
	assert_int_equal(r.r[OPAL_DWARF_RSP], slot(12));
	assert_int_equal(r.r[OPAL_DWARF_RBP], 0x1000 + OPAL_DWARF_RBP);
	assert_int_equal(r.valid, (1u << OPAL_DWARF_RSP) | (1u << OPAL_DWARF_PC) |
					  (1u << OPAL_DWARF_RBP) | (1u << OPAL_DWARF_RBX));
	/* a trampoline whose return address is 0: not a frame */
	r = leaf_regs(0x7f0000001000, slot(10));
	mem[11] = 0;
	assert_int_equal(opal_unwind_jit_step(&r, 0xc308c48348ull, NULL),
			 -OPAL_UERR_NO_UNWIND_INFO);
	/* other code: a frame-pointer step */
	r = leaf_regs(0x7f0000001000, slot(10));
	r.r[OPAL_DWARF_RBP] = slot(20);
	mem[20] = slot(40);
	mem[21] = 0x409999;
	assert_int_equal(opal_unwind_jit_step(&r, 0x9090909090909090ull, NULL), OPAL_STEP_OK);
	assert_int_equal(r.r[OPAL_DWARF_PC], 0x409999);
	assert_int_equal(r.r[OPAL_DWARF_RSP], slot(22));
	/* JIT code at its prologue (push %rbp): the return address at RSP */
	r = leaf_regs(0x7f0000001000, slot(10));
	r.r[OPAL_DWARF_RBP] = slot(20);
	mem[10] = 0x40bbbb;
	assert_int_equal(opal_unwind_jit_step(&r, 0xe5894855ull, NULL), OPAL_STEP_OK);
	assert_int_equal(r.r[OPAL_DWARF_PC], 0x40bbbb);
	assert_int_equal(r.r[OPAL_DWARF_RSP], slot(11));
	assert_int_equal(r.r[OPAL_DWARF_RBP], slot(20));
	mem[10] = 0;
	/* RBP 0 in JIT code ends nothing: an error frame, not a short stack */
	r = leaf_regs(0x7f0000001000, slot(10));
	r.r[OPAL_DWARF_RBP] = 0;
	assert_int_equal(opal_unwind_jit_step(&r, 0, NULL), -OPAL_UERR_NO_UNWIND_INFO);
	/* unreadable code bytes (0) and a return address 0 on the frame */
	r = leaf_regs(0x7f0000001000, slot(10));
	r.r[OPAL_DWARF_RBP] = slot(20);
	mem[21] = 0;
	assert_int_equal(opal_unwind_jit_step(&r, 0, NULL), -OPAL_UERR_NO_UNWIND_INFO);
}

/* ---- the userspace walk on synthetic stacks ------------------------------------ */

/* Every PC has the rule "CFA = RSP + 16, RA at CFA - 8" (a function with one
 * push), except PCs >= 0x900000: no mapping, and 0x800000: outermost. */
static int synth_resolve(void *ctx, uint64_t pc, bool exact, struct opal_unwind_body *b,
			 uint64_t *code)
{
	(void)ctx;
	(void)exact;
	(void)code;
	if (pc >= 0x900000)
		return -OPAL_UERR_NO_MAPPING;
	*b = body(OPAL_UNWIND_PACK(OPAL_CFA_REG, OPAL_DWARF_RSP), 16,
		  OPAL_UNWIND_PACK(pc == 0x800000 ? OPAL_REG_UNDEFINED : OPAL_REG_AT_CFA, 0), -8);
	return OPAL_UW_RULE;
}

/* Lays out `depth` frames of synth_resolve's shape from slot 0 upwards:
 * return addresses 0x400000 + i, the last one `last`. */
static void synth_stack(size_t depth, uint64_t last)
{
	memset(mem, 0, sizeof(mem));
	for (size_t i = 0; i < depth; i++)
		mem[2 * i + 1] = i + 1 == depth ? last : 0x400001 + i;
}

static void walk(size_t copy_len, bool to_end, uint64_t *pcs, uint8_t *flags, size_t *n)
{
	struct opal_stack_copy c = { { { STACK_ADDR, (const uint8_t *)mem, copy_len, to_end } }, 1 };
	struct opal_unwind_regs r = leaf_regs(0x400000, STACK_ADDR);

	pcs[0] = 0x400000;
	flags[0] = 0;
	*n = 1;
	assert_int_equal(opal_unwind_user_walk(synth_resolve, NULL, &r, &c, pcs, flags, n), 0);
}

static void test_walk_depths(void **state)
{
	(void)state;
	uint64_t pcs[OPAL_USTACK_SLOTS];
	uint8_t flags[OPAL_USTACK_SLOTS];
	size_t n;

	/* 100 frames down to an outermost one: complete, no error frame */
	synth_stack(100, 0x800000);
	walk(sizeof(mem), true, pcs, flags, &n);
	assert_int_equal(n, 101);
	assert_int_equal(pcs[0], 0x400000);
	assert_int_equal(flags[0], 0);
	for (size_t i = 1; i < 100; i++) {
		assert_int_equal(pcs[i], 0x400000 + i);
		assert_int_equal(flags[i], OPAL_UFRAME_RETURN);
	}
	assert_int_equal(pcs[100], 0x800000);

	/* 300 frames: the 256 leaf-most, then a truncation frame */
	synth_stack(300, 0x800000);
	walk(sizeof(mem), true, pcs, flags, &n);
	assert_int_equal(n, OPAL_MAX_USER_FRAMES + 1);
	assert_int_equal(pcs[OPAL_MAX_USER_FRAMES - 1], 0x400000 + OPAL_MAX_USER_FRAMES - 1);
	assert_int_equal(flags[OPAL_MAX_USER_FRAMES], OPAL_UFRAME_ERROR);
	assert_int_equal(pcs[OPAL_MAX_USER_FRAMES], OPAL_UERR_TRUNCATED);

	/* exactly 256 frames ending at the outermost one: not truncated */
	synth_stack(OPAL_MAX_USER_FRAMES - 1, 0x800000);
	walk(sizeof(mem), true, pcs, flags, &n);
	assert_int_equal(n, OPAL_MAX_USER_FRAMES);
	assert_int_equal(pcs[n - 1], 0x800000);

	/* a return address in no mapping: the frame, then the error */
	synth_stack(5, 0x900000);
	walk(sizeof(mem), true, pcs, flags, &n);
	assert_int_equal(n, 7);
	assert_int_equal(pcs[5], 0x900000);
	assert_int_equal(flags[6], OPAL_UFRAME_ERROR);
	assert_int_equal(pcs[6], OPAL_UERR_NO_MAPPING);
}

static void test_walk_copy_end(void **state)
{
	(void)state;
	uint64_t pcs[OPAL_USTACK_SLOTS];
	uint8_t flags[OPAL_USTACK_SLOTS];
	size_t n;

	/* the copy holds 10 frames of 50: cut at its size limit, truncated */
	synth_stack(50, 0x800000);
	walk(10 * 16, false, pcs, flags, &n);
	assert_int_equal(n, 12);
	assert_int_equal(pcs[10], 0x40000a);
	assert_int_equal(pcs[11], OPAL_UERR_TRUNCATED);
	/* cut because the stack ended there: unreadable */
	walk(10 * 16, true, pcs, flags, &n);
	assert_int_equal(pcs[11], OPAL_UERR_UNREADABLE);
}

/* Shapes by PC for the walks below: 0x500000 a signal trampoline
 * (__restore_rt), 0x600000-0x6fffff code without FDE (GAP), the rest as
 * synth_resolve. */
static int shaped_resolve(void *ctx, uint64_t pc, bool exact, struct opal_unwind_body *b,
			 uint64_t *code)
{
	if (pc == 0x500000) {
		*b = body(OPAL_UNWIND_PACK(OPAL_CFA_SIGNAL, 0), 0, 0, 0);
		return OPAL_UW_RULE;
	}
	if (pc >= 0x600000 && pc < 0x700000) {
		memset(b, 0, sizeof(*b));   /* GAP */
		return OPAL_UW_RULE;
	}
	return synth_resolve(ctx, pc, exact, b, code);
}

/* A handler on an alternate signal stack (region 0, mem[0..1023]) whose
 * signal frame says it interrupted a frame on the thread's stack (region
 * 1, mem[4096..]); the two regions are copied from distant addresses. */
static void test_walk_signal_stack_regions(void **state)
{
	(void)state;
	const uint64_t alt = 0x7f0000010000ull, main_sp = 0x7ffd00100000ull;
	uint64_t pcs[OPAL_USTACK_SLOTS];
	uint8_t flags[OPAL_USTACK_SLOTS];
	size_t n = 1;

	memset(mem, 0, sizeof(mem));
	/* the handler's frame: RA = __restore_rt, then the ucontext */
	mem[1] = 0x500000;
	uint64_t *uc = &mem[2];
	uc[OPAL_SIGFRAME_RSP / 8] = main_sp;
	uc[OPAL_SIGFRAME_RIP / 8] = 0x401000;      /* the interrupted PC */
	uc[OPAL_SIGFRAME_RBP / 8] = 0;
	/* the interrupted frame and its caller, the outermost one */
	mem[4096 + 1] = 0x800000;
	struct opal_stack_copy c = {
		{ { alt, (const uint8_t *)mem, 1024 * 8, true },
		  { main_sp, (const uint8_t *)&mem[4096], 4096 * 8, true } },
		2,
	};
	struct opal_unwind_regs r = leaf_regs(0x400100, alt);
	pcs[0] = 0x400100;
	flags[0] = 0;
	assert_int_equal(opal_unwind_user_walk(shaped_resolve, NULL, &r, &c, pcs, flags, &n), 0);
	assert_int_equal(n, 4);
	assert_int_equal(pcs[1], 0x500000);
	assert_int_equal(flags[1], 0);   /* a trampoline, not a return address */
	assert_int_equal(pcs[2], 0x401000);
	assert_int_equal(flags[2], 0);   /* interrupted: exact */
	assert_int_equal(pcs[3], 0x800000);
	assert_int_equal(flags[3], OPAL_UFRAME_RETURN);

	/* without region 1 the walk ends where the signal stack does */
	c.n = 1;
	r = leaf_regs(0x400100, alt);
	n = 1;
	assert_int_equal(opal_unwind_user_walk(shaped_resolve, NULL, &r, &c, pcs, flags, &n), 0);
	assert_int_equal(n, 4);
	assert_int_equal(flags[3], OPAL_UFRAME_ERROR);
	assert_int_equal(pcs[3], OPAL_UERR_UNREADABLE);
}

/* A PC without FDE is stepped with frame pointers; a guess that lands in
 * no mapping is taken back and the walk ends with "no unwind info". */
static void test_walk_gap_frame_pointers(void **state)
{
	(void)state;
	uint64_t pcs[OPAL_USTACK_SLOTS];
	uint8_t flags[OPAL_USTACK_SLOTS];
	size_t n = 1;

	/* leaf (CFI, one push) -> 0x600010 (no FDE, RBP frame at slot 4) ->
	 * 0x800000 (outermost) */
	memset(mem, 0, sizeof(mem));
	mem[1] = 0x600010;
	mem[4] = slot(0) + 0x1000;   /* the caller's RBP (unused) */
	mem[5] = 0x800000;
	struct opal_stack_copy c = { { { STACK_ADDR, (const uint8_t *)mem, sizeof(mem), true } }, 1 };
	struct opal_unwind_regs r = leaf_regs(0x400000, STACK_ADDR);
	r.r[OPAL_DWARF_RBP] = slot(4);
	pcs[0] = 0x400000;
	flags[0] = 0;
	assert_int_equal(opal_unwind_user_walk(shaped_resolve, NULL, &r, &c, pcs, flags, &n), 0);
	assert_int_equal(n, 3);
	assert_int_equal(pcs[1], 0x600010);
	assert_int_equal(pcs[2], 0x800000);
	assert_int_equal(flags[2], OPAL_UFRAME_RETURN | OPAL_UFRAME_FP);

	/* RBP holds no frame: the "return address" it gives maps nowhere */
	mem[5] = 0x900000;
	r = leaf_regs(0x400000, STACK_ADDR);
	r.r[OPAL_DWARF_RBP] = slot(4);
	n = 1;
	assert_int_equal(opal_unwind_user_walk(shaped_resolve, NULL, &r, &c, pcs, flags, &n), 0);
	assert_int_equal(n, 3);
	assert_int_equal(pcs[1], 0x600010);
	assert_int_equal(flags[2], OPAL_UFRAME_ERROR);
	assert_int_equal(pcs[2], OPAL_UERR_NO_UNWIND_INFO);

	/* RBP 0 in code without FDE proves nothing: no unwind info */
	r = leaf_regs(0x400000, STACK_ADDR);
	r.r[OPAL_DWARF_RBP] = 0;
	n = 1;
	assert_int_equal(opal_unwind_user_walk(shaped_resolve, NULL, &r, &c, pcs, flags, &n), 0);
	assert_int_equal(n, 3);
	assert_int_equal(pcs[2], OPAL_UERR_NO_UNWIND_INFO);
}

/* ---- this process's own stack ------------------------------------------------- */

struct self_file {
	char path[4096];
	struct opal_unwind_table t;
	uint64_t bias, entry;
	bool ok;
};

struct self {
	struct opal_map_entry *maps;
	size_t n_maps;
	struct self_file files[64];
	size_t n_files;
	const struct opal_map_entry *exe;   /* the executable's text mapping */
};

static uint64_t elf_entry_of(int fd)
{
	Elf64_Ehdr eh;
	assert_int_equal(pread(fd, &eh, sizeof(eh), 0), sizeof(eh));
	return eh.e_entry;
}

/* The table of the file mapped at `m` (built once per path). */
static struct self_file *self_file(struct self *s, const struct opal_map_entry *m)
{
	char link[128];
	struct opal_elf_info info;

	for (size_t i = 0; i < s->n_files; i++)
		if (!strcmp(s->files[i].path, m->path))
			return &s->files[i];
	assert_true(s->n_files < 64);
	struct self_file *f = &s->files[s->n_files++];
	snprintf(f->path, sizeof(f->path), "%s", m->path);
	assert_int_equal(opal_map_files_path(link, sizeof(link), getpid(), m->start, m->limit), 0);
	int fd = open(link, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return f;
	f->ok = opal_unwind_table_build(fd, NULL, &f->t) == 0 &&
		opal_elf_info_from_fd(fd, &info) == 0 &&
		opal_elf_load_bias(&info, m->start, m->limit, m->offset, true, &f->bias) == 0;
	f->entry = elf_entry_of(fd);
	close(fd);
	return f;
}

static int self_resolve(void *ctx, uint64_t pc, bool exact, struct opal_unwind_body *b,
			 uint64_t *code)
{
	struct self *s = ctx;
	(void)code;
	const struct opal_map_entry *m = opal_maps_find(s->maps, s->n_maps, pc);

	if (!m || !m->executable || !m->path[0] || m->path[0] == '[')
		return -OPAL_UERR_NO_MAPPING;
	struct self_file *f = self_file(s, m);
	if (!f->ok)
		return OPAL_UW_FP;
	*b = *opal_unwind_table_lookup(&f->t, pc - f->bias - (exact ? 0 : 1), NULL, NULL);
	return OPAL_UW_RULE;
}

static struct opal_unwind_regs captured;
static uint8_t *stack_copy;
static size_t stack_copy_len;
static uint64_t expected_ra[3];

/* Captures this frame's registers (RIP, RSP, RBP, RBX read together, so
 * the CFI row at RIP describes that RSP) and copies the stack above RSP. */
__attribute__((noinline, noclone)) static void capture(void)
{
	uint64_t rip, rsp, rbp, rbx;
	__asm__ volatile("lea 0(%%rip), %0\n\t"
			 "mov %%rsp, %1\n\t"
			 "mov %%rbp, %2\n\t"
			 "mov %%rbx, %3"
			 : "=r"(rip), "=r"(rsp), "=r"(rbp), "=r"(rbx));
	expected_ra[0] = (uint64_t)__builtin_return_address(0);
	memset(&captured, 0, sizeof(captured));
	captured.r[OPAL_DWARF_PC] = rip;
	captured.r[OPAL_DWARF_RSP] = rsp;
	captured.r[OPAL_DWARF_RBP] = rbp;
	captured.r[OPAL_DWARF_RBX] = rbx;
	captured.valid = (1u << OPAL_DWARF_PC) | (1u << OPAL_DWARF_RSP) |
			 (1u << OPAL_DWARF_RBP) | (1u << OPAL_DWARF_RBX);
	captured.flags = OPAL_REGS_EXACT_PC;
	/* up to the top of the main thread's stack, at most 1 MiB */
	struct opal_map_entry *maps;
	size_t n;
	assert_true(opal_maps_read(getpid(), NULL, &maps, &n) >= 0);
	const struct opal_map_entry *st = opal_maps_find(maps, n, rsp);
	assert_non_null(st);
	stack_copy_len = st->limit - rsp < (1u << 20) ? st->limit - rsp : (1u << 20);
	stack_copy = malloc(stack_copy_len);
	assert_non_null(stack_copy);
	memcpy(stack_copy, (const void *)(uintptr_t)rsp, stack_copy_len);
	opal_maps_free(maps, n);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline, noclone)) static void level2(void)
{
	capture();
	expected_ra[1] = (uint64_t)__builtin_return_address(0);
	__asm__ volatile("" ::: "memory");
}

__attribute__((noinline, noclone)) static void level1(void)
{
	level2();
	expected_ra[2] = (uint64_t)__builtin_return_address(0);
	__asm__ volatile("" ::: "memory");
}

static void test_walk_own_stack(void **state)
{
	(void)state;
	struct self s = { 0 };
	uint64_t pcs[OPAL_USTACK_SLOTS];
	uint8_t flags[OPAL_USTACK_SLOTS];
	size_t n = 1;

	level1();
	assert_true(opal_maps_read(getpid(), NULL, &s.maps, &s.n_maps) >= 0);
	struct opal_stack_copy c = { { { captured.r[OPAL_DWARF_RSP], stack_copy, stack_copy_len, true } },
				     1 };
	pcs[0] = captured.r[OPAL_DWARF_PC];
	flags[0] = 0;
	assert_int_equal(opal_unwind_user_walk(self_resolve, &s, &captured, &c, pcs, flags, &n), 0);
	/* capture <- level2 <- level1 <- this test, at the call sites
	 * __builtin_return_address reported */
	assert_true(n > 4);
	assert_int_equal(pcs[1], expected_ra[0]);
	assert_int_equal(pcs[2], expected_ra[1]);
	assert_int_equal(pcs[3], expected_ra[2]);
	for (size_t i = 1; i < n; i++)
		assert_int_equal(flags[i], OPAL_UFRAME_RETURN);   /* no error frame */
	/* ... and on through cmocka and libc to this executable's _start */
	const struct opal_map_entry *last = opal_maps_find(s.maps, s.n_maps, pcs[n - 1]);
	assert_non_null(last);
	char self_exe[4096];
	ssize_t len = readlink("/proc/self/exe", self_exe, sizeof(self_exe) - 1);
	assert_true(len > 0);
	self_exe[len] = '\0';
	assert_string_equal(last->path, self_exe);
	struct self_file *f = self_file(&s, last);
	uint64_t vaddr = pcs[n - 1] - f->bias;
	assert_true(vaddr > f->entry && vaddr - f->entry < 64);
	for (size_t i = 0; i < s.n_files; i++)
		opal_unwind_table_free(&s.files[i].t);
	opal_maps_free(s.maps, s.n_maps);
	free(stack_copy);
}

/* ---- the table registry without BPF --------------------------------------------- */

static void test_maps_lookup_matches_reference(void **state)
{
	(void)state;
	struct opal_counters ctr = { 0 };
	struct opal_unwind_maps m;
	struct opal_unwind_table ref;
	opal_file_id id = { { 1 } };
	int fd = open(LIBC, O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(opal_unwind_table_build(fd, NULL, &ref), 0);
	assert_int_equal(opal_unwind_maps_init(&m, -1, -1, -1, -1, 0, 0, &ctr), 0);
	struct opal_unwind_file *f = opal_unwind_file_get(&m, &id, 1);
	assert_non_null(f);
	assert_int_equal(opal_unwind_file_slot(f, 1), OPAL_SLOT_PENDING);
	assert_int_equal(opal_unwind_file_request(&m, f, fd, 1), 0);   /* no thread: built now */
	assert_int_equal(f->state, OPAL_UFILE_LOADED);
	assert_int_equal(opal_unwind_file_slot(f, 1), 0);
	assert_int_equal(ctr.unwind_tables_built, 1);
	assert_int_equal(m.bytes, ref.stats.bytes);
	/* every rule start, the byte before, and a spread of addresses */
	for (uint32_t i = 0; i < ref.n_rules; i++) {
		uint64_t a = ref.base + ref.rules[i].addr;
		for (int d = -1; d <= 1; d++) {
			struct opal_unwind_body got;
			const struct opal_unwind_body *want =
				opal_unwind_table_lookup(&ref, a + (uint64_t)d, NULL, NULL);
			int rc = opal_unwind_file_lookup(&m, f, a + (uint64_t)d, &got);
			assert_true(rc == 0 || rc == 1);
			assert_memory_equal(&got, want, sizeof(got));
		}
	}
	/* the entry point: a GAP right after it is the outermost frame */
	struct opal_unwind_body got;
	if (f->entry && OPAL_UNWIND_KIND(opal_unwind_table_lookup(&ref, f->entry, NULL, NULL)->cfa) ==
			       OPAL_CFA_GAP)
		assert_int_equal(opal_unwind_file_lookup(&m, f, f->entry, &got), 1);
	assert_int_equal(opal_unwind_file_lookup(&m, f, ref.base - 1, &got), 0);
	assert_int_equal(OPAL_UNWIND_KIND(got.cfa), OPAL_CFA_GAP);

	/* released: idle, unloaded after OPAL_UNWIND_IDLE_NS, not before */
	opal_unwind_file_put(&m, f, 10);
	opal_unwind_maps_expire(&m, 10 + OPAL_UNWIND_IDLE_NS - 1);
	assert_int_equal(m.n_loaded, 1);
	/* taken again while idle: kept */
	assert_ptr_equal(opal_unwind_file_get(&m, &id, 20), f);
	opal_unwind_file_put(&m, f, 20);
	opal_unwind_maps_expire(&m, 20 + OPAL_UNWIND_IDLE_NS);
	assert_int_equal(m.n_loaded, 0);
	assert_int_equal(m.n_files, 0);
	assert_int_equal(m.bytes, 0);
	assert_int_equal(ctr.unwind_tables_unloaded, 1);
	opal_unwind_maps_destroy(&m);
	opal_unwind_table_free(&ref);
	close(fd);
}

static void test_maps_budget(void **state)
{
	(void)state;
	struct opal_counters ctr = { 0 };
	struct opal_unwind_maps m;
	opal_file_id a = { { 1 } }, b = { { 2 } };
	int fd = open(LIBC, O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	/* room for one libc table (233 KB), not two */
	assert_int_equal(opal_unwind_maps_init(&m, -1, -1, -1, -1, 300000, 0, &ctr), 0);
	struct opal_unwind_file *fa = opal_unwind_file_get(&m, &a, 1);
	struct opal_unwind_file *fb = opal_unwind_file_get(&m, &b, 1);
	assert_int_equal(opal_unwind_file_request(&m, fa, fd, 1), 0);
	assert_int_equal(fa->state, OPAL_UFILE_LOADED);
	assert_int_equal(opal_unwind_file_request(&m, fb, fd, 1), 0);
	assert_int_equal(fb->state, OPAL_UFILE_FAILED);
	assert_int_equal(fb->err, -ENOSPC);
	assert_int_equal(opal_unwind_file_slot(fb, 2), OPAL_SLOT_NONE);   /* frame pointers */
	assert_int_equal(ctr.unwind_table_errors, 1);
	/* once `a` is idle its room is taken back, after the retry delay */
	opal_unwind_file_put(&m, fa, 3);
	assert_int_equal(opal_unwind_file_slot(fb, 1 + OPAL_UNWIND_RETRY_NS), OPAL_SLOT_PENDING);
	assert_int_equal(opal_unwind_file_request(&m, fb, fd, 1 + OPAL_UNWIND_RETRY_NS), 0);
	assert_int_equal(fb->state, OPAL_UFILE_LOADED);
	assert_int_equal(fa->state, OPAL_UFILE_PENDING);   /* unloaded for the room */
	assert_int_equal(m.n_loaded, 1);
	/* a file without usable CFI fails for good */
	opal_file_id c = { { 3 } };
	struct opal_unwind_file *fc = opal_unwind_file_get(&m, &c, 5);
	int nfd = open("/dev/null", O_RDONLY);
	assert_int_equal(opal_unwind_file_request(&m, fc, nfd, 5), 0);
	assert_int_equal(fc->state, OPAL_UFILE_FAILED);
	assert_int_equal(opal_unwind_file_slot(fc, 5 + 10 * OPAL_UNWIND_RETRY_NS), OPAL_SLOT_NONE);
	close(nfd);
	opal_unwind_maps_destroy(&m);
	close(fd);
}

static void test_builder_thread(void **state)
{
	(void)state;
	struct opal_counters ctr = { 0 };
	struct opal_unwind_maps m;
	opal_file_id id = { { 7 } };
	int fd = open("/usr/bin/python3.11", O_RDONLY | O_CLOEXEC);   /* > OPAL_UNWIND_INLINE_BYTES */

	assert_true(fd >= 0);
	assert_int_equal(opal_unwind_maps_init(&m, -1, -1, -1, -1, 0, 0, &ctr), 0);
	assert_int_equal(opal_unwind_maps_start_builder(&m, NULL, 100), 0);
	struct opal_unwind_file *f = opal_unwind_file_get(&m, &id, 1);
	assert_int_equal(opal_unwind_file_request(&m, f, fd, 1), 1);
	assert_int_equal(f->state, OPAL_UFILE_BUILDING);
	assert_int_equal(f->refs, 2);   /* ours and the job's */
	assert_int_equal(opal_unwind_file_request(&m, f, fd, 1), 1);   /* queued once */
	close(fd);   /* the job has its own descriptor */
	assert_true(opal_unwind_maps_wait(&m, 60000, 2));
	assert_int_equal(f->state, OPAL_UFILE_LOADED);
	assert_int_equal(f->refs, 1);
	assert_true(f->n_rules > 10000);
	opal_unwind_maps_destroy(&m);
}

/* ---- with BPF maps (root) -------------------------------------------------------- */

/* Outer maps shaped like bpf/sampler.bpf.c's. */
static int outer_of(enum bpf_map_type type, uint32_t value_size, uint32_t flags)
{
	LIBBPF_OPTS(bpf_map_create_opts, io, .map_flags = BPF_F_INNER_MAP | flags);
	int inner = bpf_map_create(BPF_MAP_TYPE_ARRAY, "tmpl", 4, value_size, 1, &io);
	assert_true(inner >= 0);
	LIBBPF_OPTS(bpf_map_create_opts, oo, .inner_map_fd = (uint32_t)inner);
	int fd = bpf_map_create(type, "outer", 4, 4, 64, &oo);
	assert_true(fd >= 0);
	close(inner);
	return fd;
}

/* The inner map of `outer` at `key`, as a descriptor. */
static int inner_at(int outer, uint32_t key)
{
	uint32_t id;

	if (bpf_map_lookup_elem(outer, &key, &id) < 0)
		return -errno;
	return bpf_map_get_fd_by_id(id);
}

/* The reference's body index for vaddr, or -1 where it has no rule
 * (below the first, outside the table). */
static int ref_body(const struct opal_unwind_table *t, uint64_t vaddr)
{
	const struct opal_unwind_body *b = opal_unwind_table_lookup(t, vaddr, NULL, NULL);

	return b >= t->bodies && b < t->bodies + t->n_bodies ? (int)(b - t->bodies) : -1;
}

/* The paged search (BPF's, bpf/unwind_search.h) against the reference
 * search on tables of 1 rule up to three index pages, at every page and
 * index boundary, each rule's first and last address and between. */
static void test_paged_search(void **state)
{
	(void)state;
	static const uint32_t sizes[] = { 1, 2, 511, 512, 513, 1024, 524287, 524288, 524289,
					  1300000 };
	struct opal_unwind_body bodies[7];

	memset(bodies, 0, sizeof(bodies));
	for (int i = 1; i < 7; i++)
		bodies[i].cfa = OPAL_UNWIND_PACK(OPAL_CFA_REG, OPAL_DWARF_RSP);
	for (size_t z = 0; z < sizeof(sizes) / sizeof(sizes[0]); z++) {
		uint32_t n = sizes[z];
		struct opal_unwind_table t = { .base = 0x400000, .bodies = bodies, .n_rules = n,
					       .n_bodies = 7 };
		struct opal_unwind_table_info info;
		t.rules = calloc(n, sizeof(*t.rules));
		assert_non_null(t.rules);
		for (uint32_t i = 0; i < n; i++) {
			t.rules[i].addr = 100 + 5 * i + (i % 3);   /* strictly increasing */
			t.rules[i].body = i + 1 == n ? 0 : 1 + i % 6;
		}
		uint32_t elems = opal_unwind_paged_elems(n);
		void *buf = malloc((size_t)elems * OPAL_UNWIND_PAGE_BYTES);
		assert_non_null(buf);
		opal_unwind_paged_fill(&t, 0, buf, &info);
		assert_int_equal(info.n_rules, n);
		assert_int_equal(info.n_index,
				 (n + OPAL_UNWIND_PAGE_RULES * OPAL_UNWIND_INDEX_PAGES - 1) /
					 (OPAL_UNWIND_PAGE_RULES * OPAL_UNWIND_INDEX_PAGES));
		for (uint32_t i = 0; i < n; i += (i % 512 < 2 || i % 512 > 509 || n - i < 3) ? 1 : 97) {
			uint64_t a = t.base + t.rules[i].addr;
			for (int d = -1; d <= 5; d++) {
				int want = ref_body(&t, a + d), got;
				got = opal_unwind_paged_lookup(buf, elems, &info, a + d);
				if (want < 0)
					assert_int_equal(got, OPAL_SEARCH_BELOW);
				else
					assert_int_equal(got, want);
			}
		}
		/* below the base, past 4 GiB, and a table cut short */
		assert_int_equal(opal_unwind_paged_lookup(buf, elems, &info, t.base - 1),
				 OPAL_SEARCH_BELOW);
		assert_int_equal(opal_unwind_paged_lookup(buf, elems, &info, t.base + (1ull << 33)),
				 OPAL_SEARCH_BELOW);
		assert_int_equal(opal_unwind_paged_lookup(buf, elems - 1, &info,
							  t.base + t.rules[n - 1].addr),
				 OPAL_SEARCH_MISSING);
		free(buf);
		free(t.rules);
	}
}

static void test_maps_bpf(void **state)
{
	(void)state;
	struct opal_counters ctr = { 0 };
	struct opal_unwind_maps m;
	struct opal_unwind_table ref;
	opal_file_id id = { { 9 } };

	if (geteuid() != 0)
		fail_msg("this test creates BPF maps: run it as root (make test does)");
	int info = bpf_map_create(BPF_MAP_TYPE_ARRAY, "info", 4,
				  sizeof(struct opal_unwind_table_info), OPAL_UNWIND_MAX_TABLES, NULL);
	assert_true(info >= 0);
	int rules = outer_of(BPF_MAP_TYPE_ARRAY_OF_MAPS, OPAL_UNWIND_PAGE_BYTES, BPF_F_MMAPABLE);
	int bodies = outer_of(BPF_MAP_TYPE_ARRAY_OF_MAPS, 16, BPF_F_MMAPABLE);
	int procs = outer_of(BPF_MAP_TYPE_HASH_OF_MAPS, sizeof(struct opal_unwind_mapping), 0);
	int fd = open(LIBC, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(opal_unwind_table_build(fd, NULL, &ref), 0);
	assert_int_equal(opal_unwind_maps_init(&m, info, rules, bodies, procs, 0, 0, &ctr), 0);

	struct opal_unwind_file *f = opal_unwind_file_get(&m, &id, 1);
	assert_int_equal(opal_unwind_file_request(&m, f, fd, 1), 0);
	assert_int_equal(f->state, OPAL_UFILE_LOADED);
	/* info written, arrays in the outer maps with the file's sizes */
	struct opal_unwind_table_info ti;
	assert_int_equal(bpf_map_lookup_elem(info, &f->slot, &ti), 0);
	assert_int_equal(ti.base, ref.base);
	assert_int_equal(ti.n_rules, ref.n_rules);
	assert_int_equal(ti.n_bodies, ref.n_bodies);
	assert_int_equal(ti.n_index, 1);
	assert_int_equal(ti.top[0], ref.rules[0].addr);
	int rfd = inner_at(rules, f->slot);
	assert_true(rfd >= 0);
	/* an index page, then the rule pages, the last one padded */
	static struct opal_unwind_rule_page page;
	static struct opal_unwind_index_page index;
	uint32_t last = ref.n_rules - 1, e = 0;
	assert_int_equal(bpf_map_lookup_elem(rfd, &e, &index), 0);
	assert_int_equal(index.addr[1], ref.rules[OPAL_UNWIND_PAGE_RULES].addr);
	e = 1 + last / OPAL_UNWIND_PAGE_RULES;
	assert_int_equal(bpf_map_lookup_elem(rfd, &e, &page), 0);
	assert_memory_equal(&page.r[last % OPAL_UNWIND_PAGE_RULES], &ref.rules[last],
			    sizeof(page.r[0]));
	e++;
	assert_true(bpf_map_lookup_elem(rfd, &e, &page) < 0);   /* sized to the file */
	close(rfd);
	/* lookups through the mapped arrays agree with the reference */
	for (uint32_t i = 0; i < ref.n_rules; i += 7) {
		struct opal_unwind_body got;
		uint64_t a = ref.base + ref.rules[i].addr;
		assert_true(opal_unwind_file_lookup(&m, f, a, &got) >= 0);
		assert_memory_equal(&got, opal_unwind_table_lookup(&ref, a, NULL, NULL), sizeof(got));
	}

	/* a process array: header, then the mappings */
	struct opal_unwind_mapping maps[2] = {
		{ .start = 0x1000, .limit = 0x2000, .bias = 0x1000, .slot = f->slot },
		{ .start = 0x5000, .limit = 0x6000, .slot = OPAL_SLOT_NONE },
	};
	assert_int_equal(opal_unwind_proc_install(&m, 4242, maps, 2, 7), 0);
	int pfd = inner_at(procs, 4242);
	assert_true(pfd >= 0);
	struct opal_unwind_mapping got;
	uint32_t k = 0;
	assert_int_equal(bpf_map_lookup_elem(pfd, &k, &got), 0);
	assert_int_equal(((struct opal_unwind_proc_hdr *)&got)->n, 2);
	assert_int_equal(((struct opal_unwind_proc_hdr *)&got)->gen, 7);
	k = 2;
	assert_int_equal(bpf_map_lookup_elem(pfd, &k, &got), 0);
	assert_memory_equal(&got, &maps[1], sizeof(got));
	close(pfd);
	opal_unwind_proc_remove(&m, 4242);
	assert_true(inner_at(procs, 4242) < 0);

	/* unloading empties the slot: info first, then the arrays */
	opal_unwind_file_put(&m, f, 2);
	opal_unwind_maps_expire(&m, 2 + OPAL_UNWIND_IDLE_NS);
	assert_int_equal(bpf_map_lookup_elem(info, &(uint32_t){ 0 }, &ti), 0);
	assert_int_equal(ti.n_rules, 0);
	assert_true(inner_at(rules, 0) < 0);
	opal_unwind_maps_destroy(&m);
	opal_unwind_table_free(&ref);
	close(fd);
	close(info);
	close(rules);
	close(bodies);
	close(procs);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_step_rsp_based),
		cmocka_unit_test(test_step_rbp_and_deref),
		cmocka_unit_test(test_step_stack_switch),
		cmocka_unit_test(test_step_plt),
		cmocka_unit_test(test_step_signal_frame),
		cmocka_unit_test(test_step_ra_in_register_and_outermost),
		cmocka_unit_test(test_fp_step),
		cmocka_unit_test(test_fp_step_prologue),
		cmocka_unit_test(test_paged_search),
		cmocka_unit_test(test_jit_step),
		cmocka_unit_test(test_walk_depths),
		cmocka_unit_test(test_walk_copy_end),
		cmocka_unit_test(test_walk_signal_stack_regions),
		cmocka_unit_test(test_walk_gap_frame_pointers),
		cmocka_unit_test(test_walk_own_stack),
		cmocka_unit_test(test_maps_lookup_matches_reference),
		cmocka_unit_test(test_maps_budget),
		cmocka_unit_test(test_builder_thread),
		cmocka_unit_test(test_maps_bpf),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
