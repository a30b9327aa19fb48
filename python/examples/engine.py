#!/usr/bin/env python3
"""Store and load a prompt's KV chunks the way an engine connector does.

    python3 python/examples/engine.py [--socket PATH] [PROMPT ...]

For each prompt, in order, as a serving engine's KV connector would:

1. cut the prompt's tokens into chunks and hash each chunk with the hash of
   the chunk before it (a prefix hash, as vLLM and LMCache do), so that a
   chunk's key names the whole prefix up to it;
2. look the keys up: ``reserve_read_prefix`` read-locks the longest prefix
   the pool holds;
3. load the hits: read each block's bytes through its ``memoryview``
   (here: copy them out and check them, where an engine would copy them to
   the GPU);
4. store the chunks that missed: ``reserve_write`` (mode NEW: a chunk that
   another engine is storing right now is left to it), write the KV bytes
   into the blocks, ``finish_write``;
5. release the read locks: ``finish_read``.

It prints what it did. With no prompt it runs two that share a prefix, so
the second finds the first's chunks. Only the standard library is used;
start a daemon first (README.md, "Quickstart").
"""

import argparse
import hashlib
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from kvalloc import Client, KeyBatch, Mode, ObjectKey, Status  # noqa: E402

DEMO = [
    "You are a helpful assistant. Answer briefly and cite your sources. "
    "What is the capital of France, and how many people live there?",
    "You are a helpful assistant. Answer briefly and cite your sources. "
    "What is the capital of France, and how many people live there? "
    "And which river flows through it?",
]


def chunk_hashes(prompt: str, chunk_tokens: int) -> list:
    """Prefix hashes of the prompt's full chunks (a word is a token)."""
    tokens = prompt.split()
    out, prev = [], b""
    for i in range(0, len(tokens) - chunk_tokens + 1, chunk_tokens):
        chunk = " ".join(tokens[i:i + chunk_tokens]).encode()
        prev = hashlib.sha256(prev + chunk).digest()
        out.append(prev)
    return out


def kv_bytes(chunk_hash: bytes, size: int) -> bytes:
    """Stand-in KV data of a chunk: its hash, repeated."""
    return (chunk_hash * (size // len(chunk_hash) + 1))[:size]


def serve(c: Client, prompt: str, model: str, chunk_tokens: int,
          size: int) -> dict:
    """One prompt's lookup, load and store; what happened, counted."""
    hashes = chunk_hashes(prompt, chunk_tokens)
    keys = KeyBatch(ObjectKey(h, model) for h in hashes)
    t0 = time.perf_counter()

    # 2. Look up the prefix.
    hit = c.reserve_read_prefix(keys)
    n_hit = hit.prefix

    # 3. Load the hits through the mapping, in place.
    loaded = bad = 0
    for i in range(n_hit):
        data = c.view(hit, i)[:size].tobytes()  # an engine: to the GPU
        if data != kv_bytes(hashes[i], size):
            bad += 1
        loaded += len(data)
    t1 = time.perf_counter()

    # 4. Store the chunks that missed.
    new = keys.subset(range(n_hit, len(keys)))
    stored = busy = oom = 0
    if len(new):
        res = c.reserve_write(new, size, Mode.NEW)
        ok = res.ok_indices()
        for i in ok:
            c.view(res, i)[:size] = kv_bytes(new[i].chunk_hash, size)
        done = c.finish_write(new.subset(ok), res.select(ok))
        stored = done.count_of(Status.OK)
        busy = res.statuses.count_of(Status.KEY_NOT_WRITABLE)
        oom = res.statuses.count_of(Status.OUT_OF_MEMORY)
    t2 = time.perf_counter()

    # 5. Release the read locks of the hits.
    held = range(n_hit)
    released = c.finish_read(keys.subset(held), hit.select(held))
    return dict(chunks=len(keys), hits=n_hit, loaded=loaded, bad=bad,
                stored=stored, busy=busy, oom=oom,
                released=released.count_of(Status.OK),
                load_ms=(t1 - t0) * 1e3, store_ms=(t2 - t1) * 1e3)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("prompts", nargs="*", metavar="PROMPT",
                    help="prompts to serve in order (default: a demo pair)")
    ap.add_argument("--socket", help="kvallocd's socket (default: the "
                    "daemon's default path)")
    ap.add_argument("--model", default="demo-model")
    ap.add_argument("--chunk-tokens", type=int, default=4,
                    help="tokens (words) per chunk (default 4)")
    ap.add_argument("--chunk-bytes", type=int, default=1 << 20,
                    help="KV bytes per chunk (default 1 MiB)")
    args = ap.parse_args(argv)
    prompts = args.prompts or DEMO
    with Client(args.socket) as c:
        print(f"connected to {c.path}: pool {c.hello.pool_size >> 20} MiB, "
              f"alignment {c.hello.align}, epoch {c.epoch:#x}")
        for n, prompt in enumerate(prompts, 1):
            r = serve(c, prompt, args.model, args.chunk_tokens,
                      args.chunk_bytes)
            ok = "verified" if not r["bad"] else f"{r['bad']} CORRUPT"
            print(f"prompt {n}: {r['chunks']} chunks of "
                  f"{args.chunk_tokens} tokens\n"
                  f"  lookup   reserve_read_prefix: {r['hits']} of "
                  f"{r['chunks']} chunks hit\n"
                  f"  load     {r['loaded'] >> 10} KiB read through the "
                  f"mapping, {ok}, {r['load_ms']:.2f} ms\n"
                  f"  store    reserve_write, write, finish_write: "
                  f"{r['stored']} new chunks stored ({r['busy']} being "
                  f"stored elsewhere, {r['oom']} out of memory), "
                  f"{r['store_ms']:.2f} ms\n"
                  f"  release  finish_read: {r['released']} read locks")
            if r["bad"]:
                return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
