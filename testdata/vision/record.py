#!/usr/bin/env python3
"""Records what llama.cpp makes of an image with a synthetic projector.

usage: record.py PEERS_DIR N NAME=BASE.gguf,MMPROJ.gguf,IMAGE[,PROMPT_FILE] ... > llamacpp.json

For each case it runs PEERS_DIR/llama-mtmd-cli with MTMD_DEBUG_EMBEDDINGS=1
(which logs the first and last 16 values of the image's first embedding
and the mean, std, min, max and sum of all of them), then starts
PEERS_DIR/llama-server with the model and --mmproj (f32 KV cache, no flash
attention, 2 threads) and asks /completion for N greedy tokens from the
prompt (the file's text; by default Gemma's turn around "<__media__>describe"),
the image given as multimodal_data where the prompt has <__media__>
(the server's own marker, read from /props), with n_probs 1: each
token's id and log-probability under the raw logits. A case whose NAME
ends in -real records the embeddings only: a real tower's 256 tokens do
not fit tiny-gemma3's context of 256 in Tessera.
"""
import base64, json, os, re, socket, subprocess, sys, time, urllib.request

here = os.path.dirname(os.path.abspath(__file__))
sys.argv_saved = sys.argv
sys.argv = [sys.argv[0], sys.argv[1], "1", "1"]
exec(open(os.path.join(here, "..", "families", "record.py")).read().split("def free_port")[0])  # printable()
sys.argv = sys.argv_saved

peers, n = sys.argv[1], int(sys.argv[2])
default_prompt = "<start_of_turn>user\n<__media__>describe<end_of_turn>\n<start_of_turn>model\n"
out = {"cases": {}}


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


def embeddings(base, mm, image):
    env = dict(os.environ, MTMD_DEBUG_EMBEDDINGS="1")
    r = subprocess.run([peers + "/llama-mtmd-cli", "-m", base, "--mmproj", mm, "--image", image, "-p", "<__media__>x",
                        "-n", "1", "--temp", "0", "-t", "2", "-c", "4096", "-ctk", "f32", "-ctv", "f32", "-fa", "off",
                        "--chat-template", "gemma", "-v"], env=env, capture_output=True, text=True, errors="replace")
    log = re.sub(r"\d+\.\d+\.\d+\.\d+ [IDWE] ", "", r.stderr + r.stdout)
    first = re.search(r"Token 0 \(first 16 values\):([-\d.\s]+)", log)
    last = re.search(r"Token 0 \(last 16 values\):([-\d.\s]+)", log)
    stats = re.search(r"Stats: mean=([-\d.]+), std=([-\d.]+), min=([-\d.]+), max=([-\d.]+), sum=([-\d.]+)", log)
    if not (first and last and stats):
        sys.exit("no MTMD_DEBUG_EMBEDDINGS in llama-mtmd-cli's log:\n" + log[-3000:])
    return {"first16": [float(x) for x in first.group(1).split()], "last16": [float(x) for x in last.group(1).split()],
            "mean": float(stats.group(1)), "std": float(stats.group(2)), "min": float(stats.group(3)),
            "max": float(stats.group(4)), "sum": float(stats.group(5))}


for arg in sys.argv[3:]:
    name, files = arg.split("=", 1)
    parts = files.split(",")
    base, mm, image = parts[:3]
    prompt = open(parts[3]).read() if len(parts) > 3 else default_prompt
    case = {"prompt": prompt, "embeddings": embeddings(base, mm, image)}
    if name.endswith("-real"):
        out["cases"][name] = case
        continue
    copy = printable(base)
    port = free_port()
    srv = subprocess.Popen([peers + "/llama-server", "-m", copy, "--mmproj", mm, "-c", "4096", "-t", "2", "-ctk", "f32",
                            "-ctv", "f32", "-fa", "off", "--port", str(port), "--no-webui"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = "http://127.0.0.1:%d" % port
        for _ in range(600):
            try:
                props = json.load(urllib.request.urlopen(url + "/props"))
                break
            except Exception:
                time.sleep(0.5)
        marker = props["media_marker"]
        body = {"prompt": {"prompt_string": prompt.replace("<__media__>", marker),
                           "multimodal_data": [base64.b64encode(open(image, "rb").read()).decode()]},
                "n_predict": n, "temperature": 0, "n_probs": 1, "return_tokens": True, "cache_prompt": False,
                "ignore_eos": True}
        req = urllib.request.Request(url + "/completion", data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        r = json.load(urllib.request.urlopen(req, timeout=3600))
        case["prompt_tokens"] = r["tokens_evaluated"]
        case["tokens"] = r["tokens"]
        case["logprobs"] = [round(p["logprob"], 6) for p in r["completion_probabilities"]]
        out["llama.cpp"] = props.get("build_info", "")
    finally:
        srv.terminate()
        srv.wait()
        os.unlink(copy)
    out["cases"][name] = case
json.dump(out, sys.stdout, indent=1)
print()
