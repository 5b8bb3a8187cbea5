/* The scale benchmark's program (bench/scale/scale.py copies it per salt).
 * "busy": spins in scale_l1 -> scale_l2 -> scale_l3 -> scale_l4; anything
 * else: sleeps in pause(). */
#include <string.h>
#include <unistd.h>

static const volatile char salt[] = "SALT-00000000";
volatile unsigned long sink;

__attribute__((noinline)) static void scale_l4(unsigned long n)
{ for (unsigned long i = 0; i < n; i++) sink += i ^ salt[i & 7]; }
__attribute__((noinline)) static void scale_l3(unsigned long n) { scale_l4(n); sink++; }
__attribute__((noinline)) static void scale_l2(unsigned long n) { scale_l3(n); sink++; }
__attribute__((noinline)) static void scale_l1(unsigned long n) { scale_l2(n); sink++; }

int main(int argc, char **argv)
{
	if (argc > 1 && strcmp(argv[1], "busy") == 0)
		for (;;)
			scale_l1(1000000);
	for (;;)
		pause();
}
