/* Tests of collector/send/peer.c: which listener uids are trusted, and
 * which socket folders are refused (writable by others, owned by an
 * untrusted user, the sticky exception only above the socket's own). */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "collector/send/peer.h"

static char root[64], path[256], why[512];

static int setup(void **state)
{
	(void)state;
	snprintf(root, sizeof(root), "/tmp/opal-peer.XXXXXX");   /* /tmp: root's, sticky */
	return mkdtemp(root) ? 0 : -1;
}

static int teardown(void **state)
{
	char cmd[128];
	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
	return system(cmd) == 0 ? 0 : -1;
}

/* The policy that trusts whoever runs the test (root or not). */
static struct opal_peer_policy me(void)
{
	return (struct opal_peer_policy){ .symbolizer_uid = getuid() };
}

static void test_uids(void **state)
{
	(void)state;
	struct opal_peer_policy root_only = { 0 }, opal = { .symbolizer_uid = 998 };

	assert_true(opal_peer_uid_trusted(&root_only, 0));
	assert_false(opal_peer_uid_trusted(&root_only, 65534));
	assert_true(opal_peer_uid_trusted(&opal, 998));
	assert_true(opal_peer_uid_trusted(&opal, 0));
	assert_false(opal_peer_uid_trusted(&opal, 65534));
}

static void test_private_folder_accepted(void **state)
{
	(void)state;
	struct opal_peer_policy p = me();

	assert_int_equal(chmod(root, 0755), 0);
	snprintf(path, sizeof(path), "%s/c.sock", root);
	assert_int_equal(opal_socket_dir_check(&p, path, why, sizeof(why)), 0);
	snprintf(path, sizeof(path), "%s/sub", root);
	assert_int_equal(mkdir(path, 0700), 0);
	snprintf(path, sizeof(path), "%s/sub/../sub/c.sock", root);   /* resolved first */
	assert_int_equal(opal_socket_dir_check(&p, path, why, sizeof(why)), 0);
}

static void test_writable_refused(void **state)
{
	(void)state;
	struct opal_peer_policy p = me();

	snprintf(path, sizeof(path), "%s/c.sock", root);
	assert_int_equal(chmod(root, 0777), 0);
	assert_int_equal(opal_socket_dir_check(&p, path, why, sizeof(why)), -EPERM);
	assert_non_null(strstr(why, "writable by users other than root"));
	assert_int_equal(chmod(root, 0775), 0);   /* group write too */
	assert_int_equal(opal_socket_dir_check(&p, path, why, sizeof(why)), -EPERM);
	/* sticky is no excuse for the socket's own folder: anyone could bind first */
	assert_int_equal(chmod(root, 01777), 0);
	assert_int_equal(opal_socket_dir_check(&p, path, why, sizeof(why)), -EPERM);
	assert_int_equal(opal_socket_dir_check(&p, "/tmp/s.sock", why, sizeof(why)), -EPERM);
	/* a writable folder above the socket's own is refused too */
	assert_int_equal(chmod(root, 0777), 0);
	snprintf(path, sizeof(path), "%s/sub", root);
	assert_int_equal(mkdir(path, 0755), 0);
	snprintf(path, sizeof(path), "%s/sub/c.sock", root);
	assert_int_equal(opal_socket_dir_check(&p, path, why, sizeof(why)), -EPERM);
	assert_non_null(strstr(why, root));
}

static void test_untrusted_owner_refused(void **state)
{
	(void)state;
	struct opal_peer_policy root_only = { 0 };

	/* as root: a folder given to nobody; otherwise the test's own folder,
	 * which a root-only policy does not trust either */
	if (getuid() == 0)
		assert_int_equal(chown(root, 65534, 65534), 0);
	assert_int_equal(chmod(root, 0755), 0);
	snprintf(path, sizeof(path), "%s/c.sock", root);
	assert_int_equal(opal_socket_dir_check(&root_only, path, why, sizeof(why)), -EPERM);
	assert_non_null(strstr(why, "neither root nor the symbolizer's user"));
}

static void test_missing_folder(void **state)
{
	(void)state;
	struct opal_peer_policy p = me();

	snprintf(path, sizeof(path), "%s/none/c.sock", root);
	assert_int_equal(opal_socket_dir_check(&p, path, why, sizeof(why)), -ENOENT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_uids),
		cmocka_unit_test_setup_teardown(test_private_folder_accepted, setup, teardown),
		cmocka_unit_test_setup_teardown(test_writable_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_untrusted_owner_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_missing_folder, setup, teardown),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
