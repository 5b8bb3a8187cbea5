/* BPF program loading and perf event attachment (sampling.h). */
#include "sampling.h"

#include <errno.h>
#include <linux/perf_event.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include "cpus.h"
#include "log.h"
#include "sampler.skel.h"

uint32_t opal_ringbuf_size(size_t n_cpus, uint32_t freq_hz, size_t record_size)
{
	uint64_t want = (uint64_t)n_cpus * freq_hz * record_size / 2;
	uint64_t size = OPAL_RINGBUF_MIN;

	while (size < want && size < OPAL_RINGBUF_MAX)
		size <<= 1;
	return (uint32_t)size;
}

static int libbpf_log(enum libbpf_print_level level, const char *fmt, va_list ap)
{
	char msg[1024];

	vsnprintf(msg, sizeof(msg), fmt, ap);
	msg[strcspn(msg, "\n")] = '\0';
	if (level == LIBBPF_WARN)
		opal_warn("%s", msg);
	else
		opal_debug("%s", msg);
	return 0;
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
		snprintf(why, why_len, "no CPU could be sampled (%zu online): %s", n_cpus,
			 strerror(last_err ? -last_err : ENODEV));
		return last_err ? last_err : -ENODEV;
	}
	opal_info("sampling %zu of %zu online CPUs every %llu ns", s->n_perf_links, n_cpus,
		  (unsigned long long)s->period_ns);
	return 0;
}

int opal_sampling_start(struct opal_sampling *s, uint32_t freq_hz,
			int (*cb)(void *ctx, void *data, size_t size), void *ctx, char *why,
			size_t why_len)
{
	int cpus[OPAL_MAX_CPUS];
	size_t n_online = 0;
	int err;

	memset(s, 0, sizeof(*s));
	s->period_ns = 1000000000ull / freq_hz;
	libbpf_set_print(libbpf_log);
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
	err = bpf_map__set_max_entries(s->skel->maps.events,
				       opal_ringbuf_size(n_online, freq_hz, OPAL_SAMPLE_FIXED_SIZE));
	if (err) {
		snprintf(why, why_len, "sizing the ring buffer: %s", strerror(-err));
		goto fail;
	}
	/* one scratch record per CPU, indexed by CPU number */
	err = bpf_map__set_max_entries(s->skel->maps.scratch, (uint32_t)s->n_possible_cpus);
	if (err) {
		snprintf(why, why_len, "sizing the scratch map: %s", strerror(-err));
		goto fail;
	}
	err = sampler_bpf__load(s->skel);
	if (err) {
		snprintf(why, why_len, "loading the BPF program: %s", strerror(-err));
		goto fail;
	}
	s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.events), cb, ctx, NULL);
	if (!s->rb) {
		err = -errno;
		snprintf(why, why_len, "ring buffer: %s", strerror(errno));
		goto fail;
	}
	s->exec_link = bpf_program__attach(s->skel->progs.opal_exec);
	s->exit_link = bpf_program__attach(s->skel->progs.opal_exit);
	if (!s->exec_link || !s->exit_link) {
		err = -errno;
		snprintf(why, why_len, "attaching sched_process_exec/exit tracepoints: %s",
			 strerror(errno));
		goto fail;
	}
	if ((err = attach_cpus(s, why, why_len)) < 0)
		goto fail;
	return 0;
fail:
	opal_sampling_destroy(s);
	return err < 0 ? err : -EINVAL;
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
	int n = ring_buffer__poll(s->rb, timeout_ms), m;

	if (n < 0)
		return n;
	/* most samples are written without waking this reader (bpf/sampler.bpf.c):
	 * take them too */
	m = ring_buffer__consume(s->rb);
	return m < 0 ? m : n + m;
}

int opal_sampling_drain(struct opal_sampling *s)
{
	return ring_buffer__consume(s->rb);
}

void opal_sampling_stop(struct opal_sampling *s)
{
	/* Destroying a perf_event link disables the event and closes it. */
	for (size_t i = 0; i < s->n_perf_links; i++)
		bpf_link__destroy(s->perf_links[i]);
	s->n_perf_links = 0;
}

void opal_sampling_destroy(struct opal_sampling *s)
{
	opal_sampling_stop(s);
	free(s->perf_links);
	s->perf_links = NULL;
	bpf_link__destroy(s->exec_link);
	bpf_link__destroy(s->exit_link);
	s->exec_link = s->exit_link = NULL;
	ring_buffer__free(s->rb);
	s->rb = NULL;
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
