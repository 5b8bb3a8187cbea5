/* Loopback OTLP/HTTP receiver for opal's tests (libmicrohttpd).
 *
 * Accepts POST /v1development/profiles (ExportProfilesServiceRequest) and
 * POST /v1/logs (ExportLogsServiceRequest), gunzips bodies sent with
 * Content-Encoding: gzip, decodes them with the project's protobuf-c code
 * and checks them (check.c: the profiles dictionary rules, the "profiles as
 * logs" attribute contract). Every request is recorded with its arrival
 * time, headers, verdict and a summary.
 *
 * Answers follow a script of steps, one step per OTLP request, then 200:
 *   STEP = BASE[:ra=SECONDS][:date=SECONDS][:delay=MS][:rejected=N]
 *   BASE = HTTP status (200, 400, 429, 503, ...) | ok (200) |
 *          partial (200 with partial_success, rejected=1 unless given) |
 *          slow=MS (200 after MS milliseconds)
 * ra= sends "Retry-After: SECONDS"; date= sends Retry-After as the HTTP
 * date now + SECONDS. Steps are separated by ','.
 *
 * Control endpoints (for scripts): POST /control?script=STEPS replaces the
 * script; POST /reset forgets recorded requests and the script; GET
 * /requests returns the records as a JSON array. */
#ifndef OPAL_OTLP_RECEIVER_H
#define OPAL_OTLP_RECEIVER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RCV_MAX_REQUESTS 4096
#define RCV_MAX_STEPS    256
#define RCV_MAX_BODY     (64u << 20)    /* request body, compressed or not */
#define RCV_MAX_PLAIN    (256u << 20)   /* after gunzip */
#define RCV_MAX_PIDS     64
#define RCV_MAX_NAMES    (1u << 16)

struct rcv_step {
	int status;             /* HTTP status */
	int retry_after_s;      /* -1: no Retry-After */
	bool retry_after_date;  /* send it as an HTTP date */
	int delay_ms;           /* wait before answering */
	int64_t rejected;       /* > 0: partial_success with this count */
};

struct rcv_summary {
	char kind[16];                  /* "profiles", "logs" */
	uint64_t resources;             /* ResourceProfiles / ResourceLogs */
	uint64_t samples;               /* profiles: timestamps (or values) summed;
					 * logs: "count" values of the embedded pprof */
	uint64_t log_records;
	uint64_t off_cpu_samples;       /* profiles: timestamps of off_cpu/nanoseconds Profiles */
	uint64_t off_cpu_ns;            /* ... their values summed */
	uint32_t pids[RCV_MAX_PIDS];    /* process.pid of resources (profiles) */
	size_t n_pids;
	char **names;                   /* distinct function names (malloc'd), at most
					 * RCV_MAX_NAMES */
	size_t n_names, cap_names;
	uint64_t period;                /* profiles: Profile.period; logs: period attribute */
	uint64_t mappings_without_id;   /* profiles: Mappings with no build ID attribute */
};

struct rcv_request {
	double t_ms;                    /* body complete, ms since receiver start */
	double t_done_ms;               /* answer handed to the server */
	char path[128];
	char content_type[64];
	char content_encoding[32];
	char test_header[128];          /* value of "x-opal-test" when present */
	size_t body_len;                /* bytes received */
	uint64_t body_hash;             /* FNV-1a of the uncompressed body: equal for a
					 * retry of the same request */
	int status;                     /* answered status */
	int retry_after_s;              /* -1 none */
	bool valid;                     /* decoded and every check passed */
	char error[512];                /* first failed check */
	struct rcv_summary sum;
};

struct otlp_receiver;

/* Starts listening on 127.0.0.1:`port` (0: any free port). NULL on error
 * (message on stderr). `log_path` (may be NULL) receives one JSON line per
 * request. */
struct otlp_receiver *otlp_receiver_start(uint16_t port, const char *log_path);
uint16_t otlp_receiver_port(const struct otlp_receiver *r);

/* Keeps every well-formed request's uncompressed body as DIR/NNNN.pb
 * (0000 first; NULL stops keeping them); call before requests arrive.
 * Returns 0 or -ENOMEM. */
int otlp_receiver_save_dir(struct otlp_receiver *r, const char *dir);
void otlp_receiver_stop(struct otlp_receiver *r);

/* Replaces the script; `spec` per the syntax above. Returns 0 or -EINVAL. */
int otlp_receiver_script(struct otlp_receiver *r, const char *spec);

/* Forgets recorded requests and the script. */
void otlp_receiver_reset(struct otlp_receiver *r);

/* Copies up to `max` records (oldest first) into `out`; returns how many
 * were recorded in total. The name pointers in copies are borrowed: valid
 * until the next reset or stop. */
size_t otlp_receiver_requests(struct otlp_receiver *r, struct rcv_request *out, size_t max);

/* Waits until at least `n` requests are recorded or `timeout_ms` passes;
 * returns the count. */
size_t otlp_receiver_wait(struct otlp_receiver *r, size_t n, int timeout_ms);

/* check.c: decodes `plain` (uncompressed protobuf) of the given kind and
 * checks it. Returns true when valid; otherwise false with the reason in
 * `why`. Fills `sum` either way as far as decoding went; free its names
 * with rcv_summary_free. */
bool rcv_check_profiles(const uint8_t *plain, size_t len, struct rcv_summary *sum, char *why,
			size_t why_len);
bool rcv_check_logs(const uint8_t *plain, size_t len, struct rcv_summary *sum, char *why,
		    size_t why_len);
void rcv_summary_free(struct rcv_summary *sum);

#endif
