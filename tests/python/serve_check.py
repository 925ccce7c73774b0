#!/usr/bin/env python3
"""End-to-end check of keel-serve with an independent HTTP client (Python's urllib).

usage: serve_check.py KEEL_SERVE SAVE_DEMO_MODEL

Saves the demo models (serve/tools/save_demo_model.cpp), starts keel-serve on a free loopback
port twice (a --model_config_file with two models and batching; then --model_name /
--model_base_path without batching), checks every endpoint and error answer, that concurrent
requests share batches, that a slow client neither blocks others nor holds its connection
past the timeout, that a new version written mid-traffic is swapped in with no failed request,
and that SIGTERM ends the server with status 0.

Expected numbers (the demo model, scale s): y = [s*(x0 + x2) + 0.5, s*(x1 + x2) - 0.5]
  s = 1, x = [1, 2, 3] -> [4.5, 4.5];  x = [0, 0, 0] -> [0.5, -0.5]
  s = 2, x = [1, 2, 3] -> [8.5, 9.5]
two_branch: out_a = in_a . [1, 1], out_b = in_b: in_a [1, 1] -> 2, in_b [2] -> 2.
"""
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import urllib.error
import urllib.request

FAILURES = []


def check(cond, what):
    if not cond:
        FAILURES.append(what)
        print("FAIL:", what, flush=True)


def request(port, path, body=None, timeout=10):
    """(status, parsed JSON or text) of one request; bytes/str/dict bodies are POSTed."""
    data = None
    if body is not None:
        data = body if isinstance(body, bytes) else (body if isinstance(body, str) else json.dumps(body)).encode()
    req = urllib.request.Request(f"http://127.0.0.1:{port}{path}", data=data, method="POST" if data is not None else "GET")
    try:
        with urllib.request.urlopen(req, timeout=timeout) as r:
            status, text = r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        status, text = e.code, e.read().decode()
    try:
        return status, json.loads(text)
    except ValueError:
        return status, text


class Server:
    def __init__(self, binary, args):
        self.proc = subprocess.Popen([binary, "--rest_api_port=0", "--rest_api_bind_address=127.0.0.1"] + args,
                                     stderr=subprocess.PIPE, text=True)
        self.log = []
        self.port = None
        deadline = time.time() + 10
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            if not line:
                break
            self.log.append(line)
            m = re.search(r"Exporting HTTP/REST API at:[^:]+:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                break
        if self.port is None:
            raise SystemExit("keel-serve did not start:\n" + "".join(self.log))
        threading.Thread(target=self._drain, daemon=True).start()

    def _drain(self):
        for line in self.proc.stderr:
            self.log.append(line)

    def stop(self):
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return "hung"


def metric(text, name, labels):
    m = re.search(re.escape(name + "{" + labels + "}") + r" (\S+)", text)
    return float(m.group(1)) if m else 0.0


def first_run(binary, root, servers):
    cfg = os.path.join(root, "models.config")
    with open(cfg, "w") as f:
        f.write("model_config_list {\n"
                f"  config {{ name: 'demo' base_path: '{root}/demo' model_platform: 'tensorflow' }}\n"
                f"  config {{ name: 'two' base_path: '{root}/two' }}\n"
                "}\n")
    s = Server(binary, [f"--model_config_file={cfg}", "--enable_batching", "--max_batch_size=8",
                        "--batch_timeout_micros=20000", "--max_body_bytes=65536", "--rest_api_timeout_in_ms=1000",
                        "--file_system_poll_wait_seconds=1", "--rest_api_num_threads=24"])
    servers.append(s)
    p = s.port
    # Model status: TF Serving's GetModelStatusResponse.
    st, body = request(p, "/v1/models/demo")
    check(st == 200 and body == {"model_version_status": [{"version": "1", "state": "AVAILABLE",
                                                           "status": {"error_code": "OK", "error_message": ""}}]},
          f"status of demo: {st} {body}")
    st, body = request(p, "/v1/models/demo/versions/1")
    check(st == 200 and body["model_version_status"][0]["version"] == "1", f"status of demo v1: {st} {body}")
    st, body = request(p, "/v1/models/demo/versions/7")
    check(st == 404 and "error" in body, f"status of demo v7: {st} {body}")
    st, body = request(p, "/v1/models/nosuch")
    check(st == 404 and "error" in body, f"status of an unknown model: {st} {body}")
    # Metadata: signature_def serving_default with -1 batch dims.
    st, body = request(p, "/v1/models/demo/metadata")
    ok = st == 200
    if ok:
        sig = body["metadata"]["signature_def"]["signature_def"]["serving_default"]
        (iname, inp), = sig["inputs"].items()
        (oname, out), = sig["outputs"].items()
        ok = (inp["dtype"] == "DT_FLOAT" and [d["size"] for d in inp["tensor_shape"]["dim"]] == ["-1", "3"]
              and oname == "dense" and [d["size"] for d in out["tensor_shape"]["dim"]] == ["-1", "2"]
              and body["model_spec"] == {"name": "demo", "signature_name": "", "version": "1"}
              and sig["method_name"] == "tensorflow/serving/predict")
    check(ok, f"metadata of demo: {st} {body}")
    st, body = request(p, "/v1/models/two/versions/1/metadata")
    check(st == 200 and sorted(body["metadata"]["signature_def"]["signature_def"]["serving_default"]["inputs"])
          == ["in_a", "in_b"], f"metadata of two: {st} {body}")
    # Predict, row and columnar formats.
    st, body = request(p, "/v1/models/demo:predict", {"instances": [[1, 2, 3], [0, 0, 0]]})
    check(st == 200 and body == {"predictions": [[4.5, 4.5], [0.5, -0.5]]}, f"row predict: {st} {body}")
    st, body = request(p, "/v1/models/demo/versions/1:predict", {"inputs": [[1, 2, 3]]})
    check(st == 200 and body == {"outputs": [[4.5, 4.5]]}, f"columnar predict: {st} {body}")
    st, body = request(p, "/v1/models/two:predict", {"instances": [{"in_a": [1, 1], "in_b": [2]}]})
    check(st == 200 and body == {"predictions": [{"out_a": [2.0], "out_b": [2.0]}]}, f"named row predict: {st} {body}")
    st, body = request(p, "/v1/models/two:predict", {"inputs": {"in_a": [[1, 1], [2, 0]], "in_b": [[2], [3]]}})
    check(st == 200 and body == {"outputs": {"out_a": [[2.0], [2.0]], "out_b": [[2.0], [3.0]]}},
          f"named columnar predict: {st} {body}")
    # Errors: each answered with {"error": ...} and the right status, and the server goes on.
    for path, req, want, what in [
            ("/v1/models/demo:predict", b"{not json", 400, "malformed JSON"),
            ("/v1/models/demo:predict", {"instances": [[1, 2]]}, 400, "wrong shape"),
            ("/v1/models/demo:predict", {"instances": [["a", "b", "c"]]}, 400, "wrong dtype"),
            ("/v1/models/demo:predict", {"instances": [[1, 2, 3], [1, 2]]}, 400, "ragged list"),
            ("/v1/models/demo:predict", {"instances": [[1, 2, 3]] * 9}, 400, "larger than max_batch_size"),
            ("/v1/models/demo:predict", {"nothing": 1}, 400, "no instances"),
            ("/v1/models/nosuch:predict", {"instances": [[1, 2, 3]]}, 404, "unknown model"),
            ("/v1/models/demo/versions/9:predict", {"instances": [[1, 2, 3]]}, 404, "unknown version"),
            ("/v1/models/demo:explain", {"instances": [[1, 2, 3]]}, 400, "unknown verb"),
            ("/v1/models/demo:predict", b"[" * 30000 + b"]" * 30000, 400, "deeply nested body"),
            ("/v1/models/demo:predict", b" " * 70000, 413, "body over --max_body_bytes")]:
        st, body = request(p, path, req)
        check(st == want and isinstance(body, dict) and isinstance(body.get("error"), str),
              f"{what}: {st} {str(body)[:200]}")
    st, body = request(p, "/nothing/here")
    check(st == 404 and "error" in body, f"unknown path: {st} {body}")

    # A slow client: sends half a request and stalls. Others are served meanwhile, and the
    # server drops it after --rest_api_timeout_in_ms.
    slow = socket.create_connection(("127.0.0.1", p))
    slow.sendall(b"POST /v1/models/demo:predict HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{\"inst")
    t0 = time.time()
    st, body = request(p, "/v1/models/demo:predict", {"instances": [[1, 2, 3]]}, timeout=5)
    check(st == 200 and time.time() - t0 < 1.0, f"request beside a slow client: {st} {body}")
    slow.settimeout(5)
    try:
        rest = slow.recv(4096)
        while rest and not rest.endswith(b"}") and b"\r\n\r\n" not in rest:
            rest += slow.recv(4096)
        closed_in = time.time() - t0
        check(closed_in < 4, f"the slow client was answered or dropped after {closed_in:.1f} s")
    except socket.timeout:
        check(False, "the slow client's connection was still open after 5 s")
    slow.close()

    # Concurrent single-instance requests share batches (the batcher's counters say so).
    _, before = request(p, "/monitoring/prometheus/metrics")
    results = []

    def one():
        results.append(request(p, "/v1/models/demo:predict", {"instances": [[1, 2, 3]]}))
    threads = [threading.Thread(target=one) for _ in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    check(all(r == (200, {"predictions": [[4.5, 4.5]]}) for r in results), f"concurrent predicts: {results[:3]}")
    st, after = request(p, "/monitoring/prometheus/metrics")
    check(st == 200 and isinstance(after, str), "metrics endpoint")
    batches = metric(after, "keel_serve_batches_total", 'model="demo"') - metric(before, "keel_serve_batches_total", 'model="demo"')
    served = (metric(after, "keel_serve_batched_requests_total", 'model="demo"')
              - metric(before, "keel_serve_batched_requests_total", 'model="demo"'))
    check(served == 16 and 0 < batches < 16, f"16 requests in {batches} batches (served {served})")
    check(metric(after, "keel_serve_requests_total", 'endpoint="predict",code="400"') >= 7, "400s counted")
    check("keel_serve_request_latency_seconds_bucket{endpoint=\"predict\",le=\"+Inf\"}" in after, "latency histogram")
    rc = s.stop()
    check(rc == 0, f"SIGTERM: exit status {rc}")


def second_run(binary, save_model, root, servers):
    base = os.path.join(root, "swap")
    subprocess.run([save_model, os.path.join(base, "1")], check=True)
    s = Server(binary, ["--model_name=swap", f"--model_base_path={base}", "--file_system_poll_wait_seconds=1",
                        "--rest_api_num_threads=16"])
    servers.append(s)
    p = s.port
    st, body = request(p, "/v1/models/swap:predict", {"instances": [[1, 2, 3]]})
    check(st == 200 and body == {"predictions": [[4.5, 4.5]]}, f"swap v1 predict: {st} {body}")
    stop = threading.Event()
    counts = {"ok": 0, "v2": 0, "failed": []}
    lock = threading.Lock()

    def traffic():
        while not stop.is_set():
            st, body = request(p, "/v1/models/swap:predict", {"instances": [[1, 2, 3]]})
            with lock:
                if st == 200 and body["predictions"] in ([[4.5, 4.5]], [[8.5, 9.5]]):
                    counts["ok"] += 1
                    counts["v2"] += body["predictions"] == [[8.5, 9.5]]
                else:
                    counts["failed"].append((st, body))
    threads = [threading.Thread(target=traffic) for _ in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.5)
    # A broken version first: it must be refused and keep version 1 serving.
    os.makedirs(os.path.join(base, "2"))
    with open(os.path.join(base, "2", "config.json"), "w") as f:
        f.write("{broken")
    time.sleep(2.5)
    st, body = request(p, "/v1/models/swap")
    check(st == 200 and {"version": "1", "state": "AVAILABLE"}.items() <= body["model_version_status"][-1].items()
          and any(v["version"] == "2" and v["status"]["error_code"] != "OK" for v in body["model_version_status"]),
          f"a broken version 2 keeps version 1: {body}")
    # Then a good version 3 while requests keep coming.
    subprocess.run([save_model, os.path.join(base, "3"), "2"], check=True)
    deadline = time.time() + 8
    while time.time() < deadline and counts["v2"] < 20:
        time.sleep(0.1)
    stop.set()
    for t in threads:
        t.join()
    check(not counts["failed"], f"failed requests during the swap: {counts['failed'][:3]}")
    check(counts["v2"] >= 20 and counts["ok"] > counts["v2"], f"swap traffic: {counts['ok']} ok, {counts['v2']} on v3")
    st, body = request(p, "/v1/models/swap")
    states = {v["version"]: v["state"] for v in body.get("model_version_status", [])}
    check(states.get("3") == "AVAILABLE" and states.get("1") == "END", f"status after the swap: {body}")
    st, body = request(p, "/v1/models/swap/versions/1:predict", {"instances": [[1, 2, 3]]})
    check(st == 404, f"the unloaded version 1: {st} {body}")
    rc = s.stop()
    check(rc == 0, f"SIGTERM: exit status {rc}")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    binary, save_model = sys.argv[1], sys.argv[2]
    start = time.time()
    with tempfile.TemporaryDirectory() as root:
        subprocess.run([save_model, os.path.join(root, "demo", "1")], check=True)
        os.makedirs(os.path.join(root, "two", "1"))
        subprocess.run([save_model, os.path.join(root, "two", "1", "model.keel"), "--two_inputs"], check=True)
        servers = []
        try:
            first_run(binary, root, servers)
            second_run(binary, save_model, root, servers)
        finally:
            for s in servers:  # a check that raised leaves its server running
                if s.proc.poll() is None:
                    s.proc.kill()
                    s.proc.wait()
    print(f"keel-serve checks took {time.time() - start:.1f} s")
    if FAILURES:
        for s in servers:
            sys.stderr.write("".join(s.log[-40:]))
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    print("all keel-serve checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
