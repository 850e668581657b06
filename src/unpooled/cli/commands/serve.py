"""``unpooled serve``: the web server and the task worker, together; ``unpooled worker``: a worker alone."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

from unpooled.service.config.bootstrap import setup_django


from unpooled.service.config.server import WEB_TIMEOUT, default_web_workers, web_server_command  # noqa: E402,F401


def register(sub) -> None:
    p = sub.add_parser("serve", help="run the web server and a task worker (migrates first)")
    p.add_argument("--host", default=os.environ.get("UNPOOLED_HOST", "127.0.0.1"))
    p.add_argument("--port", type=int, default=int(os.environ.get("UNPOOLED_PORT", "8000")))
    p.add_argument("--web-workers", type=int, default=None,
                   help=f"web server (gunicorn) processes (default: 2 per CPU, here {default_web_workers()})")
    p.add_argument("--web-threads", type=int, default=1,
                   help="threads per web process (default 1: sync workers; more: gthread)")
    p.add_argument("--task-workers", type=int, default=1, help="task worker processes (0: none)")
    p.add_argument("--demo", action="store_true", help="load the demo corpus and submissions first")
    p.set_defaults(func=cmd_serve)
    w = sub.add_parser("worker", help="run one task worker (django-tasks-db) in the foreground",
                       description="Run a task worker with the stable id HOST-SLOT. On start it requeues the tasks "
                                   "a previous, crashed worker with the same id left running. While it runs it "
                                   "records a heartbeat and requeues the tasks of workers (on any machine) whose "
                                   "heartbeat is older than the timeout.")
    w.add_argument("--slot", type=int, default=0, help="worker slot on this host (default 0)")
    w.add_argument("--batch", action="store_true", help="exit once the queue is empty")
    w.add_argument("--timeout", type=float, default=None,
                   help="seconds without a heartbeat after which a worker is dead and its tasks are requeued "
                        "(default $UNPOOLED_WORKER_TIMEOUT or 300; use the same value on every machine)")
    w.add_argument("--heartbeat", type=float, default=None,
                   help="seconds between heartbeats and sweeps for dead workers' tasks "
                        "(default $UNPOOLED_WORKER_HEARTBEAT or 30; at most a third of the timeout)")
    w.set_defaults(func=cmd_worker)


def cmd_worker(args) -> int:
    setup_django()
    from django.core.management import call_command

    from unpooled.service.workers import Liveness, heartbeat_interval, worker_id, worker_timeout

    wid = worker_id(args.slot)
    timeout = args.timeout if args.timeout is not None else worker_timeout()
    interval = min(args.heartbeat, timeout / 3) if args.heartbeat is not None else heartbeat_interval(timeout)
    if not (timeout > 0 and interval > 0):
        print("unpooled worker: error: --timeout and --heartbeat must be positive", file=sys.stderr)
        return 2
    live = Liveness(wid, timeout=timeout, interval=interval)
    live.start()  # requeues this id's orphans, records the first heartbeat before any claim, sweeps once
    try:
        call_command("db_worker", worker_id=wid, batch=args.batch, startup_delay=False)
    finally:
        live.stop()
    return 0


def cmd_serve(args) -> int:
    setup_django()
    if args.demo:
        from unpooled.demo import load_demo

        names = load_demo(echo=lambda m: print(m, flush=True))
        from unpooled.service.evaluations.models import Score

        for name in names:
            if not Score.objects.filter(submission__corpus__name=name).exists():
                from unpooled.service.evaluations.tasks import evaluate_corpus

                evaluate_corpus.enqueue(name)
                print(f"demo: evaluating {name} in the background (simulated crowd, accuracy 0.8); the leaderboard "
                      f"fills in about a minute: /corpora/{name}/leaderboard/", flush=True)
    env = dict(os.environ, DJANGO_SETTINGS_MODULE="unpooled.service.config.settings")
    procs = [
        subprocess.Popen([sys.executable, "-m", "unpooled.cli.main", "worker", "--slot", str(i)], env=env)
        for i in range(args.task_workers)
    ]
    web_workers = default_web_workers() if args.web_workers is None else args.web_workers
    if web_workers < 1 or args.web_threads < 1:
        print("unpooled serve: error: --web-workers and --web-threads must be at least 1", file=sys.stderr)
        return 2
    procs.append(subprocess.Popen(web_server_command(f"{args.host}:{args.port}", web_workers, args.web_threads),
                                  env=env))
    def stop(signum, frame):  # SIGTERM (a service manager, a test): stop the children as Ctrl-C does
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, stop)
    host = "localhost" if args.host in ("127.0.0.1", "0.0.0.0") else args.host
    print(f"unpooled is running at http://{host}:{args.port}/  ({args.task_workers} task worker(s); Ctrl-C stops)",
          flush=True)
    try:
        while all(p.poll() is None for p in procs):
            time.sleep(0.5)
    except KeyboardInterrupt:
        pass
    finally:
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
    failed = [p.args[2] for p in procs if p.returncode not in (0, -signal.SIGTERM, None)]
    if failed:
        print(f"unpooled: error: {', '.join(map(str, failed))} stopped unexpectedly", file=sys.stderr)
        return 3
    return 0
