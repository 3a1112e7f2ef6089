#!/usr/bin/env python3
"""Records llama.cpp's greedy tokens and their log-probabilities for GGUF files.

usage: record.py PEERS_DIR N PROMPT_IDS SHAPE=FILE[@CONTEXT][#N][!ARG=VALUE] ... > llamacpp.json

For each file it starts PEERS_DIR/llama-server (f32 KV cache, no flash
attention, 2 threads, the given context or 256), asks /completion for N
tokens from the prompt's ids, greedy (end-of-generation tokens left out:
ignore_eos), with n_probs 1 (each token's
log-probability from the raw logits), and prints one JSON object. llama.cpp
rounds its context up to 256; !--yarn-orig-ctx=512 makes it choose LongRoPE's
short factors where Tessera runs at a context within the original.

RECORD_TOP=N records each position's N most likely tokens too ("top": [id,
log-probability] pairs, from the same raw logits): a random model at real
widths is often certain of its token (log-probability 0), and the runners-up
show the distribution. RECORD_IN_PLACE=1 marks the byte tokens normal in the
file itself instead of in a copy (a real shape's file may not fit twice on
disk; Tessera reads token ids, so the change does not matter to it).
"""
import json, os, subprocess, sys, time, urllib.request

sys.dont_write_bytecode = True  # no __pycache__ in testdata
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from ggufmeta import free_port, printable  # noqa: E402

peers, n, prompt = sys.argv[1], int(sys.argv[2]), [int(x) for x in sys.argv[3].split(",")]
top = int(os.environ.get("RECORD_TOP", "1"))
in_place = os.environ.get("RECORD_IN_PLACE") == "1"
out = {"prompt": prompt, "llama.cpp": "", "shapes": {}}


for arg in sys.argv[4:]:
    shape, spec = arg.split("=", 1)
    spec, _, extra = spec.partition("!")
    spec, _, count = spec.partition("#")
    path, _, ctx = spec.partition("@")
    ctx, count = int(ctx or 256), int(count or n)
    port = free_port()
    copy = printable(path, in_place)
    srv = subprocess.Popen([peers + "/llama-server", "-m", copy, "-c", str(ctx), "-t", "2", "-ctk", "f32", "-ctv", "f32",
                            "-fa", "off", "-np", "1", "--port", str(port), "--no-warmup"] + (extra.split("=", 1) if extra else []),
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(600):
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1)
                break
            except Exception:
                time.sleep(0.5)
        if not out["llama.cpp"]:
            props = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/props"))
            out["llama.cpp"] = props.get("build_info", "")
        body = {"prompt": prompt, "n_predict": count, "temperature": 0, "top_k": 1, "n_probs": top, "cache_prompt": False,
                "ignore_eos": True, "samplers": ["top_k"]}
        req = urllib.request.Request(f"http://127.0.0.1:{port}/completion", json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
        res = json.load(urllib.request.urlopen(req, timeout=3600))
        probs = res["completion_probabilities"]
        out["shapes"][shape] = {"context": ctx, "tokens": [p["id"] for p in probs],
                                "logprobs": [round(p["logprob"], 6) for p in probs]}
        if top > 1:
            out["shapes"][shape]["top"] = [[[q["id"], round(q["logprob"], 6)] for q in p["top_logprobs"]] for p in probs]
    finally:
        srv.terminate()
        srv.wait()
        if copy != path:
            os.remove(copy)
json.dump(out, sys.stdout, indent=1)
print()
