/* opal-collector: samples on-CPU stacks of every process with eBPF and
 * ships them, aggregated per interval, to opal-symbolizer over a Unix
 * socket (docs/architecture.md, docs/wire-protocol.md). Single-threaded:
 * the main loop polls the ring buffer (~100 ms), closes an interval every
 * --interval seconds and services the socket. */
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>
#include "base/clock.h"
#include "base/counters.h"
#include "interp/interp.h"
#include "options.h"
#include "proc/files.h"
#include "proc/hostinfo.h"
#include "proc/jitsrc.h"
#include "proc/proc_table.h"
#include "proc/elfinfo.h"
#include "proc/procsrc.h"
#include "proc/vdso.h"
#include "sampler/sampling.h"
#include "send/aggregate.h"
#include "send/sender.h"
#include "send/sendq.h"
#include "shared/log.h"
#include "shared/notify.h"
#include "shared/service.h"
#include "stack/offcpu.h"
#include "stack/samples.h"
#include "stack/tctx_pair.h"
#include "unwind/unwind_proc.h"
#include "unwind/unwind_store.h"

#define POLL_MS            100
#define OUT_POLL_MS        10    /* while frames wait in the sender's output queue */
#define FD_RESERVE         256   /* descriptors kept free for everything but ELF files */
/* Stop deadline (docs/deployment.md, "Stopping"): TimeoutStopSec= of the
 * unit; the waits below end by STOP_WAIT_MS after the signal, leaving the
 * rest for tearing down. */
#define STOP_DEADLINE_MS   5000
#define STOP_WAIT_MS       2000
#define UNPARK_WAIT_MS     1000  /* at stop, for tables parked samples wait for */
#define STOP_DRAIN_MS      500   /* at stop, for reading the ring buffer */

struct collector {
	struct opal_collector_options opt;
	struct opal_counters ctr;
	struct opal_sampling smp;
	struct opal_file_table files;
	struct opal_proc_table procs;
	struct opal_agg *agg;
	struct opal_sendq q;
	struct opal_sender snd;
	struct opal_host_info host;
	uint64_t mono_to_real_ns;
	uint64_t run_id, next_seq;
	uint64_t interval_start_mono;
	uint64_t idle_at_start;          /* BPF idle counter when the interval began */
	uint64_t proc_lost_seen;         /* BPF exec/exit events lost, already handled */
	bool dropped_warned;             /* aggregation bound logged this interval */
	uint64_t records_until_ns;       /* stopping: samples read until then (CLOCK_MONOTONIC) */
	struct opal_stack stack;         /* scratch for one sample */
	struct opal_unwind_maps tables;  /* the BPF unwinder's tables */
	struct opal_unwind_store store;  /* their on-disk cache */
	struct opal_unwinder unwind;
	struct opal_interp interp;
	struct opal_stacks stacks;
	struct opal_offcpu offcpu;       /* off-CPU samples waiting for their value */
	struct opal_jit_table jit;       /* JIT files of processes with JIT frames */
	struct opal_tctx_pair tctx;      /* thread context records awaiting their samples */
};


/* SIGHUP (opal_reload_signal): the main loop re-reads the configuration
 * (opal_options_reload) from these. */
static int saved_argc;
static char **saved_argv;

/* Raises the descriptor limit (opal_raise_nofile) and returns how many
 * ELF descriptors the file table may keep: `wanted`, or fewer when the
 * limit leaves less than FD_RESERVE for everything else. */
static size_t fd_budget(uint32_t wanted)
{
	rlim_t lim = opal_raise_nofile();

	if (lim != 0 && lim != RLIM_INFINITY && lim < (rlim_t)wanted + FD_RESERVE) {
		size_t n = lim > FD_RESERVE + OPAL_MIN_MAX_FDS ? lim - FD_RESERVE : OPAL_MIN_MAX_FDS;
		opal_warn("RLIMIT_NOFILE is %llu: keeping at most %zu ELF descriptors open",
			  (unsigned long long)lim, n);
		return n;
	}
	return wanted;
}

static void on_exclude(void *ctx, pid_t pid)
{
	struct collector *c = ctx;
	int err = opal_sampling_exclude(&c->smp, pid);

	if (err < 0)
		opal_warn("pid %d: cannot add to the BPF excluded map: %s (its samples are dropped "
			  "in userspace)", (int)pid, strerror(-err));
}

static void on_peer(void *ctx, pid_t pid)
{
	struct collector *c = ctx;

	opal_procs_exclude(&c->procs, pid);
}

/* Adds translated sample `ev` (frames in `st`) of process `p` to the interval. */
static void add_sample(void *ctx, const struct opal_sample_event *ev, struct opal_proc *p,
		       const struct opal_stack *st)
{
	struct collector *c = ctx;
	char thread_name[OPAL_COMM_LEN + 1];
	int r;

	memcpy(thread_name, ev->comm, OPAL_COMM_LEN);
	thread_name[OPAL_COMM_LEN] = '\0';
	struct opal_agg_sample s = {
		.pid = ev->pid,
		.tid = ev->tid,
		.cpu = ev->cpu,
		.time_unix_ns = ev->ktime_ns + c->mono_to_real_ns,
		.thread_name = thread_name,
		.proc = &p->info,
		.frames = st->frames,
		.n_frames = st->n_frames,
		.off_cpu = (ev->flags & OPAL_SAMPLE_OFF_CPU) != 0,
		.off_cpu_ns = ev->off_cpu_ns,
		.jit_id = st->jit ? opal_jit_note(&c->jit, p, opal_mono_ns()) : 0,
	};
	const struct opal_procctx *pctx = opal_procs_context(&c->procs, p, c->next_seq);
	s.process_context = pctx->payload;
	s.process_context_len = pctx->len;
	s.process_context_published_ns = pctx->published_ns;
	if (ev->flags & OPAL_SAMPLE_THREAD_CTX)
		s.thread_ctx = opal_tctx_pair_take(&c->tctx, ev);
	r = opal_agg_add(c->agg, &s);
	if (r == 0 && s.off_cpu)
		c->ctr.offcpu_samples++;
	if (r == -ENOSPC) {
		c->ctr.samples_dropped++;
		if (!c->dropped_warned)
			opal_warn("interval aggregation bound reached (%zu stacks, %zu samples); "
				  "further new stacks are dropped until the interval ends",
				  opal_agg_n_stacks(c->agg), opal_agg_n_samples(c->agg));
		c->dropped_warned = true;
	} else if (r < 0) {
		c->ctr.samples_dropped++;
		opal_warn("pid %u: sample dropped: %s", ev->pid, strerror(-r));
	}
}

static void handle_sample(struct collector *c, const struct opal_sample_event *ev)
{
	struct opal_proc *p;
	int r = opal_translate_sample(&c->stacks, ev, &p, &c->stack);

	if (r < 0)
		opal_warn("pid %u: sample dropped: %s", ev->pid, strerror(-r));
	else if (r == OPAL_TRANSLATED)
		add_sample(c, ev, p, &c->stack);
	else if (r == OPAL_TRANSLATE_PARKED && p && !p->gone && opal_procs_has_jit(p))
		opal_jit_note(&c->jit, p, opal_mono_ns());   /* while its files can be opened */
}

/* Ring buffer callback: samples and exec/exit events, in the order taken. */
static int on_record(void *ctx, void *data, size_t size)
{
	struct collector *c = ctx;
	uint32_t kind;

	if (size < sizeof(kind))
		return 0;
	memcpy(&kind, data, sizeof(kind));
	/* A stop signal ends the reading at once (the main loop is then to
	 * see it); while stopping, after STOP_DRAIN_MS (the record stays in
	 * the ring: libbpf reads it again). */
	if (kind == OPAL_EVENT_SAMPLE && opal_stop_signals && opal_mono_ns() > c->records_until_ns)
		return -EINTR;
	if (kind == OPAL_EVENT_SAMPLE && opal_sample_event_valid(data, size)) {
		const struct opal_sample_event *ev = data;
		if (ev->flags & OPAL_SAMPLE_OFF_CPU) {
			opal_stacks_notice(&c->stacks, ev);
			opal_offcpu_start(&c->offcpu, ev, size);   /* its value follows */
		} else
			handle_sample(c, ev);
	} else if (kind == OPAL_EVENT_OFFCPU_END && size >= sizeof(struct opal_offcpu_end)) {
		size_t n;
		struct opal_sample_event *ev = opal_offcpu_end(&c->offcpu, data, &n);
		if (ev)
			handle_sample(c, ev);
		free(ev);
	} else if (kind == OPAL_EVENT_THREAD_CTX) {
		if (opal_tctx_pair_put(&c->tctx, data, size) < 0)
			c->ctr.thread_ctx_unpaired++;
	} else if ((kind == OPAL_EVENT_EXEC || kind == OPAL_EVENT_EXIT) &&
		   size >= sizeof(struct opal_proc_event)) {
		const struct opal_proc_event *e = data;
		if (kind == OPAL_EVENT_EXEC) {
			opal_procs_forget(&c->procs, (pid_t)e->pid);
		} else {
			/* the pid may be reused by a process that is not opal's */
			opal_stacks_exit_maps(&c->stacks, data, size);
			opal_procs_exited(&c->procs, (pid_t)e->pid);
			opal_sampling_unexclude(&c->smp, (pid_t)e->pid);
		}
	}
	return 0;
}

static void fill_counters(struct collector *c, const uint64_t *bpf,
			  Opal__Wire__V1__CollectorCounters *out)
{
	opal__wire__v1__collector_counters__init(out);
	out->samples_total = bpf[OPAL_CTR_SAMPLES];
	out->samples_idle = bpf[OPAL_CTR_IDLE];
	out->samples_self = bpf[OPAL_CTR_EXCLUDED] + c->ctr.samples_self;
	out->samples_lost = bpf[OPAL_CTR_LOST];
	out->samples_dropped = c->ctr.samples_dropped;
	out->frames_no_mapping = c->ctr.frames_no_mapping;
	out->maps_reads = c->ctr.maps_reads;
	out->files_opened = c->ctr.files_opened;
	out->file_open_errors = c->ctr.file_open_errors;
	out->intervals_dropped = c->ctr.intervals_dropped;
	out->stack_errors = c->ctr.stack_errors;
	out->frames_no_unwind_info = c->ctr.frames_no_unwind_info;
	out->frames_unreadable_stack = c->ctr.frames_unreadable_stack;
	out->frames_truncated = c->ctr.frames_truncated;
	out->frames_fp_fallback = c->ctr.frames_fp_fallback;
	out->samples_deferred = c->ctr.samples_deferred;
	out->samples_park_full = c->ctr.samples_park_full;
	out->unwind_tables_built = c->ctr.unwind_tables_built;
	out->unwind_tables_ahead = c->ctr.unwind_tables_ahead;
	out->unwind_table_errors = c->ctr.unwind_table_errors;
	out->unwind_tables_unloaded = c->ctr.unwind_tables_unloaded;
	out->unwind_cache_hits = c->store.hits;
	out->unwind_cache_misses = c->store.misses;
	out->unwind_cache_writes = c->store.writes;
	out->unwind_cache_errors = c->store.errors;
	out->unwind_cache_evicted = c->store.evicted;
	out->unwind_builds_throttled = c->tables.threaded ? c->tables.builder.throttled : 0;
	out->unwind_build_cpu_ns = c->tables.threaded ? c->tables.builder.cpu_ns : 0;
	out->proc_installs = c->ctr.proc_installs;
	out->proc_install_errors = c->ctr.proc_install_errors;
	out->interp_procs = c->ctr.interp_procs;
	out->interp_unsupported = c->ctr.interp_unsupported;
	out->interp_frames = c->ctr.interp_frames;
	out->interp_frame_errors = c->ctr.interp_frame_errors;
	out->interp_code_reads = c->ctr.interp_code_reads;
	out->interp_code_errors = c->ctr.interp_code_errors;
	out->interp_code_capped = c->ctr.interp_code_capped;
	out->interp_code_evicted = c->ctr.interp_code_evicted;
	out->interp_unmatched = c->ctr.interp_unmatched;
	out->interp_early = bpf[OPAL_CTR_INTERP_EARLY];
	out->vma_checks = bpf[OPAL_CTR_VMA_CHECKS];
	out->vma_busy = bpf[OPAL_CTR_VMA_BUSY];
	out->lifecycle_lost = bpf[OPAL_CTR_PROC_LOST];
	out->procs_revalidated = c->ctr.procs_revalidated;
	out->procs_evicted = c->ctr.procs_evicted;
	out->offcpu_switches = bpf[OPAL_CTR_OFFCPU_SWITCHES];
	out->offcpu_sampled = bpf[OPAL_CTR_OFFCPU_SAMPLED];
	out->offcpu_table_full = bpf[OPAL_CTR_OFFCPU_FULL];
	out->offcpu_capped = bpf[OPAL_CTR_OFFCPU_CAPPED];
	out->offcpu_lost = bpf[OPAL_CTR_OFFCPU_LOST];
	out->offcpu_samples = c->ctr.offcpu_samples;
	out->offcpu_unmatched = c->ctr.offcpu_unmatched;
	out->peers_refused = c->ctr.peers_refused;
	out->send_waits = c->ctr.send_waits;
	out->jit_frames = c->ctr.jit_frames;
	out->jit_files_opened = c->ctr.jit_files_opened;
	out->jit_file_errors = c->ctr.jit_file_errors;
	out->jit_procs_dropped = c->ctr.jit_procs_dropped;
	out->process_ctx_reads = c->ctr.process_ctx_reads;
	out->process_ctx_errors = c->ctr.process_ctx_errors;
	out->process_ctx_scans = c->ctr.process_ctx_scans;
	out->thread_ctx_samples = bpf[OPAL_CTR_TCTX_SAMPLES];
	out->thread_ctx_invalid = bpf[OPAL_CTR_TCTX_INVALID] + c->ctr.thread_ctx_unpaired;
	out->thread_ctx_procs = c->ctr.thread_ctx_procs;
	out->thread_ctx_unsupported = c->ctr.thread_ctx_unsupported;
}

/* opal_procs_revalidate: a pid whose process is gone may have been
 * excluded. */
static void on_gone(void *ctx, pid_t pid)
{
	struct collector *c = ctx;

	opal_sampling_unexclude(&c->smp, pid);
}

/* Ends the current interval: drains the ring buffer, packs the aggregate
 * and queues it for sending. */
static void close_interval(struct collector *c, bool final)
{
	uint64_t bpf[OPAL_CTR_MAX] = { 0 };
	Opal__Wire__V1__CollectorCounters ctr;
	struct opal_sendq_entry e = { 0 };
	uint64_t now;
	int err;

	/* Every sample drained here was taken before `now`, the interval's end. */
	opal_sampling_drain(&c->smp);
	now = opal_mono_ns();
	opal_unwind_maps_expire(&c->tables, now);
	opal_procs_reap(&c->procs);
	if ((err = opal_sampling_counters(&c->smp, bpf)) < 0)
		opal_warn("reading BPF counters: %s", strerror(-err));
	if (bpf[OPAL_CTR_PROC_LOST] > c->proc_lost_seen) {
		/* A lost exit may leave an entry (or an excluded pid) of a
		 * process that is gone or whose pid was reused, a lost exec one
		 * of an executable that was replaced: only those are dropped. */
		size_t n_cached = c->procs.n_procs;
		size_t n = opal_procs_revalidate(&c->procs, on_gone, c);
		c->ctr.procs_revalidated += n;
		opal_warn("%llu exec/exit events lost (lifecycle ring full): %zu of %zu cached "
			  "processes were gone or replaced and are dropped",
			  (unsigned long long)(bpf[OPAL_CTR_PROC_LOST] - c->proc_lost_seen), n,
			  n_cached);
		c->proc_lost_seen = bpf[OPAL_CTR_PROC_LOST];
	}
	opal_jit_expire(&c->jit, now);
	fill_counters(c, bpf, &ctr);
	struct opal_interval_meta m = {
		.seq = c->next_seq,
		.run_id = c->run_id,
		.start_unix_ns = c->interval_start_mono + c->mono_to_real_ns,
		.end_unix_ns = now + c->mono_to_real_ns,
		.idle_samples = bpf[OPAL_CTR_IDLE] - c->idle_at_start,
		.counters = &ctr,
		.final = final,
	};
	err = opal_agg_pack(c->agg, &m, &e);
	if (err < 0) {
		opal_err("interval %llu lost: packing failed: %s", (unsigned long long)m.seq,
			 strerror(-err));
		c->ctr.intervals_dropped++;
	} else {
		e.seq = m.seq;
		int dropped = opal_sendq_push(&c->q, &e);
		if (dropped < 0) {
			opal_err("interval %llu lost: %s", (unsigned long long)m.seq,
				 strerror(-dropped));
			free(e.buf);
			free(e.ids);
			free(e.code_ids);
			c->ctr.intervals_dropped++;
		} else if (dropped > 0) {
			opal_warn("send buffer full (%llu bytes): %d oldest unacknowledged intervals "
				  "dropped", (unsigned long long)c->opt.buffer_bytes, dropped);
			c->ctr.intervals_dropped += (uint64_t)dropped;
		}
	}
	opal_debug("interval %llu%s: %zu CPU samples, %zu off-CPU samples, %zu stacks, %llu idle, "
		   "%zu bytes, %zu files, %zu queued", (unsigned long long)m.seq,
		   final ? " (final)" : "",
		   opal_agg_n_samples(c->agg) - opal_agg_n_off_cpu(c->agg),
		   opal_agg_n_off_cpu(c->agg), opal_agg_n_stacks(c->agg),
		   (unsigned long long)m.idle_samples, e.len, e.n_ids, c->q.n);
	opal_notify_status("interval %llu: %zu samples; %zu intervals unacknowledged; "
			   "%llu intervals dropped", (unsigned long long)m.seq,
			   opal_agg_n_samples(c->agg), c->q.n,
			   (unsigned long long)c->ctr.intervals_dropped);
	c->next_seq++;
	c->idle_at_start = bpf[OPAL_CTR_IDLE];
	c->interval_start_mono = now;
	c->dropped_warned = false;
	opal_agg_reset(c->agg);
}

/* Whom the collector trusts with its descriptors (send/peer.h), and the
 * socket's folder checked before anything else starts. Returns 0, or -1
 * when another user could listen on the socket path. */
/* Opens the unwind table cache of --unwind-cache. Its entries are keyed
 * to this collector's own GNU build ID, so tables of another build of the
 * builder are never read. Without one of either, tables are built each
 * time, as before the cache. */
static void open_table_cache(struct collector *c)
{
	struct opal_elf_info self;
	int fd, err;

	opal_unwind_store_init_off(&c->store);
	if (!c->opt.unwind_cache[0])
		return;
	fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	err = fd < 0 ? -errno : opal_elf_info_from_fd(fd, &self);
	if (fd >= 0)
		close(fd);
	if (err == 0 && self.build_id_len == 0)
		err = -ENODATA;
	if (err == 0)
		err = opal_unwind_store_open(&c->store, c->opt.unwind_cache, self.build_id,
					     self.build_id_len, c->opt.unwind_cache_bytes);
	if (err < 0)
		opal_warn("no unwind table cache in %s (%s): tables are built each time",
			  c->opt.unwind_cache,
			  err == -EPERM ? "not root's, or writable by others" :
			  err == -ENODATA ? "the collector has no build ID" : strerror(-err));
	else
		opal_info("unwind table cache: %s, %u tables, %.1f MiB", c->opt.unwind_cache,
			  c->store.n_files, c->store.bytes / 1048576.0);
}

static int setup_peer_policy(struct collector *c)
{
	struct passwd *pw = getpwnam(c->opt.symbolizer_user);
	char why[512];
	int err;

	if (pw)
		c->snd.peer.symbolizer_uid = pw->pw_uid;
	else
		opal_info("no user '%s' (--symbolizer-user): only a listener running as root is "
			  "trusted on %s", c->opt.symbolizer_user, c->opt.socket_path);
	err = opal_socket_dir_check(&c->snd.peer, c->opt.socket_path, why, sizeof(why));
	if (err == -EPERM) {
		opal_err("refusing --socket %s: %s", c->opt.socket_path, why);
		return -1;
	}
	if (err == -ENOENT)
		opal_info("the folder of %s does not exist yet; it is checked before every "
			  "connection", c->opt.socket_path);
	else if (err < 0)
		opal_warn("cannot check the folder of %s: %s", c->opt.socket_path, strerror(-err));
	return 0;
}

static int setup(struct collector *c)
{
	const struct opal_agg_limits lim = {
		.max_stacks = OPAL_AGG_MAX_STACKS,
		.max_samples = OPAL_AGG_MAX_SAMPLES,
		.max_bytes = OPAL_AGG_MAX_BYTES,
	};
	char why[1024];
	size_t max_fds = fd_budget(c->opt.max_fds);
	int err;

	opal_sender_init(&c->snd, c->opt.socket_path, &c->q, &c->files, &c->ctr, &c->host);
	if (setup_peer_policy(c) < 0)
		return -1;
	if (getrandom(&c->run_id, sizeof(c->run_id), 0) != sizeof(c->run_id)) {
		opal_err("getrandom: %s", strerror(errno));
		return -1;
	}
	c->next_seq = 1;
	c->mono_to_real_ns = opal_mono_to_real_offset_ns();
	if ((err = opal_host_info_read(&c->host)) < 0) {
		opal_err("uname: %s", strerror(-err));
		return -1;
	}
	if (opal_files_init(&c->files, OPAL_DEFAULT_MAX_FILES, max_fds, &opal_proc_source_live,
			    &c->ctr) < 0 ||
	    opal_procs_init(&c->procs, OPAL_DEFAULT_MAX_PROCS, c->opt.include_self,
			    &opal_proc_source_live, &c->files, &c->ctr) < 0 ||
	    !(c->agg = opal_agg_new(&lim)) || opal_sendq_init(&c->q, c->opt.buffer_bytes) < 0 ||
	    opal_offcpu_init(&c->offcpu, &c->ctr) < 0 ||
	    opal_tctx_pair_init(&c->tctx, &c->ctr) < 0) {
		opal_err("out of memory");
		return -1;
	}
	c->procs.command_line = c->opt.command_line;
	err = opal_sampling_start(&c->smp, c->opt.frequency_hz, c->opt.lifecycle_bytes,
				  c->opt.off_cpu ? c->opt.off_cpu_ppm : 0, c->opt.off_cpu_max_rate,
				  on_record, c, why, sizeof(why));
	if (err < 0) {
		opal_err("BPF unavailable: %s", why);
		return -1;
	}
	c->procs.on_exclude = on_exclude;
	c->procs.on_exclude_ctx = c;
	open_table_cache(c);
	if (opal_unwinder_attach(&c->unwind, &c->procs, &c->tables, &c->smp, &c->store,
				 c->opt.unwind_build_pct, &c->ctr) < 0) {
		opal_err("out of memory");
		return -1;
	}
	if (opal_interp_init(&c->interp, &c->procs, opal_sampling_interp_fd(&c->smp), 0,
			     &c->ctr) < 0) {
		opal_err("out of memory");
		return -1;
	}
	c->interp.tctx_map_fd = opal_sampling_tctx_fd(&c->smp);
	c->interp.files_map_fd = opal_sampling_interp_files_fd(&c->smp);
	if (c->opt.native_only) {
		/* no runtime probed: BPF gets no walk parameters, so no process
		 * has interpreter frames and no code object is read */
		c->interp.n_runtimes = 0;
		opal_info("--native-only: no interpreter frames");
	}
	opal_stacks_init(&c->stacks, &c->procs, &c->unwind, &c->interp, &c->ctr);
	if ((err = opal_vdso_register(&c->files, &c->procs.vdso)) < 0)
		opal_warn("vDSO unavailable as a file (%s): its frames unwind with frame "
			  "pointers and stay unsymbolized", strerror(-err));
	opal_procs_exclude(&c->procs, getpid());

	c->snd.codes = &c->interp.codes;
	opal_jit_init(&c->jit, &opal_jit_source_live, &c->ctr);
	c->snd.jit = &c->jit;
	c->snd.run_id = c->run_id;
	c->snd.boot_time_unix_ns = c->mono_to_real_ns;
	c->snd.frequency_hz = c->opt.frequency_hz;
	c->snd.period_ns = c->smp.period_ns;
	c->snd.next_seq = &c->next_seq;
	c->snd.on_peer = on_peer;
	c->snd.on_peer_ctx = c;
	c->interval_start_mono = opal_mono_ns();
	opal_info("run %016llx: %u Hz, %u s intervals, socket %s%s", (unsigned long long)c->run_id,
		  c->opt.frequency_hz, c->opt.interval_s, c->opt.socket_path,
		  c->opt.include_self ? ", including opal's own processes" : "");
	return 0;
}

/* Applies a SIGHUP: logging verbosity at once; a new interval length from
 * the current interval's start (an interval already longer than it ends
 * now). Returns the interval length in ns. */
static uint64_t reload(struct collector *c, uint64_t interval_ns, uint64_t *boundary)
{
	opal_reload_signal = 0;
	if (opal_options_reload(saved_argc, saved_argv, &c->opt) <= 0)
		return interval_ns;
	opal_log_init("opal-collector", c->opt.verbose);
	uint64_t n = (uint64_t)c->opt.interval_s * 1000000000ull;
	if (n != interval_ns)
		*boundary = c->interval_start_mono + n;
	return n;
}

static void run(struct collector *c)
{
	uint64_t interval_ns = (uint64_t)c->opt.interval_s * 1000000000ull;
	uint64_t boundary = c->interval_start_mono + interval_ns;

	while (!opal_stop_signals) {
		if (opal_reload_signal)
			interval_ns = reload(c, interval_ns, &boundary);
		/* queued output goes out as the symbolizer makes room */
		int r = opal_sampling_poll(&c->smp,
					   opal_sender_pending(&c->snd) ? OUT_POLL_MS : POLL_MS);
		if (r < 0 && r != -EINTR)
			opal_warn("ring buffer poll: %s", strerror(-r));
		if (opal_stop_signals)
			break;   /* finish: its sends are bounded by the stop deadline */
		opal_stacks_unpark(&c->stacks, false, 0, add_sample, c, &c->stack);
		uint64_t now = opal_mono_ns();
		if (now >= boundary) {
			close_interval(c, false);
			boundary += interval_ns;
			if (boundary <= now)   /* stalled past several boundaries */
				boundary = now + interval_ns;
		}
		if (opal_stop_signals)
			break;
		opal_sender_service(&c->snd, now);
	}
}

/* Clean stop within STOP_DEADLINE_MS of the signal: no new samples, the
 * rest of the ring buffer into a final interval, then until STOP_WAIT_MS
 * for its acknowledgement; a send never blocks past that (a stalled or
 * gone symbolizer only costs the wait). */
static void finish(struct collector *c)
{
	uint64_t final_seq = c->next_seq;
	uint64_t deadline = opal_mono_ns() + STOP_WAIT_MS * 1000000ull;
	int signals = opal_stop_signals;

	opal_info("stopping: sending the final interval");
	opal_sampling_stop(&c->smp);
	c->records_until_ns = opal_mono_ns() + STOP_DRAIN_MS * 1000000ull;
	/* samples waiting for tables go into the final interval */
	if (opal_sampling_drain(&c->smp) == -EINTR)
		opal_warn("stopping: samples still in the ring buffer after %d ms of reading are "
			  "not sent", STOP_DRAIN_MS);
	opal_stacks_unpark(&c->stacks, true, UNPARK_WAIT_MS, add_sample, c, &c->stack);
	close_interval(c, true);
	while (opal_sendq_has(&c->q, final_seq) && opal_stop_signals == signals) {
		uint64_t now = opal_mono_ns();
		if (now + POLL_MS * 1000000ull >= deadline) {
			opal_warn("final interval %llu not acknowledged by the stop deadline (%d ms); "
				  "%zu intervals unsent or unacknowledged", (unsigned long long)final_seq,
				  STOP_WAIT_MS, c->q.n);
			return;
		}
		opal_sender_limit_block(&c->snd, (int)((deadline - now) / 1000000ull));
		opal_sender_service(&c->snd, now);
		if (c->snd.sock < 0) {
			/* gone (or refused): waiting would only hold up the stop */
			opal_warn("final interval %llu not acknowledged: no symbolizer at %s; "
				  "%zu intervals unsent or unacknowledged",
				  (unsigned long long)final_seq, c->opt.socket_path, c->q.n);
			return;
		}
		if (opal_sendq_has(&c->q, final_seq))
			opal_sender_wait(&c->snd, POLL_MS);
	}
	if (!opal_sendq_has(&c->q, final_seq))
		opal_info("final interval %llu acknowledged", (unsigned long long)final_seq);
	else
		opal_warn("second signal: exiting without waiting for the acknowledgement");
}

int main(int argc, char **argv)
{
	static struct collector c;   /* large (scratch stack); static keeps it off the stack */
	int r = opal_options_parse(argc, argv, &c.opt, stdout, stderr);

	saved_argc = argc;
	saved_argv = argv;
	if (r != 0)
		return r > 0 ? 0 : 2;
	opal_log_init("opal-collector", c.opt.verbose);
	umask(077);   /* its only files, the unwind table cache's, stay private */
	opal_service_signals();
	if ((r = opal_notify_init()) < 0)
		opal_warn("NOTIFY_SOCKET unusable: %s", strerror(-r));
	if (setup(&c) < 0)
		return 1;
	opal_notify("READY=1");
	opal_notify_status("sampling at %u Hz, %u s intervals", c.opt.frequency_hz,
			   c.opt.interval_s);
	run(&c);
	finish(&c);
	opal_sender_close(&c.snd);
	/* The rest goes with the process: freeing the BPF objects, the unwind
	 * tables and thousands of descriptors one by one took seconds (RCU
	 * grace periods per inner map), past the stop deadline. The unwind
	 * builder thread may still run; exit ends it. */
	opal_notify_close();
	opal_info("stopped");
	return 0;
}
