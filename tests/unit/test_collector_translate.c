/* Unit tests of user-address translation: collector/stack/samples.c over
 * collector/proc/proc_table.c and collector/proc/files.c, with a fake process source
 * (maps text, mapped files and a clock under the test's control) and
 * hand-built ELF files laid out like lld output (p_vaddr != p_offset,
 * several PT_LOADs in one page). */
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
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <bpf/bpf.h>

#include "collector/stack/samples.h"
#include "collector/unwind/unwind_proc.h"
#include "shared/fileid.h"

#define NATIVE OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_NATIVE
#define KERNEL OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_KERNEL
#define ERROR  OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_ERROR
#define JIT    OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_JIT
#define E_NO_MAPPING  OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_NO_MAPPING
#define E_TRUNCATED   OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_TRUNCATED
#define E_UNREADABLE  OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_UNREADABLE_STACK
#define INTERP OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_INTERPRETED
#define E_INTERP_READ OPAL__WIRE__V1__UNWIND_ERROR__UNWIND_ERROR_INTERP_UNREADABLE

#define BASE 0x555500000000ull
#define MS   1000000ull

/* ---- fake process source ------------------------------------------------ */

#define MAX_FAKE 16

struct fake_proc {
	pid_t pid;
	const char *comm, *exe;
	const char *maps;            /* maps text, one mapping per line */
	uint64_t start;              /* its start time (identity), 0 taken as 1 */
};

struct fake_file {
	pid_t pid;
	uint64_t start, limit;
	const char *path;            /* real file to open */
};

struct fake {
	struct fake_proc procs[MAX_FAKE];
	struct fake_file files[MAX_FAKE];
	uint64_t now;
	int info_reads, opens;
	pid_t excluded[MAX_FAKE];
	int n_excluded;
};

static int cmp_start(const void *a, const void *b)
{
	const struct opal_map_entry *x = a, *y = b;
	return x->start < y->start ? -1 : x->start > y->start;
}

static int fake_read_maps(void *ctx, pid_t pid, struct opal_map_entry **out, size_t *n)
{
	struct fake *f = ctx;

	for (int i = 0; i < MAX_FAKE; i++) {
		if (f->procs[i].pid != pid || !f->procs[i].maps)
			continue;
		struct opal_map_entry *v = calloc(64, sizeof(*v));
		size_t k = 0;
		const char *s = f->procs[i].maps;
		while (*s) {
			const char *nl = strchr(s, '\n');
			size_t len = nl ? (size_t)(nl - s) : strlen(s);
			char line[256];
			snprintf(line, sizeof(line), "%.*s", (int)len, s);
			assert_int_equal(opal_maps_parse_line(line, &v[k]), 0);
			k++;
			s += len + (nl ? 1 : 0);
		}
		qsort(v, k, sizeof(*v), cmp_start);
		*out = v;
		*n = k;
		return 0;
	}
	return -ESRCH;
}

static int fake_open_mapped(void *ctx, pid_t pid, uint64_t start, uint64_t limit)
{
	struct fake *f = ctx;

	for (int i = 0; i < MAX_FAKE; i++) {
		struct fake_file *x = &f->files[i];
		if (x->path && x->pid == pid && x->start == start && x->limit == limit) {
			int fd = open(x->path, O_RDONLY | O_CLOEXEC);
			if (fd >= 0)
				f->opens++;
			return fd < 0 ? -errno : fd;
		}
	}
	return -ENOENT;
}

static int fake_read_info(void *ctx, pid_t pid, struct opal_proc_info *out)
{
	struct fake *f = ctx;

	memset(out, 0, sizeof(*out));
	f->info_reads++;
	for (int i = 0; i < MAX_FAKE; i++) {
		if (f->procs[i].pid == pid) {
			snprintf(out->comm, sizeof(out->comm), "%s", f->procs[i].comm);
			out->exe = strdup(f->procs[i].exe);
			out->service_name = strdup("");
			return 0;
		}
	}
	out->exe = strdup("");
	out->service_name = strdup("");
	return 0;
}

static int fake_identity(void *ctx, pid_t pid, struct opal_proc_identity *out)
{
	struct fake *f = ctx;

	memset(out, 0, sizeof(*out));
	for (int i = 0; i < MAX_FAKE; i++) {
		if (f->procs[i].pid == pid) {
			out->start_ticks = f->procs[i].start ? f->procs[i].start : 1;
			for (const char *c = f->procs[i].exe; *c; c++)   /* the exe's "inode" */
				out->exe_ino = out->exe_ino * 31 + (uint8_t)*c;
			return 0;
		}
	}
	return -ESRCH;
}

static uint64_t fake_now(void *ctx)
{
	return ((struct fake *)ctx)->now;
}

static void fake_on_exclude(void *ctx, pid_t pid)
{
	struct fake *f = ctx;
	f->excluded[f->n_excluded++] = pid;
}

/* ---- ELF files ------------------------------------------------------------ */

static const uint8_t BUILD_ID[20] = { 0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6,
				      7, 8, 9, 10, 11, 12, 13, 14, 15, 16 };

/* An ET_DYN laid out like a small lld link: R at 0/0, R+X at 0x6e0/0x16e0,
 * RW at 0x8e0/0x28e0 (all in the file's first page), a build ID note.
 * `salt` changes a byte so that copies get different file IDs. */
static void write_elf(const char *path, uint8_t salt)
{
	uint8_t img[0x1000];
	Elf64_Ehdr *eh = (Elf64_Ehdr *)img;
	Elf64_Phdr *ph = (Elf64_Phdr *)(img + sizeof(*eh));

	memset(img, 0, sizeof(img));
	memcpy(eh->e_ident, ELFMAG, SELFMAG);
	eh->e_ident[EI_CLASS] = ELFCLASS64;
	eh->e_ident[EI_DATA] = ELFDATA2LSB;
	eh->e_ident[EI_VERSION] = EV_CURRENT;
	eh->e_type = ET_DYN;
	eh->e_machine = EM_X86_64;
	eh->e_version = EV_CURRENT;
	eh->e_phoff = sizeof(*eh);
	eh->e_ehsize = sizeof(*eh);
	eh->e_phentsize = sizeof(*ph);
	eh->e_phnum = 4;
	ph[0] = (Elf64_Phdr){ .p_type = PT_LOAD, .p_flags = PF_R, .p_offset = 0, .p_vaddr = 0,
			      .p_filesz = 0x6d4, .p_memsz = 0x6d4, .p_align = 0x1000 };
	ph[1] = (Elf64_Phdr){ .p_type = PT_LOAD, .p_flags = PF_R | PF_X, .p_offset = 0x6e0,
			      .p_vaddr = 0x16e0, .p_filesz = 0x200, .p_memsz = 0x200,
			      .p_align = 0x1000 };
	ph[2] = (Elf64_Phdr){ .p_type = PT_LOAD, .p_flags = PF_R | PF_W, .p_offset = 0x8e0,
			      .p_vaddr = 0x28e0, .p_filesz = 0x6e8, .p_memsz = 0x700,
			      .p_align = 0x1000 };
	ph[3] = (Elf64_Phdr){ .p_type = PT_NOTE, .p_flags = PF_R, .p_offset = 0x300,
			      .p_vaddr = 0x300, .p_filesz = 36, .p_memsz = 36, .p_align = 4 };
	uint32_t nh[3] = { 4, 20, NT_GNU_BUILD_ID };
	memcpy(img + 0x300, nh, 12);
	memcpy(img + 0x30c, "GNU", 4);
	memcpy(img + 0x310, BUILD_ID, 20);
	img[0x700] = salt;
	FILE *f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fwrite(img, 1, sizeof(img), f), sizeof(img));
	fclose(f);
}

static char dir[64];
static char app[128], app2[128], notelf[128];

static int setup_files(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/opal-translate-XXXXXX");
	assert_non_null(mkdtemp(dir));
	snprintf(app, sizeof(app), "%s/app", dir);
	snprintf(app2, sizeof(app2), "%s/app2", dir);
	snprintf(notelf, sizeof(notelf), "%s/notelf", dir);
	write_elf(app, 1);
	write_elf(app2, 2);
	FILE *f = fopen(notelf, "w");
	fputs("#!/bin/sh\necho not an ELF file\n", f);
	fclose(f);
	return 0;
}

static int teardown_files(void **state)
{
	(void)state;
	unlink(app);
	unlink(app2);
	unlink(notelf);
	rmdir(dir);
	return 0;
}

static opal_file_id file_id_of(const char *path)
{
	opal_file_id id;
	int fd = open(path, O_RDONLY);
	assert_true(fd >= 0);
	assert_int_equal(opal_file_id_from_fd(fd, &id), 0);
	close(fd);
	return id;
}

/* ---- fixture ------------------------------------------------------------ */

static const char APP_MAPS[] =
	"555500000000-555500001000 r--p 00000000 08:01 1234 /fake/app\n"
	"555500001000-555500002000 r-xp 00000000 08:01 1234 /fake/app\n"
	"555500002000-555500003000 rw-p 00000000 08:01 1234 /fake/app\n"
	"7f0000000000-7f0000100000 rwxp 00000000 00:00 0 \n"
	"7f1000000000-7f1000001000 r-xp 00000000 08:01 999 /fake/missing\n"
	"7f2000000000-7f2000001000 r-xp 00000000 08:01 998 /fake/notelf\n"
	"7ffff7fc1000-7ffff7fc3000 r-xp 00000000 00:00 0 [vdso]\n"
	"7ffffffde000-7ffffffff000 rw-p 00000000 00:00 0 [stack]";

struct fx {
	struct fake fake;
	struct opal_proc_source src;
	struct opal_counters ctr;
	struct opal_file_table files;
	struct opal_proc_table procs;
	struct opal_stacks stacks;
	struct opal_stack stack;
};

static struct fx *fx_new(size_t max_files, size_t max_fds, bool include_self)
{
	struct fx *x = calloc(1, sizeof(*x));

	x->src = (struct opal_proc_source){ &x->fake, fake_read_maps, fake_open_mapped,
					    fake_read_info, fake_now, fake_identity };
	x->fake.now = 1000 * MS;
	x->fake.procs[0] = (struct fake_proc){ 100, "app", "/fake/app", APP_MAPS };
	x->fake.files[0] = (struct fake_file){ 100, BASE + 0x1000, BASE + 0x2000, app };
	x->fake.files[1] = (struct fake_file){ 100, 0x7f2000000000, 0x7f2000001000, notelf };
	assert_int_equal(opal_files_init(&x->files, max_files, max_fds, &x->src, &x->ctr), 0);
	assert_int_equal(opal_procs_init(&x->procs, 16, include_self, &x->src, &x->files, &x->ctr),
			 0);
	x->procs.on_exclude = fake_on_exclude;
	x->procs.on_exclude_ctx = &x->fake;
	opal_stacks_init(&x->stacks, &x->procs, NULL, NULL, &x->ctr);
	return x;
}

static void fx_free(struct fx *x)
{
	opal_stacks_destroy(&x->stacks);
	opal_procs_destroy(&x->procs);
	opal_files_destroy(&x->files);
	free(x);
}

/* Translates a sample of `pid` with the given stacks. */
static int translate(struct fx *x, pid_t pid, const uint64_t *k, int nk, const uint64_t *u, int nu)
{
	static struct opal_sample_event ev;
	struct opal_proc *p;

	memset(&ev, 0, sizeof(ev));
	ev.kind = OPAL_EVENT_SAMPLE;
	ev.pid = ev.tid = (uint32_t)pid;
	ev.kstack_n = nk;
	for (int i = 0; i < nk; i++)
		ev.kstack[i] = k[i];
	if (nu < 0) {   /* no user registers: an error frame */
		ev.ustack_n = 1;
		ev.ustack[0] = OPAL_UERR_NO_REGS;
		ev.uflags[0] = OPAL_UFRAME_ERROR;
	} else {
		ev.ustack_n = nu;
	}
	/* a walk: the interrupted PC, then return addresses */
	for (int i = 0; i < nu && i < OPAL_USTACK_SLOTS; i++) {
		ev.ustack[i] = u[i];
		ev.uflags[i] = i > 0 ? OPAL_UFRAME_RETURN : 0;
	}
	return opal_translate_sample(&x->stacks, &ev, &p, &x->stack);
}

static void expect_frame(const struct opal_frame *f, uint8_t kind, uint64_t addr, bool ret)
{
	if (f->kind != kind || f->address != addr || f->return_address != ret)
		fail_msg("frame {kind %u, address 0x%llx, ret %d}, want {%u, 0x%llx, %d}", f->kind,
			 (unsigned long long)f->address, f->return_address, kind,
			 (unsigned long long)addr, ret);
}

/* ---- tests ---------------------------------------------------------------- */

static void test_native_vdso_jit_kernel(void **state)
{
	(void)state;
	struct fx *x = fx_new(16, 16, false);
	uint64_t k[] = { 0xffffffff81000010, 0xffffffff81000020 };
	uint64_t u[] = { BASE + 0x17e7, BASE + 0x1809, 0x7ffff7fc1010, 0x7f0000000123 };

	assert_int_equal(translate(x, 100, k, 2, u, 4), 0);
	struct opal_stack *s = &x->stack;
	assert_int_equal(s->n_frames, 6);
	expect_frame(&s->frames[0], KERNEL, k[0], false);
	expect_frame(&s->frames[1], KERNEL, k[1], true);
	assert_null(s->frames[0].mapping);
	/* ELF virtual addresses: runtime - start + offset + (p_vaddr - p_offset) */
	expect_frame(&s->frames[2], NATIVE, 0x17e7, false);
	expect_frame(&s->frames[3], NATIVE, 0x1809, true);
	const struct opal_mapping_desc *m = s->frames[2].mapping;
	assert_non_null(m);
	assert_ptr_equal(s->frames[3].mapping, m);   /* one description per mapping */
	assert_true(m->has_file_id);
	opal_file_id want = file_id_of(app);
	assert_memory_equal(m->file_id.b, want.b, 16);
	assert_int_equal(m->build_id_len, 20);
	assert_memory_equal(m->build_id, BUILD_ID, 20);
	assert_int_equal(m->start, BASE + 0x1000);
	assert_int_equal(m->limit, BASE + 0x2000);
	assert_int_equal(m->file_offset, 0);
	assert_string_equal(m->path, "/fake/app");
	/* the load bias agrees with the frames: runtime = vaddr + bias */
	assert_int_equal(m->load_bias, BASE);
	assert_int_equal(0x17e7 + m->load_bias, u[0]);
	/* vDSO and anonymous executable memory (a JIT frame): runtime
	 * address, no file ID */
	expect_frame(&s->frames[4], NATIVE, 0x7ffff7fc1010, true);
	assert_false(s->frames[4].mapping->has_file_id);
	assert_string_equal(s->frames[4].mapping->path, "[vdso]");
	assert_int_equal(s->frames[4].mapping->load_bias, 0);
	expect_frame(&s->frames[5], JIT, 0x7f0000000123, true);
	assert_false(s->frames[5].mapping->has_file_id);
	assert_string_equal(s->frames[5].mapping->path, "");
	assert_true(s->jit);
	assert_int_equal(s->n_maps, 3);
	assert_int_equal(x->ctr.maps_reads, 1);
	assert_int_equal(x->ctr.files_opened, 1);
	assert_int_equal(x->ctr.file_open_errors, 0);
	assert_int_equal(x->ctr.frames_no_mapping, 0);

	/* the second sample uses the caches: no new maps read or file open */
	assert_int_equal(translate(x, 100, NULL, 0, u, 2), 0);
	assert_int_equal(x->stack.n_frames, 2);
	expect_frame(&x->stack.frames[0], NATIVE, 0x17e7, false);
	assert_int_equal(x->ctr.maps_reads, 1);
	assert_int_equal(x->fake.opens, 1);
	assert_int_equal(x->fake.info_reads, 1);
	fx_free(x);
}

static void test_no_mapping_ends_stack_and_rereads_rate_limited(void **state)
{
	(void)state;
	struct fx *x = fx_new(16, 16, false);
	uint64_t u[] = { BASE + 0x17e7, 0x10000010, BASE + 0x1800 };

	assert_int_equal(translate(x, 100, NULL, 0, u, 3), 0);
	assert_int_equal(x->stack.n_frames, 2);
	expect_frame(&x->stack.frames[0], NATIVE, 0x17e7, false);
	expect_frame(&x->stack.frames[1], ERROR, E_NO_MAPPING, false);
	assert_null(x->stack.frames[1].mapping);
	assert_int_equal(x->ctr.frames_no_mapping, 1);
	/* maps were read just now: the miss does not re-read them */
	assert_int_equal(x->ctr.maps_reads, 1);

	/* a new mapping appears (dlopen) */
	static char maps2[sizeof(APP_MAPS) + 100];
	snprintf(maps2, sizeof(maps2), "10000000-10001000 r-xp 00000000 00:00 0 [anon:jit]\n%s",
		 APP_MAPS);
	x->fake.procs[0].maps = maps2;
	x->fake.now += 50 * MS;
	assert_int_equal(translate(x, 100, NULL, 0, u, 3), 0);
	assert_int_equal(x->ctr.maps_reads, 1);   /* within 100 ms: still limited */
	assert_int_equal(x->stack.n_frames, 2);
	assert_int_equal(x->ctr.frames_no_mapping, 2);

	x->fake.now += 60 * MS;
	assert_int_equal(translate(x, 100, NULL, 0, u, 3), 0);
	assert_int_equal(x->ctr.maps_reads, 2);   /* re-read once */
	assert_int_equal(x->stack.n_frames, 3);
	expect_frame(&x->stack.frames[1], JIT, 0x10000010, true);
	assert_string_equal(x->stack.frames[1].mapping->path, "[anon:jit]");
	expect_frame(&x->stack.frames[2], NATIVE, 0x1800, true);
	assert_true(x->stack.frames[2].mapping->has_file_id);
	assert_int_equal(x->ctr.frames_no_mapping, 2);

	/* all addresses known: no re-read however much time passes */
	x->fake.now += 10000 * MS;
	assert_int_equal(translate(x, 100, NULL, 0, u, 3), 0);
	assert_int_equal(x->ctr.maps_reads, 2);
	fx_free(x);
}

/* An OTEP 4719 context published after the process's maps were read is
 * found by a scan of its maps once the backoff allows (1 s, then doubling),
 * and one that can no longer be read (unmapped) is looked for again at the
 * next interval, then with the backoff anew, its copy kept meanwhile. The
 * process is this test's own, so that the header is really read. */
static void test_process_context_published_late(void **state)
{
	(void)state;
	struct fx *x = fx_new(16, 16, true);
	long page = sysconf(_SC_PAGESIZE);
	uint8_t *m = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
			  -1, 0);
	uint32_t version = 2, size = 3;
	uint64_t published = 5, payload = (uint64_t)(uintptr_t)(m + page);
	static char maps2[sizeof(APP_MAPS) + 100];

	assert_true(m != MAP_FAILED);
	memcpy(m, "OTEL_CTX", 8);
	memcpy(m + 8, &version, 4);
	memcpy(m + 12, &size, 4);
	memcpy(m + 16, &published, 8);
	memcpy(m + 24, &payload, 8);
	memcpy(m + page, "abc", 3);
	x->fake.procs[0].pid = getpid();
	struct opal_proc *p = opal_procs_get(&x->procs, getpid());
	assert_non_null(p);
	assert_null(opal_procs_context(&x->procs, p, 1)->payload);
	assert_int_equal(x->ctr.process_ctx_scans, 0);   /* its maps were read just now */

	snprintf(maps2, sizeof(maps2), "%s\n%lx-%lx rw-p 00000000 00:00 0 [anon:OTEL_CTX]",
		 APP_MAPS, (unsigned long)(uintptr_t)m, (unsigned long)(uintptr_t)(m + 2 * page));
	x->fake.procs[0].maps = maps2;
	x->fake.now += 500 * MS;
	assert_null(opal_procs_context(&x->procs, p, 2)->payload);
	assert_int_equal(x->ctr.process_ctx_scans, 0);   /* within its first second */
	x->fake.now += 600 * MS;
	const struct opal_procctx *c = opal_procs_context(&x->procs, p, 3);
	assert_int_equal(x->ctr.process_ctx_scans, 1);
	assert_int_equal(x->ctr.process_ctx_reads, 1);
	assert_int_equal(c->len, 3);
	assert_memory_equal(c->payload, "abc", 3);
	assert_true(opal_procs_context(&x->procs, p, 3) == c);   /* once per interval */

	munmap(m, 2 * page);   /* unpublished, or exiting: the copy is kept */
	x->fake.now += 100 * MS;
	assert_non_null(opal_procs_context(&x->procs, p, 4)->payload);
	assert_int_equal(x->ctr.process_ctx_errors, 1);
	x->fake.procs[0].maps = APP_MAPS;
	x->fake.now += 1100 * MS;
	assert_non_null(opal_procs_context(&x->procs, p, 5)->payload);
	assert_int_equal(x->ctr.process_ctx_scans, 2);
	x->fake.now += 1100 * MS;   /* gaps of 1 s, then 2 s */
	opal_procs_context(&x->procs, p, 6);
	assert_int_equal(x->ctr.process_ctx_scans, 3);
	x->fake.now += 1100 * MS;
	opal_procs_context(&x->procs, p, 7);
	assert_int_equal(x->ctr.process_ctx_scans, 3);
	x->fake.now += 1000 * MS;
	opal_procs_context(&x->procs, p, 8);
	assert_int_equal(x->ctr.process_ctx_scans, 4);
	fx_free(x);
}

static int cmdline_reads;

static int fake_read_command_line(void *ctx, pid_t pid, char **out)
{
	cmdline_reads++;
	*out = strdup("/fake/app --flag");
	return *out ? 0 : -ENOMEM;
}

/* process.command_line is read only when the table is told to (opt-in). */
static void test_command_line_opt_in(void **state)
{
	(void)state;
	struct fx *x = fx_new(16, 16, false);

	x->src.read_command_line = fake_read_command_line;
	cmdline_reads = 0;
	struct opal_proc *p = opal_procs_get(&x->procs, 100);
	assert_non_null(p);
	assert_null(p->info.command_line);
	assert_int_equal(cmdline_reads, 0);
	opal_procs_forget(&x->procs, 100);
	x->procs.command_line = true;
	p = opal_procs_get(&x->procs, 100);
	assert_non_null(p);
	assert_string_equal(p->info.command_line, "/fake/app --flag");
	assert_int_equal(cmdline_reads, 1);
	fx_free(x);
}

static void test_non_executable_mapping_is_no_mapping(void **state)
{
	(void)state;
	struct fx *x = fx_new(16, 16, false);
	/* a "return address" on the stack or in the data segment: a broken walk */
	uint64_t u[] = { BASE + 0x17e7, 0x7ffffffde100, BASE + 0x1800 };
	uint64_t u2[] = { BASE + 0x2010 };

	assert_int_equal(translate(x, 100, NULL, 0, u, 3), 0);
	assert_int_equal(x->stack.n_frames, 2);
	expect_frame(&x->stack.frames[1], ERROR, E_NO_MAPPING, false);
	assert_int_equal(translate(x, 100, NULL, 0, u2, 1), 0);
	assert_int_equal(x->stack.n_frames, 1);
	expect_frame(&x->stack.frames[0], ERROR, E_NO_MAPPING, false);
	assert_int_equal(x->ctr.frames_no_mapping, 2);
	fx_free(x);
}

static void test_unreadable_files_keep_runtime_address(void **state)
{
	(void)state;
	struct fx *x = fx_new(16, 16, false);
	uint64_t u[] = { 0x7f1000000100, 0x7f2000000200, BASE + 0x17e7 };

	assert_int_equal(translate(x, 100, NULL, 0, u, 3), 0);
	assert_int_equal(x->stack.n_frames, 3);
	/* /fake/missing cannot be opened */
	expect_frame(&x->stack.frames[0], NATIVE, 0x7f1000000100, false);
	assert_false(x->stack.frames[0].mapping->has_file_id);
	assert_string_equal(x->stack.frames[0].mapping->path, "/fake/missing");
	/* /fake/notelf opens but is no ELF file */
	expect_frame(&x->stack.frames[1], NATIVE, 0x7f2000000200, true);
	assert_false(x->stack.frames[1].mapping->has_file_id);
	expect_frame(&x->stack.frames[2], NATIVE, 0x17e7, true);
	assert_int_equal(x->ctr.file_open_errors, 2);
	assert_int_equal(x->ctr.files_opened, 2);   /* notelf and app */

	/* failures are remembered per mapping: not counted again */
	assert_int_equal(translate(x, 100, NULL, 0, u, 3), 0);
	assert_int_equal(x->ctr.file_open_errors, 2);
	assert_int_equal(x->ctr.files_opened, 2);
	fx_free(x);
}

static void test_opal_processes_excluded(void **state)
{
	(void)state;
	struct fx *x = fx_new(16, 16, false);
	uint64_t u[] = { BASE + 0x17e7 };

	x->fake.procs[1] = (struct fake_proc){ 200, "opal-symbolizer", "/usr/bin/opal-symbolizer",
					       APP_MAPS };
	x->fake.procs[2] = (struct fake_proc){ 300, "python3", "/usr/bin/python3", APP_MAPS };
	assert_int_equal(translate(x, 200, NULL, 0, u, 1), 1);
	assert_int_equal(x->ctr.samples_self, 1);
	assert_int_equal(x->fake.n_excluded, 1);
	assert_int_equal(x->fake.excluded[0], 200);
	assert_int_equal(translate(x, 200, NULL, 0, u, 1), 1);
	assert_int_equal(x->ctr.samples_self, 2);
	assert_int_equal(x->fake.n_excluded, 1);   /* told once */
	assert_int_equal(x->ctr.maps_reads, 0);    /* no work for excluded processes */

	/* explicit exclusion (the symbolizer peer found with SO_PEERCRED) */
	assert_int_equal(translate(x, 300, NULL, 0, u, 1), 0);
	opal_procs_exclude(&x->procs, 300);
	assert_int_equal(x->fake.excluded[1], 300);
	assert_int_equal(translate(x, 300, NULL, 0, u, 1), 1);
	/* ... also after its cache entry is gone (exec) */
	opal_procs_forget(&x->procs, 300);
	assert_int_equal(translate(x, 300, NULL, 0, u, 1), 1);
	/* its exit ends the exclusion: its exit path is still its own, a
	 * process that reuses the pid is not */
	assert_true(opal_procs_exited(&x->procs, 300));
	assert_false(opal_procs_exited(&x->procs, 300));
	assert_int_equal(translate(x, 300, NULL, 0, u, 1), 1);
	x->fake.procs[2].start = 2;
	assert_int_equal(translate(x, 300, NULL, 0, u, 1), 0);
	fx_free(x);

	/* --include-self: nothing excluded */
	x = fx_new(16, 16, true);
	x->fake.procs[1] = (struct fake_proc){ 200, "opal-symbolizer", "/usr/bin/opal-symbolizer",
					       APP_MAPS };
	assert_int_equal(translate(x, 200, NULL, 0, u, 1), 0);
	opal_procs_exclude(&x->procs, 100);
	assert_int_equal(translate(x, 100, NULL, 0, u, 1), 0);
	assert_int_equal(x->fake.n_excluded, 0);
	assert_int_equal(x->ctr.samples_self, 0);
	fx_free(x);
}

/* Samples taken after a process's exit event (its exit path) keep its
 * entry for OPAL_EXIT_GRACE_NS; a new process on the pid gets its own. */
static void test_exit_path_keeps_entry(void **state)
{
	(void)state;
	struct fx *x = fx_new(16, 16, false);
	uint64_t u[] = { BASE + 0x17e7 };
	struct opal_proc *p;

	assert_int_equal(translate(x, 100, NULL, 0, u, 1), 0);
	p = opal_procs_peek(&x->procs, 100);
	assert_false(opal_procs_exited(&x->procs, 100));
	assert_int_equal(x->fake.info_reads, 1);
	/* a zombie (same start time) ... */
	x->fake.now += OPAL_EXIT_GRACE_NS / 2;
	assert_int_equal(translate(x, 100, NULL, 0, u, 1), 0);
	assert_ptr_equal(opal_procs_peek(&x->procs, 100), p);
	/* ... and a pid no longer in /proc: still the exited process */
	x->fake.procs[0].pid = 0;
	assert_int_equal(translate(x, 100, NULL, 0, u, 1), 0);
	assert_int_equal(x->fake.info_reads, 1);
	assert_int_equal(x->ctr.maps_reads, 1);
	expect_frame(&x->stack.frames[0], NATIVE, 0x17e7, false);
	/* past the grace: forgotten */
	x->fake.now += OPAL_EXIT_GRACE_NS;
	opal_procs_reap(&x->procs);
	assert_null(opal_procs_peek(&x->procs, 100));
	assert_int_equal(x->procs.n_procs, 0);

	/* another process reusing the pid within the grace: a new entry */
	x->fake.procs[0].pid = 100;
	assert_int_equal(translate(x, 100, NULL, 0, u, 1), 0);
	assert_false(opal_procs_exited(&x->procs, 100));
	x->fake.procs[0].start = 7;
	assert_int_equal(translate(x, 100, NULL, 0, u, 1), 0);
	assert_int_equal(x->fake.info_reads, 3);
	assert_false(opal_procs_peek(&x->procs, 100)->exited);
	/* an exec of the pid forgets the exited entry at once */
	assert_false(opal_procs_exited(&x->procs, 100));
	opal_procs_forget(&x->procs, 100);
	assert_null(opal_procs_peek(&x->procs, 100));
	fx_free(x);
}

static void test_exec_drops_cached_maps(void **state)
{
	(void)state;
	struct fx *x = fx_new(16, 16, false);
	uint64_t old_pc[] = { BASE + 0x17e7 };

	assert_int_equal(translate(x, 100, NULL, 0, old_pc, 1), 0);
	assert_int_equal(x->ctr.maps_reads, 1);
	/* exec: same pid, new image at another base */
	x->fake.procs[0].maps = "666600001000-666600002000 r-xp 00000000 08:01 77 /fake/app2\n";
	x->fake.procs[0].exe = "/fake/app2";
	x->fake.files[0] = (struct fake_file){ 100, 0x666600001000, 0x666600002000, app2 };
	opal_procs_forget(&x->procs, 100);
	uint64_t new_pc[] = { 0x666600001700 };
	assert_int_equal(translate(x, 100, NULL, 0, new_pc, 1), 0);
	assert_int_equal(x->ctr.maps_reads, 2);
	assert_int_equal(x->fake.info_reads, 2);
	expect_frame(&x->stack.frames[0], NATIVE, 0x1700, false);
	opal_file_id want = file_id_of(app2);
	assert_memory_equal(x->stack.frames[0].mapping->file_id.b, want.b, 16);
	fx_free(x);
}

static void test_truncated_and_unreadable_stacks(void **state)
{
	(void)state;
	struct fx *x = fx_new(16, 16, false);
	static uint64_t deep[OPAL_USTACK_SLOTS];

	/* the unwinder's truncation frame after OPAL_MAX_USER_FRAMES frames */
	for (int i = 0; i < OPAL_MAX_USER_FRAMES; i++)
		deep[i] = BASE + 0x1700 + (uint64_t)i;
	assert_int_equal(translate(x, 100, NULL, 0, deep, OPAL_MAX_USER_FRAMES), 0);
	assert_int_equal(x->stack.n_frames, OPAL_MAX_USER_FRAMES);
	static struct opal_sample_event ev;
	struct opal_proc *p;
	memset(&ev, 0, sizeof(ev));
	ev.kind = OPAL_EVENT_SAMPLE;
	ev.pid = ev.tid = 100;
	ev.ustack_n = OPAL_MAX_USER_FRAMES + 1;
	for (int i = 0; i < OPAL_MAX_USER_FRAMES; i++) {
		ev.ustack[i] = deep[i];
		ev.uflags[i] = i > 0 ? OPAL_UFRAME_RETURN : 0;
	}
	ev.ustack[OPAL_MAX_USER_FRAMES] = OPAL_UERR_TRUNCATED;
	ev.uflags[OPAL_MAX_USER_FRAMES] = OPAL_UFRAME_ERROR;
	assert_int_equal(opal_translate_sample(&x->stacks, &ev, &p, &x->stack), 0);
	assert_int_equal(x->stack.n_frames, OPAL_MAX_USER_FRAMES + 1);
	expect_frame(&x->stack.frames[OPAL_MAX_USER_FRAMES - 1], NATIVE,
		     0x1700 + OPAL_MAX_USER_FRAMES - 1, true);
	expect_frame(&x->stack.frames[OPAL_MAX_USER_FRAMES], ERROR, E_TRUNCATED, false);
	assert_int_equal(x->ctr.frames_truncated, 1);

	/* no user registers */
	uint64_t k[] = { 0xffffffff81000010 };
	assert_int_equal(translate(x, 100, k, 1, NULL, -EFAULT), 0);
	assert_int_equal(x->stack.n_frames, 2);
	expect_frame(&x->stack.frames[0], KERNEL, k[0], false);
	expect_frame(&x->stack.frames[1], ERROR, E_UNREADABLE, false);
	assert_int_equal(x->ctr.stack_errors, 1);
	/* a kernel thread: kernel frames only, no error */
	assert_int_equal(translate(x, 100, k, 1, NULL, 0), 0);
	assert_int_equal(x->stack.n_frames, 1);
	assert_int_equal(x->ctr.stack_errors, 1);
	fx_free(x);
}

/* Past the table's bound the least recently used entry goes, counted. */
static void test_table_bound_evicts(void **state)
{
	(void)state;
	struct fx *x = fx_new(16, 16, false);

	for (pid_t pid = 5000; pid < 5016; pid++)
		assert_non_null(opal_procs_get(&x->procs, pid));
	assert_int_equal(x->ctr.procs_evicted, 0);
	assert_non_null(opal_procs_get(&x->procs, 5000));   /* used again: now the newest */
	assert_non_null(opal_procs_get(&x->procs, 5016));
	assert_int_equal(x->procs.n_procs, 16);
	assert_int_equal(x->ctr.procs_evicted, 1);
	assert_non_null(opal_procs_peek(&x->procs, 5000));
	assert_null(opal_procs_peek(&x->procs, 5001));
	/* the evicted process, sampled again, gets an entry of its own */
	assert_non_null(opal_procs_get(&x->procs, 5001));
	assert_int_equal(x->ctr.procs_evicted, 2);
	assert_null(opal_procs_peek(&x->procs, 5002));
	fx_free(x);
}

static void test_process_gone(void **state)
{
	(void)state;
	struct fx *x = fx_new(16, 16, false);
	uint64_t u[] = { BASE + 0x17e7, BASE + 0x1800 };

	assert_int_equal(translate(x, 4242, NULL, 0, u, 2), 0);
	assert_int_equal(x->stack.n_frames, 1);
	expect_frame(&x->stack.frames[0], ERROR, E_NO_MAPPING, false);
	fx_free(x);
}

static void note_gone(void *ctx, pid_t pid)
{
	struct fake *f = ctx;
	f->excluded[f->n_excluded++] = -pid;   /* negated: told apart from exclusions */
}

/* After lost exec/exit events only the entries whose process is gone, is
 * another one, or runs another executable are dropped; the rest keep
 * their maps (no re-read). */
static void test_revalidate_after_lost_events(void **state)
{
	(void)state;
	struct fx *x = fx_new(16, 16, false);
	uint64_t u[] = { BASE + 0x17e7 };

	for (int i = 1; i <= 3; i++)
		x->fake.procs[i] = (struct fake_proc){ 100 + 100 * i, "app", "/fake/app", APP_MAPS };
	x->fake.procs[4] = (struct fake_proc){ 600, "opal-symbolizer", "/usr/sbin/opal-symbolizer" };
	for (pid_t pid = 100; pid <= 400; pid += 100)
		assert_int_equal(translate(x, pid, NULL, 0, u, 1), 0);
	opal_procs_exclude(&x->procs, 500);   /* an excluded pid never cached */
	opal_procs_exclude(&x->procs, 600);
	assert_int_equal(x->ctr.maps_reads, 4);
	x->fake.n_excluded = 0;

	x->fake.procs[1].pid = 0;               /* 200 exited */
	x->fake.procs[2].start = 77;            /* 300: pid reused */
	x->fake.procs[3].exe = "/fake/other";   /* 400: exec of another executable */
	assert_int_equal(opal_procs_revalidate(&x->procs, note_gone, &x->fake), 4);
	assert_int_equal(x->fake.n_excluded, 4);
	int seen = 0;
	for (int i = 0; i < x->fake.n_excluded; i++)
		seen |= 1 << (-x->fake.excluded[i] / 100);
	assert_int_equal(seen, (1 << 2) | (1 << 3) | (1 << 4) | (1 << 5));
	assert_non_null(opal_procs_peek(&x->procs, 100));
	assert_null(opal_procs_peek(&x->procs, 200));
	assert_null(opal_procs_peek(&x->procs, 400));
	assert_int_equal(x->procs.n_extra_excluded, 1);   /* 600 lives on */
	assert_int_equal(x->procs.extra_excluded[0], 600);
	/* 100 kept its maps: no read */
	assert_int_equal(translate(x, 100, NULL, 0, u, 1), 0);
	assert_int_equal(x->ctr.maps_reads, 4);
	expect_frame(&x->stack.frames[0], NATIVE, 0x17e7, false);
	/* nothing changed since: nothing dropped */
	assert_int_equal(opal_procs_revalidate(&x->procs, NULL, NULL), 0);
	fx_free(x);
}

/* An exit event's VMAs in the order the process made them (a library's
 * text mapped over its first, larger mapping with MAP_FIXED; libraries
 * below the executable): p's maps become sorted and disjoint, the later
 * mapping winning where two overlap. */
static void test_maps_from_vmas_order(void **state)
{
	(void)state;
	struct fx *x = fx_new(16, 16, false);
	const struct opal_vma_rec vmas[] = {
		{ .start = 0x7f3000000000, .limit = 0x7f3000010000, .inode = 10 },
		{ .start = 0x7f3000004000, .limit = 0x7f3000008000, .offset = 0x4000, .inode = 10 },
		{ .start = 0x7f2000000000, .limit = 0x7f2000002000, .inode = 11 },
		{ .start = 0x7f2000001000, .limit = 0x7f2000001000, .inode = 12 },   /* empty */
	};
	struct opal_proc *p = opal_procs_get(&x->procs, 4242);

	assert_non_null(p);
	assert_int_equal(p->n_maps, 0);   /* no such process */
	opal_procs_maps_from_vmas(&x->procs, p, vmas, sizeof(vmas) / sizeof(vmas[0]));
	assert_int_equal(p->n_maps, 2);
	assert_int_equal(p->maps[0].start, 0x7f2000000000);
	assert_int_equal(p->maps[1].start, 0x7f3000004000);
	assert_int_equal(p->maps[1].limit, 0x7f3000008000);
	assert_int_equal(p->maps[1].offset, 0x4000);
	fx_free(x);
}

/* A process gone since its maps were read keeps them (its samples in
 * flight ran there); a file it mapped that the table already knows is
 * found by device and inode, though map_files can no longer open it. */
static void test_gone_since_read(void **state)
{
	(void)state;
	struct fx *x = fx_new(16, 16, false);
	static char maps[256];
	struct stat st;
	uint64_t u[] = { BASE + 0x17e7 };

	assert_int_equal(translate(x, 100, NULL, 0, u, 1), 0);   /* app is known now */
	assert_int_equal(stat(app, &st), 0);
	snprintf(maps, sizeof(maps), "555500001000-555500002000 r-xp 00000000 %02x:%02x %llu /fake/app\n",
		 major(st.st_dev), minor(st.st_dev), (unsigned long long)st.st_ino);
	x->fake.procs[1] = (struct fake_proc){ 200, "app", "/fake/app", maps };
	struct opal_proc *p = opal_procs_get(&x->procs, 200);
	assert_non_null(p);
	assert_int_equal(p->n_maps, 1);
	/* it exits: map_files and maps are gone */
	x->fake.procs[1].pid = 0;
	opal_procs_reread(&x->procs, p);
	assert_int_equal(p->maps_err, -ESRCH);
	assert_int_equal(p->n_maps, 1);
	struct opal_file *f;
	const struct opal_map_res *r = opal_procs_resolve(&x->procs, p, 0, &f);
	assert_int_equal(r->state, OPAL_MAP_FILE);
	opal_file_id want = file_id_of(app);
	assert_memory_equal(f->id.b, want.b, 16);
	fx_free(x);
}

/* ---- interpreter frames ------------------------------------------------------ */

/* A runtime standing for CPython: the fixture `app` is its interpreter,
 * with its evaluation function at ELF vaddr [0x1700, 0x1780); a code
 * object's copy is its address (0xdead: freed since, -ESTALE). */
#define EVAL_LO (BASE + 0x1700)

static int rt_probe(int fd, void **info, const char **why)
{
	struct stat a, b;

	*info = NULL;
	return fstat(fd, &a) == 0 && stat(app, &b) == 0 && a.st_ino == b.st_ino ? 0 : -ENOENT;
}

static void rt_free_info(void *info)
{
}

/* test_interp_resync_keeps_walk: the walk map to look into at set-up
 * (-1: none), what was found there, and whether set-up fails */
static int rt_walk_fd = -1;
static bool rt_walk_seen, rt_setup_fails;

static int rt_setup(const void *info, pid_t pid, uint64_t bias, struct opal_interp_setup *out,
		    const char **why)
{
	struct opal_py_walk w;
	uint32_t key = (uint32_t)pid;

	if (rt_walk_fd >= 0)
		rt_walk_seen = bpf_map_lookup_elem(rt_walk_fd, &key, &w) == 0;
	if (rt_setup_fails)
		return -ESRCH;
	memset(out, 0, sizeof(*out));
	out->walk.runtime = bias + 0x4000;
	out->walk.version = 0x030b;
	out->eval_start[0] = bias + 0x1700;
	out->eval_limit[0] = bias + 0x1780;
	out->n_eval = 1;
	return 0;
}

static void rt_free_state(void *state)
{
}

static int rt_copy(const void *state, pid_t pid, uint64_t addr, uint32_t check,
		   Opal__Wire__V1__CodeObject *msg, uint8_t *buf, size_t len, bool *capped)
{
	if (addr == 0xdead)
		return -ESTALE;
	memcpy(buf, &addr, sizeof(addr));
	msg->runtime = OPAL__WIRE__V1__RUNTIME__RUNTIME_CPYTHON;
	msg->code.data = buf;
	msg->code.len = sizeof(addr);
	return 0;
}

static const struct opal_runtime fake_runtime = {
	"fake", rt_probe, rt_free_info, rt_setup, rt_free_state, rt_copy,
};
static const struct opal_runtime *const fake_runtimes[] = { &fake_runtime };

struct pyfx {
	struct fx *x;
	struct opal_interp ip;
};

static void pyfx_init(struct pyfx *f)
{
	f->x = fx_new(16, 16, false);
	assert_int_equal(opal_interp_init(&f->ip, &f->x->procs, -1, 0, &f->x->ctr), 0);
	f->ip.runtimes = fake_runtimes;
	f->ip.n_runtimes = 1;
	opal_stacks_destroy(&f->x->stacks);
	opal_stacks_init(&f->x->stacks, &f->x->procs, NULL, &f->ip, &f->x->ctr);
}

static void pyfx_free(struct pyfx *f)
{
	opal_stacks_destroy(&f->x->stacks);
	opal_interp_destroy(&f->ip);
	fx_free(f->x);
}

#define IF(code, lasti, fl) { (code), (lasti) | (uint32_t)(fl) << 24, 0 }

/* Translates a sample of pid 100 with user PCs u[nu] and interpreter
 * frames fr[nf]; returns the user frames' kinds as letters (N native, I
 * interpreted, E error) into `kinds`. */
static void translate_py(struct pyfx *f, const uint64_t *u, int nu,
			 const struct opal_interp_frame *fr, int nf, char *kinds)
{
	static struct opal_sample_event ev;
	struct opal_proc *p;

	memset(&ev, 0, sizeof(ev));
	ev.kind = OPAL_EVENT_SAMPLE;
	ev.pid = ev.tid = 100;
	ev.ustack_n = nu;
	for (int i = 0; i < nu; i++) {
		ev.ustack[i] = u[i];
		ev.uflags[i] = i > 0 ? OPAL_UFRAME_RETURN : 0;
	}
	ev.iframes_n = (uint32_t)nf;
	memcpy(ev.iframes, fr, (size_t)nf * sizeof(*fr));
	assert_int_equal(opal_translate_sample(&f->x->stacks, &ev, &p, &f->x->stack), 0);
	size_t i;
	for (i = 0; i < f->x->stack.n_frames; i++) {
		uint8_t k = f->x->stack.frames[i].kind;
		kinds[i] = k == NATIVE ? 'N' : k == INTERP ? 'I' : k == ERROR ? 'E' : '?';
	}
	kinds[i] = '\0';
}

static void test_interp_frames_at_their_evaluation(void **state)
{
	(void)state;
	struct pyfx f;
	char kinds[64];
	pyfx_init(&f);
	/* X (native) called by evaluation E1 running A and B, by Y, by E2
	 * running C: one evaluation's frames just leafward of its native frame */
	uint64_t u[] = { BASE + 0x17e7, EVAL_LO + 0x10, BASE + 0x1809, EVAL_LO + 0x20 };
	const struct opal_interp_frame fr[] = {
		IF(0xa000, 3, 0), IF(0xb000, 5, OPAL_IFRAME_ENTRY), IF(0xc000, 7, OPAL_IFRAME_ENTRY),
	};
	translate_py(&f, u, 4, fr, 3, kinds);
	assert_string_equal(kinds, "NIINNIN");
	const struct opal_frame *s = f.x->stack.frames;
	assert_int_equal(s[1].address, 3);
	assert_int_equal(s[2].address, 5);
	assert_int_equal(s[5].address, 7);
	assert_int_equal(s[1].code_id, opal_code_id(opal_procs_peek(&f.x->procs, 100)->serial,
						    0xa000, 0));
	assert_true(s[1].code_id != s[2].code_id && s[2].code_id != s[5].code_id);
	assert_int_equal(f.x->ctr.interp_frames, 3);
	assert_int_equal(f.x->ctr.interp_code_reads, 3);
	/* the same code objects again: copied once */
	translate_py(&f, u, 4, fr, 3, kinds);
	assert_int_equal(f.x->ctr.interp_code_reads, 3);
	assert_int_equal(f.x->ctr.interp_unmatched, 0);
	pyfx_free(&f);
}

/* Re-reads the maps of pid 100 (a sample with a PC in no mapping, past
 * the re-read's rate limit), which sets it up again at its next sample:
 * returns whether its walk was in BPF (`fd`) during that set-up. */
static bool resync(struct pyfx *f, int fd)
{
	uint64_t u[] = { EVAL_LO + 0x10 }, miss[] = { EVAL_LO + 0x10, 0x10000010 };
	uint64_t reads = f->x->ctr.maps_reads;
	char kinds[64];

	rt_walk_fd = fd;
	rt_walk_seen = false;
	f->x->fake.now += 200 * MS;
	translate_py(f, miss, 2, NULL, 0, kinds);
	translate_py(f, u, 1, NULL, 0, kinds);
	assert_int_equal(f->x->ctr.maps_reads, reads + 1);
	rt_walk_fd = -1;
	return rt_walk_seen;
}

/* A process set up again (its maps re-read) keeps its BPF walk while the
 * new set-up runs: removed first, its samples and the children it forks
 * then would go without one. A set-up that fails removes it. */
static void test_interp_resync_keeps_walk(void **state)
{
	(void)state;
	uint64_t u[] = { EVAL_LO + 0x10 };
	struct opal_py_walk w;
	uint32_t key = 100;
	struct pyfx f;
	char kinds[64];
	int fd = bpf_map_create(BPF_MAP_TYPE_HASH, "test_walks", sizeof(key), sizeof(w), 16, NULL);

	if (fd < 0)
		fail_msg("bpf_map_create: %s (this test needs root and BPF)", strerror(errno));
	pyfx_init(&f);
	f.ip.walk_map_fd = fd;
	translate_py(&f, u, 1, NULL, 0, kinds);
	assert_int_equal(bpf_map_lookup_elem(fd, &key, &w), 0);
	assert_int_equal(w.runtime, BASE + 0x4000);
	assert_true(resync(&f, fd));
	assert_int_equal(bpf_map_lookup_elem(fd, &key, &w), 0);
	rt_setup_fails = true;
	assert_true(resync(&f, fd));
	rt_setup_fails = false;
	assert_int_not_equal(bpf_map_lookup_elem(fd, &key, &w), 0);
	pyfx_free(&f);
	close(fd);
}

/* 3.12+: shim frames end each evaluation, one of which has run no frame
 * yet; more evaluations than native frames go to the outermost one. */
static void test_interp_boundaries_and_unmatched(void **state)
{
	(void)state;
	struct pyfx f;
	char kinds[64];
	pyfx_init(&f);
	uint64_t u3[] = { EVAL_LO + 0x10, EVAL_LO + 0x20, EVAL_LO + 0x30 };
	const struct opal_interp_frame shims[] = {
		IF(0, 0, OPAL_IFRAME_BOUNDARY), IF(0xa000, 1, 0), IF(0, 0, OPAL_IFRAME_BOUNDARY),
		IF(0xb000, 2, 0), IF(0, 0, OPAL_IFRAME_BOUNDARY),
	};
	translate_py(&f, u3, 3, shims, 5, kinds);
	assert_string_equal(kinds, "NININ");
	assert_int_equal(f.x->stack.frames[1].address, 1);
	assert_int_equal(f.x->stack.frames[3].address, 2);

	uint64_t u2[] = { EVAL_LO + 0x10, EVAL_LO + 0x20 };
	const struct opal_interp_frame three[] = {
		IF(0xa000, 1, OPAL_IFRAME_ENTRY), IF(0xb000, 2, OPAL_IFRAME_ENTRY),
		IF(0xc000, 3, OPAL_IFRAME_ENTRY),
	};
	translate_py(&f, u2, 2, three, 3, kinds);
	assert_string_equal(kinds, "INIIN");
	assert_int_equal(f.x->stack.frames[2].address, 2);
	assert_int_equal(f.x->stack.frames[3].address, 3);
	assert_int_equal(f.x->ctr.interp_unmatched, 1);
	pyfx_free(&f);
}

/* Errors: an unreadable interpreter frame is an error frame in place; a
 * code object gone since keeps its frame, unnamed; interpreter frames with
 * no evaluation frame on a native walk that ended early go before its end. */
static void test_interp_errors(void **state)
{
	(void)state;
	struct pyfx f;
	char kinds[64];
	pyfx_init(&f);
	uint64_t u1[] = { EVAL_LO + 0x10 };
	const struct opal_interp_frame bad[] = { IF(0xa000, 1, 0), IF(OPAL_IERR_READ, 0,
								   OPAL_IFRAME_ERROR) };
	translate_py(&f, u1, 1, bad, 2, kinds);
	assert_string_equal(kinds, "IEN");
	expect_frame(&f.x->stack.frames[1], ERROR, E_INTERP_READ, false);
	assert_int_equal(f.x->ctr.interp_frame_errors, 1);

	const struct opal_interp_frame stale[] = { IF(0xdead, 4, OPAL_IFRAME_ENTRY) };
	translate_py(&f, u1, 1, stale, 1, kinds);
	assert_string_equal(kinds, "IN");
	assert_int_equal(f.x->stack.frames[0].code_id, 0);
	assert_int_equal(f.x->ctr.interp_code_errors, 1);

	uint64_t nowhere[] = { BASE + 0x17e7, 0x1234 };   /* the walk strays out */
	const struct opal_interp_frame one[] = { IF(0xa000, 1, OPAL_IFRAME_ENTRY) };
	translate_py(&f, nowhere, 2, one, 1, kinds);
	assert_string_equal(kinds, "NIE");
	assert_int_equal(f.x->ctr.interp_unmatched, 1);
	pyfx_free(&f);
}

/* ---- file table bounds ----------------------------------------------------- */

static const char TWO_MAPS[] =
	"555500001000-555500002000 r-xp 00000000 08:01 1234 /fake/app\n"
	"666600001000-666600002000 r-xp 00000000 08:01 77 /fake/app2\n";

static struct fx *fx_two_files(size_t max_files, size_t max_fds)
{
	struct fx *x = fx_new(max_files, max_fds, false);

	x->fake.procs[0].maps = TWO_MAPS;
	x->fake.files[1] = (struct fake_file){ 100, 0x666600001000, 0x666600002000, app2 };
	return x;
}

static void test_fd_lru_and_reopen(void **state)
{
	(void)state;
	struct fx *x = fx_two_files(16, 1);
	uint64_t u[] = { BASE + 0x17e7, 0x666600001700 };

	assert_int_equal(translate(x, 100, NULL, 0, u, 2), 0);
	assert_int_equal(x->stack.n_frames, 2);
	assert_int_equal(x->files.n_files, 2);
	assert_int_equal(x->files.n_fds, 1);   /* the bound closed app's descriptor */
	opal_file_id id1 = file_id_of(app), id2 = file_id_of(app2);
	struct opal_file *f1 = opal_files_find_id(&x->files, &id1);
	struct opal_file *f2 = opal_files_find_id(&x->files, &id2);
	assert_non_null(f1);
	assert_non_null(f2);
	assert_int_equal(f1->fd, -1);
	assert_true(f2->fd >= 0);
	/* identity kept: translation still works without reopening */
	int opens = x->fake.opens;
	assert_int_equal(translate(x, 100, NULL, 0, u, 1), 0);
	expect_frame(&x->stack.frames[0], NATIVE, 0x17e7, false);
	assert_true(x->stack.frames[0].mapping->has_file_id);
	assert_int_equal(x->fake.opens, opens);

	/* a FileRequest needs the descriptor: reopened through the witness */
	int fd = opal_files_fd(&x->files, f1);
	assert_true(fd >= 0);
	assert_int_equal(f1->fd, fd);
	assert_int_equal(f2->fd, -1);
	assert_int_equal(x->files.n_fds, 1);
	opal_file_id got;
	assert_int_equal(opal_file_id_from_fd(fd, &got), 0);
	assert_memory_equal(got.b, id1.b, 16);

	/* the witness now maps another file: reopening must not pass it off */
	assert_true(opal_files_fd(&x->files, f2) >= 0);   /* closes f1's descriptor */
	assert_int_equal(f1->fd, -1);
	x->fake.files[0].path = app2;
	assert_int_equal(opal_files_fd(&x->files, f1), -ENOENT);
	assert_int_equal(f1->n_witness, 0);
	fx_free(x);
}

static void test_identity_bound(void **state)
{
	(void)state;
	struct fx *x = fx_two_files(1, 16);
	uint64_t u1[] = { BASE + 0x17e7 }, u2[] = { 0x666600001700 };

	assert_int_equal(translate(x, 100, NULL, 0, u1, 1), 0);
	assert_int_equal(translate(x, 100, NULL, 0, u2, 1), 0);
	assert_int_equal(x->files.n_files, 1);
	assert_int_equal(x->files.n_fds, 1);
	opal_file_id id1 = file_id_of(app);
	assert_null(opal_files_find_id(&x->files, &id1));
	/* the process's mapping is resolved again when its file was dropped */
	assert_int_equal(translate(x, 100, NULL, 0, u1, 1), 0);
	expect_frame(&x->stack.frames[0], NATIVE, 0x17e7, false);
	assert_memory_equal(x->stack.frames[0].mapping->file_id.b, id1.b, 16);
	assert_non_null(opal_files_find_id(&x->files, &id1));
	assert_int_equal(x->files.n_files, 1);
	fx_free(x);
}

static void test_shared_file_one_entry(void **state)
{
	(void)state;
	struct fx *x = fx_new(16, 16, false);
	uint64_t u[] = { BASE + 0x17e7 };

	x->fake.procs[1] = (struct fake_proc){ 101, "app", "/fake/app", APP_MAPS };
	x->fake.files[2] = (struct fake_file){ 101, BASE + 0x1000, BASE + 0x2000, app };
	assert_int_equal(translate(x, 100, NULL, 0, u, 1), 0);
	assert_int_equal(translate(x, 101, NULL, 0, u, 1), 0);
	assert_int_equal(x->files.n_files, 1);
	assert_int_equal(x->files.n_fds, 1);
	opal_file_id id1 = file_id_of(app);
	struct opal_file *f = opal_files_find_id(&x->files, &id1);
	assert_int_equal(f->n_witness, 2);
	assert_int_equal(f->witness[0].pid, 101);   /* newest first */
	assert_int_equal(f->witness[1].pid, 100);
	fx_free(x);
}

/* Busy files get their unwind table before any sample needs it: the
 * eighth process mapping libc finds its table built at install (no BPF:
 * tables kept in userspace), unless loaded tables take half the budget. */
static void test_busy_file_built_ahead(void **state)
{
	(void)state;
	static const char LIBC_MAPS[] = "7f5000026000-7f500017c000 r-xp 00026000 08:01 555 "
					"/lib/x86_64-linux-gnu/libc.so.6";
	struct fx *x = fx_new(16, 16, false);
	struct opal_unwind_maps m;
	struct opal_unwinder u;
	struct opal_proc *p;

	assert_int_equal(opal_unwind_maps_init(&m, -1, -1, -1, -1, 0, 0, &x->ctr), 0);
	assert_int_equal(opal_unwinder_init(&u, &x->procs, &m, &x->ctr), 0);
	for (int i = 0; i < OPAL_UNWIND_AHEAD_REFS; i++) {
		x->fake.procs[2 + i] = (struct fake_proc){ 200 + i, "sh", "/bin/sh", LIBC_MAPS };
		x->fake.files[2 + i] = (struct fake_file){ 200 + i, 0x7f5000026000, 0x7f500017c000,
							   "/lib/x86_64-linux-gnu/libc.so.6" };
	}
	for (int i = 0; i < OPAL_UNWIND_AHEAD_REFS - 1; i++) {
		assert_non_null(p = opal_procs_get(&x->procs, 200 + i));
		assert_int_equal(opal_unwinder_install(&u, p), 0);
		assert_int_equal(p->n_maps, 1);
		assert_int_equal(opal_unwinder_slot(p, 0), OPAL_SLOT_PENDING);
	}
	assert_int_equal(x->ctr.unwind_tables_ahead, 0);
	assert_int_equal(x->ctr.unwind_tables_built, 0);

	/* with half the byte budget taken, not even a busy file is built ahead */
	m.bytes = m.max_bytes / 2;
	assert_non_null(p = opal_procs_get(&x->procs, 200 + OPAL_UNWIND_AHEAD_REFS - 1));
	assert_int_equal(opal_unwinder_install(&u, p), 0);
	assert_int_equal(opal_unwinder_slot(p, 0), OPAL_SLOT_PENDING);
	assert_int_equal(x->ctr.unwind_tables_ahead, 0);

	m.bytes = 0;
	assert_int_equal(opal_unwinder_install(&u, p), 0);
	assert_int_equal(x->ctr.unwind_tables_ahead, 1);
	assert_int_equal(x->ctr.unwind_tables_built, 1);
	assert_true(opal_unwinder_slot(p, 0) < OPAL_UNWIND_MAX_TABLES);
	struct opal_file *libc = opal_files_lookup(&x->files, &p->res[0].key);
	struct opal_unwind_file *uf = opal_unwind_file_get(&m, &libc->id, 0);
	assert_int_equal(uf->state, OPAL_UFILE_LOADED);
	assert_true(uf->n_rules > 1000);
	opal_unwind_file_put(&m, uf, 0);
	/* one table for all of them: a reinstall of the first takes its slot */
	assert_non_null(p = opal_procs_get(&x->procs, 200));
	assert_int_equal(opal_unwinder_install(&u, p), 0);
	assert_true(opal_unwinder_slot(p, 0) < OPAL_UNWIND_MAX_TABLES);
	assert_int_equal(x->ctr.unwind_tables_built, 1);
	assert_int_equal(x->ctr.unwind_tables_ahead, 1);
	opal_unwinder_detach(&u);
	fx_free(x);
}

/* BPF reports a mapping the cached maps lack (STALE) in a sample taken
 * after they were read: they are read again at once up to
 * OPAL_QUICK_REREADS times (a process of a few ms maps its libraries
 * after its first sample), then once per OPAL_MAPS_REREAD_NS; never for a
 * sample older than the maps. */
static void test_stale_rereads_quick_then_limited(void **state)
{
	(void)state;
	struct fx *x = fx_new(16, 16, false);
	static struct opal_sample_event ev;
	struct opal_unwind_maps m;
	struct opal_unwinder u;
	struct opal_proc *p;

	assert_int_equal(opal_unwind_maps_init(&m, -1, -1, -1, -1, 0, 0, &x->ctr), 0);
	assert_int_equal(opal_unwinder_init(&u, &x->procs, &m, &x->ctr), 0);
	assert_non_null(p = opal_procs_get(&x->procs, 100));
	assert_int_equal(x->ctr.maps_reads, 1);
	memset(&ev, 0, sizeof(ev));
	ev.kind = OPAL_EVENT_SAMPLE;
	ev.pid = ev.tid = 100;
	ev.flags = OPAL_SAMPLE_STALE | OPAL_SAMPLE_DEFERRED;
	ev.ustack_n = 1;
	ev.ustack[0] = BASE + 0x17e7;
	ev.ktime_ns = x->fake.now - MS;   /* taken before the read */
	opal_unwinder_sync(&u, p, &ev);
	assert_int_equal(x->ctr.maps_reads, 1);
	for (int i = 1; i <= OPAL_QUICK_REREADS; i++) {
		x->fake.now += MS;
		ev.ktime_ns = x->fake.now;
		opal_unwinder_sync(&u, p, &ev);
		assert_int_equal(x->ctr.maps_reads, 1 + i);
		x->fake.now += MS;
	}
	ev.ktime_ns = x->fake.now;
	x->fake.now += MS;
	opal_unwinder_sync(&u, p, &ev);
	assert_int_equal(x->ctr.maps_reads, 1 + OPAL_QUICK_REREADS);
	x->fake.now += OPAL_MAPS_REREAD_NS;
	opal_unwinder_sync(&u, p, &ev);
	assert_int_equal(x->ctr.maps_reads, 2 + OPAL_QUICK_REREADS);
	opal_unwinder_detach(&u);
	fx_free(x);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_native_vdso_jit_kernel),
		cmocka_unit_test(test_no_mapping_ends_stack_and_rereads_rate_limited),
		cmocka_unit_test(test_process_context_published_late),
		cmocka_unit_test(test_command_line_opt_in),
		cmocka_unit_test(test_non_executable_mapping_is_no_mapping),
		cmocka_unit_test(test_unreadable_files_keep_runtime_address),
		cmocka_unit_test(test_opal_processes_excluded),
		cmocka_unit_test(test_exec_drops_cached_maps),
		cmocka_unit_test(test_truncated_and_unreadable_stacks),
		cmocka_unit_test(test_process_gone),
		cmocka_unit_test(test_table_bound_evicts),
		cmocka_unit_test(test_revalidate_after_lost_events),
		cmocka_unit_test(test_maps_from_vmas_order),
		cmocka_unit_test(test_interp_frames_at_their_evaluation),
		cmocka_unit_test(test_interp_boundaries_and_unmatched),
		cmocka_unit_test(test_interp_resync_keeps_walk),
		cmocka_unit_test(test_interp_errors),
		cmocka_unit_test(test_gone_since_read),
		cmocka_unit_test(test_fd_lru_and_reopen),
		cmocka_unit_test(test_identity_bound),
		cmocka_unit_test(test_exit_path_keeps_entry),
		cmocka_unit_test(test_shared_file_one_entry),
		cmocka_unit_test(test_busy_file_built_ahead),
		cmocka_unit_test(test_stale_rereads_quick_then_limited),
	};
	return cmocka_run_group_tests(tests, setup_files, teardown_files);
}
