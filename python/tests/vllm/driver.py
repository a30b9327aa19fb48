"""One vLLM instance running a script of steps; the e2e cases' engine.

    python driver.py SCRIPT.json OUT.json

Runs in the engine's environment (vLLM for CPU). SCRIPT is a JSON object:
``model`` (a local model directory), ``connector`` (null for none, or
``{"module", "class", "extra"}``), ``block_size``, ``max_tokens``,
``logprobs`` and ``steps``, each one of

- ``{"op": "generate", "name", "prompt": [token ids], "salt"}``: greedy
  generation; records the tokens, each chosen token's logprob, and the
  connector's counters it moved (tokens looked up, hit, loaded, saved);
- ``{"op": "corrupt", "prompt", "salt", "socket"}``: overwrite the stored
  KV (not the header) of the prompt's blocks in the pool through a test
  client, so that a load of them is wrong KV;
- ``{"op": "touch", "file"}`` and ``{"op": "wait", "file", "timeout"}``:
  meet another process.

OUT is rewritten after every step, so a killed run leaves what it did.
"""

import json
import os
import sys
import time


def counters(path):
    """The connector's counters, summed over its processes (the latest
    line of each process and role)."""
    last = {}
    if path and os.path.exists(path):
        with open(path) as f:
            for line in f:
                try:
                    d = json.loads(line)
                except ValueError:
                    continue
                last[(d["pid"], d["role"])] = d
    tot = {}
    for d in last.values():
        for k, v in d.items():
            if isinstance(v, int) and k != "pid":
                tot[k] = tot.get(k, 0) + v
    model = next((d["model"] for d in last.values()), None)
    return tot, model


def block_hashes(prompt, salt, block_size):
    """vLLM's block hashes of the prompt's full blocks, as the engine
    computes them (sha256, the default algorithm)."""
    from vllm.utils.hashing import sha256
    from vllm.v1.core import kv_cache_utils as kcu
    kcu.init_none_hash(sha256)
    out, parent = [], None
    for i in range(len(prompt) // block_size):
        toks = prompt[i * block_size:(i + 1) * block_size]
        extra = ("cache_salt", salt) if (i == 0 and salt) else None
        extra = (extra,) if extra else None
        parent = kcu.hash_block_tokens(sha256, parent, toks, extra)
        out.append(bytes(parent))
    return out


def corrupt(step, script, model_field):
    """Overwrite the payload of the prompt's stored blocks; how many."""
    import array
    import random

    from kvalloc import Client, KeyBatch, ObjectKey
    from kvalloc.vllm.layout import HEADER_BYTES
    hs = block_hashes(step["prompt"], step.get("salt"), script["block_size"])
    salt = step.get("salt") or ""
    kb = KeyBatch(ObjectKey(h, model_field, 0, 0, salt) for h in hs)
    rnd = random.Random(7)
    with Client(step["socket"], timeout=10) as c:
        res = c.reserve_read(kb)
        n = 0
        for i in res.ok_indices():
            v = c.view(res, i)
            # fp32 values in [-2, 2): wrong KV, but numbers (random bytes
            # would be NaNs, which hide how wrong the output is).
            size = (res.sizes[i] - HEADER_BYTES) // 4
            vals = array.array("f", (rnd.uniform(-2, 2) for _ in range(size)))
            v[HEADER_BYTES:HEADER_BYTES + 4 * size] = vals.tobytes()
            n += 1
        c.finish_read(kb.subset(res.ok_indices()),
                      res.select(res.ok_indices()))
    return n


def main():
    script_path, out_path = sys.argv[1], sys.argv[2]
    with open(script_path) as f:
        script = json.load(f)
    from vllm import LLM, SamplingParams
    metrics = None
    kw = {}
    conn = script.get("connector")
    if conn:
        extra = dict(conn.get("extra", {}))
        metrics = extra.get("metrics_file")
        kw["kv_transfer_config"] = {
            "kv_connector": conn["class"],
            "kv_connector_module_path": conn["module"],
            "kv_role": "kv_both",
            "kv_connector_extra_config": extra,
        }
    t0 = time.monotonic()
    llm = LLM(model=script["model"], dtype="float32", enforce_eager=True,
              enable_prefix_caching=False, block_size=script["block_size"],
              max_model_len=script.get("max_model_len", 1024),
              max_num_seqs=4, seed=0,
              disable_hybrid_kv_cache_manager=True, **kw)
    out = {"pid": os.getpid(), "start_s": time.monotonic() - t0,
           "steps": []}

    def save():
        tmp = out_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(out, f)
        os.replace(tmp, out_path)

    save()
    sp = SamplingParams(temperature=0.0, max_tokens=script["max_tokens"],
                        logprobs=script.get("logprobs", 1), seed=0)
    for step in script["steps"]:
        op = step["op"]
        rec = {"op": op, "name": step.get("name", op)}
        if op == "generate":
            before, _ = counters(metrics)
            p = {"prompt_token_ids": step["prompt"]}
            if step.get("salt"):
                p["cache_salt"] = step["salt"]
            t = time.monotonic()
            res = llm.generate([p], sp, use_tqdm=False)[0].outputs[0]
            rec["seconds"] = time.monotonic() - t
            rec["tokens"] = list(res.token_ids)
            rec["logprobs"] = [lp[tok].logprob for tok, lp in
                               zip(res.token_ids, res.logprobs)]
            after, model = counters(metrics)
            rec["model"] = model
            rec["counters"] = {k: after.get(k, 0) - before.get(k, 0)
                               for k in after}
        elif op == "corrupt":
            _, model = counters(metrics)
            rec["blocks"] = corrupt(step, script, model)
        elif op == "touch":
            with open(step["file"], "w") as f:
                f.write("1")
        elif op == "wait":
            deadline = time.monotonic() + step.get("timeout", 900)
            while not os.path.exists(step["file"]):
                if time.monotonic() > deadline:
                    raise SystemExit(f"timed out waiting for {step['file']}")
                time.sleep(0.1)
        else:
            raise SystemExit(f"unknown op {op}")
        out["steps"].append(rec)
        save()
    out["done"] = True
    save()


if __name__ == "__main__":
    main()
