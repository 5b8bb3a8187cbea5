# Pure-Python CPU loop for bench/unwind: no C extension does the work, so
# the native stack is the interpreter's, from _PyEval_EvalFrameDefault down
# to _start. Runs until killed.
def fib(n):
    return n if n < 2 else fib(n - 1) + fib(n - 2)


while True:
    fib(22)
