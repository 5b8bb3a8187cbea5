/* The symbolizer's stop deadline (docs/deployment.md, "Stopping"): from
 * the first stop signal, its waits (collectors hanging up, exporters
 * flushing) end by OPAL_STOP_WAIT_MS; a watchdog thread ends the process
 * with status 0 at OPAL_STOP_EXIT_MS if the stop sequence is still not
 * done, after logging the step it was in. Everything acknowledged is on
 * disk by then (the ledger commits before each Ack); what was queued for
 * export is lost, as at any exporter's flush timeout. The units'
 * TimeoutStopSec= is OPAL_STOP_DEADLINE_MS. */
#ifndef OPAL_SYMBOLIZER_STOP_DEADLINE_H
#define OPAL_SYMBOLIZER_STOP_DEADLINE_H

#define OPAL_STOP_DEADLINE_MS 5000u   /* TimeoutStopSec= of the units */
#define OPAL_STOP_WAIT_MS     4000u   /* waits end by this after the stop signal */
#define OPAL_STOP_EXIT_MS     4500u   /* the watchdog exits at this */

/* Starts the clock and the watchdog (main thread, once; a second call does
 * nothing). Without a thread (pthread_create failed) only the waits are
 * bounded. */
void opal_stop_deadline_start(void);

/* Names the step the stop sequence is in, for the watchdog's log line;
 * `what` must outlive the process (a string literal). */
void opal_stop_deadline_step(const char *what);

/* Milliseconds left for waiting: OPAL_STOP_WAIT_MS after the start, minus
 * the time since; 0 when over. OPAL_STOP_WAIT_MS before the start. */
unsigned opal_stop_deadline_wait_left_ms(void);

/* The stop sequence is done: stops and joins the watchdog. */
void opal_stop_deadline_end(void);

#endif
