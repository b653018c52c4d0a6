import subprocess
import sys
import time

import psycopg
import test_store_processes as t
from crawl.served_capsules import capsule_server, generate


def test_dbg(tmp_path, pg_url):
    seeds = generate(tmp_path / "capsules", 12, 96)
    for robots in (tmp_path / "capsules").glob("*/robots.txt"):
        robots.write_text(robots.read_text() + "Crawl-delay: 0.5\n")
    log = tmp_path / "log"
    with capsule_server(tmp_path / "capsules", tmp_path / "certs", log) as port:
        argv = [
            sys.executable,
            "-m",
            "geminibot",
            "crawl",
            *seeds,
            "--db",
            pg_url,
            "--test-range",
            "--allow-host",
            "*.test",
            "--connect-to",
            f"*.test:1965:127.0.0.1:{port}",
            "--lease-seconds",
            "3",
            "--concurrency",
            "4",
        ]
        ps = [
            subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            for _ in range(3)
        ]
        t0 = time.time()
        while len(t.requests(log)) < 44:
            time.sleep(0.01)
        print("kill at", time.time() - t0, t.work_by_holder(pg_url))
        ps[0].kill()
        ps[0].wait()
        for p in ps[1:]:
            out = p.communicate(timeout=60)[0]
            print(out, time.time() - t0)
        with psycopg.connect(pg_url) as conn:
            for r in conn.execute("SELECT state, count(*) FROM urls GROUP BY 1"):
                print(r)
