/* Ping-pong load of bench/offcpu/run.sh: two threads pass a byte back and
 * forth over two pipes, each blocking in read() until the other writes,
 * paced in 10 ms slices so that the machine does about RATE blocking
 * context switches per second (run it on one CPU: taskset -c N).
 * usage: pingpong RATE SECONDS
 * Prints "switches N seconds S": the voluntary context switches of both
 * threads (getrusage RUSAGE_THREAD) over the run. */
#define _GNU_SOURCE   /* RUSAGE_THREAD */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

static int to_pong[2], to_ping[2];
static long pong_switches;

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static long my_switches(void)
{
	struct rusage ru;

	getrusage(RUSAGE_THREAD, &ru);
	return ru.ru_nvcsw;
}

static void *pong(void *arg)
{
	long start = my_switches();
	char c;

	(void)arg;
	while (read(to_pong[0], &c, 1) == 1 && c == 'p')
		if (write(to_ping[1], &c, 1) != 1)
			break;
	pong_switches = my_switches() - start;
	return NULL;
}

int main(int argc, char **argv)
{
	long rate, start;
	double seconds, t0, next;
	pthread_t t;
	char c = 'p';

	if (argc != 3 || (rate = atol(argv[1])) <= 0 || (seconds = atof(argv[2])) <= 0) {
		fprintf(stderr, "usage: pingpong RATE SECONDS\n");
		return 2;
	}
	if (pipe(to_pong) < 0 || pipe(to_ping) < 0 || pthread_create(&t, NULL, pong, NULL)) {
		perror("pingpong");
		return 1;
	}
	start = my_switches();
	t0 = next = now_s();
	/* a round trip is measured to be one blocking switch (the woken
	 * thread often finds the next byte already there): rate per second */
	long per_slice = rate / 100 > 0 ? rate / 100 : 1;
	while (now_s() - t0 < seconds) {
		for (long i = 0; i < per_slice; i++)
			if (write(to_pong[1], &c, 1) != 1 || read(to_ping[0], &c, 1) != 1)
				return 1;
		next += 0.01;
		double wait = next - now_s();
		if (wait > 0) {
			struct timespec d = { 0, (long)(wait * 1e9) };
			nanosleep(&d, NULL);
		}
	}
	c = 'q';
	if (write(to_pong[1], &c, 1) != 1)
		return 1;
	pthread_join(t, NULL);
	printf("switches %ld seconds %.2f\n", my_switches() - start + pong_switches, now_s() - t0);
	return 0;
}
