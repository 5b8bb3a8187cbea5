/* bench_replay: the symbolizer's steady state, without a machine's noise.
 *
 * Acts as a collector on the socket (the wire protocol of
 * proto/opal/wire.proto): Hello, kallsyms and one FileInfo with its
 * descriptor per ELF file given, then the same interval again and again
 * (new sequence numbers and timestamps): STACKS distinct stacks of DEPTH
 * native frames each (return addresses inside functions of the files'
 * symbol tables, shaped as a call tree) plus 8 kernel frames, SAMPLES
 * samples in all, spread over 4 processes of 4 threads. Every interval after the first WARM ones finds
 * every frame cached, which is the state a steady host is in. Each
 * interval waits for its Ack; the symbolizer's CPU time (its threads'
 * schedstat, which includes the output writes) is read before and after.
 *
 * usage: bench_replay SOCKET SYMBOLIZER_PID INTERVALS WARM SAMPLES STACKS DEPTH ELF...
 * OPAL_REPLAY_PACE_MS in the environment: that long between intervals
 * (default 0: the next one as soon as the Ack came), for a file system
 * whose cost depends on how many files were deleted lately.
 * prints: one line per measured interval and a summary with the median
 * and the mean CPU ms per interval and per 1,000 samples. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>
#include "shared/fileid.h"
#include "shared/wire.h"
#include "shared/wire_frames.h"

#define MAX_FILES   16
#define MAX_FUNCS   4096
#define NPROC       4
#define NTHREAD     4
#define KFRAMES     8

struct file {
	const char *path;
	int fd;
	opal_file_id id;
	uint64_t funcs[MAX_FUNCS];   /* ELF addresses inside functions */
	unsigned nfuncs;
	uint64_t lo, hi;             /* first executable PT_LOAD's addresses */
};

static struct file files[MAX_FILES];
static unsigned nfiles;

static void die(const char *what, int err)
{
	fprintf(stderr, "bench_replay: %s: %s\n", what, strerror(err < 0 ? -err : err));
	exit(1);
}

/* Functions of .symtab (or .dynsym) of at least 16 bytes, every one kept
 * up to MAX_FUNCS: an address 8 bytes in (as a return address would be). */
static void load_funcs(struct file *f)
{
	elf_version(EV_CURRENT);
	Elf *e = elf_begin(f->fd, ELF_C_READ, NULL);
	if (!e)
		die(f->path, EINVAL);
	Elf_Scn *scn = NULL;
	for (int want = SHT_SYMTAB; want && !f->nfuncs; want = want == SHT_SYMTAB ? SHT_DYNSYM : 0) {
		while ((scn = elf_nextscn(e, scn))) {
			GElf_Shdr sh;
			if (!gelf_getshdr(scn, &sh) || sh.sh_type != (unsigned)want || !sh.sh_entsize)
				continue;
			Elf_Data *d = elf_getdata(scn, NULL);
			for (size_t i = 0; d && i < sh.sh_size / sh.sh_entsize && f->nfuncs < MAX_FUNCS; i++) {
				GElf_Sym s;
				if (gelf_getsym(d, (int)i, &s) && GELF_ST_TYPE(s.st_info) == STT_FUNC &&
				    s.st_value && s.st_size >= 16)
					f->funcs[f->nfuncs++] = s.st_value + 8;
			}
		}
	}
	size_t n;
	elf_getphdrnum(e, &n);
	for (size_t i = 0; i < n; i++) {
		GElf_Phdr ph;
		if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD && (ph.p_flags & PF_X)) {
			f->lo = ph.p_vaddr & ~0xfffull;
			f->hi = ph.p_vaddr + ph.p_memsz;
			break;
		}
	}
	elf_end(e);
	if (!f->nfuncs || f->hi <= f->lo)
		die(f->path, ENOENT);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The process's CPU ns: the sum of its threads' schedstat run times. */
static uint64_t cpu_ns(int pid)
{
	char p[64];
	snprintf(p, sizeof(p), "/proc/%d/task", pid);
	DIR *d = opendir(p);
	if (!d)
		die("symbolizer pid", errno);
	uint64_t sum = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] == '.')
			continue;
		char q[320];
		snprintf(q, sizeof(q), "/proc/%d/task/%s/schedstat", pid, de->d_name);
		FILE *fp = fopen(q, "r");
		unsigned long long run;
		if (fp && fscanf(fp, "%llu", &run) == 1)
			sum += run;
		if (fp)
			fclose(fp);
	}
	closedir(d);
	return sum;
}

static void send_env(int sock, Opal__Wire__V1__Envelope *env, int fd)
{
	int err = opal_wire_send(sock, env, fd);
	if (err < 0)
		die("send", err);
}

static void send_files(int sock)
{
	Opal__Wire__V1__Envelope env = OPAL__WIRE__V1__ENVELOPE__INIT;
	Opal__Wire__V1__FileInfo fi = OPAL__WIRE__V1__FILE_INFO__INIT;
	int kfd = open("/proc/kallsyms", O_RDONLY | O_CLOEXEC);
	fi.kind = OPAL__WIRE__V1__FILE_KIND__FILE_KIND_KALLSYMS;
	fi.path = "/proc/kallsyms";
	fi.has_fd = kfd >= 0;
	env.msg_case = OPAL__WIRE__V1__ENVELOPE__MSG_FILE;
	env.file = &fi;
	send_env(sock, &env, kfd);
	close(kfd);
	for (unsigned i = 0; i < nfiles; i++) {
		Opal__Wire__V1__FileInfo f = OPAL__WIRE__V1__FILE_INFO__INIT;
		f.kind = OPAL__WIRE__V1__FILE_KIND__FILE_KIND_ELF;
		f.file_id.data = files[i].id.b;
		f.file_id.len = sizeof(files[i].id.b);
		f.path = (char *)files[i].path;
		f.size = (uint64_t)lseek(files[i].fd, 0, SEEK_END);
		f.has_fd = true;
		env.file = &f;
		send_env(sock, &env, files[i].fd);
	}
}

/* Kernel text addresses from kallsyms (readable as root): 8 of them,
 * the same in every stack, as a syscall path would be. */
static void kernel_addrs(uint64_t *k)
{
	FILE *fp = fopen("/proc/kallsyms", "r");
	unsigned n = 0;
	char line[256];
	while (fp && n < KFRAMES && fgets(line, sizeof(line), fp)) {
		unsigned long long a;
		char t;
		if (sscanf(line, "%llx %c", &a, &t) == 2 && (t == 't' || t == 'T') && a)
			k[n++] = a + 4;
	}
	if (fp)
		fclose(fp);
	if (n < KFRAMES)
		die("kallsyms (run as root)", EPERM);
}

/* A 32-bit integer hash (xorshift-multiply): the same frames every run. */
static uint32_t mix(uint32_t x)
{
	x ^= x >> 16;
	x *= 0x7feb352du;
	x ^= x >> 15;
	x *= 0x846ca68bu;
	x ^= x >> 16;
	return x;
}

struct shape {
	unsigned samples, stacks, depth;
	uint64_t kaddr[KFRAMES];
};

/* One interval: every process maps every file (mapping i at
 * 0x10000000000 * (i + 1)); stack s of thread t gets frames drawn from a
 * fixed pseudo-random sequence, so every interval repeats the same ones. */
static void send_interval(int sock, const struct shape *sh, uint64_t run_id, uint64_t seq)
{
	static Opal__Wire__V1__Process procs[NPROC];
	static Opal__Wire__V1__Process *pp[NPROC];
	static Opal__Wire__V1__Thread threads[NPROC][NTHREAD], *tp[NPROC][NTHREAD];
	static Opal__Wire__V1__Mapping maps[MAX_FILES], *mp[MAX_FILES];
	static char tname[NPROC][NTHREAD][16];
	unsigned nst = sh->stacks, per = sh->samples / nst ? sh->samples / nst : 1;
	Opal__Wire__V1__Stack *stacks = calloc(nst, sizeof(*stacks));
	Opal__Wire__V1__Stack **sp = calloc(nst, sizeof(*sp));
	size_t depth = sh->depth + KFRAMES;
	uint32_t *info = calloc((size_t)nst * depth, sizeof(*info));
	uint64_t *addr = calloc((size_t)nst * depth, sizeof(*addr));
	uint64_t *ts = calloc((size_t)nst * per, sizeof(*ts));
	uint32_t *cpus = calloc((size_t)nst * per, sizeof(*cpus));
	uint64_t t0 = now_ns();
	uint32_t rnd;

	for (unsigned i = 0; i < nfiles; i++) {
		opal__wire__v1__mapping__init(&maps[i]);
		maps[i].start = 0x10000000000ull * (i + 1) + files[i].lo;
		maps[i].limit = 0x10000000000ull * (i + 1) + files[i].hi;
		maps[i].load_bias = 0x10000000000ull * (i + 1);
		maps[i].file_id.data = files[i].id.b;
		maps[i].file_id.len = sizeof(files[i].id.b);
		maps[i].path = (char *)files[i].path;
		mp[i] = &maps[i];
	}
	for (unsigned s = 0; s < nst; s++) {
		opal__wire__v1__stack__init(&stacks[s]);
		uint32_t *fi = info + (size_t)s * depth;
		uint64_t *fa = addr + (size_t)s * depth;
		for (unsigned d = 0; d < depth; d++) {
			if (d < KFRAMES) {
				fi[d] = opal_wire_frame_info(OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_KERNEL,
							     false, 0);
				fa[d] = sh->kaddr[d];
			} else {
				/* Frame dr from the root has 1 + dr / 2 variants across
				 * the stacks: shared callers, varied leaves, as in a
				 * real call tree. */
				unsigned dr = sh->depth - 1 - (d - KFRAMES);
				rnd = mix(dr * 1000003u + s % (1 + dr / 2));
				unsigned fidx = (rnd >> 8) % nfiles;
				fi[d] = opal_wire_frame_info(OPAL__WIRE__V1__FRAME_KIND__FRAME_KIND_NATIVE,
							     d > KFRAMES, fidx);
				fa[d] = files[fidx].funcs[(rnd >> 4) % files[fidx].nfuncs];
			}
		}
		/* packed, as the collector sends them */
		stacks[s].frame_info = fi;
		stacks[s].n_frame_info = depth;
		stacks[s].frame_address = fa;
		stacks[s].n_frame_address = depth;
		stacks[s].timestamps_unix_ns = ts + (size_t)s * per;
		stacks[s].cpus = cpus + (size_t)s * per;
		for (unsigned k = 0; k < per; k++) {
			stacks[s].timestamps_unix_ns[k] = t0 + (uint64_t)(s * per + k) * 1000;
			stacks[s].cpus[k] = k % 2;
		}
		stacks[s].n_timestamps_unix_ns = stacks[s].n_cpus = per;
		sp[s] = &stacks[s];
	}
	unsigned per_thread = nst / (NPROC * NTHREAD) ? nst / (NPROC * NTHREAD) : 1, next = 0;
	for (unsigned p = 0; p < NPROC; p++) {
		opal__wire__v1__process__init(&procs[p]);
		procs[p].pid = 100000 + p;
		procs[p].comm = "replay";
		procs[p].executable_path = (char *)files[0].path;
		procs[p].mappings = mp;
		procs[p].n_mappings = nfiles;
		for (unsigned t = 0; t < NTHREAD; t++) {
			Opal__Wire__V1__Thread *th = &threads[p][t];
			opal__wire__v1__thread__init(th);
			th->tid = procs[p].pid + t;
			snprintf(tname[p][t], sizeof(tname[p][t]), "worker-%u", t);
			th->name = tname[p][t];
			unsigned n = next >= nst ? 0 : (nst - next < per_thread ? nst - next : per_thread);
			if (p == NPROC - 1 && t == NTHREAD - 1)
				n = nst - next;
			th->stacks = sp + next;
			th->n_stacks = n;
			next += n;
			tp[p][t] = th;
		}
		procs[p].threads = tp[p];
		procs[p].n_threads = NTHREAD;
		pp[p] = &procs[p];
	}
	Opal__Wire__V1__Interval iv = OPAL__WIRE__V1__INTERVAL__INIT;
	Opal__Wire__V1__CollectorCounters c = OPAL__WIRE__V1__COLLECTOR_COUNTERS__INIT;
	iv.seq = seq;
	iv.run_id = run_id;
	iv.start_unix_ns = t0 - 5000000000ull;
	iv.end_unix_ns = t0;
	iv.processes = pp;
	iv.n_processes = NPROC;
	iv.counters = &c;
	Opal__Wire__V1__Envelope env = OPAL__WIRE__V1__ENVELOPE__INIT;
	env.msg_case = OPAL__WIRE__V1__ENVELOPE__MSG_INTERVAL;
	env.interval = &iv;
	send_env(sock, &env, -1);
	free(stacks);
	free(sp);
	free(info);
	free(addr);
	free(ts);
	free(cpus);
}

/* Reads until the Ack of `seq`; FileRequests are answered by sending
 * every file again (the symbolizer asks only after dropping one). */
static void wait_ack(struct opal_wire_reader *r, int sock, uint64_t seq)
{
	for (;;) {
		Opal__Wire__V1__Envelope *env = NULL;
		int fd = -1, err = opal_wire_recv(r, &env, &fd);
		if (err <= 0)
			die("recv (symbolizer gone?)", err ? err : EPIPE);
		if (fd >= 0)
			close(fd);
		bool done = env->msg_case == OPAL__WIRE__V1__ENVELOPE__MSG_ACK && env->ack->seq >= seq;
		if (env->msg_case == OPAL__WIRE__V1__ENVELOPE__MSG_FILE_REQUEST)
			send_files(sock);
		opal_wire_free(env);
		if (done)
			return;
	}
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	if (argc < 9) {
		fprintf(stderr, "usage: bench_replay SOCKET SYMBOLIZER_PID INTERVALS WARM SAMPLES "
				"STACKS DEPTH ELF...\n");
		return 2;
	}
	int pid = atoi(argv[2]);
	unsigned n = (unsigned)atoi(argv[3]), warm = (unsigned)atoi(argv[4]);
	struct shape sh = { (unsigned)atoi(argv[5]), (unsigned)atoi(argv[6]), (unsigned)atoi(argv[7]) };
	if (!n || !sh.samples || !sh.stacks || !sh.depth || sh.stacks > sh.samples)
		die("arguments", EINVAL);
	for (int i = 8; i < argc && nfiles < MAX_FILES; i++) {
		struct file *f = &files[nfiles++];
		f->path = argv[i];
		if ((f->fd = open(argv[i], O_RDONLY | O_CLOEXEC)) < 0)
			die(argv[i], errno);
		int err = opal_file_id_from_fd(f->fd, &f->id);
		if (err < 0)
			die(argv[i], err);
		load_funcs(f);
	}
	kernel_addrs(sh.kaddr);

	int sock = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	struct sockaddr_un a = { .sun_family = AF_UNIX };
	snprintf(a.sun_path, sizeof(a.sun_path), "%s", argv[1]);
	if (sock < 0 || connect(sock, (struct sockaddr *)&a, sizeof(a)) < 0)
		die(argv[1], errno);
	Opal__Wire__V1__Envelope env = OPAL__WIRE__V1__ENVELOPE__INIT;
	Opal__Wire__V1__Hello h = OPAL__WIRE__V1__HELLO__INIT;
	h.protocol_version = OPAL_WIRE_VERSION;
	h.hostname = "replay";
	h.kernel_release = "replay";
	h.frequency_hz = 99;
	h.period_ns = 1000000000ull / 99;
	h.collector_pid = (uint32_t)getpid();
	h.first_unacked_seq = 1;
	env.msg_case = OPAL__WIRE__V1__ENVELOPE__MSG_HELLO;
	env.hello = &h;
	send_env(sock, &env, -1);
	send_files(sock);

	struct opal_wire_reader r;
	opal_wire_reader_init(&r, sock);
	uint64_t run_id = now_ns() ^ (uint64_t)getpid() << 32;
	uint64_t *cost = calloc(n, sizeof(*cost));
	const char *pace_env = getenv("OPAL_REPLAY_PACE_MS");
	unsigned pace_ms = pace_env ? (unsigned)atoi(pace_env) : 0, m = 0;
	uint64_t first = 0;
	for (unsigned i = 1; i <= warm + n; i++) {
		if (pace_ms && i > 1)
			nanosleep(&(struct timespec){ pace_ms / 1000, (long)(pace_ms % 1000) * 1000000 },
				  NULL);
		uint64_t c0 = cpu_ns(pid);
		if (i == warm + 1)
			first = c0;
		send_interval(sock, &sh, run_id, i);
		wait_ack(&r, sock, i);
		uint64_t c = cpu_ns(pid) - c0;
		if (i > warm) {
			cost[m++] = c;
			printf("interval %u: %.3f ms CPU\n", i, c / 1e6);
		} else {
			printf("warm-up interval %u: %.3f ms CPU\n", i, c / 1e6);
		}
	}
	/* A running thread's schedstat lags until it is switched out: the
	 * per-interval figures move work after an Ack into the next one. The
	 * mean is read once its threads have settled, so it holds all of it. */
	nanosleep(&(struct timespec){ 0, 200 * 1000000 }, NULL);
	double mean = (cpu_ns(pid) - first) / 1e6 / m;
	qsort(cost, m, sizeof(*cost), cmp_u64);
	double med = cost[m / 2] / 1e6;
	printf("samples %u, stacks %u, depth %u (+%d kernel), files %u\n", sh.samples, sh.stacks,
	       sh.depth, KFRAMES, nfiles);
	printf("warm interval: median %.3f ms CPU [%.3f-%.3f], %.3f ms per 1000 samples; "
	       "mean %.3f ms CPU, %.3f ms per 1000 samples\n", med, cost[0] / 1e6, cost[m - 1] / 1e6,
	       med * 1000.0 / sh.samples, mean, mean * 1000.0 / sh.samples);
	opal_wire_reader_close(&r);
	close(sock);
	return 0;
}
