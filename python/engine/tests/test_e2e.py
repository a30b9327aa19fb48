"""End-to-end cases: vLLM on CPU serving the tiny model, with and without
kvalloc's KV connector, against real kvallocd daemons.

Run by ``make engine-test`` (``python/engine/run-tests.sh``), with the
engine venv's Python. Each case prints, through ``common.report``, the
tokens the connector looked up, loaded and saved. The cases run in name
order; they share one baseline engine (vLLM without a connector) and the
model, which ``common`` makes on first use.
"""

import unittest

import common
import harness


def tearDownModule() -> None:
    common.close_all()


_hf = {}


def hf_greedy(model_dir, prompt, n):
    """``n`` greedy tokens after ``prompt`` by transformers itself, with the
    logprob of each and the margin between the best two logits at each
    step (fp32, eager; the reference vLLM's outputs are checked against)."""
    import torch
    from transformers import LlamaForCausalLM

    if model_dir not in _hf:
        _hf[model_dir] = LlamaForCausalLM.from_pretrained(
            model_dir, dtype=torch.float32).eval()
    model = _hf[model_dir]
    ids = list(prompt)
    toks, lps, margins, prompt_lps = [], [], [], []
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0]
        lsm = torch.log_softmax(logits, -1)
        prompt_lps = [None] + [float(lsm[i - 1, ids[i]])
                               for i in range(1, len(ids))]
        for _ in range(n):
            last = logits[-1]
            top2 = last.topk(2)
            t = int(top2.indices[0])
            toks.append(t)
            lps.append(float(torch.log_softmax(last, -1)[t]))
            margins.append(float(top2.values[0] - top2.values[1]))
            ids.append(t)
            logits = model(torch.tensor([ids])).logits[0]
    return toks, lps, margins, prompt_lps


class Case1Baseline(unittest.TestCase):
    """Case 1: vLLM without a connector serves the tiny model as
    transformers computes it, and repeats itself exactly: the baseline the
    connector's cases compare their tokens with."""

    def test_case1_baseline_tokens(self) -> None:
        out = common.baseline()
        self.assertEqual(len(out), len(common.PROMPTS))
        md = common.model_dir()
        # Greedy tokens equal transformers' until a step whose best two
        # logits are within 1e-3 (where fp32 rounding may pick either), and
        # the logprobs within 2e-3; the prompt logprobs too.
        compared = 0
        for p, o in zip(common.PROMPTS, out):
            self.assertEqual(len(o["token_ids"]), common.MAX_TOKENS)
            self.assertEqual(o["num_cached_tokens"], 0,
                             "vLLM's prefix cache is off: nothing is cached")
            toks, lps, margins, plps = hf_greedy(md, p, common.MAX_TOKENS)
            for i, (t, lp, m) in enumerate(zip(toks, lps, margins)):
                if m < 1e-3:
                    break
                self.assertEqual(o["token_ids"][i], t,
                                 f"token {i}: vLLM {o['token_ids']}, "
                                 f"transformers {toks}")
                self.assertAlmostEqual(o["logprobs"][i][0][1], lp, delta=2e-3)
                compared += 1
            self.assertEqual(len(o["prompt_logprobs"]), len(p))
            self.assertIsNone(o["prompt_logprobs"][0])
            worst = max(abs(a - b) for a, b in
                        zip(o["prompt_logprobs"][1:], plps[1:]))
            self.assertLess(worst, 2e-3, "prompt logprobs vs transformers")
        self.assertGreaterEqual(compared, common.MAX_TOKENS * 3,
                                "too few tokens compared with transformers")
        # The prompts differ after the shared prefix, and so do their
        # completions: a case that served one prompt's KV to another would
        # show.
        self.assertEqual(len({tuple(o["token_ids"]) for o in out}), len(out))
        # The same prompts again, without prompt logprobs: the same tokens
        # and logprobs (deterministic; vLLM's cache is off, so recomputed).
        again = common.baseline_engine().generate(
            common.PROMPTS, max_tokens=common.MAX_TOKENS)
        self.assertEqual(harness.max_logprob_diff(out, again), 0.0)
        self.assertTrue(all(o["num_cached_tokens"] == 0 for o in again))
        common.report("case 1 (vLLM without the connector)", 0, 0, 0,
                      f"{compared} tokens equal to transformers'")


if __name__ == "__main__":
    unittest.main()
