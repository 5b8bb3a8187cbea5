/* Unit tests of symbolizer/sandbox*.c. The sandbox is irreversible, so each
 * case forks a child that (when the tests run as root) drops to nobody the
 * way the daemon does, applies the sandbox, and then checks what is still
 * allowed — the libraries the symbolizer uses (SQLite, libdwfl, glibc
 * threads and name resolution, libcurl with OpenSSL, libdebuginfod,
 * libmicrohttpd) must work without a
 * single seccomp denial — and what is refused. The child reports failures
 * on stderr, which the parent reads and asserts on. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <curl/curl.h>
#include <elfutils/debuginfod.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <sqlite3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "symbolizer/sandbox/privdrop.h"
#include "symbolizer/sandbox/sandbox.h"
#include "symbolizer/sandbox/sandbox_landlock.h"
#include "symbolizer/sandbox/sandbox_seccomp.h"
#include "symbolizer/symbolize/sym_dwfl.h"

#define CHILD_TIMEOUT_S 30

static char rw_dir[64];      /* granted to the sandbox, owned by the child's user */
static char other_dir[64];   /* not granted: a world-readable and a root-only file */
static int landlock_abi;     /* the kernel's, read before sandboxing (it denies the call) */

/* In the child: report and fail. */
#define CHECK(cond)                                                                          \
	do {                                                                                 \
		if (!(cond)) {                                                               \
			fprintf(stderr, "CHECK failed at line %d: %s (errno %d %s)\n",       \
				__LINE__, #cond, errno, strerror(errno));                    \
			_exit(1);                                                            \
		}                                                                            \
	} while (0)

struct child_run {
	void (*body)(void *arg);          /* runs sandboxed in the child */
	void (*serve)(void *arg);         /* runs in the parent meanwhile, or NULL */
	void *arg;
	char log[8192];                   /* the child's stderr */
};

/* Forks; the child becomes nobody (if root), applies the sandbox with
 * rw_dir writable, runs body and exits 0. Asserts the child exited 0 and
 * keeps its stderr in run->log. */
static void run_sandboxed(struct child_run *run)
{
	int errp[2];
	pid_t pid;

	assert_int_equal(pipe2(errp, O_CLOEXEC), 0);
	fflush(NULL);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		dup2(errp[1], STDERR_FILENO);
		alarm(CHILD_TIMEOUT_S);
		if (geteuid() == 0) {
			uid_t uid;
			gid_t gid;
			CHECK(opal_lookup_user("nobody", &uid, &gid) == 0);
			CHECK(opal_drop_privileges(uid, gid) == 0);
		}
		const char *dirs[] = { rw_dir };
		struct opal_sandbox_config cfg = { .prog = "test_sandbox", .rw_dirs = dirs,
						   .n_rw_dirs = 1 };
		struct opal_sandbox_result res;
		int r = opal_sandbox_apply(&cfg, &res);
		errno = -r;
		CHECK(r == 0);
		CHECK(res.landlock_kernel_abi == landlock_abi);
		if (landlock_abi > 0)
			CHECK(res.landlock_abi > 0 && res.landlock_rules > 0);
		run->body(run->arg);
		_exit(0);
	}
	close(errp[1]);
	if (run->serve)
		run->serve(run->arg);
	size_t n = 0;
	ssize_t got;
	while ((got = read(errp[0], run->log + n, sizeof(run->log) - 1 - n)) > 0)
		n += (size_t)got;
	run->log[n] = '\0';
	close(errp[0]);
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		fail_msg("sandboxed child failed (status 0x%x):\n%s", status, run->log);
}

/* ---- file access ---------------------------------------------------------- */

static void body_files(void *arg)
{
	char path[128], path2[128];
	int fd;
	(void)arg;

	/* The granted folder: create, write, rename, list, remove. */
	snprintf(path, sizeof(path), "%s/a.tmp", rw_dir);
	snprintf(path2, sizeof(path2), "%s/a", rw_dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	CHECK(fd >= 0);
	CHECK(write(fd, "x", 1) == 1);
	CHECK(fsync(fd) == 0);
	close(fd);
	CHECK(rename(path, path2) == 0);
	snprintf(path, sizeof(path), "%s/sub", rw_dir);
	CHECK(mkdir(path, 0755) == 0);
	CHECK(rmdir(path) == 0);
	CHECK(open(rw_dir, O_RDONLY | O_DIRECTORY) >= 0);
	CHECK(unlink(path2) == 0);

	/* Outside it: a world-readable file is refused by Landlock alone. */
	snprintf(path, sizeof(path), "%s/public", other_dir);
	errno = 0;
	if (landlock_abi > 0)
		CHECK(open(path, O_RDONLY) < 0 && errno == EACCES);
	snprintf(path, sizeof(path), "%s/secret", other_dir);
	struct stat st;
	CHECK(stat(path, &st) == 0);
	errno = 0;
	if (landlock_abi > 0 || st.st_uid != getuid())   /* mode 0600 */
		CHECK(open(path, O_RDONLY) < 0 && errno == EACCES);
	snprintf(path, sizeof(path), "%s/new", other_dir);
	CHECK(open(path, O_WRONLY | O_CREAT, 0644) < 0 && errno == EACCES);
	if (landlock_abi > 0) {
		CHECK(open("/etc/passwd", O_RDONLY) < 0 && errno == EACCES);
		CHECK(open("/usr/bin", O_RDONLY | O_DIRECTORY) < 0 && errno == EACCES);
	}

	/* What the libraries need stays readable. */
	CHECK(open("/proc/self/status", O_RDONLY) >= 0);
	CHECK(open("/dev/null", O_WRONLY) >= 0);
	if (access("/etc/hosts", F_OK) == 0)
		CHECK(open("/etc/hosts", O_RDONLY) >= 0);
	if (access("/usr/lib/debug", F_OK) == 0)
		CHECK(open("/usr/lib/debug", O_RDONLY | O_DIRECTORY) >= 0);
	CHECK(opal_seccomp_denials() == 0);
}

static void test_files(void **state)
{
	struct child_run run = { .body = body_files };
	(void)state;

	run_sandboxed(&run);
	assert_null(strstr(run.log, "seccomp: denied"));
}

/* ---- system calls ---------------------------------------------------------- */

static void *thread_fn(void *arg)
{
	return arg;
}

static void body_syscalls(void *arg)
{
	pthread_t t;
	void *ret;
	(void)arg;

	/* Threads work (clone with CLONE_THREAD, after clone3 said ENOSYS). */
	CHECK(pthread_create(&t, NULL, thread_fn, (void *)0x1234) == 0);
	CHECK(pthread_join(t, &ret) == 0 && ret == (void *)0x1234);
	errno = 0;
	CHECK(syscall(SYS_clone3, NULL, 0) < 0 && errno == ENOSYS);
	CHECK(opal_seccomp_denials() == 0);

	/* Denied with EPERM, counted, logged. */
	errno = 0;
	CHECK(syscall(SYS_ptrace, 0, 0, 0, 0) < 0 && errno == EPERM);
	CHECK(opal_seccomp_denials() == 1);
	errno = 0;
	CHECK(fork() < 0 && errno == EPERM);                  /* clone without CLONE_THREAD */
	errno = 0;
	CHECK(unshare(CLONE_NEWUSER) < 0 && errno == EPERM);
	errno = 0;
	CHECK(socket(AF_NETLINK, SOCK_RAW, 0) < 0 && errno == EPERM);
	int s = socket(AF_INET6, SOCK_STREAM, 0);
	CHECK(s >= 0);
	close(s);
	errno = 0;
	CHECK(mmap(NULL, 4096, PROT_READ | PROT_WRITE | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS,
		   -1, 0) == MAP_FAILED && errno == EPERM);
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	CHECK(p != MAP_FAILED);
	errno = 0;
	CHECK(mprotect(p, 4096, PROT_READ | PROT_EXEC) < 0 && errno == EPERM);
	CHECK(mprotect(p, 4096, PROT_READ) == 0);
	errno = 0;
	CHECK(execl("/bin/true", "true", (char *)NULL) < 0 && errno == EPERM);
	CHECK(opal_seccomp_denials() == 7);
	/* Signals to another process are refused (only our own threads). */
	errno = 0;
	CHECK(syscall(SYS_tgkill, 1, 1, 0) < 0 && errno == EPERM);
	CHECK(opal_seccomp_denials() == 8);
	errno = 0;
	CHECK(syscall(SYS_kill, 1, 0) < 0 && errno == EPERM);
	CHECK(opal_seccomp_denials() == 9);
}

static void test_syscalls(void **state)
{
	struct child_run run = { .body = body_syscalls };
	(void)state;

	run_sandboxed(&run);
	assert_non_null(strstr(run.log, "test_sandbox: seccomp: denied system call ptrace (101)"));
	assert_non_null(strstr(run.log, "denied system call execve"));
	assert_non_null(strstr(run.log, "further denials are only counted"));
	/* Only the first OPAL_SECCOMP_LOG_MAX are logged. */
	assert_null(strstr(run.log, "denied system call kill"));
}

/* ---- the symbolizer's libraries ------------------------------------------------ */

struct libs_arg {
	int self_fd, libc_fd;               /* opened before the sandbox, like passed fds */
	uint64_t self_vaddr, libc_vaddr;    /* ELF virtual addresses to look up */
	enum opal_debug_quality libc_quality;   /* found without the sandbox */
	int http_listen, tls_listen;
	int http_port, tls_port;
};

static size_t curl_sink(char *data, size_t size, size_t n, void *arg)
{
	char *buf = arg;
	size_t len = strlen(buf), add = size * n;

	if (len + add < 64) {
		memcpy(buf + len, data, add);
		buf[len + add] = '\0';
	}
	return add;
}

/* libmicrohttpd request handler: answers "mhd". */
static enum MHD_Result mhd_answer(void *cls, struct MHD_Connection *conn, const char *url,
				  const char *method, const char *version, const char *upload,
				  size_t *upload_size, void **req_cls)
{
	static const char text[] = "mhd";
	(void)cls, (void)url, (void)method, (void)version, (void)upload, (void)upload_size,
		(void)req_cls;
	struct MHD_Response *r = MHD_create_response_from_buffer(3, (void *)text,
								  MHD_RESPMEM_PERSISTENT);
	enum MHD_Result ret = MHD_queue_response(conn, MHD_HTTP_OK, r);

	MHD_destroy_response(r);
	return ret;
}

static void body_libs(void *argp)
{
	struct libs_arg *a = argp;
	struct opal_dwfl_file *f;
	struct opal_sym_result r;
	char path[256];
	sqlite3 *db;

	/* SQLite in WAL mode in the granted folder. */
	snprintf(path, sizeof(path), "%s/state.db", rw_dir);
	CHECK(sqlite3_open(path, &db) == SQLITE_OK);
	CHECK(sqlite3_exec(db, "PRAGMA journal_mode=WAL; CREATE TABLE t(x); INSERT INTO t "
			   "VALUES (1); SELECT count(*) FROM t;", NULL, NULL, NULL) == SQLITE_OK);
	CHECK(sqlite3_close(db) == SQLITE_OK);

	/* libdwfl on descriptors, with separate debug info from /usr/lib/debug. */
	CHECK(opal_dwfl_open(a->self_fd, "/proc/self/exe", &f) == 0);
	CHECK(opal_dwfl_lookup(f, a->self_vaddr, &r) == 0);
	CHECK(r.n >= 1 && r.frames[0].function && !strcmp(r.frames[0].function, "body_libs"));
	opal_sym_result_free(&r);
	opal_dwfl_close(f);
	CHECK(opal_dwfl_open(a->libc_fd, "/lib/x86_64-linux-gnu/libc.so.6", &f) == 0);
	CHECK(opal_dwfl_quality(f, NULL) == a->libc_quality);
	CHECK(opal_dwfl_lookup(f, a->libc_vaddr, &r) == 0);
	CHECK(r.n >= 1 && r.frames[r.n - 1].function &&
	      strstr(r.frames[r.n - 1].function, "getpid"));
	opal_sym_result_free(&r);
	opal_dwfl_close(f);

	/* Name resolution through /etc/nsswitch.conf and /etc/hosts. */
	struct addrinfo hints = { .ai_socktype = SOCK_STREAM }, *ai;
	CHECK(getaddrinfo("localhost", "80", &hints, &ai) == 0);
	freeaddrinfo(ai);

	/* libcurl: plain HTTP, then TLS (OpenSSL loads its configuration and
	 * the CA store before the handshake, which the server ends). */
	char body[64] = "", url[64];
	long code = 0;
	CHECK(curl_global_init(CURL_GLOBAL_DEFAULT) == CURLE_OK);
	CURL *c = curl_easy_init();
	CHECK(c != NULL);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/test", a->http_port);
	curl_easy_setopt(c, CURLOPT_URL, url);
	curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	curl_easy_setopt(c, CURLOPT_TIMEOUT, 10L);
	curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, curl_sink);
	curl_easy_setopt(c, CURLOPT_WRITEDATA, body);
	CURLcode cr = curl_easy_perform(c);
	if (cr != CURLE_OK)
		fprintf(stderr, "curl: %s\n", curl_easy_strerror(cr));
	CHECK(cr == CURLE_OK);
	curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	CHECK(code == 200 && !strcmp(body, "ok"));

	/* libdebuginfod: a download into its cache in the granted folder, with
	 * a cache cleaning pass first (interval 0). */
	char cache[128], dbg[4] = "";
	snprintf(cache, sizeof(cache), "%s/debuginfod", rw_dir);
	CHECK(mkdir(cache, 0700) == 0);
	snprintf(path, sizeof(path), "%s/cache_clean_interval_s", cache);
	FILE *f0 = fopen(path, "w");
	CHECK(f0 && fputs("0\n", f0) >= 0 && fclose(f0) == 0);
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", a->http_port);
	setenv("DEBUGINFOD_URLS", url, 1);
	setenv("DEBUGINFOD_CACHE_PATH", cache, 1);
	static const unsigned char build_id[20] = { 0xab, 0xcd };
	debuginfod_client *dc = debuginfod_begin();
	CHECK(dc != NULL);
	int dfd = debuginfod_find_debuginfo(dc, build_id, sizeof(build_id), NULL);
	errno = dfd < 0 ? -dfd : 0;
	CHECK(dfd >= 0 && pread(dfd, dbg, 2, 0) == 2 && !strcmp(dbg, "ok"));
	close(dfd);
	debuginfod_end(dc);

	/* libmicrohttpd the way the symbolizer's HTTP API runs it: its own
	 * polling threads (epoll), asked by libcurl from this thread. */
	struct sockaddr_in mhd_addr = { .sin_family = AF_INET,
					.sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	struct MHD_Daemon *d = MHD_start_daemon(
		MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_AUTO, 0, NULL, NULL, mhd_answer, NULL,
		MHD_OPTION_SOCK_ADDR, &mhd_addr, MHD_OPTION_THREAD_POOL_SIZE, 2u,
		MHD_OPTION_LISTENING_ADDRESS_REUSE, 1u, MHD_OPTION_END);
	CHECK(d != NULL);
	const union MHD_DaemonInfo *info = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
	CHECK(info && info->port);
	body[0] = '\0';
	snprintf(url, sizeof(url), "http://127.0.0.1:%u/flamegraph", (unsigned)info->port);
	curl_easy_setopt(c, CURLOPT_URL, url);
	CHECK(curl_easy_perform(c) == CURLE_OK && !strcmp(body, "mhd"));
	MHD_stop_daemon(d);

	snprintf(url, sizeof(url), "https://localhost:%d/", a->tls_port);
	curl_easy_setopt(c, CURLOPT_URL, url);
	CHECK(curl_easy_perform(c) != CURLE_OK);
	curl_easy_cleanup(c);
	curl_global_cleanup();

	CHECK(opal_seccomp_denials() == 0);
}

static int listen_loopback(int *port)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 4), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	*port = ntohs(sa.sin_port);
	return fd;
}

/* Accepts one connection within the child's time limit; -1 if none. */
static int accept_one(int lfd)
{
	struct pollfd p = { .fd = lfd, .events = POLLIN };

	if (poll(&p, 1, CHILD_TIMEOUT_S * 1000) != 1)
		return -1;
	return accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
}

/* Parent side: two HTTP requests (libcurl's, libdebuginfod's) answered
 * "ok", then a TLS connection closed at once. */
static void serve_libs(void *argp)
{
	struct libs_arg *a = argp;
	static const char resp[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";
	char req[4096];
	int fd;

	for (int i = 0; i < 2 && (fd = accept_one(a->http_listen)) >= 0; i++) {
		size_t n = 0;
		struct pollfd p = { .fd = fd, .events = POLLIN };
		while (n < sizeof(req) - 1 && poll(&p, 1, 5000) == 1) {
			ssize_t got = read(fd, req + n, sizeof(req) - 1 - n);
			if (got <= 0)
				break;
			n += (size_t)got;
			req[n] = '\0';
			if (strstr(req, "\r\n\r\n"))
				break;
		}
		if (write(fd, resp, sizeof(resp) - 1) < 0)
			fprintf(stderr, "serve_libs: write: %s\n", strerror(errno));
		close(fd);
	}
	fd = accept_one(a->tls_listen);
	if (fd >= 0)
		close(fd);
}

struct find_arg {
	const char *needle;
	uintptr_t base;
};

static int find_object(struct dl_phdr_info *info, size_t size, void *argp)
{
	struct find_arg *fa = argp;
	(void)size;

	if (strstr(info->dlpi_name, fa->needle)) {
		fa->base = info->dlpi_addr;
		return 1;
	}
	return 0;
}

static void test_libraries(void **state)
{
	struct libs_arg a = { 0 };
	struct child_run run = { .body = body_libs, .serve = serve_libs, .arg = &a };
	struct find_arg self = { .needle = "" }, libc = { .needle = "libc.so.6" };
	struct opal_dwfl_file *f;
	(void)state;

	/* Load biases: the main program is the first object (empty name). */
	dl_iterate_phdr(find_object, &self);
	dl_iterate_phdr(find_object, &libc);
	assert_true(libc.base != 0);
	a.self_vaddr = (uintptr_t)body_libs - self.base;
	a.libc_vaddr = (uintptr_t)getpid - libc.base;
	a.self_fd = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
	a.libc_fd = open("/lib/x86_64-linux-gnu/libc.so.6", O_RDONLY | O_CLOEXEC);
	assert_true(a.self_fd >= 0 && a.libc_fd >= 0);
	assert_int_equal(opal_dwfl_open(a.libc_fd, "/lib/x86_64-linux-gnu/libc.so.6", &f), 0);
	a.libc_quality = opal_dwfl_quality(f, NULL);
	opal_dwfl_close(f);
	a.http_listen = listen_loopback(&a.http_port);
	a.tls_listen = listen_loopback(&a.tls_port);

	run_sandboxed(&run);
	assert_null(strstr(run.log, "seccomp: denied"));
	close(a.http_listen);
	close(a.tls_listen);
	close(a.self_fd);
	close(a.libc_fd);
}

/* ---- preconditions ------------------------------------------------------------- */

static void *sleeper(void *arg)
{
	pause();
	return arg;
}

static void test_refuses_threads_and_root(void **state)
{
	(void)state;
	pid_t pid = fork();

	assert_true(pid >= 0);
	if (pid == 0) {
		pthread_t t;
		const char *dirs[] = { rw_dir };
		struct opal_sandbox_config cfg = { .prog = "test_sandbox", .rw_dirs = dirs,
						   .n_rw_dirs = 1 };
		struct opal_sandbox_result res;
		if (geteuid() == 0 && opal_sandbox_apply(&cfg, &res) != -EPERM)
			_exit(2);
		if (pthread_create(&t, NULL, sleeper, NULL) != 0)
			_exit(3);
		_exit(opal_sandbox_apply(&cfg, &res) == -EBUSY ? 0 : 4);
	}
	int status;
	assert_int_equal(waitpid(pid, &status, 0), pid);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

static int setup(void **state)
{
	char path[128];
	int fd;
	(void)state;

	landlock_abi = opal_landlock_kernel_abi();
	snprintf(rw_dir, sizeof(rw_dir), "/tmp/opal-test-sandbox-rw-XXXXXX");
	snprintf(other_dir, sizeof(other_dir), "/tmp/opal-test-sandbox-other-XXXXXX");
	if (!mkdtemp(rw_dir) || !mkdtemp(other_dir))
		return -1;
	chmod(other_dir, 0755);
	if (geteuid() == 0) {
		uid_t uid;
		gid_t gid;
		if (opal_lookup_user("nobody", &uid, &gid) < 0 || chown(rw_dir, uid, gid) < 0)
			return -1;
	}
	snprintf(path, sizeof(path), "%s/public", other_dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
	if (fd < 0)
		return -1;
	fchmod(fd, 0644);
	close(fd);
	snprintf(path, sizeof(path), "%s/secret", other_dir);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	if (fd < 0)
		return -1;
	close(fd);
	return 0;
}

static int teardown(void **state)
{
	char cmd[256];
	(void)state;

	snprintf(cmd, sizeof(cmd), "rm -rf '%s' '%s'", rw_dir, other_dir);
	return system(cmd) == 0 ? 0 : -1;
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_files),
		cmocka_unit_test(test_syscalls),
		cmocka_unit_test(test_libraries),
		cmocka_unit_test(test_refuses_threads_and_root),
	};
	return cmocka_run_group_tests(tests, setup, teardown);
}
