import time, sys, atexit, os
T0 = time.perf_counter()
marks = []
def mark(name): marks.append((name, time.perf_counter() - T0))
if __name__ == '__main__':
    import threading
    _orig_shutdown = threading._shutdown
    def _sd():
        mark('threading shutdown start'); _orig_shutdown(); mark('threading shutdown end')
    threading._shutdown = _sd
    @atexit.register
    def last():
        sys.stderr.write(f'LAST {time.time():.3f}\n')
    import wfrl.cli
    mark("import wfrl.cli")
    import wfrl.search.loop as loop
    orig_rs, orig_close = loop.WorkflowSearch.run_search, loop.WorkflowSearch._close
    def rs(self):
        mark("run_search start")
        try: return orig_rs(self)
        finally: mark("run_search end")
    def cl(self):
        mark("_close start")
        try: return orig_close(self)
        finally: mark("_close end")
    loop.WorkflowSearch.run_search, loop.WorkflowSearch._close = rs, cl
    orig_init = loop.WorkflowSearch.__init__
    def init(self, *a, **k):
        mark("search init start"); orig_init(self, *a, **k); mark("search init end")
    loop.WorkflowSearch.__init__ = init
    @atexit.register
    def report():
        mark("atexit")
        with open(os.environ["PHASES_OUT"], "w") as f:
            for n, t in marks: f.write(f"{t:8.2f} {n}\n")
    rc = wfrl.cli.main(sys.argv[1:])
    mark("main returned")
    sys.exit(rc)
