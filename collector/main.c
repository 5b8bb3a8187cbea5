/* opal-collector: samples on-CPU stacks of every process with eBPF and
 * ships them, aggregated per interval, to opal-symbolizer over a Unix
 * socket (docs/architecture.md, docs/wire-protocol.md). Single-threaded:
 * the main loop polls the ring buffer (~100 ms), closes an interval every
 * --interval seconds and services the socket. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <unistd.h>
#include "aggregate.h"
#include "clock.h"
#include "counters.h"
#include "files.h"
#include "hostinfo.h"
#include "log.h"
#include "notify.h"
#include "options.h"
#include "proc.h"
#include "procsrc.h"
#include "samples.h"
#include "sampling.h"
#include "sender.h"
#include "sendq.h"
#include "unwind_proc.h"

#define POLL_MS            100
#define FINAL_ACK_WAIT_NS  5000000000ull
#define FD_RESERVE         256   /* descriptors kept free for everything but ELF files */
#define UNPARK_WAIT_MS     5000  /* at stop, for tables parked samples wait for */

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
	struct opal_stack stack;         /* scratch for one sample */
	struct opal_unwind_maps unwind;  /* the BPF unwinder's tables */
};

static volatile sig_atomic_t stop_signals;

static void on_signal(int sig)
{
	(void)sig;
	stop_signals++;
	opal_notify("STOPPING=1");   /* async-signal-safe: one sendto() */
}

/* SIGHUP: the main loop re-reads the configuration (opal_options_reload). */
static volatile sig_atomic_t reload_signals;
static int saved_argc;
static char **saved_argv;

static void on_sighup(int sig)
{
	(void)sig;
	reload_signals = 1;
}

static void install_signals(void)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_signal;   /* no SA_RESTART: poll returns EINTR */
	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = on_sighup;
	sa.sa_flags = SA_RESTART;
	sigaction(SIGHUP, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

/* Raises the soft descriptor limit to the hard one and returns how many
 * ELF descriptors the file table may keep. */
static size_t raise_nofile(uint32_t wanted)
{
	struct rlimit rl;

	if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
		return wanted;
	if (rl.rlim_cur < rl.rlim_max) {
		rl.rlim_cur = rl.rlim_max;
		if (setrlimit(RLIMIT_NOFILE, &rl) < 0)
			getrlimit(RLIMIT_NOFILE, &rl);
	}
	if (rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < (rlim_t)wanted + FD_RESERVE) {
		size_t n = rl.rlim_cur > FD_RESERVE + OPAL_MIN_MAX_FDS ? rl.rlim_cur - FD_RESERVE
								      : OPAL_MIN_MAX_FDS;
		opal_warn("RLIMIT_NOFILE is %llu: keeping at most %zu ELF descriptors open",
			  (unsigned long long)rl.rlim_cur, n);
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
	};
	r = opal_agg_add(c->agg, &s);
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
	int r = opal_translate_sample(&c->procs, ev, &p, &c->stack);

	if (r < 0)
		opal_warn("pid %u: sample dropped: %s", ev->pid, strerror(-r));
	else if (r == 0)
		add_sample(c, ev, p, &c->stack);   /* 1: excluded; 2: parked */
}

/* Ring buffer callback: samples and exec/exit events, in submission order. */
static int on_record(void *ctx, void *data, size_t size)
{
	struct collector *c = ctx;
	uint32_t kind;

	if (size < sizeof(kind))
		return 0;
	memcpy(&kind, data, sizeof(kind));
	if (kind == OPAL_EVENT_SAMPLE && opal_sample_event_valid(data, size)) {
		handle_sample(c, data);
	} else if ((kind == OPAL_EVENT_EXEC || kind == OPAL_EVENT_EXIT) &&
		   size >= sizeof(struct opal_proc_event)) {
		const struct opal_proc_event *e = data;
		if (kind == OPAL_EVENT_EXEC) {
			opal_procs_forget(&c->procs, (pid_t)e->pid);
		} else {
			/* the pid may be reused by a process that is not opal's */
			opal_samples_exit_maps(&c->procs, data, size);
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
	out->unwind_tables_built = c->ctr.unwind_tables_built;
	out->unwind_tables_ahead = c->ctr.unwind_tables_ahead;
	out->unwind_table_errors = c->ctr.unwind_table_errors;
	out->unwind_tables_unloaded = c->ctr.unwind_tables_unloaded;
	out->proc_installs = c->ctr.proc_installs;
	out->proc_install_errors = c->ctr.proc_install_errors;
	out->vma_checks = bpf[OPAL_CTR_VMA_CHECKS];
	out->vma_busy = bpf[OPAL_CTR_VMA_BUSY];
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
	opal_unwind_maps_expire(&c->unwind, now);
	if ((err = opal_sampling_counters(&c->smp, bpf)) < 0)
		opal_warn("reading BPF counters: %s", strerror(-err));
	if (bpf[OPAL_CTR_PROC_LOST] > c->proc_lost_seen) {
		/* A lost exec/exit event may leave stale maps, or an excluded pid
		 * that now belongs to another process: start over. opal's own
		 * processes are found again on their next sample. */
		opal_warn("%llu exec/exit events lost (ring buffer full); process cache cleared",
			  (unsigned long long)(bpf[OPAL_CTR_PROC_LOST] - c->proc_lost_seen));
		c->proc_lost_seen = bpf[OPAL_CTR_PROC_LOST];
		opal_procs_clear(&c->procs);
		opal_sampling_unexclude_all(&c->smp);
		opal_procs_renotify_excluded(&c->procs);
	}
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
	err = opal_agg_pack(c->agg, &m, &e.buf, &e.len, &e.ids, &e.n_ids);
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
			c->ctr.intervals_dropped++;
		} else if (dropped > 0) {
			opal_warn("send buffer full (%llu bytes): %d oldest unacknowledged intervals "
				  "dropped", (unsigned long long)c->opt.buffer_bytes, dropped);
			c->ctr.intervals_dropped += (uint64_t)dropped;
		}
	}
	opal_debug("interval %llu%s: %zu samples, %zu stacks, %llu idle, %zu bytes, %zu files, "
		   "%zu queued", (unsigned long long)m.seq, final ? " (final)" : "",
		   opal_agg_n_samples(c->agg), opal_agg_n_stacks(c->agg),
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

static int setup(struct collector *c)
{
	const struct opal_agg_limits lim = {
		.max_stacks = OPAL_AGG_MAX_STACKS,
		.max_samples = OPAL_AGG_MAX_SAMPLES,
		.max_bytes = OPAL_AGG_MAX_BYTES,
	};
	char why[256];
	size_t max_fds = raise_nofile(c->opt.max_fds);
	int err;

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
	    !(c->agg = opal_agg_new(&lim)) || opal_sendq_init(&c->q, c->opt.buffer_bytes) < 0) {
		opal_err("out of memory");
		return -1;
	}
	err = opal_sampling_start(&c->smp, c->opt.frequency_hz, on_record, c, why, sizeof(why));
	if (err < 0) {
		opal_err("BPF unavailable: %s. opal-collector must run as root (CAP_BPF, "
			 "CAP_PERFMON, CAP_SYS_PTRACE, CAP_DAC_READ_SEARCH, "
			 "CAP_CHECKPOINT_RESTORE, CAP_SYSLOG) on a kernel with BTF "
			 "(/sys/kernel/btf/vmlinux).", why);
		return -1;
	}
	c->procs.on_exclude = on_exclude;
	c->procs.on_exclude_ctx = c;
	if (opal_unwinder_attach(&c->procs, &c->unwind, &c->smp, &c->ctr) < 0) {
		opal_err("out of memory");
		return -1;
	}
	opal_procs_exclude(&c->procs, getpid());

	opal_sender_init(&c->snd, c->opt.socket_path, &c->q, &c->files, &c->ctr, &c->host);
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
	reload_signals = 0;
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

	while (!stop_signals) {
		if (reload_signals)
			interval_ns = reload(c, interval_ns, &boundary);
		int r = opal_sampling_poll(&c->smp, POLL_MS);
		if (r < 0 && r != -EINTR)
			opal_warn("ring buffer poll: %s", strerror(-r));
		opal_samples_unpark(&c->procs, false, 0, add_sample, c, &c->stack);
		uint64_t now = opal_mono_ns();
		if (now >= boundary) {
			close_interval(c, false);
			boundary += interval_ns;
			if (boundary <= now)   /* stalled past several boundaries */
				boundary = now + interval_ns;
		}
		opal_sender_service(&c->snd, now);
	}
}

/* Clean stop: no new samples, the rest of the ring buffer into a final
 * interval, and up to FINAL_ACK_WAIT_NS for its acknowledgement. */
static void finish(struct collector *c)
{
	uint64_t final_seq = c->next_seq;
	uint64_t deadline;
	int signals = stop_signals;

	opal_info("stopping: sending the final interval");
	opal_sampling_stop(&c->smp);
	/* samples waiting for tables go into the final interval */
	opal_sampling_drain(&c->smp);
	opal_samples_unpark(&c->procs, true, UNPARK_WAIT_MS, add_sample, c, &c->stack);
	close_interval(c, true);
	deadline = opal_mono_ns() + FINAL_ACK_WAIT_NS;
	while (opal_sendq_has(&c->q, final_seq) && stop_signals == signals) {
		uint64_t now = opal_mono_ns();
		if (now >= deadline) {
			opal_warn("final interval %llu not acknowledged within 5 s; %zu intervals "
				  "unsent or unacknowledged", (unsigned long long)final_seq, c->q.n);
			return;
		}
		opal_sender_service(&c->snd, now);
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
	install_signals();
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
	opal_unwinder_detach(&c.procs);
	opal_sampling_destroy(&c.smp);
	opal_sendq_destroy(&c.q);
	opal_agg_free(c.agg);
	opal_procs_destroy(&c.procs);
	opal_files_destroy(&c.files);
	opal_notify_close();
	return 0;
}
