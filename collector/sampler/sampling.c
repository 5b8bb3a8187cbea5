/* BPF program loading and perf event attachment (sampling.h). */
#include "sampler/sampling.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "base/clock.h"
#include "sampler/bpf_load.h"
#include "sampler/cpus.h"
#include "sampler/kernel_check.h"
#include "shared/log.h"
#include "sampler.skel.h"

uint32_t opal_ringbuf_size(size_t n_cpus, uint32_t freq_hz, size_t record_size)
{
	uint64_t want = (uint64_t)n_cpus * freq_hz * record_size / 2;
	uint64_t size = OPAL_RINGBUF_MIN;

	while (size < want && size < OPAL_RINGBUF_MAX)
		size <<= 1;
	return (uint32_t)size;
}

uint32_t opal_offcpu_ringbuf_size(size_t n_cpus, uint32_t off_cpu_ppm, uint32_t on_cpu_size,
				  size_t record_size)
{
	uint64_t want = (uint64_t)n_cpus * OPAL_OFFCPU_SWITCH_RATE * off_cpu_ppm / 1000000u *
			record_size / 2;
	uint64_t size = OPAL_RINGBUF_MIN;

	while (size < want && size < OPAL_RINGBUF_OFFCPU)
		size <<= 1;
	return size > on_cpu_size ? (uint32_t)size : on_cpu_size;
}

static int open_cpu_clock(int cpu, uint64_t period_ns)
{
	struct perf_event_attr attr;
	long fd;

	memset(&attr, 0, sizeof(attr));
	attr.type = PERF_TYPE_SOFTWARE;
	attr.size = sizeof(attr);
	attr.config = PERF_COUNT_SW_CPU_CLOCK;
	attr.sample_period = period_ns;   /* freq = 0: a fixed period */
	fd = syscall(__NR_perf_event_open, &attr, -1, cpu, -1, PERF_FLAG_FD_CLOEXEC);
	return fd < 0 ? -errno : (int)fd;
}

static int attach_cpus(struct opal_sampling *s, char *why, size_t why_len)
{
	int cpus[OPAL_MAX_CPUS];
	size_t n_cpus;
	int err, last_err = 0;

	err = opal_online_cpus(cpus, OPAL_MAX_CPUS, &n_cpus);
	if (err < 0) {
		snprintf(why, why_len, "cannot read /sys/devices/system/cpu/online: %s",
			 strerror(-err));
		return err;
	}
	s->perf_links = calloc(n_cpus, sizeof(*s->perf_links));
	if (!s->perf_links)
		return -ENOMEM;
	for (size_t i = 0; i < n_cpus; i++) {
		int fd = open_cpu_clock(cpus[i], s->period_ns);
		if (fd < 0) {
			last_err = fd;
			opal_warn("CPU %d: perf_event_open: %s", cpus[i], strerror(-fd));
			continue;
		}
		struct bpf_link *l = bpf_program__attach_perf_event(s->skel->progs.opal_sample, fd);
		if (!l) {
			last_err = -errno;
			opal_warn("CPU %d: attaching the BPF program: %s", cpus[i], strerror(errno));
			close(fd);
			continue;
		}
		s->perf_links[s->n_perf_links++] = l;
	}
	if (s->n_perf_links == 0) {
		char buf[256];
		const char *cause = opal_perf_open_cause(last_err, opal_kernel_sysctl("",
							 "perf_event_paranoid"), buf, sizeof(buf));
		snprintf(why, why_len, "no CPU could be sampled (%zu online): perf_event_open: %s%s%s", n_cpus,
			 strerror(last_err ? -last_err : ENODEV), cause[0] ? ": " : "", cause);
		return last_err ? last_err : -ENODEV;
	}
	opal_info("sampling %zu of %zu online CPUs every %llu ns", s->n_perf_links, n_cpus,
		  (unsigned long long)s->period_ns);
	return 0;
}

static uint32_t lifecycle_size(uint64_t want)
{
	uint64_t size = OPAL_LIFECYCLE_MIN;

	while (size < want && size < OPAL_LIFECYCLE_MAX)
		size <<= 1;
	return (uint32_t)size;
}

static void deliver_held(void *ctx, void *rec, size_t size)
{
	struct opal_sampling *s = ctx;

	s->cb(s->cb_ctx, rec, size);
}

/* The lifecycle ring, drained first: its records wait for the samples
 * taken before them. */
static int on_lifecycle(void *ctx, void *data, size_t size)
{
	struct opal_sampling *s = ctx;

	if (opal_lifeq_push(&s->held, data, size) == -ENOSPC) {
		opal_lifeq_release(&s->held, UINT64_MAX, deliver_held, s);
		s->cb(s->cb_ctx, data, size);
	}
	return 0;
}

static int on_sample(void *ctx, void *data, size_t size)
{
	struct opal_sampling *s = ctx;
	uint64_t t;

	if (size >= offsetof(struct opal_sample_event, ktime_ns) + sizeof(t)) {
		memcpy(&t, (const uint8_t *)data + offsetof(struct opal_sample_event, ktime_ns),
		       sizeof(t));
		/* taken after the lifecycle ring was read: an exec or exit
		 * before it may have arrived since (an exec a moment before
		 * the new image's first samples) */
		if (t >= s->life_read_ns) {
			s->life_read_ns = opal_mono_ns();
			ring_buffer__consume(s->rb_life);
		}
		opal_lifeq_release(&s->held, t, deliver_held, s);
	}
	return s->cb(s->cb_ctx, data, size);
}

int opal_sampling_start(struct opal_sampling *s, uint32_t freq_hz, uint64_t lifecycle_bytes,
			uint32_t off_cpu_ppm, uint32_t off_cpu_max_rate,
			int (*cb)(void *ctx, void *data, size_t size), void *ctx, char *why,
			size_t why_len)
{
	uint32_t life_size = lifecycle_size(lifecycle_bytes), ring_size;
	struct opal_kernel_probe kp;
	int cpus[OPAL_MAX_CPUS];
	size_t n_online = 0;
	int err;

	memset(s, 0, sizeof(*s));
	s->period_ns = 1000000000ull / freq_hz;
	s->cb = cb;
	s->cb_ctx = ctx;
	opal_bpf_log_install();
	if ((err = opal_kernel_privileges("", why, why_len)) < 0 ||
	    (err = opal_kernel_check("", &kp, why, why_len)) < 0)
		return err;
	s->n_possible_cpus = libbpf_num_possible_cpus();
	if (s->n_possible_cpus <= 0) {
		snprintf(why, why_len, "cannot count possible CPUs");
		return -EINVAL;
	}
	s->skel = sampler_bpf__open();
	if (!s->skel) {
		err = -errno;
		snprintf(why, why_len, "opening the BPF object: %s", strerror(errno));
		return err;
	}
	if (opal_online_cpus(cpus, OPAL_MAX_CPUS, &n_online) < 0)
		n_online = (size_t)s->n_possible_cpus;
	ring_size = opal_ringbuf_size(n_online, freq_hz, OPAL_SAMPLE_FIXED_SIZE);
	if (off_cpu_ppm)
		ring_size = opal_offcpu_ringbuf_size(n_online, off_cpu_ppm, ring_size,
						     OPAL_SAMPLE_HEAD_SIZE);
	err = bpf_map__set_max_entries(s->skel->maps.events, ring_size);
	if (!err)
		err = bpf_map__set_max_entries(s->skel->maps.lifecycle, life_size);
	if (err) {
		snprintf(why, why_len, "sizing the ring buffers: %s", strerror(-err));
		goto fail;
	}
	if ((err = opal_lifeq_init(&s->held, life_size)) < 0) {
		snprintf(why, why_len, "lifecycle queue: %s", strerror(-err));
		goto fail;
	}
	/* one scratch record per CPU, indexed by CPU number */
	err = bpf_map__set_max_entries(s->skel->maps.scratch, (uint32_t)s->n_possible_cpus);
	if (!err)
		err = bpf_map__set_max_entries(s->skel->maps.offcpu_scratch,
					       off_cpu_ppm ? (uint32_t)s->n_possible_cpus : 1);
	if (err) {
		snprintf(why, why_len, "sizing the scratch map: %s", strerror(-err));
		goto fail;
	}
	/* exit-time mappings: the VMA iterator where the kernel has it, else
	 * the mappings recorded as processes make them */
	bpf_program__set_autoload(s->skel->progs.opal_mmap, kp.have[OPAL_KFEAT_VMA_ITER] != 1);
	/* of 2^32, compared with bpf_get_prandom_u32() */
	s->skel->rodata->offcpu_threshold = ((uint64_t)off_cpu_ppm << 32) / 1000000u;
	s->skel->rodata->offcpu_max_rate = off_cpu_max_rate;
	bpf_program__set_autoload(s->skel->progs.opal_switch, off_cpu_ppm != 0);
	if ((err = opal_bpf_load(s->skel->skeleton, why, why_len)) < 0)
		goto fail;
	/* ring_buffer__consume drains rings in the order added: lifecycle
	 * records are held before the samples they follow are read */
	s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.lifecycle), on_lifecycle, s, NULL);
	s->rb_life = ring_buffer__new(bpf_map__fd(s->skel->maps.lifecycle), on_lifecycle, s, NULL);
	if (!s->rb || !s->rb_life ||
	    ring_buffer__add(s->rb, bpf_map__fd(s->skel->maps.events), on_sample, s)) {
		err = -errno;
		snprintf(why, why_len, "ring buffers: %s", strerror(errno));
		goto fail;
	}
	s->exec_link = bpf_program__attach(s->skel->progs.opal_exec);
	s->exit_link = bpf_program__attach(s->skel->progs.opal_exit);
	if (kp.have[OPAL_KFEAT_VMA_ITER] != 1 &&
	    !(s->mmap_link = bpf_program__attach(s->skel->progs.opal_mmap)))
		opal_warn("recording executable mappings (fexit of vm_mmap_pgoff): %s; processes "
			  "gone before their maps are read stay unsymbolized", strerror(errno));
	if (!(s->fork_link = bpf_program__attach(s->skel->progs.opal_fork)))
		opal_warn("attaching sched_process_fork: %s; a process forked without exec gets "
			  "its interpreter frames from the first read of its maps", strerror(errno));
	if (!s->exec_link || !s->exit_link) {
		err = -errno;
		snprintf(why, why_len, "attaching sched_process_exec/exit tracepoints: %s",
			 strerror(errno));
		goto fail;
	}
	if (off_cpu_ppm && !(s->switch_link = bpf_program__attach(s->skel->progs.opal_switch))) {
		err = -errno;
		snprintf(why, why_len, "attaching the off-CPU program (tp_btf/sched_switch): %s",
			 strerror(errno));
		goto fail;
	}
	if (off_cpu_ppm)
		opal_info("off-CPU samples: %u of every 1000000 blocking context switches, at most "
			  "%u per CPU per second (0: no bound)", off_cpu_ppm, off_cpu_max_rate);
	if ((err = attach_cpus(s, why, why_len)) < 0)
		goto fail;
	return 0;
fail:
	opal_sampling_destroy(s);
	return err < 0 ? err : -EINVAL;
}

int opal_sampling_interp_fd(const struct opal_sampling *s)
{
	return bpf_map__fd(s->skel->maps.interp_procs);
}

int opal_sampling_interp_files_fd(const struct opal_sampling *s)
{
	return bpf_map__fd(s->skel->maps.interp_files);
}

int opal_sampling_tctx_fd(const struct opal_sampling *s)
{
	return bpf_map__fd(s->skel->maps.tctx_procs);
}

void opal_sampling_unwind_fds(const struct opal_sampling *s, int *info, int *rules, int *bodies,
			      int *procs)
{
	*info = bpf_map__fd(s->skel->maps.unwind_info);
	*rules = bpf_map__fd(s->skel->maps.unwind_rules);
	*bodies = bpf_map__fd(s->skel->maps.unwind_bodies);
	*procs = bpf_map__fd(s->skel->maps.proc_maps);
}

int opal_sampling_poll(struct opal_sampling *s, int timeout_ms)
{
	struct epoll_event ev[2];

	/* not ring_buffer__poll: it reads the rings in the order they became
	 * ready, and the lifecycle ring must come first */
	if (epoll_wait(ring_buffer__epoll_fd(s->rb), ev, 2, timeout_ms) < 0)
		return -errno;
	return opal_sampling_drain(s);
}

int opal_sampling_drain(struct opal_sampling *s)
{
	int n;

	s->life_read_ns = opal_mono_ns();
	n = ring_buffer__consume(s->rb);

	opal_lifeq_release(&s->held, UINT64_MAX, deliver_held, s);
	return n;
}

void opal_sampling_stop(struct opal_sampling *s)
{
	/* Destroying a perf_event link disables the event and closes it. */
	for (size_t i = 0; i < s->n_perf_links; i++)
		bpf_link__destroy(s->perf_links[i]);
	s->n_perf_links = 0;
	bpf_link__destroy(s->switch_link);
	s->switch_link = NULL;
}

void opal_sampling_destroy(struct opal_sampling *s)
{
	opal_sampling_stop(s);
	free(s->perf_links);
	s->perf_links = NULL;
	bpf_link__destroy(s->exec_link);
	bpf_link__destroy(s->exit_link);
	bpf_link__destroy(s->mmap_link);
	bpf_link__destroy(s->fork_link);
	s->exec_link = s->exit_link = s->mmap_link = s->fork_link = NULL;
	ring_buffer__free(s->rb);
	ring_buffer__free(s->rb_life);
	s->rb = s->rb_life = NULL;
	opal_lifeq_destroy(&s->held);
	sampler_bpf__destroy(s->skel);
	s->skel = NULL;
}

int opal_sampling_counters(struct opal_sampling *s, uint64_t out[OPAL_CTR_MAX])
{
	size_t n = (size_t)s->n_possible_cpus;
	uint64_t *vals = calloc(n, sizeof(uint64_t));

	if (!vals)
		return -ENOMEM;
	for (uint32_t k = 0; k < OPAL_CTR_MAX; k++) {
		out[k] = 0;
		if (bpf_map__lookup_elem(s->skel->maps.counters, &k, sizeof(k), vals,
					 n * sizeof(uint64_t), 0)) {
			int err = -errno;
			free(vals);
			return err;
		}
		for (size_t c = 0; c < n; c++)
			out[k] += vals[c];
	}
	free(vals);
	return 0;
}

int opal_sampling_exclude(struct opal_sampling *s, pid_t pid)
{
	uint32_t key = (uint32_t)pid;
	uint8_t one = 1;

	for (size_t i = 0; i < s->n_excluded; i++)
		if (s->excluded[i] == key)
			return 0;
	if (s->n_excluded == OPAL_MAX_EXCLUDED_PIDS)
		return -E2BIG;
	if (bpf_map__update_elem(s->skel->maps.excluded, &key, sizeof(key), &one, sizeof(one),
				 BPF_ANY))
		return -errno;
	s->excluded[s->n_excluded++] = key;
	return 0;
}

static int delete_excluded(struct opal_sampling *s, size_t i)
{
	uint32_t key = s->excluded[i];

	s->excluded[i] = s->excluded[--s->n_excluded];
	if (bpf_map__delete_elem(s->skel->maps.excluded, &key, sizeof(key), 0) && errno != ENOENT)
		return -errno;
	return 0;
}

int opal_sampling_unexclude(struct opal_sampling *s, pid_t pid)
{
	for (size_t i = 0; i < s->n_excluded; i++)
		if (s->excluded[i] == (uint32_t)pid)
			return delete_excluded(s, i);
	return 0;
}

int opal_sampling_unexclude_all(struct opal_sampling *s)
{
	int err = 0;

	while (s->n_excluded > 0) {
		int r = delete_excluded(s, s->n_excluded - 1);
		if (r < 0)
			err = r;
	}
	return err;
}
